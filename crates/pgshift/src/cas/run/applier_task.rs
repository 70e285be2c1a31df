//! The background applier of a live run: a task that keeps the shadow in step with
//! the change log while the copy, the index builds and verification go on, pausable
//! for each index build and for the swap.
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{watch, Mutex, Notify};
use tokio_postgres::Client;

use crate::cas::applier::{self, Applier};
use crate::cas::copier::CopyState;
use crate::cas::error::CasError;
use crate::cas::statements::Statements;
use crate::connect::Session;

/// How often the background applier, when caught up, reads the change log from its
/// start again (see [`Applier::rewind`]).
pub(super) const REWIND_EVERY: Duration = Duration::from_secs(2);

/// Samples the change log's backlog into the run's largest.
pub(super) async fn note_backlog(
    applier: &Applier,
    client: &Client,
    max: &AtomicI64,
) -> Result<(), CasError> {
    max.fetch_max(applier.backlog(client).await?, Ordering::Relaxed);
    Ok(())
}

/// The background applier's rest for `period`, cut short when the task is stopped.
async fn rest(wake: &Notify, period: Duration) {
    tokio::select! {
        () = tokio::time::sleep(period) => {}
        () = wake.notified() => {}
    }
}

/// How often the background applier looks again whether the shadow has its key.
pub(super) const KEY_WAIT: Duration = Duration::from_millis(100);

/// The background applier: runs until stopped, pausable for the swap (and for each
/// index build). It applies nothing until the shadow has its primary key
/// ([`CopyState::key_ready`]). It applies in
/// batches of [`applier::BATCH_MIN`] entries, larger while batches come back full,
/// and pauses for [`applier::PAUSE`] after a batch that was not.
pub(super) struct ApplierTask {
    pub(super) stop: Arc<AtomicBool>,
    /// Wakes the task from its pause when it is stopped: the run ends (and the swap's
    /// clean-up reports) the moment the task does, not a pause later.
    wake: Arc<Notify>,
    pub(super) gate: Arc<Mutex<()>>,
    /// Set while an index build holds [`Self::gate`]: verification running beside
    /// the builds then knows that pending changes wait for the build, not for an
    /// applier that cannot keep up.
    pub(super) held_for_build: Arc<AtomicBool>,
    pub(super) backlog_max: Arc<AtomicI64>,
    /// Passes of the task's loop so far (each ends with a statement on its session);
    /// closed when the task ends.
    passes: watch::Receiver<u64>,
    pub(super) handle: tokio::task::JoinHandle<Result<(), CasError>>,
}

/// The longest [`ApplierTask::check_after_a_pass`] waits for the pass.
const PASS_WAIT: Duration = Duration::from_secs(2);

impl ApplierTask {
    pub(super) fn spawn(session: Session, statements: Statements, state: Arc<CopyState>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Notify::new());
        let gate = Arc::new(Mutex::new(()));
        let backlog_max = Arc::new(AtomicI64::new(0));
        let (stop_flag, gate_lock, max) = (stop.clone(), gate.clone(), backlog_max.clone());
        let woken = wake.clone();
        let (passed, passes) = watch::channel(0_u64);
        let handle = tokio::spawn(async move {
            let mut applier = Applier::new(statements);
            let client = session.client();
            let mut ticks: u32 = 0;
            let mut limit = applier::BATCH_MIN;
            let mut rewound = Instant::now();
            let mut waits: u32 = 0;
            let mut key_seen = false;
            while !stop_flag.load(Ordering::Relaxed) {
                if !state.key_ready.load(Ordering::Acquire) {
                    // No key yet (the copy writes a bare heap): the entries wait in
                    // the log; once the key is built every chunk has landed, so
                    // every entry is applied then.
                    waits = waits.wrapping_add(1);
                    // Sampled at once and then twice a second, so that the copy's
                    // progress shows the backlog growing (it is the run's largest
                    // once the key is built) rather than a stale 0.
                    if waits % 5 == 1 {
                        note_backlog(&applier, client, &max).await?;
                    }
                    passed.send_modify(|n| *n += 1);
                    rest(&woken, KEY_WAIT).await;
                    continue;
                }
                if !key_seen {
                    // The key is there: the backlog that gathered meanwhile is at its
                    // largest now, before the first batch (reported as the run's
                    // largest backlog) — noted even when this task first looks only
                    // after the key was built (a busy runtime, or a resumed run).
                    key_seen = true;
                    note_backlog(&applier, client, &max).await?;
                }
                let batch = {
                    let _open = gate_lock.lock().await;
                    applier.step(client, &state.ledger, limit).await?
                };
                passed.send_modify(|n| *n += 1);
                ticks = ticks.wrapping_add(1);
                if ticks % 50 == 0 {
                    note_backlog(&applier, client, &max).await?;
                }
                let pause;
                (limit, pause) = applier::next_limit(limit, batch.read);
                if pause {
                    // Caught up: now and then, read the log from its start again for
                    // entries committed after a later one was read, so that they do
                    // not wait for the swap's drain.
                    if rewound.elapsed() >= REWIND_EVERY {
                        applier.rewind();
                        rewound = Instant::now();
                    }
                    rest(&woken, applier::PAUSE).await;
                }
            }
            Ok(())
        });
        ApplierTask {
            stop,
            wake,
            gate,
            held_for_build: Arc::new(AtomicBool::new(false)),
            backlog_max,
            passes,
            handle,
        }
    }

    /// Fails if the applier stopped with an error.
    pub(super) fn check(&self) -> Result<(), CasError> {
        if self.handle.is_finished() && !self.stop.load(Ordering::Relaxed) {
            return Err(CasError::ApplierStopped);
        }
        Ok(())
    }

    /// [`Self::check`], once the task has made one more pass (woken from its rest;
    /// waited for up to [`PASS_WAIT`]): a session ended since the task's last
    /// statement is noticed before the swap, rather than by the swap's clean-up. The
    /// swap would still be right without it (its drain applies what is left under
    /// the lock), but a run whose applier died stops there, resumable.
    pub(super) async fn check_after_a_pass(&self) -> Result<(), CasError> {
        let mut passes = self.passes.clone();
        passes.mark_unchanged();
        self.wake.notify_one();
        // A pass, the task's end (the channel closes: the task has returned) or the
        // bound, whichever first.
        let ended = matches!(
            tokio::time::timeout(PASS_WAIT, passes.changed()).await,
            Ok(Err(_))
        );
        if ended && !self.stop.load(Ordering::Relaxed) {
            return Err(CasError::ApplierStopped);
        }
        self.check()
    }

    /// Stops the task: the largest backlog it saw, and how it ended. The largest
    /// backlog stands whatever the ending (a task that fails after the swap dropped
    /// its log still saw it).
    pub(super) async fn stop(self) -> (i64, Result<(), CasError>) {
        self.stop.store(true, Ordering::Relaxed);
        // A permit is kept if the task is not resting now: its next rest ends at once.
        self.wake.notify_one();
        let ended = match self.handle.await {
            Ok(result) => result,
            Err(e) => Err(CasError::Record(format!("the applier task failed: {e}"))),
        };
        (self.backlog_max.load(Ordering::Relaxed), ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stopped_applier_does_not_rest_out_its_pause() {
        let wake = Notify::new();
        // Stopped while it was not resting: the permit ends its next rest at once.
        wake.notify_one();
        tokio::time::timeout(
            Duration::from_secs(10),
            rest(&wake, Duration::from_secs(3600)),
        )
        .await
        .expect("the rest ends when the task is stopped");
    }
}
