//! `pgshift lint`: offline findings for migration files.

use pgshift::catalog::DeclaredSchema;
use pgshift::lint::{lint, Severity};
use pgshift::report::{self, FindingReport, LintReport, LintSummary, LintedFile};
use pgshift::script::{analyze, transaction_mode_for, Knowledge};

use super::{inputs, lint_trace};
use crate::cli::{LintArgs, LintFormat};
use crate::exit;
use crate::render;

/// Runs `pgshift lint` and returns the exit code.
pub fn run(args: &LintArgs) -> u8 {
    let mut report = LintReport {
        format_version: report::FORMAT_VERSION,
        tool: report::TOOL,
        tool_version: report::TOOL_VERSION,
        command: "lint",
        layouts: pgshift::layout::InputLayout::of_inputs(&args.paths),
        files: Vec::new(),
        findings: Vec::new(),
        summary: LintSummary::default(),
        trace: None,
    };
    let mut traced = lint_trace::Traced::default();
    let mut text = String::new();
    for layout in &report.layouts {
        text.push_str(&format!(
            "{}: layout: {}\n",
            layout.path, layout.layout.description
        ));
    }
    let mut declared = DeclaredSchema::new();
    for input in inputs::load_schema(&args.schema, args.max_file_bytes) {
        match input {
            Ok(parsed) => declared.absorb(&parsed.statements),
            Err(failure) => {
                text.push_str(&failure.render());
                text.push('\n');
                report.summary.input_errors += 1;
                // In the report too: a JSON reader learns why it exits 1.
                report.files.push(LintedFile {
                    path: failure.path,
                    statements: 0,
                    transaction_mode: None,
                    error: Some(failure.report),
                });
            }
        }
    }
    for input in inputs::load(&args.paths, args.max_file_bytes) {
        match input {
            Err(failure) => {
                text.push_str(&failure.render());
                text.push('\n');
                report.summary.input_errors += 1;
                report.files.push(LintedFile {
                    path: failure.path,
                    statements: 0,
                    transaction_mode: None,
                    error: Some(failure.report),
                });
            }
            Ok(parsed) => {
                let mode = transaction_mode_for(&parsed.statements, args.transaction_mode.into());
                let count = parsed.statements.len();
                let snapshot = declared.snapshot();
                let knowledge = Knowledge {
                    facts: Some(&snapshot),
                    server_version_num: None,
                    created_earlier: None,
                };
                let script = analyze(parsed.statements, mode, knowledge);
                let statements: Vec<_> = script
                    .statements
                    .iter()
                    .map(|s| s.statement.clone())
                    .collect();
                declared.absorb(&statements);
                if args.trace {
                    traced.add(&parsed.path, &script);
                }
                let mut findings = lint(&script);
                if count == 0 {
                    findings.push(render::no_statements_finding());
                }
                for finding in &findings {
                    let statement = script
                        .statements
                        .get(finding.statement)
                        .map_or("", |item| item.statement.text.as_str());
                    text.push_str(&render::finding(&parsed.path, finding, statement));
                    report.summary.count(finding.severity);
                    report
                        .findings
                        .push(FindingReport::new(&parsed.path, finding, statement));
                }
                report.summary.files += 1;
                report.files.push(LintedFile {
                    path: parsed.path,
                    statements: count,
                    transaction_mode: Some(mode),
                    error: None,
                });
            }
        }
    }
    let trace_failed = if args.trace {
        let trace = traced.run(args.url.as_deref(), report.summary.input_errors);
        for (path, finding, statement) in traced.hidden_rewrites(&trace, &report.findings) {
            text.push_str(&render::finding(&path, &finding, &statement));
            report.summary.count(finding.severity);
            report
                .findings
                .push(FindingReport::new(&path, &finding, &statement));
        }
        text.push_str(&render::trace_section(&trace));
        let failed = lint_trace::found_wanting(&trace);
        report.trace = Some(trace);
        failed
    } else {
        lint_trace::Wanting::No
    };
    match args.format {
        LintFormat::Json => render::print_json(&report),
        LintFormat::Github => print!("{}", render::github(&report)),
        LintFormat::Sarif => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let docs_url = args.docs_url.clone().unwrap_or_else(default_docs_url);
            render::print_json(&render::sarif(&report, &cwd, &docs_url));
        }
        LintFormat::Text => {
            text.push_str(&render::lint_summary(&report.summary));
            print!("{text}");
        }
    }
    if report.summary.input_errors > 0 || trace_failed == lint_trace::Wanting::Untraced {
        exit::INPUT_ERROR
    } else if trace_failed == lint_trace::Wanting::Yes
        || report
            .findings
            .iter()
            .any(|finding| finding.severity == Severity::Error)
    {
        exit::FINDINGS
    } else {
        exit::OK
    }
}

/// Where `docs/LINTS.md` is, for SARIF's `helpUri`: the package's repository when the
/// manifest names one, else this build's own `docs` directory.
fn default_docs_url() -> String {
    let repository = env!("CARGO_PKG_REPOSITORY").trim_end_matches('/');
    if !repository.is_empty() {
        return format!("{repository}/blob/main/docs");
    }
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let docs = docs.canonicalize().unwrap_or(docs);
    format!("file://{}", docs.display())
}
