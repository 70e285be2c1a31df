//! A migrations directory: `NNNN_name.sql` files, their versions, and the checks
//! that make their order unambiguous (numbered, no duplicates, no gaps).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::MigrateError;
use crate::source::migration_number;

/// One migration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MigrationFile {
    /// Its version (the leading number).
    pub version: i64,
    /// The file name without the number and `.sql` (`add_index`).
    pub name: String,
    /// Its path.
    pub path: PathBuf,
}

/// The migration files of `dir`, in version order. Every `.sql` file must start with
/// a number; two files with the same number are an error.
pub fn scan(dir: &Path) -> Result<Vec<MigrationFile>, MigrateError> {
    let entries = std::fs::read_dir(dir).map_err(|source| MigrateError::Directory {
        path: dir.display().to_string(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| MigrateError::Directory {
            path: dir.display().to_string(),
            source,
        })?;
        let path = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if !path.is_file() || !file_name.ends_with(".sql") {
            continue;
        }
        let version = migration_number(&file_name)
            .and_then(|n| i64::try_from(n).ok())
            .ok_or_else(|| MigrateError::Unnumbered {
                file: file_name.clone(),
            })?;
        let stem = file_name.trim_end_matches(".sql");
        let name = stem
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start_matches(['_', '-'])
            .to_owned();
        files.push(MigrationFile {
            version,
            name,
            path,
        });
    }
    files.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.path.cmp(&b.path)));
    if let Some(pair) = files.windows(2).find(|w| w[0].version == w[1].version) {
        return Err(MigrateError::DuplicateVersion {
            version: pair[0].version,
            first: pair[0].path.display().to_string(),
            second: pair[1].path.display().to_string(),
        });
    }
    Ok(files)
}

/// Refuses a gap in the versions (`1, 2, 4`): a file may be missing.
pub fn check_no_gaps(files: &[MigrationFile]) -> Result<(), MigrateError> {
    match files.windows(2).find(|w| w[1].version != w[0].version + 1) {
        Some(pair) => Err(MigrateError::Gap {
            after: pair[0].version,
            next: pair[1].version,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "pgshift-migrate-dir-{}-{}",
            std::process::id(),
            files.join("-").len()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        for file in files {
            std::fs::write(dir.join(file), "SELECT 1;").expect("write");
        }
        dir
    }

    #[test]
    fn files_sort_by_version_and_names_lose_their_number() {
        let dir = dir_with(&["0002_b.sql", "0001_a.sql", "0010_c.sql", "README.md"]);
        let files = scan(&dir).expect("scans");
        let versions: Vec<i64> = files.iter().map(|f| f.version).collect();
        assert_eq!(versions, vec![1, 2, 10]);
        assert_eq!(files[0].name, "a");
        assert!(matches!(
            check_no_gaps(&files),
            Err(MigrateError::Gap { after: 2, next: 10 })
        ));
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn duplicates_and_unnumbered_files_are_errors() {
        let dir = dir_with(&["0001_a.sql", "01_again.sql"]);
        assert!(matches!(
            scan(&dir),
            Err(MigrateError::DuplicateVersion { version: 1, .. })
        ));
        std::fs::remove_dir_all(dir).expect("cleanup");
        let dir = dir_with(&["0001_a.sql", "seed.sql", "x"]);
        assert!(matches!(scan(&dir), Err(MigrateError::Unnumbered { .. })));
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}
