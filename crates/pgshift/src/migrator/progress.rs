//! The engine's progress as `tracing` events, target `pgshift::migrator`: a unit
//! started and ended (info), a concurrent build's and copy-and-swap's readings (debug),
//! copy-and-swap's phases, notes and throttle changes (info), and after the run each
//! file's status (info; warn for a refused or failed file).

use crate::cas::index_watch::IndexBuild;
use crate::cas::{CasProgress, Phase};
use crate::exec::{BuildProgress, Progress, Unit, UnitResult};
use crate::migrate::FileStatus;

use super::MigrationReport;

/// [`Progress`] and [`CasProgress`] that emit `tracing` events; what the
/// [`Migrator`](super::Migrator) reports with. An application sees them through
/// whatever subscriber it installs.
#[derive(Clone, Copy, Debug, Default)]
pub struct TracingProgress;

impl Progress for TracingProgress {
    fn started(&mut self, index: usize, total: usize, unit: &Unit) {
        tracing::info!(
            target: "pgshift::migrator",
            unit = index + 1,
            of = total,
            steps = unit.steps.len(),
            transactional = unit.transactional,
            copy_and_swap = unit.copy_and_swap.as_ref().map(ToString::to_string),
            "unit started"
        );
    }

    fn build(&mut self, progress: BuildProgress) {
        tracing::debug!(
            target: "pgshift::migrator",
            phase = %progress.phase,
            fraction = progress.fraction(),
            "index build"
        );
    }

    fn finished(&mut self, index: usize, total: usize, result: &UnitResult) {
        let ended = match (&result.skipped, &result.report) {
            (Some(_), _) => "skipped",
            (None, Some(report)) if report.committed => "committed",
            (None, Some(_)) => "failed",
            (None, None) => "not run",
        };
        tracing::info!(target: "pgshift::migrator", unit = index + 1, of = total, ended, "unit ended");
    }

    fn copy_and_swap(&mut self) -> Option<&mut dyn CasProgress> {
        Some(self)
    }
}

impl CasProgress for TracingProgress {
    fn phase(&mut self, phase: Phase) {
        tracing::info!(target: "pgshift::migrator", phase = phase.name(), "copy-and-swap phase");
    }

    fn copied(&mut self, rows: i64, estimate: i64, backlog_max: i64) {
        tracing::debug!(target: "pgshift::migrator", rows, estimate, backlog_max, "copied");
    }

    fn verified(&mut self, rows: i64, estimate: i64) {
        tracing::debug!(target: "pgshift::migrator", rows, estimate, "verified");
    }

    fn note(&mut self, text: &str) {
        tracing::info!(target: "pgshift::migrator", note = text, "copy-and-swap note");
    }

    fn throttled(&mut self, pace: &str, why: &str, paused_ms: u64) {
        tracing::info!(target: "pgshift::migrator", pace, why, paused_ms, "copy-and-swap pace");
    }

    fn index_build(&mut self, build: &IndexBuild) {
        tracing::debug!(
            target: "pgshift::migrator",
            index = %build.index,
            number = build.number,
            count = build.count,
            "shadow index build"
        );
    }
}

/// Each file's status once the run ended.
pub(super) fn files(report: &MigrationReport) {
    for file in &report.verdict.files {
        let version = file.version.as_deref().unwrap_or("repeatable");
        match file.status {
            FileStatus::Refused | FileStatus::Failed => tracing::warn!(
                target: "pgshift::migrator",
                version,
                name = %file.name,
                status = ?file.status,
                error = file.error.as_deref(),
                "migration stopped the run"
            ),
            _ => tracing::info!(
                target: "pgshift::migrator",
                version,
                name = %file.name,
                status = ?file.status,
                "migration"
            ),
        }
    }
    tracing::info!(target: "pgshift::migrator", outcome = ?report.verdict.outcome, "migrate ended");
}
