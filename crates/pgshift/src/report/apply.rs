//! The `pgshift apply` JSON report.

use serde::Serialize;

use crate::catalog::ServerFacts;
use crate::exec::{ApplyVerdict, Outcome};

/// The whole apply run.
#[derive(Clone, Debug, Serialize)]
pub struct ApplyReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version.
    pub tool_version: &'static str,
    /// `apply`.
    pub command: &'static str,
    /// The server.
    pub server: Option<ServerFacts>,
    /// The input (a path, or `<sql>`).
    pub path: String,
    /// How it ended (also in `verdict.outcome`).
    pub outcome: Outcome,
    /// The exit code the CLI returns for it.
    pub exit_code: u8,
    /// Everything that happened.
    pub verdict: ApplyVerdict,
    /// Totals.
    pub summary: ApplySummary,
    /// Its procedural statements, traced on a clone of the target, and how each ran.
    /// Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub procedural: Vec<crate::procedural::ProceduralVerdict>,
}

/// Totals of an apply.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ApplySummary {
    /// Units scheduled.
    pub units: usize,
    /// Units committed.
    pub committed: usize,
    /// Attempts made over all units.
    pub attempts: usize,
    /// The longest upper bound of a strong lock's hold, over all units (µs).
    pub strong_lock_held_us_max: Option<u64>,
}

impl ApplySummary {
    /// Totals of a verdict.
    pub fn of(verdict: &ApplyVerdict) -> Self {
        let reports = verdict.units.iter().filter_map(|u| u.report.as_ref());
        let mut summary = ApplySummary {
            units: verdict.units.len(),
            committed: verdict.committed_units,
            ..ApplySummary::default()
        };
        for report in reports {
            summary.attempts += report.attempts.len();
            summary.strong_lock_held_us_max = summary
                .strong_lock_held_us_max
                .max(report.strong_lock_held_us_max);
        }
        summary
    }
}
