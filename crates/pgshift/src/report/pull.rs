//! The `pgshift pull` JSON report.

use serde::Serialize;

use crate::desired::Pulled;

/// What a pull wrote.
#[derive(Clone, Debug, Serialize)]
pub struct PullReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version.
    pub tool_version: &'static str,
    /// `pull`.
    pub command: &'static str,
    /// The exit code the CLI returns for it (0).
    pub exit_code: u8,
    /// The pull.
    #[serde(flatten)]
    pub pulled: Pulled,
}

impl PullReport {
    /// The report of a pull.
    pub fn of(pulled: &Pulled, exit_code: u8) -> Self {
        PullReport {
            format_version: super::FORMAT_VERSION,
            tool: super::TOOL,
            tool_version: super::TOOL_VERSION,
            command: "pull",
            exit_code,
            pulled: pulled.clone(),
        }
    }
}
