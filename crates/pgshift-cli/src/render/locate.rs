//! Where a statement ends, and file paths as URIs, for the machine formats.

use std::path::Path;

/// A statement's extent: its start and the position just past its last character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First line (1-based).
    pub start_line: u32,
    /// First column (1-based, in characters).
    pub start_column: u32,
    /// Line of the last character.
    pub end_line: u32,
    /// Column just past the last character (SARIF's `endColumn`).
    pub end_column_exclusive: u32,
}

/// The extent of `text` starting at `line`:`column`. Columns count characters, as the
/// start position does; an empty text ends where it starts.
pub fn extent(line: u32, column: u32, text: &str) -> Extent {
    let (mut end_line, mut end_column) = (line, column);
    for ch in text.trim_end().chars() {
        if ch == '\n' {
            end_line = end_line.saturating_add(1);
            end_column = 1;
        } else {
            end_column = end_column.saturating_add(1);
        }
    }
    Extent {
        start_line: line,
        start_column: column,
        end_line,
        end_column_exclusive: end_column,
    }
}

/// `path` as a URI reference relative to `base` (the working directory) when it is
/// under it, else an absolute `file://` URI; percent-encoded (RFC 3986).
pub fn uri_of(path: &str, base: &Path) -> String {
    let as_path = Path::new(path);
    if as_path.is_absolute() {
        return match as_path.strip_prefix(base) {
            Ok(relative) => encode(&relative.to_string_lossy()),
            Err(_) => format!("file://{}", encode(path)),
        };
    }
    let mut relative = path;
    while let Some(rest) = relative.strip_prefix("./") {
        relative = rest;
    }
    encode(relative)
}

/// `dir` as an absolute `file://` URI ending in `/`.
pub fn dir_uri(dir: &Path) -> String {
    let mut text = encode(&dir.to_string_lossy());
    if !text.ends_with('/') {
        text.push('/');
    }
    format!("file://{text}")
}

/// Percent-encodes everything but unreserved characters and `/`.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_of_one_and_several_lines() {
        let one = extent(4, 1, "ALTER TABLE t");
        assert_eq!((one.end_line, one.end_column_exclusive), (4, 14));
        let two = extent(12, 3, "CREATE INDEX i\n    ON t (a)");
        assert_eq!((two.end_line, two.end_column_exclusive), (13, 13));
        let empty = extent(1, 1, "");
        assert_eq!((empty.end_line, empty.end_column_exclusive), (1, 1));
        let wide = extent(1, 1, "SELECT 'é'");
        assert_eq!(wide.end_column_exclusive, 11);
    }

    #[test]
    fn uris_are_relative_to_the_working_directory_and_encoded() {
        let base = Path::new("/work/repo");
        assert_eq!(
            uri_of("migrations/0001 a.sql", base),
            "migrations/0001%20a.sql"
        );
        assert_eq!(uri_of("./././m/x.sql", base), "m/x.sql");
        assert_eq!(uri_of("/work/repo/m/x.sql", base), "m/x.sql");
        assert_eq!(uri_of("/elsewhere/x.sql", base), "file:///elsewhere/x.sql");
        assert_eq!(uri_of("<stdin>", base), "%3Cstdin%3E");
        assert_eq!(dir_uri(base), "file:///work/repo/");
    }
}
