//! `fmt`: desired files in the canonical layout `pull` writes. The files run on a
//! throwaway cluster (of the live server's major, with its roles and tablespaces, when
//! a database is named; else of the installation pgshift finds) and that database is
//! pulled, with `pull`'s proof (DS-1): the result is PostgreSQL's own printing of what
//! the files define, one object per file, in dependency order.

use std::path::Path;

use super::compare::Desired;
use super::error::PullError;
use super::pull::{pull, Pulled};
use crate::trace::{clone::Clone, install, read_target};

/// Writes `desired` into `out` (a folder that must not exist or be empty) in the
/// canonical layout. `like` names a live database whose major version, roles and
/// tablespaces the files are run with.
pub async fn fmt(desired: &Desired, out: &Path, like: Option<&str>) -> Result<Pulled, PullError> {
    if out.exists() && std::fs::read_dir(out).is_ok_and(|mut e| e.next().is_some()) {
        return Err(PullError::OutputExists(out.to_owned()));
    }
    let (install, globals) = match like {
        Some(conninfo) => {
            let (version_num, globals) = read_target(conninfo).await?;
            (install::for_major(version_num / 10_000)?, Some(globals))
        }
        None => (install::default_install()?, None),
    };
    let clone = Clone::start(&install)?;
    if let Some(globals) = &globals {
        clone.provide(globals).await?;
    }
    let file = match desired {
        Desired::Path(path) if path.is_dir() => path.join(super::layout::MANIFEST),
        Desired::Path(path) => path.clone(),
        Desired::Text(text) => tempfile_in_out_parent(out, text)?,
    };
    let ran = clone.run_file(&file);
    if let Desired::Text(_) = desired {
        let _ = std::fs::remove_file(&file);
    }
    ran.map_err(|e| PullError::DesiredDidNotRun(e.to_string()))?;
    pull(&clone.conninfo(), out).await
}

/// Standard input's SQL in a file beside `out`, for `psql -f`.
fn tempfile_in_out_parent(out: &Path, text: &str) -> Result<std::path::PathBuf, PullError> {
    let path = out.with_file_name(format!(
        ".{}.pgshift-fmt-{}.sql",
        out.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&path, text).map_err(|source| PullError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}
