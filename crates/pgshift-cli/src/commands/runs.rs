//! `pgshift status`, `resume`, `abort`, `cutover`: copy-and-swap runs from their
//! checkpoints in `pgshift.runs`.

use std::fmt::Write;

use pgshift::cas::{self, CasError, RunRecord};
use pgshift::connect::ConnectionSpec;
use pgshift::report;
use serde::Serialize;

use super::apply::table_name;
use crate::cli::{Format, RunTableArgs, StatusArgs};
use crate::exit;
use crate::render;

/// One run, as `status` shows it.
#[derive(Debug, Serialize)]
struct RunLine {
    run: i64,
    table: String,
    phase: String,
    resume_phase: Option<String>,
    statement: String,
    rows_copied: i64,
    copy_finished: bool,
    verified: bool,
    defer_cutover: bool,
    cutover_requested: bool,
    label: Option<String>,
    created_at: String,
    updated_at: String,
    error: Option<String>,
    /// What the operator can do now.
    next: Option<String>,
}

impl RunLine {
    fn of(record: &RunRecord) -> Self {
        let phase = record.phase.name().to_owned();
        let next = match phase.as_str() {
            "failed" => Some(format!(
                "pgshift resume {t}  (or: pgshift abort {t})",
                t = record.source
            )),
            "ready" if !record.cutover_requested => {
                Some(format!("pgshift cutover {}", record.source))
            }
            _ => None,
        };
        RunLine {
            run: record.id,
            table: record.source.clone(),
            phase,
            resume_phase: record.resume_phase.map(|p| p.name().to_owned()),
            statement: record.statement.clone(),
            rows_copied: record.rows_copied,
            copy_finished: record.copy_finished,
            verified: record.verified,
            defer_cutover: record.defer_cutover,
            cutover_requested: record.cutover_requested,
            label: record.label.clone(),
            created_at: record.created_at.clone(),
            updated_at: record.updated_at.clone(),
            error: record.error.clone(),
            next,
        }
    }
}

#[derive(Serialize)]
struct StatusReport {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    runs: Vec<RunLine>,
}

#[derive(Serialize)]
struct RunCommandReport<'a, T: Serialize> {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    table: &'a str,
    exit_code: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn spec_of(command: &str, url: Option<&str>) -> Option<ConnectionSpec> {
    match ConnectionSpec::parse(&super::connection::connection_text(url)) {
        Ok(spec) => Some(spec),
        Err(err) => {
            eprintln!("pgshift {command}: the connection string is not valid: {err}");
            None
        }
    }
}

/// The exit code of a run that stopped.
fn error_code(err: &CasError) -> u8 {
    match err {
        CasError::Refused(_)
        | CasError::CutoverRefused(_)
        | CasError::Busy { .. }
        | CasError::WrongState { .. }
        | CasError::NoSuchRun(_)
        | CasError::Divergence(_) => exit::FINDINGS,
        _ => exit::INPUT_ERROR,
    }
}

/// `pgshift status`.
pub fn status(args: &StatusArgs) -> u8 {
    let Some(spec) = spec_of("status", args.url.as_deref()) else {
        return exit::INPUT_ERROR;
    };
    let Some(runtime) = super::runtime() else {
        return exit::INPUT_ERROR;
    };
    let runs = match runtime.block_on(cas::status(&spec)) {
        Ok(runs) => runs,
        Err(err) => {
            eprintln!("pgshift status: {err}");
            return exit::INPUT_ERROR;
        }
    };
    let lines: Vec<RunLine> = runs.iter().map(RunLine::of).collect();
    match args.format {
        Format::Json => render::print_json(&StatusReport {
            format_version: report::FORMAT_VERSION,
            tool: report::TOOL,
            tool_version: report::TOOL_VERSION,
            command: "status",
            runs: lines,
        }),
        Format::Text => print!("{}", status_text(&lines)),
    }
    exit::OK
}

fn status_text(lines: &[RunLine]) -> String {
    let mut out = String::new();
    if lines.is_empty() {
        let _ = writeln!(out, "No copy-and-swap runs recorded in this database.");
        return out;
    }
    for line in lines {
        let phase = match &line.resume_phase {
            Some(resume) => format!("{} (resumes at {resume})", line.phase),
            None if line.phase == "ready" => "ready (waiting for pgshift cutover)".to_owned(),
            None => line.phase.clone(),
        };
        let _ = writeln!(
            out,
            "run {} on {}: {phase}; {} rows copied{}{}; updated {}",
            line.run,
            line.table,
            line.rows_copied,
            if line.copy_finished {
                " (copy done)"
            } else {
                ""
            },
            if line.verified { ", verified" } else { "" },
            line.updated_at
        );
        let statement = line.statement.lines().next().unwrap_or("");
        let _ = writeln!(out, "    {statement}");
        if let Some(error) = &line.error {
            let _ = writeln!(out, "    stopped: {error}");
        }
        if let Some(next) = &line.next {
            let _ = writeln!(out, "    next: {next}");
        }
    }
    out
}

/// `pgshift resume TABLE`.
pub fn resume(args: &RunTableArgs) -> u8 {
    let Some(spec) = spec_of("resume", args.url.as_deref()) else {
        return exit::INPUT_ERROR;
    };
    let Some(runtime) = super::runtime() else {
        return exit::INPUT_ERROR;
    };
    let table = table_name(&args.table);
    let style = progress_style(args.format);
    let mut progress = render::CasView::new(style);
    let result = runtime.block_on(cas::resume(&spec, &table, &mut progress));
    finish("resume", args, result, render::cas_report)
}

/// `pgshift abort TABLE`.
pub fn abort(args: &RunTableArgs) -> u8 {
    let Some(spec) = spec_of("abort", args.url.as_deref()) else {
        return exit::INPUT_ERROR;
    };
    let Some(runtime) = super::runtime() else {
        return exit::INPUT_ERROR;
    };
    let table = table_name(&args.table);
    let result = runtime.block_on(cas::abort(&spec, &table));
    finish("abort", args, result, |run| {
        format!(
            "Run {run} aborted: its shadow, triggers, change log and functions are removed; {} is as it was.\n",
            args.table
        )
    })
}

/// `pgshift cutover TABLE`.
pub fn cutover(args: &RunTableArgs) -> u8 {
    let Some(spec) = spec_of("cutover", args.url.as_deref()) else {
        return exit::INPUT_ERROR;
    };
    let Some(runtime) = super::runtime() else {
        return exit::INPUT_ERROR;
    };
    let table = table_name(&args.table);
    let result = runtime.block_on(cas::request_cutover(&spec, &table));
    finish("cutover", args, result, |request| {
        if request.running {
            format!(
                "Cutover requested for run {}: the process running it re-checks everything and swaps now (watch `pgshift status`).\n",
                request.run
            )
        } else {
            format!(
                "Cutover requested for run {}, but no process is running it: `pgshift resume {}` verifies again and swaps.\n",
                request.run, args.table
            )
        }
    })
}

fn progress_style(format: Format) -> render::ProgressStyle {
    use std::io::IsTerminal;
    match format {
        Format::Json => render::ProgressStyle::Json,
        Format::Text if std::io::stderr().is_terminal() => render::ProgressStyle::Bar,
        Format::Text => render::ProgressStyle::Lines,
    }
}

/// Prints the outcome of a run command and returns its exit code.
fn finish<T: Serialize>(
    command: &'static str,
    args: &RunTableArgs,
    result: Result<T, CasError>,
    text: impl Fn(&T) -> String,
) -> u8 {
    let next_step = result
        .as_ref()
        .err()
        .map(render::cas_do_this)
        .unwrap_or_default();
    let (code, value, error) = match result {
        Ok(value) => (exit::OK, Some(value), None),
        Err(err) => (error_code(&err), None, Some(err.to_string())),
    };
    match args.format {
        Format::Json => render::print_json(&RunCommandReport {
            format_version: report::FORMAT_VERSION,
            tool: report::TOOL,
            tool_version: report::TOOL_VERSION,
            command,
            table: &args.table,
            exit_code: code,
            result: value,
            error,
        }),
        Format::Text => {
            if let Some(value) = &value {
                print!("{}", text(value));
            }
            if let Some(error) = &error {
                eprintln!("pgshift {command}: {error}");
                eprint!("{next_step}");
            }
        }
    }
    code
}
