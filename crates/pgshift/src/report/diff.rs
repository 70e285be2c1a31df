//! The `pgshift diff` JSON report.

use serde::Serialize;

use super::PlanReport;
use crate::desired::Compared;

/// A diff: the changes, their fingerprints, and the plan of them.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version.
    pub tool_version: &'static str,
    /// `diff`.
    pub command: &'static str,
    /// The exit code the CLI returns for it.
    pub exit_code: u8,
    /// The comparison.
    #[serde(flatten)]
    pub compared: Compared,
    /// The changes as `plan` judges them against the live database (none when there
    /// is no difference).
    pub plan: Option<PlanReport>,
}

impl DiffReport {
    /// The report of a diff.
    pub fn of(compared: &Compared, plan: Option<PlanReport>, exit_code: u8) -> Self {
        DiffReport {
            format_version: super::FORMAT_VERSION,
            tool: super::TOOL,
            tool_version: super::TOOL_VERSION,
            command: "diff",
            exit_code,
            compared: compared.clone(),
            plan,
        }
    }
}
