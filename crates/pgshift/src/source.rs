//! Reading SQL inputs: files, migration directories (in migration order) and stdin,
//! with clear errors for anything that is not readable UTF-8 text of a sane size.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::layout::{self, Layout, LayoutError};
use pgshift_sql::{LineIndex, Position};

/// The largest input file read by default (16 MiB): migration files are far
/// smaller; anything bigger is almost certainly a data dump.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// One SQL text and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The path as the user gave it (or `<stdin>`, or `<sql>`).
    pub path: String,
    /// The text.
    pub text: String,
}

/// Why an input could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The path does not exist.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The path.
        path: String,
    },
    /// Reading failed.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not UTF-8 text.
    #[error("{path}:{}:{}: not UTF-8 text (invalid byte at offset {offset}); pgshift reads SQL files as UTF-8", position.line, position.column)]
    NotUtf8 {
        /// The path.
        path: String,
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// Its line and column.
        position: Position,
    },
    /// The file is larger than the limit.
    #[error("{path}: {bytes} bytes is larger than the {limit}-byte limit for one SQL file (a data dump rather than a migration?)")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A directory with no `.sql` files.
    #[error("{path}: directory holds no .sql files")]
    EmptyDirectory {
        /// The path.
        path: String,
    },
    /// A directory whose migration layout is mixed or ambiguous.
    #[error("{path}: {source}")]
    Layout {
        /// The directory.
        path: String,
        /// What was found.
        source: LayoutError,
    },
}

impl SourceError {
    /// Where the error is, when it is inside a file.
    pub fn position(&self) -> Option<Position> {
        match self {
            SourceError::NotUtf8 { position, .. } => Some(*position),
            _ => None,
        }
    }
}

/// The leading number of a migration file name (`0007_add_index.sql` → 7).
pub fn migration_number(file_name: &str) -> Option<u64> {
    let digits: String = file_name.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The layout of a migrations directory (see [`crate::layout`]).
pub fn directory_layout(dir: &Path) -> Result<Layout, SourceError> {
    let display = dir.display().to_string();
    match layout::detect(dir) {
        Err(source) => Err(SourceError::Io {
            path: display,
            source,
        }),
        Ok(Err(source)) => Err(SourceError::Layout {
            path: display,
            source,
        }),
        Ok(Ok(layout)) => Ok(layout),
    }
}

/// The forward `.sql` files of a directory in migration order, as its layout reads
/// them: by version, then by name; files without a version come last, by name; the
/// `.down.sql` half of a reversible pair and Flyway undo files are never listed.
pub fn migration_files(dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let files = directory_layout(dir)?.forward_paths();
    if files.is_empty() {
        return Err(SourceError::EmptyDirectory {
            path: dir.display().to_string(),
        });
    }
    Ok(files)
}

/// The layout of every directory among the inputs a user named, for reports
/// (`lint`, `plan`); directories whose layout is an error are left out (the error is
/// reported with the inputs).
pub fn input_layouts(inputs: &[String]) -> Vec<(String, Layout)> {
    inputs
        .iter()
        .filter(|input| Path::new(input).is_dir())
        .filter_map(|input| {
            directory_layout(Path::new(input))
                .ok()
                .map(|layout| (input.clone(), layout))
        })
        .collect()
}

/// Expands the inputs a user named (files, directories, `-` for stdin) into the
/// paths to read, in order. Missing paths are reported per input.
pub fn expand_inputs(inputs: &[String]) -> Vec<Result<InputPath, SourceError>> {
    let mut result = Vec::new();
    let mut explicit = Vec::new();
    for input in inputs {
        if input == "-" {
            result.push(Ok(InputPath::Stdin));
            continue;
        }
        let path = Path::new(input);
        if path.is_dir() {
            match migration_files(path) {
                Ok(files) => result.extend(files.into_iter().map(|p| Ok(InputPath::File(p)))),
                Err(err) => result.push(Err(err)),
            }
        } else if path.exists() {
            explicit.push(result.len());
            result.push(Ok(InputPath::File(path.to_path_buf())));
        } else {
            result.push(Err(SourceError::NotFound {
                path: input.clone(),
            }));
        }
    }
    in_migration_order(&mut result, &explicit);
    result
}

/// Files named one by one (`lint migrations/*.sql`: the shell's byte order, in which
/// `10_x.sql` comes before `2_x.sql`) are judged in their directory's migration order:
/// the places the files of one directory hold among the inputs are filled with them
/// in the order its layout reads them. Files of other directories, directories and
/// stdin keep their places; a file the layout does not read keeps its own.
fn in_migration_order(inputs: &mut [Result<InputPath, SourceError>], explicit: &[usize]) {
    let mut by_dir: Vec<(PathBuf, Vec<usize>)> = Vec::new();
    for &slot in explicit {
        let Some(Ok(InputPath::File(path))) = inputs.get(slot) else {
            continue;
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        match by_dir.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, slots)) => slots.push(slot),
            None => by_dir.push((dir, vec![slot])),
        }
    }
    for (dir, slots) in by_dir.into_iter().filter(|(_, slots)| slots.len() > 1) {
        let listed = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir.as_path()
        };
        let Ok(order) = directory_layout(listed).map(|layout| layout.forward_paths()) else {
            continue;
        };
        let position = |slot: usize| match &inputs[slot] {
            Ok(InputPath::File(path)) => {
                order.iter().position(|p| p.file_name() == path.file_name())
            }
            _ => None,
        };
        let mut read: Vec<(usize, usize)> = Vec::new();
        for &slot in &slots {
            if let Some(at) = position(slot) {
                read.push((slot, at));
            }
        }
        let mut sorted: Vec<InputPath> = {
            let mut by_position = read.clone();
            by_position.sort_by_key(|&(_, at)| at);
            by_position
                .iter()
                .filter_map(|&(slot, _)| inputs[slot].as_ref().ok().cloned())
                .collect()
        };
        for (slot, _) in read.iter().rev() {
            if let Some(input) = sorted.pop() {
                inputs[*slot] = Ok(input);
            }
        }
    }
}

/// An input to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputPath {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
}

/// Reads one input as UTF-8 text, refusing anything over `max_bytes`.
pub fn read_input(input: &InputPath, max_bytes: u64) -> Result<SourceFile, SourceError> {
    let (path, bytes) = match input {
        InputPath::Stdin => {
            let path = "<stdin>".to_owned();
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(max_bytes + 1)
                .read_to_end(&mut bytes)
                .map_err(|source| SourceError::Io {
                    path: path.clone(),
                    source,
                })?;
            if bytes.len() as u64 > max_bytes {
                return Err(SourceError::TooLarge {
                    path,
                    bytes: bytes.len() as u64,
                    limit: max_bytes,
                });
            }
            (path, bytes)
        }
        InputPath::File(file) => {
            let path = file.display().to_string();
            let size = fs::metadata(file)
                .map_err(|source| SourceError::Io {
                    path: path.clone(),
                    source,
                })?
                .len();
            if size > max_bytes {
                return Err(SourceError::TooLarge {
                    path,
                    bytes: size,
                    limit: max_bytes,
                });
            }
            let bytes = fs::read(file).map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
            (path, bytes)
        }
    };
    decode(path, bytes)
}

/// Bytes to text, locating the first invalid byte.
pub fn decode(path: String, bytes: Vec<u8>) -> Result<SourceFile, SourceError> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SourceFile { path, text }),
        Err(err) => {
            let offset = err.utf8_error().valid_up_to();
            let bytes = err.into_bytes();
            let valid = String::from_utf8_lossy(&bytes[..offset]).into_owned();
            let mut position = LineIndex::new(&valid).position(offset);
            if valid.ends_with('\n') || valid.is_empty() {
                position.column = 1;
            }
            Err(SourceError::NotUtf8 {
                path,
                offset,
                position,
            })
        }
    }
}

/// Blanks out psql meta-command lines (`\set`, `\connect`, `\restrict` …), which
/// schema dumps contain but which are not SQL, keeping every other byte in place so
/// positions stay exact. A line counts when its first non-blank character is a
/// backslash; such a line inside a string or function body would also be blanked, so
/// this is only for schema files, never for SQL that will run.
pub fn blank_psql_meta_commands(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            if line.trim_start().starts_with('\\') {
                line.chars()
                    .map(|c| if c == '\n' || c == '\r' { c } else { ' ' })
                    .collect()
            } else {
                line.to_owned()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_commands_are_blanked_in_place() {
        let text = "\\set ON_ERROR_STOP 1\nSELECT 1;\n  \\connect x\n";
        let blanked = blank_psql_meta_commands(text);
        assert_eq!(blanked.len(), text.len());
        assert_eq!(pgshift_sql::parse(&blanked).expect("valid").len(), 1);
    }

    #[test]
    fn migration_numbers_order_numerically() {
        assert_eq!(migration_number("0007_add.sql"), Some(7));
        assert_eq!(
            migration_number("20240101120000_x.sql"),
            Some(20_240_101_120_000)
        );
        assert_eq!(migration_number("add.sql"), None);
    }

    #[test]
    fn directories_list_in_migration_order() {
        let dir = std::env::temp_dir().join(format!("pgshift-source-test-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        for name in ["10_c.sql", "2_b.sql", "1_a.sql", "notes.txt", "z.sql"] {
            fs::write(dir.join(name), "SELECT 1;").expect("write");
        }
        let names: Vec<String> = migration_files(&dir)
            .expect("lists")
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["1_a.sql", "2_b.sql", "10_c.sql", "z.sql"]);
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn invalid_utf8_is_located() {
        let err = decode("x.sql".to_owned(), b"SELECT 1;\nSELECT '\xe9';".to_vec())
            .expect_err("latin-1 byte");
        match err {
            SourceError::NotUtf8 {
                offset, position, ..
            } => {
                assert_eq!(offset, 18);
                assert_eq!(position.line, 2);
                assert_eq!(position.column, 9);
            }
            other => panic!("unexpected {other}"),
        }
    }
}
