//! The `pgshift lint` JSON report.

use serde::Serialize;

use crate::lint::{Code, Finding, Help, Severity};
use crate::script::TransactionMode;

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
