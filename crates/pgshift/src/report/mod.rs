//! Versioned JSON reports with closed vocabularies, for machines: `lint`, `plan`,
//! `apply`, `audit`, `pull`, `diff` and `capabilities` output. Renderers for people
//! live in the CLI.
//!
//! Every report carries `format_version`; a field is never renamed or given a new
//! meaning without a new version. Fields may be added within a version: version 1
//! gained the related-relation locks (`related_locks`, and `related_to` and
//! `index_mode` on `locks`) and the facts that name them (`related` on each relation,
//! `objects`), all additions a reader of the earlier shape can ignore.

mod apply;
mod audit;
mod capabilities;
mod diff;
mod lint;
mod plan;
mod pull;

pub use apply::{ApplyReport, ApplySummary};
pub use audit::{AuditReport, AuditSummary};
pub use capabilities::CapabilitiesReport;
pub use diff::DiffReport;
pub use lint::{
    FindingReport, InputErrorReport, LintReport, LintSummary, LintTrace, LintedFile, TraceObject,
    TracedStatementReport,
};
pub use plan::{PlanReport, PlanSummary, PlannedFile, PlannedStatement};
pub use pull::PullReport;

/// The version of every JSON report's shape.
pub const FORMAT_VERSION: u32 = 1;

/// The tool's name in reports.
pub const TOOL: &str = "pgshift";

/// The tool's version in reports.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");
