//! Progress of an apply, reported to whoever shows it (the CLI's progress bar or
//! quiet lines, or nothing).

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
