//! Running a unit routed to copy-and-swap: the statement is handed to `pgshift::cas`,
//! which opens sessions of its own (from the connection spec) and records the run in
//! `pgshift.runs`.
//!
//! A unit with a label (a migration's unit) finds its run again: a run with that label
//! that is done counts as committed (the process died between the swap and the
//! history record), and one that stopped is resumed rather than started anew.

use serde::Serialize;
use tokio_postgres::Client;

use super::unit::{Unit, UnitReport};
use crate::cas::{self, CasError, CasProgress, Phase, Request, RunOptions, RunReport};
use crate::connect::ConnectionSpec;
use crate::refusal::{Refusal, RefusalCause};

/// How rewrites routed to copy-and-swap run.
#[derive(Clone, Debug)]
pub struct CasSettings {
    /// Where the run's sessions connect (the same server and database).
    pub spec: ConnectionSpec,
    /// The run's options.
    pub options: RunOptions,
    /// Standbys of the primary to read at the cutover (`--standby-url`).
    pub standbys: Vec<ConnectionSpec>,
}

/// What copy-and-swap did for a unit.
#[derive(Clone, Debug, Serialize)]
pub struct CasUnitReport {
    /// The run's number in `pgshift.runs`, when it was recorded.
    pub run: Option<i64>,
    /// Whether an earlier, stopped run of this unit was resumed.
    pub resumed: bool,
    /// Whether the unit's run had already finished (found by its label).
    pub found_done: bool,
    /// The run's report, when it finished.
    pub report: Option<RunReport>,
    /// Why it stopped, when it did.
    pub error: Option<String>,
    /// The refusal, when the stop is one (nothing swapped).
    pub refusal: Option<Refusal>,
    /// What the operator can do next, when the run stopped.
    pub next: Option<String>,
}

/// Runs the unit's statement through copy-and-swap; `bookkeeping` (the migration
/// history record) runs on `main` after the swap.
pub async fn run_cas_unit(
    main: &Client,
    unit: &Unit,
    settings: &CasSettings,
    search_path: &[String],
    label: Option<&str>,
    bookkeeping: Option<&str>,
    progress: &mut dyn CasProgress,
) -> (UnitReport, CasUnitReport) {
    let started = std::time::Instant::now();
    let mut cas_report = CasUnitReport {
        run: None,
        resumed: false,
        found_done: false,
        report: None,
        error: None,
        refusal: None,
        next: None,
    };
    let outcome = run(
        unit,
        settings,
        search_path,
        label,
        progress,
        &mut cas_report,
    )
    .await;
    let mut failure = None;
    match outcome {
        Ok(()) => {
            if let Some(sql) = bookkeeping {
                if let Err(e) = main.batch_execute(sql).await {
                    failure = Some(format!(
                        "the rewrite committed, but recording it failed: {e}"
                    ));
                }
            }
        }
        Err(err) => {
            cas_report.refusal = refusal_of(&err, unit);
            if cas_report.run.is_none() && !matches!(err, CasError::Refused(_)) {
                // Which run (if any) the stopped unit left recorded, by its label.
                if let Some(label) = label {
                    if let Ok(Some(record)) = find_labelled(&settings.spec, label).await {
                        cas_report.run = Some(record.id);
                    }
                }
            }
            cas_report.next = next_step(&err, cas_report.run, unit);
            failure = Some(err.to_string());
            cas_report.error = failure.clone();
        }
    }
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let report = UnitReport {
        attempts: vec![super::unit::Attempt {
            number: 1,
            outcome: if failure.is_none() {
                "committed".to_owned()
            } else {
                "copy-and-swap-stopped".to_owned()
            },
            elapsed_us,
            backoff_us: 0,
        }],
        committed: failure.is_none(),
        failure_kind: failure.as_ref().map(|_| "copy-and-swap"),
        failure,
        strong_lock_held_us_max: cas_report
            .report
            .as_ref()
            .and_then(|r| r.swap.as_ref())
            .map(|s| s.lock_held_us),
        step_us: vec![elapsed_us],
        cleanups: Vec::new(),
        lock_wait_us_observed: None,
        guarded: None,
    };
    (report, cas_report)
}

async fn run(
    unit: &Unit,
    settings: &CasSettings,
    search_path: &[String],
    label: Option<&str>,
    progress: &mut dyn CasProgress,
    out: &mut CasUnitReport,
) -> Result<(), CasError> {
    let (Some(table), Some(step)) = (&unit.copy_and_swap, unit.steps.first()) else {
        return Err(CasError::Record(
            "a copy-and-swap unit without its table or statement".to_owned(),
        ));
    };
    if let Some(label) = label {
        if let Some(record) = find_labelled(&settings.spec, label).await? {
            out.run = Some(record.id);
            if record.phase == Phase::Done {
                out.found_done = true;
                out.report = record
                    .report
                    .and_then(|value| serde_json::from_value(value).ok());
                return Ok(());
            }
            out.resumed = true;
            let report =
                cas::resume_id_with(&settings.spec, record.id, &settings.standbys, progress)
                    .await?;
            out.report = Some(report);
            return Ok(());
        }
    }
    let statements = pgshift_sql::parse(&step.sql).map_err(|e| CasError::Record(e.to_string()))?;
    let statement = statements
        .first()
        .ok_or_else(|| CasError::Record("an empty statement".to_owned()))?;
    let request = Request {
        statement,
        table,
        search_path,
        label,
        standbys: &settings.standbys,
    };
    let report = Box::pin(cas::start_request(
        &settings.spec,
        request,
        settings.options.clone(),
        progress,
    ))
    .await?;
    out.run = Some(report.run);
    out.report = Some(report);
    Ok(())
}

async fn find_labelled(
    spec: &ConnectionSpec,
    label: &str,
) -> Result<Option<cas::RunRecord>, CasError> {
    let session = cas::session::open(spec, "pgshift").await?;
    cas::store::ensure(session.client()).await?;
    cas::store::by_label(session.client(), label).await
}

/// The refusal a stop is, when it is one (nothing was started, or nothing swapped).
fn refusal_of(err: &CasError, unit: &Unit) -> Option<Refusal> {
    match err {
        CasError::Refused(refusal) | CasError::CutoverRefused(refusal) => Some(refusal.clone()),
        // INV: OC-2 — a table another process is running a run on is a refusal: this
        // unit started nothing.
        CasError::Busy { pid, .. } => Some(Refusal::new(
            RefusalCause::RunInProgress,
            format!(
                "another pgshift process is running a copy-and-swap run of {}{}; nothing was started: let it finish (pgshift status shows it), then run this again",
                unit.copy_and_swap
                    .as_ref()
                    .map_or_else(|| "this table".to_owned(), ToString::to_string),
                pid.map_or_else(String::new, |p| format!(" (backend pid {p})"))
            ),
        )),
        _ => None,
    }
}

/// The command that continues or cleans up after a stopped run.
fn next_step(err: &CasError, run: Option<i64>, unit: &Unit) -> Option<String> {
    let table = super::allow_blocking::command_line_name(unit.copy_and_swap.as_ref()?);
    match err {
        CasError::Refused(_) | CasError::Busy { .. } | CasError::Connect(_) => None,
        // INV: OC-6 — nothing to resume: the run removed itself.
        CasError::DataRejected { .. } => Some(format!(
            "nothing to resume or abort: the run removed itself. Change the rows the message names (or the statement's USING expression so that every row converts), then run it again; `SELECT` the rows of {table} whose value the new type refuses to find them"
        )),
        _ => Some(match run {
            Some(r) => format!(
                "run {r} is recorded: `pgshift resume --url … {table}` continues it, `pgshift abort --url … {table}` removes it"
            ),
            // The error may have come before the run was recorded.
            None => format!(
                "`pgshift status --url …` shows whether a run of {table} was recorded; if so, `pgshift resume --url … {table}` continues it and `pgshift abort --url … {table}` removes it"
            ),
        }),
    }
}
