//! The `pgshift lint` JSON report.

use serde::Serialize;

use crate::catalog::volume::LiveVolume;
use crate::lint::{Code, Finding, Help, Severity};
use crate::script::TransactionMode;
use crate::trace::{
    Difference, NestedAvailability, NestedStatement, Outcome, SchemaOrigin, StatementTrace,
    TracedDdl, TracedLock, TracedRewrite,
};

/// The whole lint run.
#[derive(Clone, Debug, Serialize)]
pub struct LintReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version.
    pub tool_version: &'static str,
    /// `lint`.
    pub command: &'static str,
    /// The layout of each directory given, as detected from its file names.
    pub layouts: Vec<crate::layout::InputLayout>,
    /// The files, in the order they were judged.
    pub files: Vec<LintedFile>,
    /// Every finding, file by file, in statement order.
    pub findings: Vec<FindingReport>,
    /// Counts.
    pub summary: LintSummary,
    /// What the statements did on a throwaway clone (`lint --trace` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<LintTrace>,
}

/// `lint --trace`: the trace of every statement, next to the static findings.
#[derive(Clone, Debug, Serialize)]
pub struct LintTrace {
    /// The clone's server version; `None` when the trace could not be made.
    pub server_version: Option<String>,
    /// Where the clone's schema came from.
    pub schema: Option<SchemaOrigin>,
    /// Whether nested statement texts were recorded.
    pub nested_statements: Option<NestedAvailability>,
    /// Why the trace could not be made, if so.
    pub error: Option<String>,
    /// One entry per statement, file by file.
    pub statements: Vec<TracedStatementReport>,
    /// With `--url`: why the live sizes of the traced tables could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_sizes_error: Option<String>,
}

/// One statement's trace, and where the static classification differs from it.
#[derive(Clone, Debug, Serialize)]
pub struct TracedStatementReport {
    /// Always `traced`: this comes from the server, not from the classifier.
    pub source: &'static str,
    /// The file.
    pub path: String,
    /// Line of the statement's first token.
    pub line: u32,
    /// Column of the statement's first token.
    pub column: u32,
    /// Zero-based statement index in the file.
    pub statement_index: usize,
    /// Ran, failed, skipped or not run.
    pub outcome: Outcome,
    /// What the server did.
    pub trace: TraceObject,
    /// Where lint's static judgement differs from the trace (the trace wins).
    pub differences: Vec<Difference>,
    /// With `--url`: the live size of each pre-existing table the statement rewrote or
    /// locked ACCESS EXCLUSIVE on the clone, measured on the target (read-only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveVolume>,
}

/// What the server did for one statement.
#[derive(Clone, Debug, Serialize)]
pub struct TraceObject {
    /// Whether it ran in a transaction block of its own (locks were read).
    pub in_transaction: bool,
    /// Relation locks held at the end of its transaction; `null` when not read.
    pub locks: Option<Vec<TracedLock>>,
    /// Tables rewritten.
    pub rewrites: Vec<TracedRewrite>,
    /// DDL executed, nested commands included.
    pub ddl: Vec<TracedDdl>,
    /// Statements run below the top level (unordered); `null` when not recorded.
    pub nested: Option<Vec<NestedStatement>>,
}

impl TracedStatementReport {
    /// The report of `trace`, a statement of `path` at `line:column`.
    pub fn new(
        path: &str,
        position: pgshift_sql::Position,
        trace: &StatementTrace,
        differences: Vec<Difference>,
    ) -> Self {
        TracedStatementReport {
            source: "traced",
            path: path.to_owned(),
            line: position.line,
            column: position.column,
            statement_index: trace.index,
            outcome: trace.outcome.clone(),
            trace: TraceObject {
                in_transaction: trace.in_transaction,
                locks: trace.locks.clone(),
                rewrites: trace.rewrites.clone(),
                ddl: trace.ddl.clone(),
                nested: trace.nested.clone(),
            },
            differences,
            live: Vec::new(),
        }
    }
}

/// One input.
#[derive(Clone, Debug, Serialize)]
pub struct LintedFile {
    /// The path as given.
    pub path: String,
    /// How many statements it has (0 when it could not be parsed).
    pub statements: usize,
    /// The transaction mode it was judged in.
    pub transaction_mode: Option<TransactionMode>,
    /// Why it could not be read or parsed, if so.
    pub error: Option<InputErrorReport>,
}

/// An input that could not be read or parsed.
#[derive(Clone, Debug, Serialize)]
pub struct InputErrorReport {
    /// `read` (the bytes) or `parse` (the SQL).
    pub kind: &'static str,
    /// What went wrong.
    pub message: String,
    /// Line, when known.
    pub line: Option<u32>,
    /// Column, when known.
    pub column: Option<u32>,
}

/// One finding.
#[derive(Clone, Debug, Serialize)]
pub struct FindingReport {
    /// The file.
    pub path: String,
    /// Line of the statement's first token.
    pub line: u32,
    /// Column of the statement's first token.
    pub column: u32,
    /// Closed vocabulary (see `docs/LINTS.md`).
    pub code: Code,
    /// `error`, `warning` or `info`.
    pub severity: Severity,
    /// Zero-based statement index in the file.
    pub statement_index: usize,
    /// The statement's text.
    pub statement: String,
    /// What is wrong.
    pub message: String,
    /// How to do it safely, when known.
    pub help: Option<Help>,
}

impl FindingReport {
    /// A finding of `path`, with the statement text it is about.
    pub fn new(path: &str, finding: &Finding, statement: &str) -> Self {
        FindingReport {
            path: path.to_owned(),
            line: finding.position.line,
            column: finding.position.column,
            code: finding.code,
            severity: finding.severity,
            statement_index: finding.statement,
            statement: statement.to_owned(),
            message: finding.message.clone(),
            help: finding.help.clone(),
        }
    }
}

/// Counts of a lint run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LintSummary {
    /// Files judged (readable and parsable).
    pub files: usize,
    /// Inputs that could not be read or parsed.
    pub input_errors: usize,
    /// Error-severity findings.
    pub errors: usize,
    /// Warning-severity findings.
    pub warnings: usize,
    /// Info-severity findings.
    pub infos: usize,
}

impl LintSummary {
    /// Counts one finding.
    pub fn count(&mut self, severity: Severity) {
        match severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Info => self.infos += 1,
        }
    }
}
