//! The layouts of migrations directories that real projects use, detected from the
//! file names, with one reading of each name for `lint`, `plan` and `migrate`:
//!
//! - pgshift's own sequential numbers: `0007_add_index.sql` (gaps are suspicious);
//! - timestamp versions, as sqlx writes them: `20240101120000_add_index.sql` (versions,
//!   not a sequence: gaps are expected);
//! - reversible pairs (sqlx, golang-migrate): `…_name.up.sql` is the forward
//!   migration, `…_name.down.sql` its reversal, never read as a forward migration;
//! - Flyway and refinery: `V1__name.sql`, `V1.1__name.sql`; Flyway's undo files
//!   (`U1__name.sql`, next to their `V1__`) are never forward migrations; repeatable
//!   files (`R__name.sql`) are refused, naming the file: pgshift has no "re-run when
//!   the checksum changes" step.
//!
//! A directory that mixes layouts (sequential numbers with timestamps, numbered files
//! with Flyway names, reversible pairs with plain files) is an error that says what
//! was found: its order would be a guess.

use std::cmp::Ordering;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

/// The layout of a directory's versioned files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutKind {
    /// `NNNN_name.sql`: sequential numbers.
    Numbered,
    /// `YYYYMMDDHHMMSS_name.sql`: timestamp versions (sqlx's default).
    Timestamp,
    /// `V<version>__name.sql` (Flyway, refinery).
    Flyway,
    /// No file carries a version.
    Unversioned,
}

/// A version as the file name writes it: one number, or Flyway's dotted parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Version {
    /// The numeric parts (`1.10` → `[1, 10]`).
    pub parts: Vec<u64>,
    /// As written (`0007`, `1.10`).
    pub text: String,
}

impl Version {
    /// The version as one integer, when it has one part that fits.
    pub fn as_integer(&self) -> Option<i64> {
        match self.parts.as_slice() {
            [only] => i64::try_from(*only).ok(),
            _ => None,
        }
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        // Flyway compares part by part, a missing part counting as 0 (1 = 1.0).
        let len = self.parts.len().max(other.parts.len());
        (0..len)
            .map(|i| {
                let a = self.parts.get(i).copied().unwrap_or(0);
                let b = other.parts.get(i).copied().unwrap_or(0);
                a.cmp(&b)
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.parts.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// A forward migration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VersionedFile {
    /// Its version.
    pub version: Version,
    /// Its name without version, direction and `.sql` (`add_index`).
    pub name: String,
    /// Its path.
    pub path: PathBuf,
}

/// Why a `.sql` file of the directory is not a forward migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// The `.down.sql` half of a reversible pair.
    Down,
    /// A Flyway undo file (`U<version>__`).
    Undo,
}

/// A file that is read by no command as a forward migration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Its path.
    pub path: PathBuf,
    /// Why.
    pub reason: SkipReason,
}

/// A directory's layout and its files in migration order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// The layout.
    pub kind: LayoutKind,
    /// Whether the files are reversible pairs (`.up.sql` / `.down.sql`).
    pub reversible: bool,
    /// The forward migrations, in version order (then by name).
    pub files: Vec<VersionedFile>,
    /// `.sql` files that carry no version, by name.
    pub unversioned: Vec<PathBuf>,
    /// Files that are not forward migrations (down and undo files).
    pub skipped: Vec<SkippedFile>,
}

impl Layout {
    /// One line for people: `sqlx (timestamp versions, reversible pairs)`.
    pub fn describe(&self) -> String {
        let mut traits: Vec<String> = Vec::new();
        let base = match self.kind {
            LayoutKind::Numbered => {
                traits.push("NNNN_name.sql".to_owned());
                "numbered"
            }
            LayoutKind::Timestamp => {
                traits.push("timestamp versions".to_owned());
                "sqlx"
            }
            LayoutKind::Flyway => {
                traits.push("V<version>__name.sql".to_owned());
                "flyway"
            }
            LayoutKind::Unversioned => "unversioned",
        };
        if self.reversible {
            traits.push("reversible pairs".to_owned());
        }
        let down = self.count_skipped(SkipReason::Down);
        if down > 0 {
            traits.push(format!("{down} down file{} not read", plural(down)));
        }
        let undo = self.count_skipped(SkipReason::Undo);
        if undo > 0 {
            traits.push(format!("{undo} undo file{} not read", plural(undo)));
        }
        if !self.unversioned.is_empty() && self.kind != LayoutKind::Unversioned {
            let n = self.unversioned.len();
            traits.push(format!("{n} unversioned file{} last", plural(n)));
        }
        if traits.is_empty() {
            base.to_owned()
        } else {
            format!("{base} ({})", traits.join(", "))
        }
    }

    /// Whether gaps between versions are suspicious (sequential numbers only).
    pub fn expects_sequence(&self) -> bool {
        self.kind == LayoutKind::Numbered
    }

    /// Every forward file, versioned ones first, then the unversioned by name.
    pub fn forward_paths(&self) -> Vec<PathBuf> {
        self.files
            .iter()
            .map(|f| f.path.clone())
            .chain(self.unversioned.iter().cloned())
            .collect()
    }

    fn count_skipped(&self, reason: SkipReason) -> usize {
        self.skipped.iter().filter(|s| s.reason == reason).count()
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A layout as reports carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayoutReport {
    /// The layout.
    pub kind: LayoutKind,
    /// Whether the files are reversible pairs.
    pub reversible: bool,
    /// The one-line description (`sqlx (timestamp versions, reversible pairs)`).
    pub description: String,
    /// Files not read as forward migrations (down and undo files).
    pub skipped: Vec<SkippedFile>,
}

impl LayoutReport {
    /// The report of a detected layout.
    pub fn of(layout: &Layout) -> Self {
        LayoutReport {
            kind: layout.kind,
            reversible: layout.reversible,
            description: layout.describe(),
            skipped: layout.skipped.clone(),
        }
    }
}

/// The layout of one directory a command was given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputLayout {
    /// The directory as given.
    pub path: String,
    /// Its layout.
    #[serde(flatten)]
    pub layout: LayoutReport,
}

impl InputLayout {
    /// The layouts of the directories among `inputs`.
    pub fn of_inputs(inputs: &[String]) -> Vec<InputLayout> {
        crate::source::input_layouts(inputs)
            .into_iter()
            .map(|(path, layout)| InputLayout {
                path,
                layout: LayoutReport::of(&layout),
            })
            .collect()
    }
}

/// Why a directory's layout cannot be read unambiguously.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// Files of two layouts in one directory.
    #[error("{dir}: mixed migration layouts: {first} and {second}; pgshift cannot tell which order they run in. Use one layout per directory")]
    Mixed {
        /// The directory.
        dir: String,
        /// One layout and an example file.
        first: String,
        /// The other and an example file.
        second: String,
    },
    /// A Flyway repeatable migration.
    #[error("{file}: a repeatable migration (R__): Flyway re-runs it whenever its checksum changes, after the versioned ones; pgshift has no such step. Move its statements into a versioned migration")]
    Repeatable {
        /// The file.
        file: String,
    },
    /// A `.down.sql` file without its `.up.sql`.
    #[error("{file}: a down migration without its up migration; it is never read as a forward migration, so the forward half is missing")]
    OrphanDown {
        /// The file.
        file: String,
    },
    /// A `U` file with no `V` file of its version.
    #[error("{file}: a U file with no V file of its version: Flyway reads it as an undo migration, refinery as an unversioned forward one. Rename it (V… for a forward migration)")]
    AmbiguousUndo {
        /// The file.
        file: String,
    },
}

/// How one file name reads.
#[derive(Debug)]
enum NameKind {
    Numbered {
        version: Version,
        name: String,
        direction: Option<Direction>,
        timestamp: bool,
    },
    FlywayVersioned {
        version: Version,
        name: String,
    },
    FlywayUndo {
        version: Version,
    },
    Repeatable,
    Unversioned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

fn read_name(file_name: &str) -> NameKind {
    let Some(stem) = file_name.strip_suffix(".sql") else {
        return NameKind::Unversioned;
    };
    if stem.starts_with("R__") {
        return NameKind::Repeatable;
    }
    if let Some((prefix, rest)) = flyway_prefix(stem) {
        if let Some((version_text, name)) = rest.split_once("__") {
            if let Some(version) = dotted_version(version_text) {
                return match prefix {
                    'V' => NameKind::FlywayVersioned {
                        version,
                        name: name.to_owned(),
                    },
                    _ => NameKind::FlywayUndo { version },
                };
            }
        }
    }
    let digits: String = stem.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return NameKind::Unversioned;
    }
    let Ok(number) = digits.parse::<u64>() else {
        return NameKind::Unversioned;
    };
    let rest = &stem[digits.len()..];
    let (rest, direction) = if let Some(r) = rest.strip_suffix(".up") {
        (r, Some(Direction::Up))
    } else if let Some(r) = rest.strip_suffix(".down") {
        (r, Some(Direction::Down))
    } else {
        (rest, None)
    };
    if !(rest.is_empty() || rest.starts_with(['_', '-'])) {
        return NameKind::Unversioned;
    }
    NameKind::Numbered {
        timestamp: is_timestamp(&digits),
        version: Version {
            parts: vec![number],
            text: digits,
        },
        name: rest.trim_start_matches(['_', '-']).to_owned(),
        direction,
    }
}

fn flyway_prefix(stem: &str) -> Option<(char, &str)> {
    let mut chars = stem.chars();
    let first = chars.next()?;
    let rest = chars.as_str();
    (matches!(first, 'V' | 'U') && rest.starts_with(|c: char| c.is_ascii_digit()))
        .then_some((first, rest))
}

/// `1`, `1.1`, `1_1` (Flyway reads `_` as `.`).
fn dotted_version(text: &str) -> Option<Version> {
    let parts: Option<Vec<u64>> = text
        .split(['.', '_'])
        .map(|p| {
            (!p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        })
        .collect();
    parts.map(|parts| Version {
        parts,
        text: text.to_owned(),
    })
}

/// Fourteen digits reading as `YYYYMMDDHHMMSS`.
fn is_timestamp(digits: &str) -> bool {
    if digits.len() != 14 {
        return false;
    }
    let field = |from: usize, to: usize| digits[from..to].parse::<u32>().unwrap_or(u32::MAX);
    (1970..=9999).contains(&field(0, 4))
        && (1..=12).contains(&field(4, 6))
        && (1..=31).contains(&field(6, 8))
        && field(8, 10) < 24
        && field(10, 12) < 60
        && field(12, 14) < 61
}

/// Reads the layout of the `.sql` files in `dir` (an I/O error is the caller's).
pub fn detect(dir: &Path) -> std::io::Result<Result<Layout, LayoutError>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_file() && name.ends_with(".sql") {
            names.push((name, path));
        }
    }
    names.sort();
    Ok(from_names(&dir.display().to_string(), names))
}

/// The layout of files given by name (sorted or not).
fn from_names(dir: &str, names: Vec<(String, PathBuf)>) -> Result<Layout, LayoutError> {
    let mut families: Vec<(&'static str, String)> = Vec::new();
    let mut note = |family: &'static str, file: &str| {
        if !families.iter().any(|(f, _)| *f == family) {
            families.push((family, file.to_owned()));
        }
    };
    let mut files = Vec::new();
    let mut ups = Vec::new();
    let mut downs: Vec<(Version, String, PathBuf)> = Vec::new();
    let mut undos = Vec::new();
    let mut unversioned = Vec::new();
    for (file_name, path) in names {
        match read_name(&file_name) {
            NameKind::Repeatable => {
                return Err(LayoutError::Repeatable {
                    file: path.display().to_string(),
                })
            }
            NameKind::Unversioned => unversioned.push(path),
            NameKind::FlywayVersioned { version, name } => {
                note("Flyway names (V<version>__name.sql)", &file_name);
                files.push(VersionedFile {
                    version,
                    name,
                    path,
                });
            }
            NameKind::FlywayUndo { version } => {
                note("Flyway names (V<version>__name.sql)", &file_name);
                undos.push((version, path));
            }
            NameKind::Numbered {
                version,
                name,
                direction,
                timestamp,
            } => {
                if timestamp {
                    note("timestamp versions (YYYYMMDDHHMMSS_name.sql)", &file_name);
                } else {
                    note("sequential numbers (NNNN_name.sql)", &file_name);
                }
                match direction {
                    Some(Direction::Down) => {
                        note("reversible pairs (.up.sql/.down.sql)", &file_name);
                        downs.push((version, name, path));
                    }
                    Some(Direction::Up) => {
                        note("reversible pairs (.up.sql/.down.sql)", &file_name);
                        ups.push(version.clone());
                        files.push(VersionedFile {
                            version,
                            name,
                            path,
                        });
                    }
                    None => {
                        note("plain files (no .up/.down)", &file_name);
                        files.push(VersionedFile {
                            version,
                            name,
                            path,
                        });
                    }
                }
            }
        }
    }
    let mixed = |a: &(&str, String), b: &(&str, String)| LayoutError::Mixed {
        dir: dir.to_owned(),
        first: format!("{} such as {}", a.0, a.1),
        second: format!("{} such as {}", b.0, b.1),
    };
    let find = |prefix: &str| families.iter().find(|(f, _)| f.starts_with(prefix));
    let exclusive = [
        ("Flyway", "sequential"),
        ("Flyway", "timestamp"),
        ("sequential", "timestamp"),
        ("reversible", "plain"),
    ];
    for (a, b) in exclusive {
        if let (Some(x), Some(y)) = (find(a), find(b)) {
            return Err(mixed(x, y));
        }
    }
    let skipped = pair_reversals(&files, &ups, downs, undos)?;
    unversioned.sort();
    let kind = if find("Flyway").is_some() {
        LayoutKind::Flyway
    } else if find("timestamp").is_some() {
        LayoutKind::Timestamp
    } else if find("sequential").is_some() {
        LayoutKind::Numbered
    } else {
        LayoutKind::Unversioned
    };
    files.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.path.cmp(&b.path)));
    Ok(Layout {
        kind,
        reversible: !ups.is_empty(),
        files,
        unversioned,
        skipped,
    })
}

/// Every down file has its up file, every undo file its versioned one.
fn pair_reversals(
    files: &[VersionedFile],
    ups: &[Version],
    downs: Vec<(Version, String, PathBuf)>,
    undos: Vec<(Version, PathBuf)>,
) -> Result<Vec<SkippedFile>, LayoutError> {
    let mut skipped = Vec::new();
    for (version, _, path) in downs {
        if !ups.contains(&version) {
            return Err(LayoutError::OrphanDown {
                file: path.display().to_string(),
            });
        }
        skipped.push(SkippedFile {
            path,
            reason: SkipReason::Down,
        });
    }
    for (version, path) in undos {
        if !files.iter().any(|f| f.version == version) {
            return Err(LayoutError::AmbiguousUndo {
                file: path.display().to_string(),
            });
        }
        skipped.push(SkippedFile {
            path,
            reason: SkipReason::Undo,
        });
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(names: &[&str]) -> Result<Layout, LayoutError> {
        from_names(
            "dir",
            names
                .iter()
                .map(|n| ((*n).to_owned(), PathBuf::from(n)))
                .collect(),
        )
    }

    fn order(layout: &Layout) -> Vec<String> {
        layout
            .forward_paths()
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    }

    #[test]
    fn sequential_numbers_order_numerically() {
        let l = layout(&["10_c.sql", "2_b.sql", "1_a.sql", "z.sql"]).expect("reads");
        assert_eq!(l.kind, LayoutKind::Numbered);
        assert_eq!(order(&l), vec!["1_a.sql", "2_b.sql", "10_c.sql", "z.sql"]);
        assert!(l.expects_sequence());
        assert_eq!(
            l.describe(),
            "numbered (NNNN_name.sql, 1 unversioned file last)"
        );
    }

    #[test]
    fn timestamps_are_versions_and_down_files_are_never_forward() {
        let l = layout(&[
            "20240101120000_init.up.sql",
            "20240101120000_init.down.sql",
            "20240305093000_add_index.down.sql",
            "20240305093000_add_index.up.sql",
        ])
        .expect("reads");
        assert_eq!(l.kind, LayoutKind::Timestamp);
        assert!(l.reversible && !l.expects_sequence());
        assert_eq!(
            order(&l),
            vec![
                "20240101120000_init.up.sql",
                "20240305093000_add_index.up.sql"
            ]
        );
        assert_eq!(l.files[1].name, "add_index");
        assert_eq!(l.skipped.len(), 2);
        assert!(l.skipped.iter().all(|s| s.reason == SkipReason::Down));
        assert_eq!(
            l.describe(),
            "sqlx (timestamp versions, reversible pairs, 2 down files not read)"
        );
    }

    #[test]
    fn flyway_versions_compare_part_by_part_and_undo_files_are_skipped() {
        let l = layout(&[
            "V1.10__later.sql",
            "V1.2__second.sql",
            "V1__first.sql",
            "U1.2__second.sql",
            "V2_1__third.sql",
        ])
        .expect("reads");
        assert_eq!(l.kind, LayoutKind::Flyway);
        assert_eq!(
            order(&l),
            vec![
                "V1__first.sql",
                "V1.2__second.sql",
                "V1.10__later.sql",
                "V2_1__third.sql"
            ]
        );
        assert_eq!(l.files[3].version.to_string(), "2.1");
        assert_eq!(l.files[0].version.as_integer(), Some(1));
        assert_eq!(l.files[1].version.as_integer(), None);
        assert_eq!(l.skipped[0].reason, SkipReason::Undo);
    }

    #[test]
    fn repeatable_orphan_and_ambiguous_files_are_typed_errors_naming_the_file() {
        assert_eq!(
            layout(&["V1__a.sql", "R__views.sql"]),
            Err(LayoutError::Repeatable {
                file: "R__views.sql".to_owned()
            })
        );
        assert_eq!(
            layout(&["0001_a.up.sql", "0002_b.down.sql"]),
            Err(LayoutError::OrphanDown {
                file: "0002_b.down.sql".to_owned()
            })
        );
        assert_eq!(
            layout(&["V1__a.sql", "U2__b.sql"]),
            Err(LayoutError::AmbiguousUndo {
                file: "U2__b.sql".to_owned()
            })
        );
    }

    #[test]
    fn mixed_layouts_say_what_was_found() {
        let cases: &[(&[&str], &str, &str)] = &[
            (
                &["0001_a.sql", "20240101120000_b.sql"],
                "sequential numbers",
                "timestamp versions",
            ),
            (&["0001_a.sql", "V2__b.sql"], "Flyway", "sequential"),
            (
                &["0001_a.up.sql", "0001_a.down.sql", "0002_b.sql"],
                "reversible pairs",
                "plain files",
            ),
        ];
        for (names, one, other) in cases {
            let err = layout(names).expect_err("mixed");
            let text = err.to_string();
            assert!(
                text.contains(one) && text.contains(other),
                "{names:?}: {text}"
            );
            assert!(matches!(err, LayoutError::Mixed { .. }));
        }
    }

    #[test]
    fn fourteen_digits_that_are_no_timestamp_are_sequential() {
        assert!(is_timestamp("20240101120000"));
        assert!(!is_timestamp("00000000000001"));
        assert!(!is_timestamp("20241301120000"));
        let l = layout(&["00000000000001_a.sql", "00000000000002_b.sql"]).expect("reads");
        assert_eq!(l.kind, LayoutKind::Numbered);
    }

    #[test]
    fn unversioned_directories_keep_name_order() {
        let l = layout(&["b.sql", "a.sql"]).expect("reads");
        assert_eq!(l.kind, LayoutKind::Unversioned);
        assert_eq!(l.describe(), "unversioned");
    }
}
