//! The migrations runner: applies the pending files of a directory in order, one
//! schedule per file, recording each in the history table, and stops at the first
//! file that is refused or fails. Running it again resumes a failed file from its
//! first unit that did not commit.

use std::path::Path;

use serde::Serialize;

use super::directory::{check_no_gaps, scan_layout, MigrationFile};
use super::error::MigrateError;
use super::history::{self, HistoryRow};
use crate::connect::Session;
use crate::exec::split::Split;
use crate::exec::{
    run_schedule, schedule, ApplyOptions, ApplyVerdict, Ledger, Outcome, Progress, Schedule,
    ScheduleOptions, Sessions, Sleeper,
};
use crate::layout::LayoutReport;
use crate::plan::{plan, PlanInput};
use crate::script::TransactionMode;

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
    /// Its version.
    pub version: i64,
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
    /// When pgshift runs the file as more units than its runner had transactions.
    pub split: Option<Split>,
    /// How the file was recorded without being run (`--baseline`), when it was.
    pub baselined: Option<String>,
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
    /// The directory's layout, as detected from its file names.
    pub layout: LayoutReport,
    /// Every file of the directory, in order.
    pub files: Vec<FileRun>,
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
    if !options.dry_run {
        history::lock(client).await?;
        history::ensure(client).await?;
    }
    let rows = if options.dry_run {
        history::rows(client).await.unwrap_or_default()
    } else {
        history::rows(client).await?
    };
    check_order(&files, &rows, options)?;
    let mut verdict = MigrateVerdict {
        outcome: if options.dry_run {
            MigrateOutcome::Planned
        } else {
            MigrateOutcome::Done
        },
        layout: LayoutReport::of(&layout),
        files: Vec::new(),
    };
    let mut stopped = false;
    for file in &files {
        let row = rows.iter().find(|row| row.version == file.version);
        let mut run = FileRun {
            version: file.version,
            name: file.name.clone(),
            path: file.path.display().to_string(),
            status: FileStatus::NotRun,
            resumed: false,
            committed_before: 0,
            schedule: None,
            verdict: None,
            error: None,
            split: None,
            baselined: None,
        };
        if stopped {
            verdict.files.push(run);
            continue;
        }
        let bytes = match std::fs::read(&file.path) {
            Ok(bytes) => bytes,
            Err(err) => {
                run.status = FileStatus::Failed;
                run.error = Some(format!("cannot read: {err}"));
                verdict.files.push(run);
                verdict.outcome = MigrateOutcome::Failed;
                stopped = true;
                continue;
            }
        };
        let checksum = history::checksum(client, &bytes).await?;
        if let Some(row) = row {
            if row.checksum != checksum && (row.outcome == "done" || row.units_committed > 0) {
                return Err(MigrateError::ChangedAfterApply {
                    version: row.version,
                    name: row.name.clone(),
                    recorded: row.checksum.clone(),
                    current: checksum,
                });
            }
            if row.outcome == "done" {
                run.status = FileStatus::AlreadyApplied;
                run.baselined = row.baselined.clone();
                verdict.files.push(run);
                continue;
            }
        }
        let outcome = run_file(
            session, monitor, file, &bytes, &checksum, row, options, sleeper, progress, &mut run,
        )
        .await?;
        match outcome {
            Some(MigrateOutcome::Refused) => {
                verdict.outcome = MigrateOutcome::Refused;
                stopped = true;
            }
            Some(MigrateOutcome::Failed) => {
                verdict.outcome = MigrateOutcome::Failed;
                stopped = true;
            }
            Some(MigrateOutcome::DoneWithBlocking) if verdict.outcome == MigrateOutcome::Done => {
                verdict.outcome = MigrateOutcome::DoneWithBlocking;
            }
            _ => {}
        }
        verdict.files.push(run);
    }
    Ok(verdict)
}

/// Refuses a pending file older than the newest applied one, unless allowed.
fn check_order(
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
        .map(|r| r.version)
        .max()
    else {
        return Ok(());
    };
    let pending_older = files
        .iter()
        .find(|file| file.version < newest && !rows.iter().any(|row| row.version == file.version));
    match pending_older {
        Some(file) => Err(MigrateError::OutOfOrder {
            version: file.version,
            applied: newest,
        }),
        None => Ok(()),
    }
}

/// Plans (or takes the recorded schedule of) one file and runs it; returns how the
/// file ended, or `None` for a dry run.
#[allow(clippy::too_many_arguments)]
async fn run_file(
    session: &Session,
    monitor: Option<&Session>,
    file: &MigrationFile,
    bytes: &[u8],
    checksum: &str,
    row: Option<&HistoryRow>,
    options: &MigrateOptions,
    sleeper: &impl Sleeper,
    progress: &mut dyn Progress,
    run: &mut FileRun,
) -> Result<Option<MigrateOutcome>, MigrateError> {
    let client = session.client();
    let resumable = row.filter(|row| row.checksum == checksum);
    let planned = match resumable {
        Some(row) => Schedule {
            items: row.items.clone(),
            refusals: Vec::new(),
            notes: Vec::new(),
        },
        None => match plan_file(session, file, bytes, options).await? {
            Ok((planned, split)) => {
                run.split = split;
                planned
            }
            Err(message) => {
                run.status = FileStatus::Failed;
                run.error = Some(message);
                return Ok(Some(MigrateOutcome::Failed));
            }
        },
    };
    if options.dry_run {
        run.status = FileStatus::Planned;
        run.committed_before =
            resumable.map_or(0, |r| usize::try_from(r.units_committed).unwrap_or(0));
        run.resumed = resumable.is_some();
        run.schedule = Some(planned);
        return Ok(None);
    }
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
        return Ok(Some(MigrateOutcome::Refused));
    }
    let committed_before = match resumable {
        Some(row) => {
            history::resume(client, file.version).await?;
            run.resumed = true;
            usize::try_from(row.units_committed).unwrap_or(0)
        }
        None => {
            if row.is_some() {
                // A failed row of an edited file that committed nothing: start over.
                client
                    .execute(
                        "DELETE FROM pgshift.migrations WHERE version = $1",
                        &[&file.version],
                    )
                    .await
                    .map_err(|source| MigrateError::Database {
                        what: "replacing a failed migration that committed nothing",
                        source,
                    })?;
            }
            history::start(client, file.version, &file.name, checksum, &planned.items).await?;
            0
        }
    };
    run.committed_before = committed_before;
    let version = file.version;
    let record = move |committed: usize| history::record_sql(version, committed);
    let ledger = Ledger {
        committed_before,
        record: Some(&record),
        label: Some(format!("migrate:{version}")),
    };
    let sessions = sessions(session, monitor);
    let verdict = run_schedule(
        &sessions,
        planned,
        &options.apply,
        &ledger,
        sleeper,
        progress,
    )
    .await;
    let outcome = match verdict.outcome {
        Outcome::Done => {
            history::finish(client, version, true, None).await?;
            run.status = FileStatus::Applied;
            MigrateOutcome::Done
        }
        Outcome::DoneWithBlocking => {
            history::finish(client, version, true, None).await?;
            run.status = FileStatus::AppliedBlocking;
            MigrateOutcome::DoneWithBlocking
        }
        Outcome::Refused | Outcome::Failed => {
            let error = failure_text(&verdict);
            let _ = history::finish(client, version, false, Some(&error)).await;
            run.status = FileStatus::Failed;
            MigrateOutcome::Failed
        }
    };
    run.verdict = Some(verdict);
    Ok(Some(outcome))
}

fn sessions<'a>(session: &'a Session, monitor: Option<&'a Session>) -> Sessions<'a> {
    Sessions {
        main: session.client(),
        monitor: monitor.map(Session::client),
        user_search_path: session.user_search_path(),
    }
}

/// Parses and plans a file, with its split when pgshift runs it as more units than
/// its runner had transactions; `Ok(Err(message))` when the file itself is unusable.
async fn plan_file(
    session: &Session,
    file: &MigrationFile,
    bytes: &[u8],
    options: &MigrateOptions,
) -> Result<Result<(Schedule, Option<Split>), String>, MigrateError> {
    if bytes.len() as u64 > options.max_file_bytes {
        return Ok(Err(format!(
            "{} bytes is larger than the {}-byte limit",
            bytes.len(),
            options.max_file_bytes
        )));
    }
    let source = match crate::source::decode(file.path.display().to_string(), bytes.to_vec()) {
        Ok(source) => source,
        Err(err) => return Ok(Err(err.to_string())),
    };
    let statements = match pgshift_sql::parse(&source.text) {
        Ok(statements) => statements,
        Err(err) => {
            let at = err
                .position()
                .map_or_else(String::new, |p| format!("{}:{}: ", p.line, p.column));
            return Ok(Err(format!("{at}{err}")));
        }
    };
    let planned = plan(
        session,
        vec![PlanInput {
            path: source.path,
            statements,
        }],
        TransactionMode::Statement,
    )
    .await?;
    let Some(script) = planned.files.first().map(|f| &f.script) else {
        return Ok(Err("nothing to plan".to_owned()));
    };
    let planned = schedule(
        script,
        &ScheduleOptions {
            allow_blocking: options.apply.allow_blocking.clone(),
            copy_and_swap: options.apply.copy_and_swap.is_some(),
        },
    );
    let split = Split::of(script, &planned);
    Ok(Ok((planned, split)))
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
