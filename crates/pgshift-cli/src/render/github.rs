//! Lint findings as GitHub Actions workflow commands: each finding becomes an
//! annotation on its statement's lines of the pull request.
//!
//! ```text
//! ::error file=migrations/0008.sql,line=4,col=1,endLine=4,endColumn=40,title=pgshift table-rewrite::ALTER COLUMN TYPE …%0Ahelp: …
//! ```
//!
//! Escaping follows GitHub's rules: `%`, CR and LF in the message and in property values,
//! and also `:` and `,` in property values.

use std::fmt::Write;

use pgshift::lint::Severity;
use pgshift::report::{FindingReport, LintReport};

use super::locate::{extent, Extent};

/// The workflow commands of a lint report, one line each, then the summary as a plain
/// log line.
pub fn github(report: &LintReport) -> String {
    let mut out = String::new();
    for file in &report.files {
        if let Some(error) = &file.error {
            let mut properties = vec![("file", repository_path(&file.path))];
            if let (Some(line), Some(column)) = (error.line, error.column) {
                properties.push(("line", line.to_string()));
                properties.push(("col", column.to_string()));
            }
            properties.push(("title", format!("pgshift {} error", error.kind)));
            command(&mut out, "error", &properties, &error.message);
        }
    }
    for finding in &report.findings {
        annotation(&mut out, finding);
    }
    let summary = &report.summary;
    let _ = writeln!(
        out,
        "pgshift lint: {} errors, {} warnings, {} notes in {} files",
        summary.errors, summary.warnings, summary.infos, summary.files
    );
    out
}

fn annotation(out: &mut String, finding: &FindingReport) {
    let Extent {
        end_line,
        end_column_exclusive,
        ..
    } = extent(finding.line, finding.column, &finding.statement);
    // GitHub's endColumn is the last column of the annotated text.
    let end_column = end_column_exclusive.saturating_sub(1).max(1);
    let properties = [
        ("file", repository_path(&finding.path)),
        ("line", finding.line.to_string()),
        ("col", finding.column.to_string()),
        ("endLine", end_line.to_string()),
        ("endColumn", end_column.to_string()),
        ("title", format!("pgshift {}", finding.code)),
    ];
    let mut message = finding.message.clone();
    if let Some(help) = &finding.help {
        let _ = write!(message, "\nhelp: {}", help.text);
        for sql in &help.sql {
            let _ = write!(message, "\n    {sql};");
        }
    }
    let _ = write!(message, "\nmore: pgshift explain {}", finding.code);
    command(out, level(finding.severity), &properties, &message);
}

/// The path as GitHub matches it against the checkout: relative to the working
/// directory (the workspace root in a workflow), without a leading `./`.
fn repository_path(path: &str) -> String {
    let as_path = std::path::Path::new(path);
    if as_path.is_absolute() {
        if let Some(relative) = std::env::current_dir().ok().and_then(|cwd| {
            as_path
                .strip_prefix(cwd)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        }) {
            return relative;
        }
        return path.to_owned();
    }
    let mut relative = path;
    while let Some(rest) = relative.strip_prefix("./") {
        relative = rest;
    }
    relative.to_owned()
}

/// The workflow command of a severity.
fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    }
}

fn command(out: &mut String, name: &str, properties: &[(&str, String)], message: &str) {
    let properties: Vec<String> = properties
        .iter()
        .map(|(key, value)| format!("{key}={}", escape_property(value)))
        .collect();
    let _ = writeln!(
        out,
        "::{name} {}::{}",
        properties.join(","),
        escape_data(message)
    );
}

/// A message: `%`, CR and LF escaped.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A property value: as a message, and `:` and `,` too.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_githubs_rules() {
        assert_eq!(escape_data("100% a:b,c\r\nd"), "100%25 a:b,c%0D%0Ad");
        assert_eq!(
            escape_property("100% a:b,c\r\nd"),
            "100%25 a%3Ab%2Cc%0D%0Ad"
        );
        // `%` first, so an escape is never escaped twice or left looking like one.
        assert_eq!(escape_data("%0A"), "%250A");
    }
}
