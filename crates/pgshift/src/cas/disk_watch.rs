//! A run's watch on the disk it writes to (INV: OC-7). The preflight measures the free
//! space of every volume the run writes to, or, where it cannot, takes the room the
//! operator gives (`--disk-room`); while the run copies, builds its indexes and
//! verifies, this watch reads, every [`INTERVAL`]:
//!
//! * the free space of each measured volume (`statvfs`, as the preflight did), against
//!   the reserve the run keeps free there (the margin on what it copies, at least
//!   16 MiB): other writers of the volume count too, since a full volume stops them
//!   all;
//! * with `--disk-room`, what the run has written: the shadow tree's relations with
//!   their TOAST and committed indexes, and the change log (`pg_total_relation_size`),
//!   against the room less the WAL allowance.
//!
//! When either runs out, the watch ends the phase with `disk-space-running-out`, and
//! the run removes itself at once (sessions ended, capture triggers, shadow and change
//! log dropped, the record kept as aborted): the disk the shadow held is given back
//! and the source was never touched. A server that reports a full disk itself
//! (SQLSTATE 53100) ends the run the same way.
//!
//! An index build in progress is invisible to `pg_total_relation_size` until it
//! commits; on a measured volume `statvfs` sees it as it grows.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::CasError;
use super::plan::RunPlan;
use super::session;
use crate::connect::ConnectionSpec;
use crate::refusal::{Refusal, RefusalCause};

/// How often the watch reads.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// What a run watches while it writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskWatch {
    /// Each volume measured at the preflight (a path on it) and the bytes the run keeps
    /// free there.
    pub volumes: Vec<(PathBuf, u64)>,
    /// The most the run may write (shadow tree, its indexes, the change log), from
    /// `--disk-room`.
    pub written_limit: Option<u64>,
}

/// What the run has written: its shadow relations and change log, with TOAST and
/// committed indexes. `$1` their names, quoted and qualified; one that does not exist
/// (yet, or any more) counts nothing.
const WRITTEN: &str = "SELECT coalesce(pg_catalog.sum(pg_catalog.pg_total_relation_size(r.oid)), 0)::pg_catalog.int8 \
    FROM pg_catalog.unnest($1::pg_catalog.text[]) n, LATERAL (SELECT pg_catalog.to_regclass(n) AS oid) r";

/// `1.50 GiB`, `12.0 MiB`, `8.0 kB`.
pub fn size(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.1} kB", bytes as f64 / 1024.0)
    }
}

/// Runs `work`; ends it with `disk-space-running-out` if the plan's watch finds a
/// volume short of its reserve, or the run's writes past its room, first.
pub(crate) async fn watched<T>(
    spec: &ConnectionSpec,
    plan: &RunPlan,
    work: impl std::future::Future<Output = Result<T, CasError>>,
) -> Result<T, CasError> {
    let Some(watch) = plan.disk_watch.as_ref().filter(|w| w.watches()) else {
        return work.await;
    };
    tokio::select! {
        result = work => result,
        stop = run(spec, plan, watch) => Err(stop),
    }
}

impl DiskWatch {
    fn watches(&self) -> bool {
        !self.volumes.is_empty() || self.written_limit.is_some()
    }
}

/// Reads until something runs out (or the watch itself fails), and says what.
async fn run(spec: &ConnectionSpec, plan: &RunPlan, watch: &DiskWatch) -> CasError {
    let session = match watch.written_limit {
        Some(_) => match session::open(spec, &plan.names().disk_application()).await {
            Ok(session) => Some(session),
            Err(err) => return err,
        },
        None => None,
    };
    let mut relations: Vec<String> = vec![plan.shadow.to_string()];
    relations.extend(plan.shadow_partitions.iter().map(ToString::to_string));
    relations.push(plan.names().log_table().to_string());
    let mut ticker = tokio::time::interval(INTERVAL);
    loop {
        ticker.tick().await;
        for (path, reserve) in &watch.volumes {
            if let Some(stop) = short_of_reserve(path, *reserve) {
                return stop;
            }
        }
        if let (Some(limit), Some(session)) = (watch.written_limit, &session) {
            let written = match session.client().query_one(WRITTEN, &[&relations]).await {
                Ok(row) => u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
                Err(e) => return CasError::db("measuring what the run has written", e),
            };
            // INV: OC-7 — the run never writes past the room the operator gave.
            if written > limit {
                return running_out(format!(
                    "the run has written {} (its shadow, indexes and change log), past the {} of --disk-room it may use \
                     (the room less the WAL allowance)",
                    size(written),
                    size(limit)
                ));
            }
        }
    }
}

/// `Some` when the volume of `path` has less than `reserve` free.
fn short_of_reserve(path: &Path, reserve: u64) -> Option<CasError> {
    // A volume that cannot be read any more is not guessed full: the reads of the
    // others, and the server's own disk-full error, still stop the run.
    let (free, _) = free_space(path).ok()?;
    // INV: OC-7 — the run stops before the volumes it writes to fill.
    (free < reserve).then(|| {
        running_out(format!(
            "{} is free on the file system of {}, less than the {} the run keeps free there",
            size(free),
            path.display(),
            size(reserve)
        ))
    })
}

fn running_out(why: String) -> CasError {
    CasError::Refused(Refusal::new(
        RefusalCause::DiskSpaceRunningOut,
        format!(
            "{why}; the run stopped and removed itself (capture triggers, shadow and change log dropped; \
             the table is as it was). Free space there, or give the run more room, and run the change again"
        ),
    ))
}

/// Free bytes for an unprivileged user on the file system of `path`, and its device.
#[cfg(unix)]
pub(crate) fn free_space(path: &Path) -> Result<(u64, u64), String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let device = std::fs::metadata(path)
        .map_err(|e| format!("cannot examine {} from this process: {e}", path.display()))?
        .dev();
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} is not a usable path", path.display()))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `stat` is only read
    // after `statvfs` reported that it filled it in.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(format!(
            "cannot statvfs {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `statvfs` returned 0, so it initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let free = u64::from(stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64);
    Ok((free, device))
}

#[cfg(not(unix))]
pub(crate) fn free_space(_path: &Path) -> Result<(u64, u64), String> {
    Err("free space is measured on Unix hosts only".to_owned())
}
