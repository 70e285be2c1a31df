//! Findings as compiler-style diagnostics:
//!
//! ```text
//! migrations/0008_kind_bigint.sql:4:1: error[table-rewrite]: … rewrites every row of "events" …
//!     4 | ALTER TABLE events ALTER COLUMN kind TYPE bigint
//!   help: `pgshift apply` runs this online through copy-and-swap …
//! ```

use std::fmt::Write;

use pgshift::lint::{Code, Finding, Severity};
use pgshift::report::LintSummary;
use pgshift_sql::{Position, Span};

use super::style::{paint, verbosity, Tone, Verbosity};

/// Lines of a statement shown under a finding (all of them with `-v`).
const SHOWN_LINES: usize = 3;

/// The colour of a severity.
pub fn severity_tone(severity: Severity) -> Tone {
    match severity {
        Severity::Error => Tone::Bad,
        Severity::Warning => Tone::Caution,
        Severity::Info => Tone::Note,
    }
}

/// One finding, with the statement's first lines and the help. Quiet: only the first
/// line of an error-severity finding. Verbose: the whole statement, the code's next
/// step and where its page is.
pub fn finding(path: &str, finding: &Finding, statement: &str) -> String {
    let mut out = String::new();
    let level = verbosity();
    if level == Verbosity::Quiet && finding.severity != Severity::Error {
        return out;
    }
    let position = finding.position;
    let label = format!("{}[{}]", finding.severity.name(), finding.code);
    let _ = writeln!(
        out,
        "{path}:{}:{}: {}: {}",
        position.line,
        position.column,
        paint(severity_tone(finding.severity), &label),
        finding.message
    );
    if level == Verbosity::Quiet {
        return out;
    }
    let shown = if level == Verbosity::Verbose {
        usize::MAX
    } else {
        SHOWN_LINES
    };
    let lines: Vec<&str> = statement.lines().collect();
    let counted = if level == Verbosity::Verbose {
        lines.len()
    } else {
        SHOWN_LINES
    };
    let width = (position.line as usize + counted).to_string().len();
    for (offset, line) in lines.iter().take(shown).enumerate() {
        let _ = writeln!(
            out,
            "  {:>width$} | {line}",
            position.line as usize + offset
        );
    }
    if lines.len() > shown {
        let _ = writeln!(out, "  {:>width$} | …", "");
    }
    if let Some(help) = &finding.help {
        let _ = writeln!(out, "  help: {}", help.text);
        for sql in &help.sql {
            let _ = writeln!(out, "        {sql};");
        }
    }
    if level == Verbosity::Verbose {
        let page = pgshift::pages::lint_page(finding.code);
        let _ = writeln!(out, "  do this: {}", page.do_this);
        let _ = writeln!(out, "  more: pgshift explain {}", finding.code);
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
    let tone = if summary.errors > 0 || summary.input_errors > 0 {
        Tone::Bad
    } else if summary.warnings > 0 {
        Tone::Caution
    } else {
        Tone::Good
    };
    let mut line = paint(tone, &line);
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
