//! Applying a judged file: schedule it, refuse it whole if any statement is refused,
//! otherwise run its units in order and stop at the first that fails, reporting the
//! committed prefix.

use std::time::Duration;

use serde::Serialize;
use tokio_postgres::Client;

use super::budgets::StepBudgets;
use super::cas_unit::{run_cas_unit, CasSettings, CasUnitReport};
use super::index_guard::IndexGuard;
use super::jitter::Jitter;
use super::judge::{judge, JudgeError};
use super::progress::Progress;
use super::schedule::{Schedule, ScheduleOptions, Scheduled, StatementRefusal};
use super::unit::{run_unit, Sleeper, Unit, UnitContext, UnitReport};
use crate::classify::WorkClass;
use crate::refusal::{Refusal, RefusalCause};
use crate::script::Script;
use pgshift_sql::QualifiedName;

/// How an apply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every unit committed, online.
    Done,
    /// Every unit committed, through at least one blocking form the operator accepted.
    DoneWithBlocking,
    /// Nothing was committed: a statement was refused, or the first unit could not
    /// take its lock within the budget.
    Refused,
    /// A unit failed after earlier units committed (the committed prefix stands).
    Failed,
}

/// What happened to one scheduled unit.
#[derive(Clone, Debug, Serialize)]
pub struct UnitResult {
    /// 0-based position among the units.
    pub index: usize,
    /// The unit.
    pub unit: Unit,
    /// What running it did; `None` when it was not run.
    pub report: Option<UnitReport>,
    /// Why it was skipped without running, when it was.
    pub skipped: Option<String>,
    /// What copy-and-swap did, for a unit routed to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_and_swap: Option<CasUnitReport>,
}

/// The verdict of an apply.
#[derive(Clone, Debug, Serialize)]
pub struct ApplyVerdict {
    /// How it ended.
    pub outcome: Outcome,
    /// Statements refused before anything ran.
    pub refusals: Vec<StatementRefusal>,
    /// A refusal discovered while running (lock budget, invalid index), with nothing
    /// committed.
    pub runtime_refusal: Option<Refusal>,
    /// Notes on how the file was scheduled.
    pub notes: Vec<String>,
    /// Every unit, run or not.
    pub units: Vec<UnitResult>,
    /// How many units committed (a prefix of `units`).
    pub committed_units: usize,
    /// The unit that failed, if one did.
    pub failed_unit: Option<usize>,
    /// The signal that stopped the apply before a unit (SIGINT, SIGTERM), if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
}

/// Options of an apply.
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// Budgets of every step.
    pub budgets: StepBudgets,
    /// Tables whose blocking rewrite the operator accepts.
    pub allow_blocking: Vec<QualifiedName>,
    /// The largest table (heap bytes over its partitions) a step may hold a lock that
    /// blocks writes on while it scans, builds or rewrites it (`--max-table-size`): an
    /// accepted blocking form on a larger one is refused (`table-too-large`).
    pub max_table_size: Option<u64>,
    /// How rewrites routed to copy-and-swap run; `None`: they are refused
    /// (`copy-and-swap-unavailable`) unless accepted as blocking.
    pub copy_and_swap: Option<CasSettings>,
}

/// The sessions an apply uses: one runs the steps; the optional other reads build
/// progress while the first is busy.
pub struct Sessions<'a> {
    /// Runs every step.
    pub main: &'a Client,
    /// Reads `pg_stat_progress_create_index` during concurrent builds.
    pub monitor: Option<&'a Client>,
    /// The user's `search_path`, for running their SQL.
    pub user_search_path: &'a [String],
}

/// Judges `script` ([`judge`]: the schedule and the pre-run checks `plan` reports
/// too) and, unless something is refused, runs it.
pub async fn apply(
    sessions: &Sessions<'_>,
    script: &Script,
    options: &ApplyOptions,
    sleeper: &impl Sleeper,
    progress: &mut dyn Progress,
) -> ApplyVerdict {
    let schedule_options = ScheduleOptions {
        max_table_size: options.max_table_size,
        disk_room: options
            .copy_and_swap
            .as_ref()
            .and_then(|cas| cas.options.disk_room),
        allow_blocking: options.allow_blocking.clone(),
        copy_and_swap: options.copy_and_swap.is_some(),
    };
    let planned = match judge(
        sessions.main,
        script,
        &schedule_options,
        sessions.user_search_path,
    )
    .await
    {
        Ok(planned) => planned,
        Err(error) => return not_judged(&error),
    };
    run_schedule(
        sessions,
        planned,
        options,
        &Ledger::none(),
        sleeper,
        progress,
    )
    .await
}

/// The verdict when the pre-run checks could not be made: nothing ran.
fn not_judged(error: &JudgeError) -> ApplyVerdict {
    ApplyVerdict {
        outcome: Outcome::Failed,
        refusals: Vec::new(),
        runtime_refusal: None,
        notes: vec![format!("nothing was run: {error}")],
        units: Vec::new(),
        committed_units: 0,
        failed_unit: None,
        interrupted: None,
    }
}

/// How a run is recorded, and where it resumes: the units before `committed_before`
/// committed in an earlier run and are not run again; `record(n)`, when given, is SQL
/// recording that `n` units have committed, run with the `n`-th unit (inside its
/// transaction when it has one).
pub struct Ledger<'a> {
    /// Units committed by an earlier run.
    pub committed_before: usize,
    /// The SQL recording `n` committed units.
    pub record: Option<&'a (dyn Fn(usize) -> String + Sync)>,
    /// A prefix for the labels of copy-and-swap runs (`migrate:<version>`), so that a
    /// re-run finds the run of each unit again.
    pub label: Option<String>,
}

impl Ledger<'_> {
    /// No record, nothing committed before.
    pub fn none() -> Self {
        Ledger {
            committed_before: 0,
            record: None,
            label: None,
        }
    }
}

/// Runs a schedule (refused whole if it holds refusals), skipping the units a ledger
/// says committed before and recording each unit that commits.
pub async fn run_schedule(
    sessions: &Sessions<'_>,
    planned: Schedule,
    options: &ApplyOptions,
    ledger: &Ledger<'_>,
    sleeper: &impl Sleeper,
    progress: &mut dyn Progress,
) -> ApplyVerdict {
    let mut verdict = ApplyVerdict {
        outcome: Outcome::Done,
        refusals: planned.refusals.clone(),
        runtime_refusal: None,
        notes: planned.notes.clone(),
        units: Vec::new(),
        committed_units: 0,
        failed_unit: None,
        interrupted: None,
    };
    // INV: RF-3 — one refused statement and nothing of the file runs.
    if !planned.refusals.is_empty() {
        verdict.outcome = Outcome::Refused;
        return verdict;
    }
    let units: Vec<Unit> = planned
        .items
        .iter()
        .filter_map(|item| match item {
            Scheduled::Unit { unit } => Some(unit.clone()),
            _ => None,
        })
        .collect();
    let total = units.len();
    let mut search_path = sessions.user_search_path.to_vec();
    let mut jitter = Jitter::from_clock();
    let mut unit_index = 0;
    for item in planned.items {
        match item {
            Scheduled::SearchPath { schemas } => {
                search_path = if schemas.is_empty() {
                    sessions.user_search_path.to_vec()
                } else {
                    schemas
                };
                continue;
            }
            Scheduled::Setting { sql, .. } => {
                if let Err(error) = sessions.main.batch_execute(&sql).await {
                    verdict.notes.push(format!("{sql}: {error}"));
                }
                continue;
            }
            Scheduled::Unit { unit } => {
                let index = unit_index;
                unit_index += 1;
                if index < ledger.committed_before {
                    verdict.committed_units += 1;
                    verdict.units.push(UnitResult {
                        index,
                        unit,
                        report: None,
                        skipped: Some(COMMITTED_BEFORE.to_owned()),
                        copy_and_swap: None,
                    });
                    continue;
                }
                if verdict.interrupted.is_none() && verdict.failed_unit.is_none() {
                    // INV: OC-3 — a stop asked by a signal takes effect between units.
                    if let Some(signal) = super::interrupt::requested_name() {
                        verdict.interrupted = Some(signal);
                        verdict.outcome = Outcome::Failed;
                    }
                }
                if verdict.failed_unit.is_some() || verdict.interrupted.is_some() {
                    let why = match &verdict.interrupted {
                        Some(signal) if verdict.failed_unit.is_none() => {
                            format!("stopped by {signal} before it ran")
                        }
                        _ => "an earlier unit failed".to_owned(),
                    };
                    verdict.units.push(UnitResult {
                        index,
                        unit,
                        report: None,
                        skipped: Some(why),
                        copy_and_swap: None,
                    });
                    continue;
                }
                progress.started(index, total, &unit);
                let bookkeeping = ledger.record.map(|record| record(index + 1));
                let result = match &options.copy_and_swap {
                    Some(settings) if unit.copy_and_swap.is_some() => {
                        let label = ledger
                            .label
                            .as_ref()
                            .map(|prefix| format!("{prefix}:unit{}", index + 1));
                        let mut silent = crate::cas::Silent;
                        let cas_progress = match progress.copy_and_swap() {
                            Some(p) => p,
                            None => &mut silent,
                        };
                        let (report, cas) = Box::pin(run_cas_unit(
                            sessions.main,
                            &unit,
                            settings,
                            &search_path,
                            label.as_deref(),
                            bookkeeping.as_deref(),
                            cas_progress,
                        ))
                        .await;
                        UnitResult {
                            index,
                            unit: unit.clone(),
                            report: Some(report),
                            skipped: None,
                            copy_and_swap: Some(cas),
                        }
                    }
                    _ => {
                        run_one(
                            sessions,
                            &unit,
                            index,
                            options,
                            &search_path,
                            bookkeeping.as_deref(),
                            sleeper,
                            &mut jitter,
                            progress,
                        )
                        .await
                    }
                };
                progress.finished(index, total, &result);
                let committed = result.report.as_ref().is_some_and(|r| r.committed);
                if committed {
                    verdict.committed_units += 1;
                    if unit.accepted_blocking {
                        verdict.outcome = Outcome::DoneWithBlocking;
                    }
                } else {
                    verdict.failed_unit = Some(index);
                    let refusal = runtime_refusal(&result);
                    if verdict.committed_units == 0 && refusal.is_some() {
                        verdict.outcome = Outcome::Refused;
                        verdict.runtime_refusal = refusal;
                    } else {
                        verdict.outcome = Outcome::Failed;
                        verdict.runtime_refusal = refusal;
                    }
                }
                verdict.units.push(result);
            }
        }
    }
    if verdict.outcome == Outcome::Failed && verdict.interrupted.is_none() {
        // A unit that stopped while a stop was asked for stopped for it (a
        // copy-and-swap run stops at its next safe point).
        verdict.interrupted = super::interrupt::requested_name();
    }
    verdict
}

/// Why a unit is shown as not run: it committed in an earlier run.
pub const COMMITTED_BEFORE: &str = "committed in an earlier run";

/// A failure that is a refusal (nothing changed by the failed unit): the lock budget,
/// or an invalid index in the way.
fn runtime_refusal(result: &UnitResult) -> Option<Refusal> {
    if let Some(refusal) = result
        .copy_and_swap
        .as_ref()
        .and_then(|cas| cas.refusal.clone())
    {
        return Some(refusal);
    }
    if let Some(skipped) = result
        .skipped
        .as_ref()
        .filter(|s| s.as_str() != COMMITTED_BEFORE)
    {
        return Some(Refusal::new(
            RefusalCause::InvalidIndexExists,
            skipped.clone(),
        ));
    }
    let report = result.report.as_ref()?;
    match report.failure_kind {
        Some("lock-timeout") | Some("deadlock") => Some(Refusal::new(
            RefusalCause::LockBudgetExhausted,
            format!(
                "could not take the lock within the budget on any of {} attempts: {}",
                report.attempts.len(),
                report.failure.clone().unwrap_or_default()
            ),
        )),
        // INV: PC-5 — a guarded block that would change something is refused, nothing of it done.
        Some("guard-would-change") => Some(Refusal::new(
            RefusalCause::ProceduralBlocking,
            report.failure.clone().unwrap_or_default(),
        )),
        // INV: TX-2 — a unit whose planned-empty table holds rows when it starts runs nothing.
        Some("no-longer-empty") => Some(Refusal::new(
            RefusalCause::TableNoLongerEmpty,
            report.failure.clone().unwrap_or_default(),
        )),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_one(
    sessions: &Sessions<'_>,
    unit: &Unit,
    index: usize,
    options: &ApplyOptions,
    search_path: &[String],
    bookkeeping: Option<&str>,
    sleeper: &impl Sleeper,
    jitter: &mut Jitter,
    progress: &mut dyn Progress,
) -> UnitResult {
    let guard = match unit.steps.as_slice() {
        [step] if !unit.transactional => {
            IndexGuard::for_step(sessions.main, &step.sql, search_path)
                .await
                .ok()
                .flatten()
        }
        _ => None,
    };
    if let Some(guard) = &guard {
        if let Ok(Some(existing)) = guard.find(sessions.main).await {
            // INV: ST-2 — an invalid index that was there before is reported, never dropped.
            if !existing.valid {
                return UnitResult {
                    index,
                    unit: unit.clone(),
                    report: None,
                    copy_and_swap: None,
                    skipped: Some(guard.in_the_way(existing.oid)),
                };
            }
        }
    }
    let run = run_unit(
        sessions.main,
        unit,
        &options.budgets,
        UnitContext {
            search_path,
            guard: guard.as_ref(),
            bookkeeping,
        },
        sleeper,
        jitter,
    );
    let watch = Watch {
        build: unit.work() == WorkClass::ConcurrentBuild,
        lock_waits: unit.strongest_lock().is_some_and(|m| m.blocks_writes()),
    };
    let report = match sessions.monitor {
        Some(monitor) if watch.build || watch.lock_waits => {
            watched(sessions.main, monitor, run, progress, watch).await
        }
        _ => run.await,
    };
    UnitResult {
        index,
        unit: unit.clone(),
        report: Some(report),
        skipped: None,
        copy_and_swap: None,
    }
}

/// What the monitor session watches while a unit runs.
#[derive(Clone, Copy)]
struct Watch {
    /// Concurrent build progress, every half second.
    build: bool,
    /// Whether the main session is waiting for a lock, every 5 ms.
    lock_waits: bool,
}

/// Runs `run` while the monitor session watches the main session's backend: build
/// progress, and how long it waits for locks (sampled every 5 ms, summed over every
/// attempt into `lock_wait_us_observed`).
async fn watched(
    main: &Client,
    monitor: &Client,
    run: impl std::future::Future<Output = UnitReport>,
    progress: &mut dyn Progress,
    watch: Watch,
) -> UnitReport {
    let pid: Option<i32> = match main
        .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
        .await
    {
        Ok(row) => Some(row.get(0)),
        Err(_) => None,
    };
    let Some(pid) = pid else {
        return run.await;
    };
    let mut run = std::pin::pin!(run);
    let mut build_tick = tokio::time::interval(Duration::from_millis(500));
    let mut wait_tick = tokio::time::interval(Duration::from_millis(5));
    wait_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut waited = Duration::ZERO;
    let mut last_sample: Option<(std::time::Instant, bool)> = None;
    loop {
        tokio::select! {
            report = &mut run => {
                let mut report = report;
                if watch.lock_waits {
                    report.lock_wait_us_observed = Some(u64::try_from(waited.as_micros()).unwrap_or(u64::MAX));
                }
                return report;
            }
            _ = build_tick.tick(), if watch.build => {
                if let Some(reading) = super::progress::read_build(monitor, pid).await {
                    progress.build(reading);
                }
            }
            _ = wait_tick.tick(), if watch.lock_waits => {
                let waiting = monitor
                    .query_opt(
                        "SELECT wait_event_type OPERATOR(pg_catalog.=) 'Lock' \
                           FROM pg_catalog.pg_stat_activity WHERE pid OPERATOR(pg_catalog.=) $1",
                        &[&pid],
                    )
                    .await
                    .ok()
                    .flatten()
                    .and_then(|row| row.get::<_, Option<bool>>(0))
                    .unwrap_or(false);
                let now = std::time::Instant::now();
                if let Some((at, true)) = last_sample {
                    waited += now - at;
                }
                last_sample = Some((now, waiting));
            }
        }
    }
}
