//! `fmt`: desired files in the canonical layout `pull` writes. The files run on a
//! throwaway cluster (of the live server's major, with its roles and tablespaces, when
//! a database is named; else of the installation pgshift finds) and that database is
//! pulled, with `pull`'s proof (DS-1): the result is PostgreSQL's own printing of what
//! the files define, one object per file, in dependency order.

use std::path::Path;

use super::compare::Desired;
use super::error::PullError;
use super::pull::{is_empty_dir, pull, Pulled};
use super::scratch::Scratch;
use crate::trace::{clone::Clone, install, read_target};

/// Writes `desired` into `out` (a folder that must not exist or be empty) in the
/// canonical layout. `like` names a live database whose major version, roles and
/// tablespaces the files are run with.
pub async fn fmt(desired: &Desired, out: &Path, like: Option<&str>) -> Result<Pulled, PullError> {
    if out.exists() && !is_empty_dir(out) {
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
    let scratch = Scratch::new().map_err(|e| PullError::DesiredDidNotRun(e.to_string()))?;
    let file = scratch
        .script_of(desired)
        .map_err(|e| PullError::DesiredDidNotRun(e.to_string()))?;
    clone
        .run_file(&file)
        .map_err(|e| PullError::DesiredDidNotRun(e.to_string()))?;
    pull(&clone.conninfo(), out).await
}
