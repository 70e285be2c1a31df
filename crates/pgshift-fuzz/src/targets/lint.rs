//! `lint_render`: `pgshift lint --schema` end to end, without the file system. The
//! bytes are `schema \0 file \0 file`: a schema file (psql meta-commands blanked, as
//! `--schema` reads it) and two migration files linted in order, each with the facts
//! the schema and the earlier file declared; the findings are rendered as the text
//! `pgshift lint` prints (the CLI's own renderer) and as its JSON report, which is read
//! back.

use pgshift::catalog::DeclaredSchema;
use pgshift::lint::{lint, Finding};
use pgshift::report::{self, FindingReport, InputErrorReport, LintReport, LintSummary, LintedFile};
use pgshift::script::{analyze, transaction_mode_for, Knowledge, TransactionMode};
use pgshift::source;
use pgshift_cli::lint_text;

use super::assert_one_statement;
use crate::input::{split_nul, within_limit};

/// Runs one input.
pub fn lint_render(data: &[u8]) {
    if !within_limit(data) {
        return;
    }
    let [schema, first, second] = split_nul(data, 3)[..] else {
        return;
    };
    let mut declared = DeclaredSchema::new();
    if let Some(text) = crate::input::text(schema) {
        if let Ok(statements) = pgshift_sql::parse(&source::blank_psql_meta_commands(&text)) {
            declared.absorb(&statements);
        }
    }
    let default_mode = if schema.len() % 2 == 0 {
        TransactionMode::File
    } else {
        TransactionMode::Statement
    };
    let mut report = LintReport {
        format_version: report::FORMAT_VERSION,
        tool: report::TOOL,
        tool_version: report::TOOL_VERSION,
        command: "lint",
        layouts: Vec::new(),
        trace: None,
        files: Vec::new(),
        findings: Vec::new(),
        summary: LintSummary::default(),
    };
    let mut text = String::new();
    for (path, bytes) in [("0001_first.sql", first), ("0002 second é.sql", second)] {
        lint_file(
            path,
            bytes,
            default_mode,
            &mut declared,
            &mut report,
            &mut text,
        );
    }
    let summary = lint_text::lint_summary(&report.summary);
    assert!(
        summary.ends_with('\n') && summary.lines().count() == 1,
        "{summary}"
    );
    check_json(&report);
}

fn lint_file(
    path: &str,
    bytes: &[u8],
    default_mode: TransactionMode,
    declared: &mut DeclaredSchema,
    report: &mut LintReport,
    text: &mut String,
) {
    let parsed = crate::input::text(bytes).map(|t| (pgshift_sql::parse(&t), t));
    let (statements, file_text) = match parsed {
        Some((Ok(statements), file_text)) => (statements, file_text),
        Some((Err(err), _)) => {
            report.summary.input_errors += 1;
            report.files.push(LintedFile {
                path: path.to_owned(),
                statements: 0,
                transaction_mode: None,
                error: Some(InputErrorReport {
                    kind: "parse",
                    message: err.to_string(),
                    line: err.position().map(|p| p.line),
                    column: err.position().map(|p| p.column),
                }),
            });
            return;
        }
        None => return,
    };
    let mode = transaction_mode_for(&statements, default_mode);
    let count = statements.len();
    let snapshot = declared.snapshot();
    let knowledge = Knowledge {
        facts: Some(&snapshot),
        server_version_num: None,
        created_earlier: None,
    };
    let script = analyze(statements, mode, knowledge);
    let analysed: Vec<_> = script
        .statements
        .iter()
        .map(|s| s.statement.clone())
        .collect();
    declared.absorb(&analysed);
    let mut findings = lint(&script);
    if count == 0 {
        findings.push(lint_text::no_statements_finding());
    }
    for finding in &findings {
        let statement = script
            .statements
            .get(finding.statement)
            .map_or("", |item| item.statement.text.as_str());
        check_finding(&file_text, count, finding);
        let rendered = lint_text::finding(path, finding, statement);
        let head = format!(
            "{path}:{}:{}: {}[{}]: ",
            finding.position.line,
            finding.position.column,
            finding.severity.name(),
            finding.code
        );
        assert!(rendered.starts_with(&head), "{rendered}");
        text.push_str(&rendered);
        report.summary.count(finding.severity);
        report
            .findings
            .push(FindingReport::new(path, finding, statement));
    }
    report.summary.files += 1;
    report.files.push(LintedFile {
        path: path.to_owned(),
        statements: count,
        transaction_mode: Some(mode),
        error: None,
    });
}

/// A finding points at a statement of its file, and the SQL of its help parses.
fn check_finding(text: &str, count: usize, finding: &Finding) {
    assert!(finding.statement < count.max(1), "{finding:?}");
    assert!(finding.span.start <= finding.span.end && finding.span.end <= text.len());
    assert!(finding.position.line >= 1 && finding.position.column >= 1);
    if let Some(help) = &finding.help {
        for sql in &help.sql {
            assert_one_statement(sql);
        }
    }
}

/// The JSON report is one document that reads back with every finding.
fn check_json(report: &LintReport) {
    let json = serde_json::to_string_pretty(report).expect("the lint report serializes");
    let value: serde_json::Value = serde_json::from_str(&json).expect("the report is JSON");
    assert_eq!(value["format_version"], report::FORMAT_VERSION);
    let findings = value["findings"].as_array().map_or(0, Vec::len);
    assert_eq!(findings, report.findings.len());
}
