//! The phase machine: a recorded run carried from its phase to its end.
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::beside::index_and_verify;
use super::copy::{copy, resume_copy};
use super::finish::finish;
use super::indexes::{
    analyze_shadow, build_indexes, ensure_key, key_exists, verifies_beside_builds,
};
use super::prepare::ensure_capture;
use super::sessions::terminate_earlier_sessions;
use super::swap::{catch_up, hold_while_paused, wait_for_cutover};
use super::verify_all::verify_all;
use super::{CasProgress, RunReport};
use crate::cas::copier::CopyState;
use crate::cas::cutover::{self};
use crate::cas::disk_watch::watched;
use crate::cas::error::CasError;
use crate::cas::ledger::Ledger;
use crate::cas::plan::{Mode, RunPlan};
use crate::cas::session;
use crate::cas::standby as standby_queries;
use crate::cas::statements::Statements;
use crate::cas::store::{self, Phase, RunRecord};
use crate::cas::throttle::{standby, Controller};
use crate::connect::{ConnectionSpec, Session};

/// Drives a recorded run from its phase to its end.
pub(super) async fn drive(
    spec: &ConnectionSpec,
    runner: &Session,
    record: RunRecord,
    standby_urls: &[ConnectionSpec],
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let client = runner.client();
    let plan = record.plan.clone();
    let mut report = RunReport {
        run: record.id,
        table: plan.source.table.name.to_string(),
        phase: "running".to_owned(),
        rows_copied: 0,
        rows_verified: 0,
        verification_passes: 0,
        backlog_max: 0,
        phases_ms: Vec::new(),
        verified_beside_builds: false,
        swap: None,
        unvalidated_foreign_keys: Vec::new(),
        kept_old: None,
        settled_from_catalog: false,
        disk: plan.disk.clone(),
        throttle: Vec::new(),
        throttled_ms: 0,
        standbys: None,
        cleanup: Vec::new(),
        left_behind: Vec::new(),
    };
    let phase = record.resume_point();
    if matches!(phase, Phase::Done | Phase::Aborted) {
        return Err(CasError::WrongState {
            run: record.id,
            state: phase.name().to_owned(),
            what: "nothing to resume".to_owned(),
        });
    }
    if phase == Phase::Cutover && cutover::settled(client, &plan).await? {
        report.settled_from_catalog = true;
        finish(client, &plan, &mut report, progress).await?;
        return Ok(report);
    }
    // A process that stopped may have left statements running (a chunk, an index
    // build, an apply): they end before this one starts its own.
    terminate_earlier_sessions(client, &plan).await?;
    ensure_capture(client, &plan).await?;
    let statements = Statements::new(&plan);
    // A phase past copying is recorded only once every chunk has landed. The recorded
    // flag alone may say otherwise: copy workers record their landings on sessions of
    // their own, so a landing that did not finish the copy can commit its record after
    // the one that did. An unfinished ledger past copying (nothing copies any more)
    // would discard entries above its prefix as uncut (INV: CO-5).
    let copy_done = record.copy_finished || phase > Phase::Copying;
    let state = Arc::new(CopyState {
        ledger: Mutex::new((Ledger::resume(record.landed_prefix.clone(), copy_done), 0)),
        cutting: Mutex::new(()),
        rows: AtomicI64::new(0),
        asked: AtomicI64::new(0),
        key_ready: AtomicBool::new(key_exists(client, &plan).await?),
    });
    let applier = match plan.options.mode {
        Mode::Live => Some(ApplierTask::spawn(
            session::open_evaluating(spec, &plan.names().apply_application(), &plan).await?,
            statements.clone(),
            state.clone(),
        )),
        Mode::Quiesced => None,
    };
    // Boxed: in an unoptimised build each enclosing future holds this one by value,
    // and the nesting outgrew a 2 MiB thread stack (a test thread, a tokio worker).
    let outcome = Box::pin(run_phases(
        spec,
        runner,
        &record,
        &plan,
        &statements,
        &state,
        applier.as_ref(),
        phase,
        standby_urls,
        &mut report,
        progress,
    ))
    .await;
    let (backlog_max, outcome) = match applier {
        Some(task) => match (task.stop().await, outcome) {
            // The applier's own error says why it stopped.
            ((max, Err(stopped)), Err(CasError::ApplierStopped)) => (max, Err(stopped)),
            ((max, _), outcome) => (max, outcome),
        },
        None => (0, outcome),
    };
    report.backlog_max = report.backlog_max.max(backlog_max);
    report.rows_copied = state.rows.load(Ordering::Relaxed);
    match outcome {
        Ok(()) => Ok(report),
        Err(err) => {
            if matches!(err, CasError::Interrupted { .. }) {
                // Stopped on request: no statement of this run is left running on the
                // server (a chunk, an index build, a verification) once it is recorded.
                let _ = terminate_earlier_sessions(client, &plan).await;
            }
            // INV: OC-6 — a run the data rejects removes itself at once.
            if let Some(rejected) = err.as_data_rejection() {
                return Err(remove_rejected(client, &plan, record.id, rejected).await);
            }
            // INV: OC-7 — a run short of disk removes itself at once, giving back
            // what its shadow holds.
            if let Some(short) = err.as_disk_stop() {
                return Err(remove_rejected(client, &plan, record.id, short).await);
            }
            let resume = match &err {
                CasError::CutoverRefused(_) | CasError::Divergence(_) => Phase::Verifying,
                _ => current_phase(client, record.id)
                    .await
                    .unwrap_or(Phase::Copying),
            };
            let _ = store::fail(client, record.id, resume, &err.to_string()).await;
            Err(err)
        }
    }
}

/// A run the table's data rejects, or one short of disk: its sessions ended, its capture triggers, shadow and
/// change log dropped, its record kept as aborted with why. When the removal itself
/// fails, the run is recorded as failed (`abort` finishes the removal) and the error
/// says both.
async fn remove_rejected(client: &Client, plan: &RunPlan, id: i64, rejected: CasError) -> CasError {
    let removed = async {
        terminate_earlier_sessions(client, plan).await?;
        super::finish::remove_artifacts(client, plan).await
    }
    .await;
    match removed {
        Ok(()) => {
            let _ = store::aborted(client, id, &rejected.to_string()).await;
            rejected
        }
        Err(removal) => {
            let both = format!(
                "{rejected}; but removing the run failed: {removal}; `pgshift abort` removes it"
            );
            let _ = store::fail(client, id, Phase::Copying, &both).await;
            CasError::Record(both)
        }
    }
}

pub(super) async fn current_phase(client: &Client, id: i64) -> Option<Phase> {
    store::by_id(client, id)
        .await
        .ok()
        .map(|r| r.resume_point())
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn run_phases(
    spec: &ConnectionSpec,
    runner: &Session,
    record: &RunRecord,
    plan: &RunPlan,
    statements: &Statements,
    state: &Arc<CopyState>,
    applier: Option<&ApplierTask>,
    from: Phase,
    standby_urls: &[ConnectionSpec],
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let client = runner.client();
    let estimate = estimate_rows(client, plan).await;
    // The copy, the index builds and verification go at the throttle's pace.
    let controller = Controller::start(
        spec,
        plan.run,
        plan.options.throttle,
        plan.options.workers.max(1),
    )
    .await?;
    let throttle = controller.throttle().clone();
    if from <= Phase::Copying {
        let started = Instant::now();
        enter(client, plan, progress, Phase::Copying).await?;
        resume_copy(client, plan, statements, record, state).await?;
        stoppable(watched(
            spec,
            plan,
            Box::pin(copy(
                spec, plan, statements, state, applier, &throttle, estimate, progress,
            )),
        ))
        .await?;
        report
            .phases_ms
            .push(("copying".to_owned(), elapsed_ms(started)));
    }
    // Verification beside the index builds records `verifying` once it starts, while
    // builds may still run: a run resumed at `verifying` makes sure of them again
    // (those built are skipped) before it verifies.
    if from <= Phase::Verifying && verifies_beside_builds(plan) {
        enter(client, plan, progress, Phase::Indexing).await?;
        let took = stoppable(watched(
            spec,
            plan,
            Box::pin(index_and_verify(
                spec, client, plan, statements, state, applier, &throttle, estimate, report,
                progress,
            )),
        ))
        .await?;
        report
            .phases_ms
            .push(("indexing".to_owned(), took.indexing));
        report
            .phases_ms
            .push(("verifying".to_owned(), took.verifying));
    } else {
        if from <= Phase::Indexing {
            let started = Instant::now();
            enter(client, plan, progress, Phase::Indexing).await?;
            stoppable(watched(
                spec,
                plan,
                Box::pin(build_indexes(
                    spec, client, plan, state, applier, &throttle, None, progress,
                )),
            ))
            .await?;
            report
                .phases_ms
                .push(("indexing".to_owned(), elapsed_ms(started)));
        }
        if !state.key_ready.load(Ordering::Acquire) {
            // Resumed past indexing: the key was built then; made sure of all the same.
            ensure_key(client, plan).await?;
            state.key_ready.store(true, Ordering::Release);
        }
        let started = Instant::now();
        enter(client, plan, progress, Phase::Verifying).await?;
        // The statistics are sampled beside verification (neither waits for the other).
        let verified = Box::pin(verify_all(
            spec,
            client,
            plan,
            statements,
            applier,
            &throttle,
            plan.options.workers,
            None,
            estimate,
            report,
            progress,
        ));
        // Each phase's future is boxed: together inline they make the run's future large
        // enough to overflow a test thread's stack in a debug build.
        stoppable(watched(spec, plan, async {
            tokio::try_join!(Box::pin(analyze_shadow(spec, plan, &throttle)), verified).map(drop)
        }))
        .await?;
        report
            .phases_ms
            .push(("verifying".to_owned(), elapsed_ms(started)));
    }
    report.throttled_ms = throttle.paused_ms();
    report.throttle = controller.stop();
    if plan.options.defer_cutover {
        enter(client, plan, progress, Phase::Ready).await?;
        stoppable(wait_for_cutover(client, plan, applier)).await?;
    }
    let held = stoppable(hold_while_paused(client, plan, applier, progress)).await?;
    if let Some(task) = applier {
        task.check_after_a_pass().await?;
    }
    report.throttled_ms = report.throttled_ms.saturating_add(held);
    // The swap checks for a stop between its attempts, never inside its transaction.
    let started = Instant::now();
    enter(client, plan, progress, Phase::Cutover).await?;
    let max_lag = plan
        .options
        .throttle
        .max_replica_lag_ms
        .map(Duration::from_millis);
    // INV: LK-7 — the standbys are checked before the swap takes its lock.
    let mut standbys =
        standby::before_swap(client, &plan.source.table.name.to_string(), max_lag).await?;
    for note in &standbys.notes {
        progress.note(note);
    }
    // INV: LK-9 — the standbys named with --standby-url are read before the swap takes
    // its lock: no query there holds or waits for a lock on the table.
    let watched = standby_queries::before_swap(
        client,
        standby_urls,
        &plan.source_oids(),
        &plan.source.table.name.to_string(),
        plan.options.cutover.total(),
    )
    .await?;
    for queried in &watched.standbys {
        progress.note(&standby_queries::clear_note(
            queried,
            &plan.source.table.name.to_string(),
        ));
    }
    // The drain under the swap's lock evaluates the user's expressions.
    session::evaluate_with_statement_path(client, plan).await?;
    let swap = match applier {
        Some(task) => {
            let _paused = task.gate.lock().await;
            Box::pin(cutover::swap(client, plan, || {
                catch_up(client, plan, statements)
            }))
            .await
        }
        None => {
            Box::pin(cutover::swap(client, plan, || {
                catch_up(client, plan, statements)
            }))
            .await
        }
    };
    session::pin_search_path(client).await?;
    let swap = swap?;
    report.swap = Some(swap);
    let wait = max_lag.unwrap_or(STANDBY_SWAP_WAIT);
    standby::after_swap(client, &mut standbys, wait).await;
    standbys.queried = standby_queries::after_swap(client, watched, wait).await;
    for queried in &standbys.queried {
        progress.note(&standby_queries::cancelled_note(queried));
    }
    report.standbys = Some(standbys);
    report
        .phases_ms
        .push(("cutover".to_owned(), elapsed_ms(started)));
    finish(client, plan, report, progress).await
}

/// How long the report waits for the standbys to replay the swap when no replica lag
/// bound is set.
const STANDBY_SWAP_WAIT: Duration = Duration::from_secs(10);

/// Runs a phase's work until it ends or a stop is asked for, whichever comes first.
/// Dropping the work there is safe: every phase before the swap resumes from its
/// record (a chunk that did not commit is copied again; a build that did not finish
/// is built again), exactly as after a killed process.
// INV: OC-3 — a stop asked by a signal ends a phase's work; the record resumes it.
pub(super) async fn stoppable<T>(
    work: impl std::future::Future<Output = Result<T, CasError>>,
) -> Result<T, CasError> {
    tokio::select! {
        result = work => result,
        () = crate::exec::interrupt::wait() => Err(CasError::interrupted(
            crate::exec::interrupt::requested().unwrap_or_default(),
        )),
    }
}

/// Enters `phase` at a safe point: a stop requested meanwhile ends the run here;
/// then the phase is shown and recorded (a process that resumes starts from it).
async fn enter(
    client: &Client,
    plan: &RunPlan,
    progress: &mut dyn CasProgress,
    phase: Phase,
) -> Result<(), CasError> {
    CasError::check_interrupt()?;
    progress.phase(phase);
    store::set_phase(client, plan.run, phase).await
}

pub(super) fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

pub(super) async fn estimate_rows(client: &Client, plan: &RunPlan) -> i64 {
    let oids = plan.source_oids();
    client
        .query_one(
            // Rows live in leaf tables only (a partitioned parent's reltuples is the
            // sum of its partitions').
            "SELECT coalesce(pg_catalog.sum(GREATEST(c.reltuples, 0)), 0)::pg_catalog.int8 FROM pg_catalog.pg_class c \
              WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND c.relkind OPERATOR(pg_catalog.<>) 'p'",
            &[&oids],
        )
        .await
        .map(|r| r.get(0))
        .unwrap_or(0)
}
