//! The migrations runner: applies the pending files of a directory in order, one
//! schedule per file, recording each in the history table, and stops at the first
//! file that is refused or fails. Running it again resumes a failed file from its
//! first unit that did not commit.

use std::path::Path;

use serde::Serialize;

use super::adopt;
use super::directory::{check_no_gaps, key_version, scan_layout, MigrationFile};
use super::error::MigrateError;
use super::history::{self, HistoryRow};
use super::pending::{self, Source};
use crate::connect::Session;
use crate::exec::split::Split;
use crate::exec::{
    interrupt, run_schedule, schedule, ApplyOptions, ApplyVerdict, Ledger, Outcome, Progress,
    Schedule, ScheduleOptions, Sessions, Sleeper,
};
use crate::layout::{LayoutKind, LayoutReport};
use crate::plan::{plan_with, PlanOptions};
use crate::script::{transaction_mode_for, Script, TransactionMode};

/// Options of a run.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// Budgets and accepted blocking forms, as for `apply`.
    pub apply: ApplyOptions,
    /// Accept gaps in the version numbers.
    pub allow_gaps: bool,
    /// Accept a pending file older than an applied one.
    pub allow_out_of_order: bool,
    /// Plan the pending files and stop: nothing is written.
    pub dry_run: bool,
    /// The largest file read, in bytes.
    pub max_file_bytes: u64,
    /// Trace procedural code on a clone of the target and run it by the trace;
    /// `None`: it is refused (`opaque-procedural-code`).
    pub procedural: Option<crate::procedural::ProceduralOptions>,
}

/// What happened to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileStatus {
    /// Applied in an earlier run; untouched.
    AlreadyApplied,
    /// Applied now.
    Applied,
    /// Applied now, through a blocking form accepted with `--allow-blocking`.
    AppliedBlocking,
    /// Refused before any of its units ran.
    Refused,
    /// Failed after starting; its committed prefix stands.
    Failed,
    /// Not reached (an earlier file stopped the run).
    NotRun,
    /// Planned only (`--dry-run`).
    Planned,
}

/// One file of the run.
#[derive(Clone, Debug, Serialize)]
pub struct FileRun {
    /// Its version as the history keys it (`7`, `1.1`, `20230101000000`); `None` for
    /// a repeatable migration (Flyway's `R__name.sql`).
    pub version: Option<String>,
    /// Its name.
    pub name: String,
    /// Its path.
    pub path: String,
    /// What happened.
    pub status: FileStatus,
    /// Whether it resumed an earlier failed run.
    pub resumed: bool,
    /// Units committed before this run.
    pub committed_before: usize,
    /// The schedule (for `--dry-run`), when planned.
    pub schedule: Option<Schedule>,
    /// What running it did, when it ran.
    pub verdict: Option<ApplyVerdict>,
    /// A problem with the file itself (unreadable, unparsable).
    pub error: Option<String>,
    /// How the project's runner runs the file (its layout's rule), when it was read.
    pub runner_transaction: Option<TransactionMode>,
    /// When pgshift runs the file as more units than its runner had transactions.
    pub split: Option<Split>,
    /// How the file was recorded without being run (`--baseline`), when it was.
    pub baselined: Option<String>,
    /// Its procedural statements, traced on a clone, and how each runs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub procedural: Vec<crate::procedural::ProceduralVerdict>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrateOutcome {
    /// Every pending file applied online (or nothing was pending).
    Done,
    /// Every pending file applied, some through an accepted blocking form.
    DoneWithBlocking,
    /// Stopped at a refused file; nothing of it ran.
    Refused,
    /// Stopped at a failed file.
    Failed,
    /// `--dry-run`: planned only.
    Planned,
}

/// The verdict of a run.
#[derive(Clone, Debug, Serialize)]
pub struct MigrateVerdict {
    /// How it ended.
    pub outcome: MigrateOutcome,
    /// Whether it was a dry run (planned only; nothing written).
    pub dry_run: bool,
    /// The directory's layout, as detected from its file names.
    pub layout: LayoutReport,
    /// Every file of the directory, in order.
    pub files: Vec<FileRun>,
    /// The signal that stopped the run (SIGINT, SIGTERM), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

impl FileRun {
    fn new(file: &MigrationFile) -> Self {
        FileRun {
            version: file.key(),
            name: file.name.clone(),
            path: file.path.display().to_string(),
            status: FileStatus::NotRun,
            resumed: false,
            committed_before: 0,
            schedule: None,
            verdict: None,
            error: None,
            runner_transaction: None,
            split: None,
            baselined: None,
            procedural: Vec::new(),
        }
    }
}

/// Runs (or, with `dry_run`, plans) the pending migrations of `dir`.
pub async fn migrate(
    session: &Session,
    monitor: Option<&Session>,
    dir: &Path,
    options: &MigrateOptions,
    sleeper: &impl Sleeper,
    progress: &mut dyn Progress,
) -> Result<MigrateVerdict, MigrateError> {
    let (layout, files) = scan_layout(dir)?;
    // Timestamp and Flyway versions are versions, not a sequence: gaps are expected.
    if !options.allow_gaps && layout.expects_sequence() {
        check_no_gaps(&files)?;
    }
    let client = session.client();
    adopt::refuse_unadopted(session, dir).await?;
    if !options.dry_run {
        history::lock(client).await?;
        history::ensure(client).await?;
    }
    let rows = if options.dry_run {
        history::rows_if_any(client).await?
    } else {
        history::rows(client).await?
    };
    check_order(layout.kind, &files, &rows, options)?;
    let sources = pending::read_all(client, &files, &rows).await?;
    if options.dry_run {
        return dry_run(session, &sources, options, LayoutReport::of(&layout)).await;
    }
    let allowed = &options.apply.allow_blocking;
    if let Some(unused) =
        pending::untouched_offline(&sources, allowed, options.max_file_bytes).first()
    {
        return Err(MigrateError::AllowBlockingUnused {
            table: crate::exec::allow_blocking::command_line_name(unused),
        });
    }
    if let Some(unused) = options.procedural.as_ref().and_then(|procedural| {
        pending::unmatched_procedural(&sources, &procedural.allow, options.max_file_bytes)
            .first()
            .map(|a| a.command_line())
    }) {
        return Err(MigrateError::AllowProceduralUnused { value: unused });
    }
    let mut verdict = MigrateVerdict {
        outcome: MigrateOutcome::Done,
        dry_run: false,
        layout: LayoutReport::of(&layout),
        files: Vec::new(),
        interrupted: None,
    };
    let mut stopped = false;
    for source in &sources {
        let mut run = FileRun::new(source.file);
        if !stopped && !source.applied() {
            // INV: OC-3 — a stop asked by a signal takes effect between files.
            if let Some(signal) = interrupt::requested_name() {
                verdict.interrupted = Some(signal);
                verdict.outcome = MigrateOutcome::Failed;
                stopped = true;
            }
        }
        if stopped {
            verdict.files.push(run);
            continue;
        }
        if source.applied() {
            run.status = FileStatus::AlreadyApplied;
            run.baselined = source.row.and_then(|row| row.baselined.clone());
            verdict.files.push(run);
            continue;
        }
        let outcome = Box::pin(run_file(
            session, monitor, source, options, sleeper, progress, &mut run,
        ))
        .await?;
        match outcome {
            MigrateOutcome::Refused => {
                verdict.outcome = MigrateOutcome::Refused;
                stopped = true;
            }
            MigrateOutcome::Failed => {
                verdict.outcome = MigrateOutcome::Failed;
                verdict.interrupted = run.verdict.as_ref().and_then(|v| v.interrupted.clone());
                stopped = true;
            }
            MigrateOutcome::DoneWithBlocking if verdict.outcome == MigrateOutcome::Done => {
                verdict.outcome = MigrateOutcome::DoneWithBlocking;
            }
            _ => {}
        }
        verdict.files.push(run);
    }
    Ok(verdict)
}

/// The files of `dir` that `pgshift.migrations` records as applied (a repeatable: with
/// its current bytes), for `plan DIR`, which plans what `migrate` would run: the
/// pending files. An applied file whose bytes changed is the error `migrate` gives.
pub async fn applied_paths(
    session: &Session,
    dir: &Path,
) -> Result<Vec<std::path::PathBuf>, MigrateError> {
    let (_, files) = scan_layout(dir)?;
    let client = session.client();
    let rows = history::rows_if_any(client).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let sources = pending::read_all(client, &files, &rows).await?;
    Ok(sources
        .iter()
        .filter(|source| source.applied())
        .map(|source| source.file.path.clone())
        .collect())
}

/// `--dry-run`: plans every pending file in order, in one planning pass — the one
/// `plan DIR` makes — so that each file is judged against the catalog the files before
/// it leave (a table an earlier file creates is new to the later ones), and writes
/// nothing. A file with a refused statement makes the outcome `Refused`; an unusable
/// file makes it `Failed`, and the files after it are not planned (what they would
/// find is unknown).
async fn dry_run(
    session: &Session,
    sources: &[Source<'_>],
    options: &MigrateOptions,
    layout: LayoutReport,
) -> Result<MigrateVerdict, MigrateError> {
    let mut verdict = MigrateVerdict {
        outcome: MigrateOutcome::Planned,
        dry_run: true,
        layout,
        files: Vec::new(),
        interrupted: None,
    };
    let mut inputs = Vec::new();
    let mut planned_files = Vec::new();
    for source in sources {
        let mut run = FileRun::new(source.file);
        if source.applied() {
            run.status = FileStatus::AlreadyApplied;
            run.baselined = source.row.and_then(|row| row.baselined.clone());
        } else if verdict.outcome == MigrateOutcome::Planned {
            match pending::parse(source, options.max_file_bytes) {
                Ok(input) => {
                    run.runner_transaction = Some(runner_mode(&input));
                    inputs.push(input);
                    planned_files.push((verdict.files.len(), source));
                    run.status = FileStatus::Planned;
                }
                Err(message) => {
                    run.status = FileStatus::Failed;
                    run.error = Some(message);
                    verdict.outcome = MigrateOutcome::Failed;
                }
            }
        }
        verdict.files.push(run);
    }
    let planned = plan_with(
        session,
        inputs,
        TransactionMode::Statement,
        &plan_options(options),
    )
    .await?;
    let scripts: Vec<&Script> = planned.files.iter().map(|f| &f.script).collect();
    let allowed = &options.apply.allow_blocking;
    if let Some(unused) =
        crate::exec::allow_blocking::untouched(allowed, scripts.iter().copied()).first()
    {
        return Err(MigrateError::AllowBlockingUnused {
            table: crate::exec::allow_blocking::command_line_name(unused),
        });
    }
    for (((index, source), script), file) in
        planned_files.into_iter().zip(scripts).zip(&planned.files)
    {
        let run = &mut verdict.files[index];
        run.procedural.clone_from(&file.procedural);
        let planned = match source.resumable() {
            Some(row) => {
                run.resumed = true;
                run.committed_before = usize::try_from(row.units_committed).unwrap_or(0);
                recorded(row, options)
            }
            None => {
                let scheduled = schedule_of(script, options);
                run.split = Split::of(script, &scheduled);
                scheduled
            }
        };
        if !planned.refusals.is_empty() && verdict.outcome == MigrateOutcome::Planned {
            verdict.outcome = MigrateOutcome::Refused;
        }
        run.schedule = Some(planned);
    }
    Ok(verdict)
}

/// The schedule recorded when a file first ran: a resumed file runs exactly it, but
/// for this run's `--allow-blocking`, which reaches the units that did not commit (a
/// copy-and-swap unit of a named table runs as written, accepted as blocking). The file
/// is not judged again: the units that committed changed what it would be judged on.
fn recorded(row: &HistoryRow, options: &MigrateOptions) -> Schedule {
    let mut items = row.items.clone();
    let committed = usize::try_from(row.units_committed).unwrap_or(0);
    let changed = crate::exec::schedule::accept_blocking_from(
        &mut items,
        committed,
        &options.apply.allow_blocking,
    );
    let notes = if changed > 0 {
        vec![format!(
            "resumed with --allow-blocking: {changed} copy-and-swap unit{} of the recorded \
             schedule run{} as written instead",
            if changed == 1 { "" } else { "s" },
            if changed == 1 { "s" } else { "" }
        )]
    } else {
        Vec::new()
    };
    Schedule {
        items,
        refusals: Vec::new(),
        notes,
    }
}

/// How the pending files are planned: procedural code traced when asked.
fn plan_options(options: &MigrateOptions) -> PlanOptions {
    PlanOptions {
        max_table_size: options.apply.max_table_size,
        allow_blocking: Vec::new(),
        procedural: options.procedural.clone(),
        disk_room: options
            .apply
            .copy_and_swap
            .as_ref()
            .and_then(|cas| cas.options.disk_room),
    }
}

/// How `apply`'s rules schedule a planned file.
fn schedule_of(script: &Script, options: &MigrateOptions) -> Schedule {
    schedule(
        script,
        &ScheduleOptions {
            max_table_size: options.apply.max_table_size,
            disk_room: options
                .apply
                .copy_and_swap
                .as_ref()
                .and_then(|cas| cas.options.disk_room),
            allow_blocking: options.apply.allow_blocking.clone(),
            copy_and_swap: options.apply.copy_and_swap.is_some(),
        },
    )
}

/// How the project's runner runs a parsed file (its layout's rule, carried by the
/// statements' marker: see `pending`).
fn runner_mode(input: &crate::plan::PlanInput) -> TransactionMode {
    transaction_mode_for(&input.statements, TransactionMode::File)
}

/// Refuses a pending versioned file older than the newest applied one, unless allowed
/// (repeatables have no version: they always come last).
fn check_order(
    kind: LayoutKind,
    files: &[MigrationFile],
    rows: &[HistoryRow],
    options: &MigrateOptions,
) -> Result<(), MigrateError> {
    if options.allow_out_of_order {
        return Ok(());
    }
    let Some(newest) = rows
        .iter()
        .filter(|r| r.outcome == "done")
        .filter_map(|r| r.version.as_deref())
        .filter_map(|key| key_version(kind, key))
        .max()
    else {
        return Ok(());
    };
    let pending_older = files.iter().find(|file| {
        file.version.as_ref().is_some_and(|v| *v < newest) && pending::row_of(file, rows).is_none()
    });
    match pending_older {
        Some(file) => Err(MigrateError::OutOfOrder {
            version: file.label(),
            applied: newest.key(),
        }),
        None => Ok(()),
    }
}

/// Plans (or takes the recorded schedule of) one file and runs it; returns how the
/// file ended.
async fn run_file(
    session: &Session,
    monitor: Option<&Session>,
    source: &Source<'_>,
    options: &MigrateOptions,
    sleeper: &impl Sleeper,
    progress: &mut dyn Progress,
    run: &mut FileRun,
) -> Result<MigrateOutcome, MigrateError> {
    let client = session.client();
    let file = source.file;
    let resumable = source.resumable();
    let planned = match resumable {
        Some(row) => recorded(row, options),
        None => match pending::parse(source, options.max_file_bytes) {
            Ok(input) => {
                run.runner_transaction = Some(runner_mode(&input));
                let planned = plan_with(
                    session,
                    vec![input],
                    TransactionMode::Statement,
                    &plan_options(options),
                )
                .await?;
                match planned.files.first() {
                    Some(planned) => {
                        run.procedural.clone_from(&planned.procedural);
                        let scheduled = schedule_of(&planned.script, options);
                        run.split = Split::of(&planned.script, &scheduled);
                        scheduled
                    }
                    None => {
                        run.status = FileStatus::Failed;
                        run.error = Some("nothing to plan".to_owned());
                        return Ok(MigrateOutcome::Failed);
                    }
                }
            }
            Err(message) => {
                run.status = FileStatus::Failed;
                run.error = Some(message);
                return Ok(MigrateOutcome::Failed);
            }
        },
    };
    if !planned.refusals.is_empty() {
        run.status = FileStatus::Refused;
        run.schedule = Some(planned.clone());
        let sessions = sessions(session, monitor);
        run.verdict = Some(
            run_schedule(
                &sessions,
                planned,
                &options.apply,
                &Ledger::none(),
                sleeper,
                progress,
            )
            .await,
        );
        return Ok(MigrateOutcome::Refused);
    }
    let (id, committed_before) = match resumable {
        Some(row) => {
            let id = row.id()?;
            history::resume(client, id).await?;
            run.resumed = true;
            (id, usize::try_from(row.units_committed).unwrap_or(0))
        }
        None => {
            if let Some(row) = source.row.filter(|row| row.outcome != "done") {
                // A failed row of an edited file that committed nothing: start over.
                history::forget(
                    client,
                    row.id()?,
                    "replacing a failed migration that committed nothing",
                )
                .await?;
            }
            let key = file.key();
            let id = history::start(
                client,
                key.as_deref(),
                &file.name,
                &source.checksum,
                &planned.items,
            )
            .await?;
            (id, 0)
        }
    };
    run.committed_before = committed_before;
    let record = move |committed: usize| history::record_sql(id, committed);
    // A versioned file's copy-and-swap runs are labelled by its version (as before
    // history rows had ids); a repeatable's by its name and row, one label per run.
    let label = match file.key() {
        Some(key) => format!("migrate:{key}"),
        None => format!("migrate:{}@{id}", file.label()),
    };
    let ledger = Ledger {
        committed_before,
        record: Some(&record),
        label: Some(label),
    };
    let sessions = sessions(session, monitor);
    let verdict = Box::pin(run_schedule(
        &sessions,
        planned,
        &options.apply,
        &ledger,
        sleeper,
        progress,
    ))
    .await;
    let outcome = match verdict.outcome {
        Outcome::Done => {
            history::finish(client, id, true, None).await?;
            run.status = FileStatus::Applied;
            MigrateOutcome::Done
        }
        Outcome::DoneWithBlocking => {
            history::finish(client, id, true, None).await?;
            run.status = FileStatus::AppliedBlocking;
            MigrateOutcome::DoneWithBlocking
        }
        Outcome::Refused => {
            // Refused while running with nothing of the file committed (the lock
            // budget, a table busy with another run): like a file refused before it
            // ran, it is not recorded, and the next run plans it afresh.
            history::forget(client, id, "removing the record of a refused migration").await?;
            run.status = FileStatus::Refused;
            MigrateOutcome::Refused
        }
        Outcome::Failed => {
            let error = failure_text(&verdict);
            let _ = history::finish(client, id, false, Some(&error)).await;
            run.status = FileStatus::Failed;
            MigrateOutcome::Failed
        }
    };
    run.verdict = Some(verdict);
    Ok(outcome)
}

fn sessions<'a>(session: &'a Session, monitor: Option<&'a Session>) -> Sessions<'a> {
    Sessions {
        main: session.client(),
        monitor: monitor.map(Session::client),
        user_search_path: session.user_search_path(),
    }
}

fn failure_text(verdict: &ApplyVerdict) -> String {
    if let Some(refusal) = &verdict.runtime_refusal {
        return format!("{}: {}", refusal.cause, refusal.message);
    }
    verdict
        .failed_unit
        .and_then(|i| verdict.units.get(i))
        .and_then(|u| u.report.as_ref())
        .and_then(|r| r.failure.clone())
        .unwrap_or_else(|| "failed".to_owned())
}
