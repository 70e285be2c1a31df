//! A migrations directory: its layout (see [`crate::layout`]), its forward files with
//! their versions, and the checks that make their order unambiguous (versioned, no
//! duplicates, no gaps in sequential numbers).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::MigrateError;
use crate::layout::{self, Layout};

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

/// The migration files of `dir`, in version order. Every `.sql` file must carry a
/// version; two files with the same version are an error.
pub fn scan(dir: &Path) -> Result<Vec<MigrationFile>, MigrateError> {
    scan_layout(dir).map(|(_, files)| files)
}

/// The layout of `dir` and its forward migration files, in version order.
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
    let mut files = Vec::with_capacity(layout.files.len());
    for file in &layout.files {
        let version =
            file.version
                .as_integer()
                .ok_or_else(|| MigrateError::UnsupportedVersion {
                    file: file_name(&file.path),
                    version: file.version.text.clone(),
                })?;
        files.push(MigrationFile {
            version,
            name: file.name.clone(),
            path: file.path.clone(),
        });
    }
    if let Some(pair) = files.windows(2).find(|w| w[0].version == w[1].version) {
        return Err(MigrateError::DuplicateVersion {
            version: pair[0].version,
            first: pair[0].path.display().to_string(),
            second: pair[1].path.display().to_string(),
        });
    }
    Ok((layout, files))
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
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
