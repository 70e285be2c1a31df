//! diesel's migration folders: `<version>_<name>/up.sql`, with `down.sql` (never read
//! as a forward migration) and an optional `metadata.toml`.
//!
//! As diesel_migrations reads them: the version is the folder name up to its first
//! `_`, recorded without its dashes; folders whose name starts with `.` are not
//! migrations; `metadata.toml`'s `run_in_transaction = false` runs `up.sql` outside a
//! transaction (the default is one transaction).

use std::path::{Path, PathBuf};

use super::version::Version;
use super::LayoutError;
use crate::script::TransactionMode;

/// One diesel migration folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folder {
    /// The folder's name (`2023-01-01-000000_create_users`).
    pub name: String,
    /// Its version.
    pub version: Version,
    /// The name after the version (`create_users`).
    pub migration: String,
    /// Its `up.sql`.
    pub up: PathBuf,
    /// Its `down.sql`, when there is one.
    pub down: Option<PathBuf>,
    /// How diesel runs `up.sql`.
    pub mode: TransactionMode,
}

/// The diesel migration in folder `path` (named `name`): `None` when the folder's name
/// is not `<version>_<name>` or it holds no migration file at all.
pub fn folder(path: &Path, name: &str) -> std::io::Result<Option<Result<Folder, LayoutError>>> {
    let Some((version_text, migration)) = name.split_once('_') else {
        return Ok(None);
    };
    let Some(version) = Version::diesel(version_text) else {
        return Ok(None);
    };
    let up = path.join("up.sql");
    let down = path.join("down.sql");
    let metadata = path.join("metadata.toml");
    if !up.is_file() {
        if down.is_file() || metadata.is_file() {
            return Ok(Some(Err(LayoutError::DieselWithoutUp {
                folder: path.display().to_string(),
            })));
        }
        return Ok(None);
    }
    let mode = if metadata.is_file() {
        match run_in_transaction(&std::fs::read_to_string(&metadata)?) {
            Ok(true) => TransactionMode::File,
            Ok(false) => TransactionMode::Statement,
            Err(reason) => {
                return Ok(Some(Err(LayoutError::DieselMetadata {
                    file: metadata.display().to_string(),
                    reason,
                })))
            }
        }
    } else {
        TransactionMode::File
    };
    Ok(Some(Ok(Folder {
        name: name.to_owned(),
        version,
        migration: migration.to_owned(),
        up,
        down: down.is_file().then_some(down),
        mode,
    })))
}

/// `run_in_transaction` of a `metadata.toml` (true when absent).
fn run_in_transaction(text: &str) -> Result<bool, String> {
    let document = text
        .parse::<toml_edit::DocumentMut>()
        .map_err(|err| format!("not TOML: {}", err.message()))?;
    match document.get("run_in_transaction") {
        None => Ok(true),
        Some(item) => item
            .as_bool()
            .ok_or_else(|| "run_in_transaction is not a boolean".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_says_whether_the_file_runs_in_a_transaction() {
        assert_eq!(run_in_transaction(""), Ok(true));
        assert_eq!(
            run_in_transaction("run_in_transaction = false\n"),
            Ok(false)
        );
        assert_eq!(run_in_transaction("run_in_transaction = true"), Ok(true));
        assert!(run_in_transaction("run_in_transaction = \"no\"").is_err());
        assert!(run_in_transaction("run_in_transaction = ").is_err());
    }
}
