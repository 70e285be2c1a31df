//! Progress of an apply, reported to whoever shows it (the CLI's progress bar or
//! quiet lines, or nothing).

use tokio_postgres::Client;

use super::apply::UnitResult;
use super::unit::Unit;

/// One reading of `pg_stat_progress_create_index` for the running build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildProgress {
    /// The build phase (`building index: scanning table`, …).
    pub phase: String,
    /// Blocks to scan in this phase.
    pub blocks_total: i64,
    /// Blocks scanned.
    pub blocks_done: i64,
    /// Tuples to process in this phase.
    pub tuples_total: i64,
    /// Tuples processed.
    pub tuples_done: i64,
    /// Partitions of a partitioned index to build (0: not partitioned).
    pub partitions_total: i64,
    /// Partitions built.
    pub partitions_done: i64,
}

impl BuildProgress {
    /// The fraction done in this phase, when the totals are known.
    pub fn fraction(&self) -> Option<f64> {
        if self.blocks_total > 0 {
            Some(self.blocks_done as f64 / self.blocks_total as f64)
        } else if self.tuples_total > 0 {
            Some(self.tuples_done as f64 / self.tuples_total as f64)
        } else {
            None
        }
    }
}

/// Reads, on `monitor`, the progress of the index build the backend `pid` runs
/// (`pg_stat_progress_create_index`); `None` when it runs none, or the read failed (a
/// reading is only shown, never relied on).
pub async fn read_build(monitor: &Client, pid: i32) -> Option<BuildProgress> {
    let row = monitor
        .query_opt(
            "SELECT phase, blocks_total, blocks_done, tuples_total, tuples_done, partitions_total, partitions_done \
               FROM pg_catalog.pg_stat_progress_create_index WHERE pid OPERATOR(pg_catalog.=) $1",
            &[&pid],
        )
        .await
        .ok()??;
    Some(BuildProgress {
        phase: row.try_get(0).ok()?,
        blocks_total: row.try_get(1).ok()?,
        blocks_done: row.try_get(2).ok()?,
        tuples_total: row.try_get(3).ok()?,
        tuples_done: row.try_get(4).ok()?,
        partitions_total: row.try_get(5).ok()?,
        partitions_done: row.try_get(6).ok()?,
    })
}

/// Receives progress.
pub trait Progress {
    /// A unit starts (`index` of `total`).
    fn started(&mut self, index: usize, total: usize, unit: &Unit);
    /// A running concurrent build reports progress.
    fn build(&mut self, progress: BuildProgress);
    /// A unit ended (committed, failed or skipped).
    fn finished(&mut self, index: usize, total: usize, result: &UnitResult);
    /// Where a copy-and-swap unit reports its progress (`None`: nowhere).
    fn copy_and_swap(&mut self) -> Option<&mut dyn crate::cas::CasProgress> {
        None
    }
}

/// Progress that goes nowhere.
pub struct NoProgress;

impl Progress for NoProgress {
    fn started(&mut self, _index: usize, _total: usize, _unit: &Unit) {}
    fn build(&mut self, _progress: BuildProgress) {}
    fn finished(&mut self, _index: usize, _total: usize, _result: &UnitResult) {}
}
