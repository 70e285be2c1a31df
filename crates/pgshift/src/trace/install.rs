//! Which PostgreSQL installation the clone runs: one of the target's major version
//! (its `pg_dump` makes the dump, its server runs the clone), or, offline, the one the
//! tests and the demo use.

use std::path::{Path, PathBuf};

use pgshift_embedded::{PgCache, PgInstall, PG_BIN_ENV};

use super::error::TraceError;

/// The library preloaded to record nested statements.
const NESTED_LIBRARY: &str = "pg_stat_statements";

/// An installation of PostgreSQL `major`, with its `pg_dump`: `PGSHIFT_PG_BIN` when it
/// is that major, else Debian's `/usr/lib/postgresql/<major>/bin`, else the download
/// cache's build of that major (`scripts/pg-versions <major>`).
pub(crate) fn for_major(major: u32) -> Result<PgInstall, TraceError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os(PG_BIN_ENV) {
        candidates.push(PathBuf::from(dir));
    }
    candidates.push(PathBuf::from(format!("/usr/lib/postgresql/{major}/bin")));
    candidates.push(PgCache::from_env().prefix(major).join("bin"));
    let mut looked_in = Vec::new();
    for dir in candidates {
        match PgInstall::from_bindir(&dir) {
            Ok(install) if install.version().major == major => {
                let pg_dump = install.bin("pg_dump");
                if !pg_dump.is_file() {
                    return Err(TraceError::NoPgDump { path: pg_dump });
                }
                return Ok(install);
            }
            Ok(install) => looked_in.push(format!(
                "{} (PostgreSQL {})",
                dir.display(),
                install.version()
            )),
            Err(_) => looked_in.push(format!("{} (no server)", dir.display())),
        }
    }
    Err(TraceError::NoMatchingServer {
        major,
        looked_in: looked_in.join(", "),
    })
}

/// The installation for an offline replay: the one [`PgInstall::discover`] finds.
pub(crate) fn default_install() -> Result<PgInstall, TraceError> {
    Ok(PgInstall::discover()?)
}

/// Whether `install` ships `pg_stat_statements` (its shared library in the install's
/// library directory, Debian's or a relocatable build's layout).
pub(crate) fn has_nested_library(install: &PgInstall) -> bool {
    let Some(prefix) = install.bindir().parent() else {
        return false;
    };
    library_candidates(prefix).iter().any(|path| path.is_file())
}

fn library_candidates(prefix: &Path) -> [PathBuf; 2] {
    let file = format!("{NESTED_LIBRARY}.so");
    [
        prefix.join("lib").join(&file),
        prefix.join("lib").join("postgresql").join(&file),
    ]
}

/// The library's name, for `shared_preload_libraries` and `CREATE EXTENSION`.
pub(crate) fn nested_library() -> &'static str {
    NESTED_LIBRARY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_major_with_no_binaries_is_refused_naming_what_to_install() {
        let err = for_major(99).expect_err("no PostgreSQL 99 here");
        let message = err.to_string();
        assert!(matches!(
            err,
            TraceError::NoMatchingServer { major: 99, .. }
        ));
        assert!(
            message.contains("apt-get install postgresql-99"),
            "{message}"
        );
        assert!(message.contains("/usr/lib/postgresql/99/bin"), "{message}");
    }
}
