//! Lint findings as SARIF 2.1.0, the format code-scanning interfaces read: one run
//! whose driver lists a rule for every lint code (from the same pages as
//! `docs/LINTS.md`), and one result per finding with its statement's region.

use std::path::Path;

use serde_json::{json, Value};

use pgshift::lint::{Code, Severity};
use pgshift::pages::{lint_page, Page};
use pgshift::report::{FindingReport, LintReport};

use super::locate::{dir_uri, extent, uri_of};

/// The schema the document declares.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The SARIF document of a lint report. `cwd` is the directory paths are relative to;
/// `docs_url` is where `LINTS.md` is published (each rule's `helpUri` is an anchor in it).
pub fn sarif(report: &LintReport, cwd: &Path, docs_url: &str) -> Value {
    let rules: Vec<Value> = Code::ALL
        .iter()
        .map(|code| rule(&lint_page(*code), docs_url))
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|finding| result(finding, cwd))
        .collect();
    let notifications: Vec<Value> = report
        .files
        .iter()
        .filter_map(|file| {
            let error = file.error.as_ref()?;
            let mut location = json!({
                "physicalLocation": {
                    "artifactLocation": { "uri": uri_of(&file.path, cwd), "uriBaseId": "SRCROOT" }
                }
            });
            if let (Some(line), Some(column)) = (error.line, error.column) {
                location["physicalLocation"]["region"] =
                    json!({ "startLine": line, "startColumn": column });
            }
            Some(json!({
                "level": "error",
                "message": { "text": format!("{} error: {}", error.kind, error.message) },
                "locations": [location],
            }))
        })
        .collect();
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "pgshift",
                    "version": report.tool_version,
                    "semanticVersion": report.tool_version,
                    "informationUri": format!("{}/LINTS.md", docs_url.trim_end_matches('/')),
                    "rules": rules,
                }
            },
            "invocations": [{
                "executionSuccessful": report.summary.input_errors == 0,
                "toolExecutionNotifications": notifications,
            }],
            "originalUriBaseIds": { "SRCROOT": { "uri": dir_uri(cwd) } },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    })
}

fn rule(page: &Page, docs_url: &str) -> Value {
    let level = match page.kind {
        pgshift::pages::PageKind::Lint { severity } => level(severity),
        pgshift::pages::PageKind::Refusal { .. } => "error",
    };
    let mut help_text = page.do_this.to_owned();
    let mut help_markdown = page.do_this.to_owned();
    if !page.sql.is_empty() {
        help_text.push_str("\n\n");
        help_text.push_str(page.sql);
        help_markdown.push_str(&format!("\n\n```sql\n{}\n```", page.sql));
    }
    help_markdown.push_str(&format!("\n\n**How pgshift runs it.** {}", page.pgshift));
    json!({
        "id": page.code,
        "name": camel_case(page.code),
        "shortDescription": { "text": page.summary },
        "fullDescription": { "text": format!("{} {}", page.means, page.matters) },
        "help": { "text": help_text, "markdown": help_markdown },
        "helpUri": format!("{}/LINTS.md#{}", docs_url.trim_end_matches('/'), page.anchor()),
        "defaultConfiguration": { "level": level },
        "properties": { "tags": ["postgresql", "migration"] },
    })
}

fn result(finding: &FindingReport, cwd: &Path) -> Value {
    let span = extent(finding.line, finding.column, &finding.statement);
    let rule_index = Code::ALL
        .iter()
        .position(|code| *code == finding.code)
        .unwrap_or_default();
    let mut text = finding.message.clone();
    if let Some(help) = &finding.help {
        text.push_str("\nhelp: ");
        text.push_str(&help.text);
        for sql in &help.sql {
            text.push_str(&format!("\n    {sql};"));
        }
    }
    json!({
        "ruleId": finding.code.name(),
        "ruleIndex": rule_index,
        "level": level(finding.severity),
        "message": { "text": text },
        "locations": [{
            "physicalLocation": {
                "artifactLocation": { "uri": uri_of(&finding.path, cwd), "uriBaseId": "SRCROOT" },
                "region": {
                    "startLine": span.start_line,
                    "startColumn": span.start_column,
                    "endLine": span.end_line,
                    "endColumn": span.end_column_exclusive,
                }
            }
        }],
    })
}

/// SARIF's result levels.
fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// `table-rewrite` → `TableRewrite`, the rule's `name`.
fn camel_case(code: &str) -> String {
    code.split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}
