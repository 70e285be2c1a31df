//! The `pgshift plan` JSON report.

use serde::Serialize;

use crate::catalog::{RelationFacts, ServerFacts};
use crate::classify::Classification;
use crate::report::InputErrorReport;
use crate::route::Route;
use crate::script::TransactionMode;

/// The whole plan run.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version.
    pub tool_version: &'static str,
    /// `plan`.
    pub command: &'static str,
    /// The layout of each directory given, as detected from its file names.
    pub layouts: Vec<crate::layout::InputLayout>,
    /// Files of the directories given that `pgshift.migrations` records as applied:
    /// not planned, as `migrate` would not run them. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    /// The server planned against.
    pub server: Option<ServerFacts>,
    /// The files, in order.
    pub files: Vec<PlannedFile>,
    /// The facts read for every relation the input names.
    pub relations: Vec<RelationFacts>,
    /// Counts.
    pub summary: PlanSummary,
}

/// One input file.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedFile {
    /// The path as given (`<sql>` for `--sql`).
    pub path: String,
    /// The transaction mode it was judged in.
    pub transaction_mode: Option<TransactionMode>,
    /// Its statements.
    pub statements: Vec<PlannedStatement>,
    /// Why it could not be read or parsed, if so.
    pub error: Option<InputErrorReport>,
    /// When pgshift runs it as more units than its runner had transactions.
    pub split: Option<crate::exec::split::Split>,
    /// Its procedural statements, traced on a clone of the target: the locks,
    /// rewrites and statements the server really produced, and how each runs
    /// (`native`, `expanded`, `accepted`, `refused`). Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub procedural: Vec<crate::procedural::ProceduralVerdict>,
}

/// One statement and how it would run.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedStatement {
    /// Zero-based index in its file.
    pub index: usize,
    /// Line of its first token.
    pub line: u32,
    /// Column of its first token.
    pub column: u32,
    /// Its text.
    pub sql: String,
    /// Everything the classifier says, route included.
    #[serde(flatten)]
    pub classification: Classification,
    /// For a statement routed to copy-and-swap: the locks the run takes, and the
    /// statement-as-written's for comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_and_swap: Option<crate::exec::cas_locks::CasLocks>,
}

/// Counts of a plan run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PlanSummary {
    /// Files planned.
    pub files: usize,
    /// Inputs that could not be read or parsed.
    pub input_errors: usize,
    /// Statements planned.
    pub statements: usize,
    /// Statements that run as written.
    pub native: usize,
    /// Statements replaced by a safer native sequence.
    pub native_sequence: usize,
    /// Statements that go through copy-and-swap.
    pub copy_and_swap: usize,
    /// Statements refused.
    pub refused: usize,
}

impl PlanSummary {
    /// Counts one statement's route.
    pub fn count(&mut self, route: &Route) {
        self.statements += 1;
        match route {
            Route::Native => self.native += 1,
            Route::NativeSequence { .. } => self.native_sequence += 1,
            Route::CopyAndSwap => self.copy_and_swap += 1,
            Route::Refused { .. } => self.refused += 1,
        }
    }
}
