//! The copy phase as the run drives it: the copy workers, and what a resumed copy
//! removes first.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::indexes::ensure_key;
use super::sessions::terminate_copiers;
use super::CasProgress;
use crate::cas::copier::{self, CopyState, Sizing};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;
use crate::cas::session;
use crate::cas::statements::Statements;
use crate::cas::store::RunRecord;
use crate::cas::throttle::{reason_kind, Pace, Pacer, Throttle};
use crate::connect::ConnectionSpec;

/// Before copying again after a stop: wait for any chunk transaction of the dead
/// process (its backend may still be running), then remove shadow rows above the
/// landed prefix — their change-log entries may have been discarded as uncut, and the
/// copy (which never overwrites) would keep them stale.
///
/// The shadow has no index during the copy, so this is a sequential scan of it, once
/// per resume. Only where that `DELETE` is refused for want of a replica identity (the
/// shadow is in a publication `FOR ALL TABLES` that publishes deletes, and its replica
/// identity is the missing key) is the key built first — over rows copied once each —
/// and the copy goes on with it.
pub(super) async fn resume_copy(
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
    record: &RunRecord,
    state: &CopyState,
) -> Result<(), CasError> {
    if record.copy_finished {
        return Ok(());
    }
    terminate_copiers(client, plan).await?;
    let lo = record.landed_prefix.clone();
    let sql = statements.delete_range(lo.is_some(), false);
    let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = lo
        .iter()
        .flat_map(|v| {
            v.iter()
                .map(|s| s as &(dyn tokio_postgres::types::ToSql + Sync))
        })
        .collect();
    match client.execute(&sql, &params).await {
        Ok(_) => Ok(()),
        Err(e)
            if e.code()
                == Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE)
                && !state.key_ready.load(Ordering::Acquire) =>
        {
            ensure_key(client, plan).await?;
            state.key_ready.store(true, Ordering::Release);
            client
                .execute(&sql, &params)
                .await
                .map_err(|e| CasError::db("removing rows above the landed prefix", e))?;
            Ok(())
        }
        Err(e) => Err(CasError::db("removing rows above the landed prefix", e)),
    }
}

/// The copy, by `workers` sessions.
#[allow(clippy::too_many_arguments)]
pub(super) async fn copy(
    spec: &ConnectionSpec,
    plan: &RunPlan,
    statements: &Statements,
    state: &Arc<CopyState>,
    applier: Option<&ApplierTask>,
    throttle: &Throttle,
    estimate: i64,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let mut watch = ThrottleWatch::default();
    let sizing = Sizing {
        first_rows: plan.options.first_chunk_rows,
        target: Duration::from_millis(plan.options.chunk_target_ms),
        estimate,
        workers: i64::try_from(plan.options.workers.max(1)).unwrap_or(1),
    };
    let mut workers = Workers::default();
    for index in 0..plan.options.workers.max(1) {
        let session =
            session::open_evaluating(spec, &plan.names().copy_application(), plan).await?;
        let (statements, state, run) = (statements.clone(), state.clone(), plan.run);
        let pace = Pacer::new(throttle.clone(), index);
        workers.spawn(async move {
            copier::worker(session.client(), run, &statements, &state, sizing, &pace).await
        });
    }
    loop {
        // A worker that stopped with an error stops the copy (the others are aborted
        // when `workers` drops; their open chunk transactions roll back).
        let more = workers.next(PROGRESS_EVERY, "a copy worker").await?;
        if let Some(task) = applier {
            task.check()?;
        }
        watch.report(throttle, progress);
        progress.copied(
            state.rows.load(Ordering::Relaxed),
            estimate,
            applier.map_or(0, |a| a.backlog_max.load(Ordering::Relaxed)),
        );
        if !more {
            break;
        }
    }
    Ok(())
}

/// How often the copy reports its progress while its workers run.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// The worker tasks of a phase (the copy's, a verification pass's), aborted if the
/// phase stops early (when this drops: a spawned task otherwise keeps running).
#[derive(Default)]
pub(super) struct Workers(tokio::task::JoinSet<Result<(), CasError>>);

impl Workers {
    /// Starts a worker.
    pub(super) fn spawn(
        &mut self,
        work: impl std::future::Future<Output = Result<(), CasError>> + Send + 'static,
    ) {
        self.0.spawn(work);
    }

    /// Waits until a worker ends or `tick` passes, whichever is first, and says
    /// whether any worker is still running. A worker that ended with an error (or
    /// panicked) is that error (`what` names the worker). The phase goes on the moment
    /// its last worker ends, not at its next tick.
    pub(super) async fn next(&mut self, tick: Duration, what: &str) -> Result<bool, CasError> {
        if self.0.is_empty() {
            return Ok(false);
        }
        tokio::select! {
            joined = self.0.join_next() => {
                if let Some(joined) = joined {
                    joined.map_err(|e| CasError::Record(format!("{what} failed: {e}")))??;
                }
            }
            () = tokio::time::sleep(tick) => {}
        }
        Ok(!self.0.is_empty())
    }
}

/// Tells the progress when the throttle's decision changes (a run that starts open
/// says nothing).
pub(super) struct ThrottleWatch(Option<(Pace, String)>);

impl Default for ThrottleWatch {
    fn default() -> Self {
        ThrottleWatch(Some((Pace::Open, String::new())))
    }
}

impl ThrottleWatch {
    pub(super) fn report(&mut self, throttle: &Throttle, progress: &mut dyn CasProgress) {
        let (pace, why) = throttle.state();
        let key = (pace, reason_kind(&why));
        if self.0.as_ref() != Some(&key) {
            progress.throttled(pace.name(), &why, throttle.paused_ms());
            self.0 = Some(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_phase_goes_on_when_its_last_worker_ends_not_at_its_next_tick() {
        let mut workers = Workers::default();
        workers.spawn(async { Ok(()) });
        let hour = Duration::from_secs(3600);
        let next = tokio::time::timeout(Duration::from_secs(10), workers.next(hour, "a worker"))
            .await
            .expect("the worker's end ends the wait");
        assert!(!next.expect("the worker succeeded"), "no worker is left");
        assert!(!workers.next(hour, "a worker").await.expect("none left"));
    }

    #[tokio::test]
    async fn a_worker_that_fails_is_the_phases_error_and_the_others_are_aborted() {
        // The running worker holds `tx`: it is dropped (and `rx` ends) only when
        // the worker's future is, which for a worker that never ends is its abort.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut workers = Workers::default();
        workers.spawn(async move {
            let _held = tx;
            std::future::pending::<Result<(), CasError>>().await
        });
        workers.spawn(async { Err(CasError::Record("chunk failed".to_owned())) });
        let hour = Duration::from_secs(3600);
        let next = tokio::time::timeout(Duration::from_secs(10), workers.next(hour, "a worker"))
            .await
            .expect("the failure ends the wait");
        match next {
            Err(CasError::Record(message)) => assert_eq!(message, "chunk failed"),
            other => panic!("expected the worker's error, got {other:?}"),
        }
        drop(workers);
        let ended = tokio::time::timeout(Duration::from_secs(10), rx).await;
        assert!(
            matches!(ended, Ok(Err(_))),
            "the running worker is aborted when the phase stops"
        );
    }
}
