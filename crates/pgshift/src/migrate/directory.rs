//! A migrations directory: its layout (see [`crate::layout`]), its forward files with
//! their versions and history keys, and the checks that make their order unambiguous
//! (versioned, no duplicates, no gaps in sequential numbers, something to read).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::MigrateError;
use crate::layout::{self, FileForm, Layout, LayoutKind, TransactionRule, Version};

/// One migration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MigrationFile {
    /// Its version; `None` for a repeatable migration (Flyway's `R__`).
    pub version: Option<Version>,
    /// The file name without version and `.sql` (`add_index`).
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Where its forward SQL is.
    pub form: FileForm,
    /// How its runner decides whether it runs in one transaction.
    pub transaction: TransactionRule,
}

impl MigrationFile {
    /// The version's history key (`None` for a repeatable).
    pub fn key(&self) -> Option<String> {
        self.version.as_ref().map(Version::key)
    }

    /// Whether it is a repeatable migration.
    pub fn repeatable(&self) -> bool {
        self.version.is_none()
    }

    /// How people and labels name it: its version, or `R__name` for a repeatable.
    pub fn label(&self) -> String {
        match &self.version {
            Some(version) => version.key(),
            None => format!("R__{}", self.name),
        }
    }
}

/// The migration files of `dir`, in migration order: versioned files by version, then
/// repeatables by name. Every `.sql` file must carry a version; two files with the
/// same version are an error; so is a directory with nothing to read.
pub fn scan(dir: &Path) -> Result<Vec<MigrationFile>, MigrateError> {
    scan_layout(dir).map(|(_, files)| files)
}

/// The layout of `dir` and its forward migration files, in migration order.
pub fn scan_layout(dir: &Path) -> Result<(Layout, Vec<MigrationFile>), MigrateError> {
    let layout = layout::detect(dir)
        .map_err(|source| MigrateError::Directory {
            path: dir.display().to_string(),
            source,
        })?
        .map_err(MigrateError::Layout)?;
    if let Some(path) = layout.unversioned.first() {
        return Err(MigrateError::Unnumbered {
            file: file_name(path),
        });
    }
    if layout.files.is_empty() && layout.repeatables.is_empty() {
        return Err(MigrateError::NothingToRead {
            dir: dir.display().to_string(),
            found: found(&layout),
        });
    }
    let mut files: Vec<MigrationFile> = layout
        .files
        .iter()
        .map(|file| MigrationFile {
            version: Some(file.version.clone()),
            name: file.name.clone(),
            path: file.path.clone(),
            form: layout.form,
            transaction: file.transaction,
        })
        .collect();
    if let Some(pair) = files.windows(2).find(|w| w[0].version == w[1].version) {
        return Err(MigrateError::DuplicateVersion {
            version: pair[0].label(),
            first: pair[0].path.display().to_string(),
            second: pair[1].path.display().to_string(),
        });
    }
    files.extend(layout.repeatables.iter().map(|file| MigrationFile {
        version: None,
        name: file.name.clone(),
        path: file.path.clone(),
        form: layout.form,
        transaction: TransactionRule::Detected,
    }));
    Ok((layout, files))
}

/// What a directory that no layout reads holds, for the error that says so.
fn found(layout: &Layout) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !layout.skipped.is_empty() {
        let names: Vec<String> = layout.skipped.iter().map(|s| file_name(&s.path)).collect();
        parts.push(format!(
            "only files that are not forward migrations ({})",
            names.join(", ")
        ));
    }
    if !layout.ignored.is_empty() {
        let shown: Vec<&str> = layout.ignored.iter().take(5).map(String::as_str).collect();
        let more = layout.ignored.len().saturating_sub(shown.len());
        parts.push(format!(
            "{} entr{} no layout reads: {}{}",
            layout.ignored.len(),
            if layout.ignored.len() == 1 {
                "y"
            } else {
                "ies"
            },
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    if parts.is_empty() {
        "nothing at all".to_owned()
    } else {
        parts.join("; ")
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Refuses a gap in the versions (`1, 2, 4`): a file may be missing.
pub fn check_no_gaps(files: &[MigrationFile]) -> Result<(), MigrateError> {
    let versions: Vec<&Version> = files.iter().filter_map(|f| f.version.as_ref()).collect();
    match versions.windows(2).find(|w| !w[0].is_followed_by(w[1])) {
        Some(pair) => Err(MigrateError::Gap {
            after: pair[0].key(),
            next: pair[1].key(),
        }),
        None => Ok(()),
    }
}

/// A history key read back as a version of `kind`'s scheme, to order it against the
/// files (`None` when it does not read as one).
pub fn key_version(kind: LayoutKind, key: &str) -> Option<Version> {
    match kind {
        LayoutKind::Diesel => Version::diesel(key),
        _ => Version::dotted(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(tag: &str, files: &[&str]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pgshift-migrate-dir-{}-{tag}", std::process::id(),));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        for file in files {
            if let Some(folder) = file.strip_suffix('/') {
                std::fs::create_dir_all(dir.join(folder)).expect("folder");
            } else {
                std::fs::write(dir.join(file), "SELECT 1;").expect("write");
            }
        }
        dir
    }

    fn keys(files: &[MigrationFile]) -> Vec<String> {
        files.iter().map(MigrationFile::label).collect()
    }

    #[test]
    fn files_sort_by_version_and_names_lose_their_number() {
        let dir = dir_with(
            "sort",
            &["0002_b.sql", "0001_a.sql", "0010_c.sql", "README.md"],
        );
        let files = scan(&dir).expect("scans");
        assert_eq!(keys(&files), vec!["1", "2", "10"]);
        assert_eq!(files[0].name, "a");
        let gap = check_no_gaps(&files);
        assert!(
            matches!(&gap, Err(MigrateError::Gap { after, next }) if after == "2" && next == "10"),
            "{gap:?}"
        );
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn duplicates_and_unnumbered_files_are_errors() {
        let dir = dir_with("dup", &["0001_a.sql", "01_again.sql"]);
        assert!(matches!(
            scan(&dir),
            Err(MigrateError::DuplicateVersion { version, .. }) if version == "1"
        ));
        std::fs::remove_dir_all(dir).expect("cleanup");
        let dir = dir_with("unnumbered", &["0001_a.sql", "seed.sql", "x"]);
        assert!(matches!(scan(&dir), Err(MigrateError::Unnumbered { .. })));
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn flyway_repeatables_come_last_without_a_version() {
        let dir = dir_with("flyway", &["R__views.sql", "V1.1__b.sql", "V1__a.sql"]);
        let files = scan(&dir).expect("scans");
        assert_eq!(keys(&files), vec!["1", "1.1", "R__views"]);
        assert!(files[2].repeatable() && files[2].key().is_none());
        // Flyway's versions are not a sequence.
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn a_directory_no_layout_reads_is_an_error_naming_what_is_there() {
        let dir = dir_with("nothing", &["2023-01-01-000000_create_users/", "notes.txt"]);
        let err = scan(&dir).expect_err("nothing to read");
        let text = err.to_string();
        assert!(matches!(err, MigrateError::NothingToRead { .. }), "{text}");
        assert!(
            text.contains("2023-01-01-000000_create_users/") && text.contains("notes.txt"),
            "{text}"
        );
        std::fs::remove_dir_all(dir).expect("cleanup");
        let empty = dir_with("empty", &[]);
        assert!(matches!(
            scan(&empty),
            Err(MigrateError::NothingToRead { .. })
        ));
        std::fs::remove_dir_all(empty).expect("cleanup");
    }

    #[test]
    fn history_keys_read_back_in_the_layouts_scheme() {
        let v = key_version(LayoutKind::Timestamp, "20240101120000").expect("reads");
        assert_eq!(v.key(), "20240101120000");
        let v = key_version(LayoutKind::Flyway, "1.1").expect("reads");
        assert!(v > key_version(LayoutKind::Flyway, "1").expect("reads"));
        let v = key_version(LayoutKind::Diesel, "20230101000000").expect("reads");
        assert_eq!(v.key(), "20230101000000");
    }
}
