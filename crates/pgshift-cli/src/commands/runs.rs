//! `pgshift status`, `resume`, `abort`, `cutover`: copy-and-swap runs from their
//! checkpoints in `pgshift.runs`, and whether a live process holds each.

use std::fmt::Write;
use std::time::{Duration, Instant};

use pgshift::cas::{self, CasError, CutoverOutcome, CutoverRequest, Phase, RunStatus};
use pgshift::exec::allow_blocking::command_line_name;
use pgshift::report;
use serde::Serialize;

use crate::cli::{CutoverArgs, Format, ResumeArgs, RunTableArgs, StatusArgs, ThrottleArgs};
use crate::errors::CliError;
use crate::exit;
use crate::render;
use crate::signals;

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
    /// Whether an operator paused it (`pgshift throttle TABLE --pause`).
    throttle_paused: bool,
    /// The throttle's state as the running process last recorded it.
    throttle: Option<String>,
    /// For an active run: whether a live process holds it (`null` once done).
    live: Option<bool>,
    /// The backend pid of that process.
    holder_pid: Option<i32>,
    /// What the operator can do now.
    next: Option<String>,
}

impl RunLine {
    fn of(status: &RunStatus) -> Self {
        let record = &status.record;
        let live = status.active().then_some(status.holder_pid.is_some());
        RunLine {
            run: record.id,
            table: record.source.clone(),
            phase: record.phase.name().to_owned(),
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
            throttle_paused: record.throttle_paused,
            throttle: record.throttle.clone(),
            live,
            holder_pid: status.holder_pid,
            next: next_step(status),
        }
    }
}

/// What to do about a run: nothing while a live process runs it (but `cutover` for one
/// waiting for it); `resume` or `abort` for a run no process holds, whatever phase its
/// record says.
// INV: OC-4 — a run no live process holds is shown as stopped, with what to do.
fn next_step(status: &RunStatus) -> Option<String> {
    let record = &status.record;
    let t = &record.source;
    match (record.phase, status.holder_pid.is_some()) {
        (Phase::Done | Phase::Aborted, _) => None,
        (Phase::Ready, true) if !record.cutover_requested => Some(format!("pgshift cutover {t}")),
        (_, true) => None,
        (Phase::Failed, false) => Some(format!("pgshift resume {t}  (or: pgshift abort {t})")),
        (Phase::Ready, false) => Some(format!(
            "pgshift resume {t}  (it verifies again and waits for pgshift cutover; or: pgshift abort {t})"
        )),
        (_, false) => Some(format!(
            "pgshift resume {t}  (or: pgshift abort {t}); no process is running it: it stopped without recording why"
        )),
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
    result: T,
}

/// The commands that continue or remove the run of `table`.
fn resume_or_abort(table: &str) -> String {
    format!("pgshift resume --url … {table} continues it; pgshift abort --url … {table} removes it")
}

/// The error document of a run command that stopped.
pub(super) fn cas_error(err: &CasError, table: &str) -> CliError {
    let message = err.to_string();
    match err {
        CasError::Refused(refusal) => CliError::new("refused", message)
            .exit(exit::FINDINGS)
            .hint(refusal.next_step.clone()),
        CasError::CutoverRefused(refusal) => CliError::new("cutover-refused", message)
            .exit(exit::FINDINGS)
            .hint(format!(
                "{} — or {}",
                refusal.next_step,
                resume_or_abort(table)
            )),
        CasError::Busy { .. } => CliError::new("busy", message)
            .exit(exit::FINDINGS)
            .hint("another process is running this table's run; pgshift status shows it"),
        CasError::WrongState { .. } => CliError::new("wrong-state", message).exit(exit::FINDINGS),
        CasError::NoSuchRun(_) => CliError::new("no-such-run", message)
            .exit(exit::FINDINGS)
            .hint("pgshift status lists the recorded runs"),
        CasError::Divergence(_) => CliError::new("divergence", message)
            .exit(exit::FINDINGS)
            .hint(format!(
                "pgshift abort --url … {table} removes the run; the source is untouched"
            )),
        CasError::Connect(_) => CliError::new("connect-failed", message),
        CasError::Interrupted { .. } => {
            CliError::new("interrupted", message).hint(resume_or_abort(table))
        }
        _ => CliError::new("failed", message).hint(resume_or_abort(table)),
    }
}

/// Prints a run command's result and returns `code`.
fn print_result<T: Serialize>(
    command: &'static str,
    format: Format,
    table: &str,
    code: u8,
    result: &T,
    text: &str,
) -> u8 {
    match format {
        Format::Json => render::print_json(&RunCommandReport {
            format_version: report::FORMAT_VERSION,
            tool: report::TOOL,
            tool_version: report::TOOL_VERSION,
            command,
            table,
            exit_code: code,
            result,
        }),
        Format::Text => print!("{text}"),
    }
    code
}

/// `pgshift status`.
pub fn status(args: &StatusArgs) -> u8 {
    let result = (|| {
        let spec = super::spec(args.url.as_deref())?;
        let runtime = super::runtime()?;
        runtime
            .block_on(cas::liveness::status(&spec))
            .map_err(|err| cas_error(&err, "TABLE"))
    })();
    let runs = match result {
        Ok(runs) => runs,
        Err(err) => return err.report("status", args.format),
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
        match (line.live, line.holder_pid) {
            (Some(true), Some(pid)) => {
                let _ = writeln!(out, "    process: running, in backend pid {pid}");
            }
            (Some(false), _) => {
                let _ = writeln!(out, "    process: none is running it (stopped or killed)");
            }
            _ => {}
        }
        if let Some(error) = &line.error {
            let _ = writeln!(out, "    stopped: {error}");
        }
        if line.throttle_paused {
            let _ = writeln!(
                out,
                "    paused by an operator (pgshift throttle {} --resume resumes it)",
                line.table
            );
        }
        if let (Some(throttle), Some(true)) = (&line.throttle, line.live) {
            let _ = writeln!(out, "    throttle: {throttle}");
        }
        if let Some(next) = &line.next {
            let _ = writeln!(out, "    next: {next}");
        }
    }
    out
}

/// `pgshift resume TABLE`.
pub fn resume(resume: &ResumeArgs) -> u8 {
    let args = &resume.run;
    let table = command_line_name(&args.table);
    let result = (|| {
        let spec = super::spec(args.url.as_deref())?;
        let standbys = resume.standby.specs()?;
        let runtime = super::runtime()?;
        let mut progress = render::CasView::new(progress_style(args.format));
        runtime
            .block_on(async {
                signals::install();
                cas::resume_with(&spec, &args.table, &standbys, &mut progress).await
            })
            .map_err(|err| cas_error(&err, &table))
    })();
    match result {
        Ok(report) => print_result(
            "resume",
            args.format,
            &table,
            exit::OK,
            &report,
            &render::cas_report(&report),
        ),
        Err(err) => err.report("resume", args.format),
    }
}

/// `pgshift abort TABLE`.
pub fn abort(args: &RunTableArgs) -> u8 {
    let table = command_line_name(&args.table);
    let result = (|| {
        let spec = super::spec(args.url.as_deref())?;
        let runtime = super::runtime()?;
        runtime
            .block_on(cas::abort(&spec, &args.table))
            .map_err(|err| cas_error(&err, &table))
    })();
    match result {
        Ok(run) => print_result(
            "abort",
            args.format,
            &table,
            exit::OK,
            &run,
            &format!("Run {run} aborted: its shadow, triggers, change log and functions are removed; {table} is as it was.\n"),
        ),
        Err(err) => err.report("abort", args.format),
    }
}

/// What `cutover` did.
#[derive(Serialize)]
struct CutoverResult {
    /// The request as recorded.
    request: CutoverRequest,
    /// Whether the command waited for the outcome (`--no-wait`: it did not).
    waited: bool,
    /// What became of it, when it waited.
    #[serde(flatten)]
    outcome: Option<CutoverOutcome>,
    /// What to do now.
    next: Option<String>,
}

/// `pgshift cutover TABLE`: records the request, then (unless `--no-wait`) waits for
/// the run to swap or stop, and exits by what happened.
pub fn cutover(args: &CutoverArgs) -> u8 {
    let run = &args.run;
    let table = command_line_name(&run.table);
    let result = (|| -> Result<(CutoverRequest, Option<CutoverOutcome>), CliError> {
        let spec = super::spec(run.url.as_deref())?;
        let runtime = super::runtime()?;
        runtime.block_on(async {
            let request = cas::request_cutover(&spec, &run.table)
                .await
                .map_err(|err| cas_error(&err, &table))?;
            if args.no_wait || !request.running {
                return Ok((request, None));
            }
            let timeout = Duration::from_secs(args.wait_timeout_s);
            let mut waiting = Waiting::new(request.run, run.format);
            let outcome = cas::await_cutover(&spec, request.run, timeout, &mut |phase, pid| {
                waiting.show(phase, pid)
            })
            .await
            .map_err(|err| cas_error(&err, &table))?;
            Ok((request, Some(outcome)))
        })
    })();
    let (request, outcome) = match result {
        Ok(answer) => answer,
        Err(err) => return err.report("cutover", run.format),
    };
    let (code, text, next) = cutover_verdict(&request, outcome.as_ref(), &table, args);
    let result = CutoverResult {
        request,
        waited: outcome.is_some(),
        outcome,
        next: next.clone(),
    };
    let mut text = text;
    if let Some(next) = &next {
        let _ = writeln!(text, "  next: {next}");
    }
    print_result("cutover", run.format, &table, code, &result, &text)
}

/// `pgshift throttle TABLE --pause|--resume`: records the request in the run record.
/// Only a request: it never says the run is paused, only that the process running it
/// will follow (exit 0), or that none does (exit 1; the request holds on resume).
pub fn throttle(args: &ThrottleArgs) -> u8 {
    let run = &args.run;
    let table = command_line_name(&run.table);
    let result = (|| -> Result<cas::ThrottleRequest, CliError> {
        let spec = super::spec(run.url.as_deref())?;
        let runtime = super::runtime()?;
        runtime
            .block_on(cas::request_throttle(&spec, &run.table, args.pause))
            .map_err(|err| cas_error(&err, &table))
    })();
    let request = match result {
        Ok(request) => request,
        Err(err) => return err.report("throttle", run.format),
    };
    let what = if request.paused { "Pause" } else { "Resume" };
    let (code, text) = match request.holder_pid {
        Some(pid) => (
            exit::OK,
            format!(
                "{what} requested for run {}: the process running it (backend pid {pid}) follows within a second; `pgshift status` shows its throttle.\n",
                request.run
            ),
        ),
        None => (
            exit::INPUT_ERROR,
            format!(
                "{what} recorded for run {}, but no live process is running it: the request holds when it is resumed (pgshift resume {table}).\n",
                request.run
            ),
        ),
    };
    print_result("throttle", run.format, &table, code, &request, &text)
}

/// The exit code, the text and the next step of a cutover.
fn cutover_verdict(
    request: &CutoverRequest,
    outcome: Option<&CutoverOutcome>,
    table: &str,
    args: &CutoverArgs,
) -> (u8, String, Option<String>) {
    let run = request.run;
    let again = Some(format!(
        "pgshift resume {table} tries again (it verifies and swaps); pgshift abort {table} removes the run"
    ));
    match (outcome, request.holder_pid) {
        (None, Some(pid)) => (
            exit::OK,
            format!("Cutover requested for run {run}: the process running it (backend pid {pid}) re-checks everything and swaps now. Not waited for: `pgshift status` shows when it is done.\n"),
            None,
        ),
        (None, None) | (Some(CutoverOutcome::NoProcess { .. }), _) => (
            exit::INPUT_ERROR,
            format!(
                "Cutover requested for run {run}, but no live process is running it{}: nothing swaps until it is resumed (the request stands).\n",
                match outcome {
                    Some(CutoverOutcome::NoProcess { phase }) => format!(" any more (its record says {phase})"),
                    _ => String::new(),
                }
            ),
            Some(format!("pgshift resume {table} verifies again and swaps; pgshift abort {table} removes the run")),
        ),
        (Some(CutoverOutcome::Swapped { report }), _) => (
            exit::OK,
            format!(
                "Run {run} swapped: {table} is the rewritten table now.\n{}",
                report
                    .as_deref()
                    .map_or_else(String::new, render::cas_report)
            ),
            None,
        ),
        (Some(CutoverOutcome::Refused { error, .. }), _) => (
            exit::FINDINGS,
            format!("Run {run} did not swap: {error}. The source is untouched.\n"),
            again,
        ),
        (Some(CutoverOutcome::Failed { error }), _) => (
            exit::INPUT_ERROR,
            format!("Run {run} stopped before swapping: {error}.\n"),
            again,
        ),
        (Some(CutoverOutcome::Gone), _) => (
            exit::INPUT_ERROR,
            format!("Run {run} was aborted while waiting; nothing swapped.\n"),
            None,
        ),
        (Some(CutoverOutcome::TimedOut { phase, holder_pid }), _) => (
            exit::INPUT_ERROR,
            format!(
                "No outcome within {} s: run {run} is {phase}{}; the request stands.\n",
                args.wait_timeout_s,
                holder_pid.map_or_else(String::new, |p| format!(" in backend pid {p}"))
            ),
            Some(format!("pgshift status shows when run {run} is done")),
        ),
    }
}

/// Progress of the wait for a cutover, on stderr: each phase change, and a line every
/// few seconds meanwhile.
struct Waiting {
    run: i64,
    json: bool,
    started: Instant,
    last: Option<(Phase, Instant)>,
}

impl Waiting {
    fn new(run: i64, format: Format) -> Self {
        Waiting {
            run,
            json: format == Format::Json,
            started: Instant::now(),
            last: None,
        }
    }

    fn show(&mut self, phase: Phase, pid: Option<i32>) {
        let now = Instant::now();
        let due = match self.last {
            Some((last, at)) => last != phase || now - at >= Duration::from_secs(5),
            None => true,
        };
        if !due {
            return;
        }
        self.last = Some((phase, now));
        let waited = self.started.elapsed().as_secs();
        if self.json {
            eprintln!(
                "{}",
                serde_json::json!({"event": "waiting", "run": self.run, "phase": phase.name(), "holder_pid": pid, "waited_s": waited})
            );
        } else {
            eprintln!(
                "cutover: waiting for run {} to swap: {}{} ({waited} s)",
                self.run,
                phase.name(),
                pid.map_or_else(String::new, |p| format!(", backend pid {p}"))
            );
        }
    }
}

fn progress_style(format: Format) -> render::ProgressStyle {
    use std::io::IsTerminal;
    match format {
        Format::Json => render::ProgressStyle::Json,
        Format::Text if std::io::stderr().is_terminal() => render::ProgressStyle::Bar,
        Format::Text => render::ProgressStyle::Lines,
    }
}

#[cfg(test)]
mod tests {
    use pgshift::cas::CasError;
    use pgshift::refusal::{Refusal, RefusalCause};

    #[test]
    fn a_refused_run_ends_with_its_next_step() {
        let refused = CasError::Refused(Refusal::new(RefusalCause::NoUsableKey, "no key"));
        let error = super::cas_error(&refused, "t");
        assert_eq!(error.exit, crate::exit::FINDINGS);
        assert_eq!(
            error.hint.as_deref(),
            Some("Add a primary key first (built concurrently), then run the change again.")
        );
        let refused = CasError::CutoverRefused(
            Refusal::new(RefusalCause::SchemaChanged, "changed").with_next_step("abort it"),
        );
        let hint = super::cas_error(&refused, "t").hint.unwrap_or_default();
        assert!(hint.starts_with("abort it — or pgshift resume"), "{hint}");
    }
}
