//! Findings as compiler-style diagnostics:
//!
//! ```text
//! migrations/0008_kind_bigint.sql:4:1: error[table-rewrite]: … rewrites every row of "events" …
//!     4 | ALTER TABLE events ALTER COLUMN kind TYPE bigint
//!   help: `pgshift apply` runs this online through copy-and-swap …
//! ```

use std::fmt::Write;

use pgshift::lint::{Code, Finding};
use pgshift::report::LintSummary;
use pgshift_sql::{Position, Span};

/// Lines of a statement shown under a finding.
const SHOWN_LINES: usize = 3;

/// One finding, with the statement's first lines and the help.
pub fn finding(path: &str, finding: &Finding, statement: &str) -> String {
    let mut out = String::new();
    let position = finding.position;
    let _ = writeln!(
        out,
        "{path}:{}:{}: {}[{}]: {}",
        position.line,
        position.column,
        finding.severity.name(),
        finding.code,
        finding.message
    );
    let width = (position.line as usize + SHOWN_LINES).to_string().len();
    let lines: Vec<&str> = statement.lines().collect();
    for (offset, line) in lines.iter().take(SHOWN_LINES).enumerate() {
        let _ = writeln!(
            out,
            "  {:>width$} | {line}",
            position.line as usize + offset
        );
    }
    if lines.len() > SHOWN_LINES {
        let _ = writeln!(out, "  {:>width$} | …", "");
    }
    if let Some(help) = &finding.help {
        let _ = writeln!(out, "  help: {}", help.text);
        for sql in &help.sql {
            let _ = writeln!(out, "        {sql};");
        }
    }
    out.push('\n');
    out
}

/// The closing line of a text lint report.
pub fn lint_summary(summary: &LintSummary) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut line = format!(
        "{}, {}, {} in {}",
        plural(summary.errors, "error"),
        plural(summary.warnings, "warning"),
        plural(summary.infos, "note"),
        plural(summary.files, "file")
    );
    if summary.input_errors > 0 {
        line.push_str(&format!(
            "; {} could not be read or parsed",
            plural(summary.input_errors, "input")
        ));
    }
    line.push('\n');
    line
}

/// The finding for a file with no statements.
pub fn no_statements_finding() -> Finding {
    Finding {
        code: Code::NoStatements,
        severity: Code::NoStatements.severity(),
        statement: 0,
        position: Position { line: 1, column: 1 },
        span: Span { start: 0, end: 0 },
        message: "the file has no SQL statements".to_owned(),
        help: None,
    }
}
