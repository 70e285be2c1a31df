//! The throttle's controller: a task with a session of its own that reads every signal
//! each tick, decides, and publishes the decision to the workers, the run record and
//! the report. It never stops on an error: what it cannot read pauses the work
//! (INV: OC-5), and a lost session is opened again on the next tick. Before the first
//! decision it measures the writers' baseline (when `--max-writer-slowdown` is on), so
//! that the work starts after it; a baseline it could not finish is finished by the
//! ticks while the work waits for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::decide::{decide, Pace, Readings, ThrottleLimits};
use super::ease::ease;
use super::signals::{Sample, Signals, PROBE_SPACING};
use super::{describe, reason_kind, record, Throttle, ThrottleEvent};
use crate::cas::error::CasError;
use crate::cas::names::RunNames;
use crate::cas::session;
use crate::connect::{ConnectionSpec, Session};

/// An event is recorded on every change of pace, and at least this often meanwhile
/// (for the charts).
const EVENT_EVERY: Duration = Duration::from_secs(5);
/// A decision older than this many ticks (at least [`MIN_STALE`]) pauses the work.
const STALE_TICKS: u32 = 10;
const MIN_STALE: Duration = Duration::from_secs(5);
/// The statement timeout of the controller's session.
const STATEMENT_TIMEOUT_MS: u64 = 5_000;
/// The time between two probes of the baseline.
const BASELINE_SPACING: Duration = Duration::from_millis(25);

/// The controller of one run; stopped (and its task ended) when dropped.
pub struct Controller {
    throttle: Throttle,
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<()>,
}

impl Controller {
    /// Opens the controller's session, makes the first decision (so that the work
    /// starts under one), and starts the task.
    pub async fn start(
        spec: &ConnectionSpec,
        run: i64,
        limits: ThrottleLimits,
        workers: usize,
    ) -> Result<Self, CasError> {
        let interval = Duration::from_millis(limits.interval_ms.max(50));
        let stale = (interval * STALE_TICKS).max(MIN_STALE);
        let throttle = Throttle::new(Pace::Paused, "no signal read yet".to_owned(), Some(stale));
        let session = open(spec, run).await?;
        let probe_timeout = Duration::from_millis(
            limits
                .max_writer_p99_ms
                .map_or(2_000, |ms| ms.saturating_mul(4))
                .clamp(1_000, STATEMENT_TIMEOUT_MS),
        );
        let mut tick = Tick {
            run,
            limits,
            workers: workers.max(1),
            signals: Signals::new(run, probe_timeout),
            // With both writer limits off the probe decides nothing: one a tick, for
            // the record.
            probes: if limits.max_writer_p99_ms.is_some() || limits.max_writer_slowdown.is_some() {
                (interval.as_millis() / PROBE_SPACING.as_millis()).max(1) as usize
            } else {
                1
            },
            throttle: throttle.clone(),
            last_event: None,
            last_state: String::new(),
        };
        if limits.max_writer_slowdown.is_some() {
            tick.signals
                .measure_baseline(session.client(), BASELINE_SPACING)
                .await;
        }
        // The first decision at once: the baseline's probes fill the window.
        tick.once(Some(&session), 1).await;
        // The wait for the first reading is not time the work was held back.
        throttle.0.paused_ms.store(0, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, spec) = (stop.clone(), spec.clone());
        let handle = tokio::spawn(async move {
            let mut session = Some(session);
            // A tick spends most of its interval probing: the rest is waited.
            let mut took = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                tokio::time::sleep(interval.saturating_sub(took)).await;
                let started = Instant::now();
                if session.as_ref().is_none_or(|s| s.client().is_closed()) {
                    session = open(&spec, run).await.ok();
                }
                let probes = tick.probes;
                tick.once(session.as_ref(), probes).await;
                took = started.elapsed();
            }
        });
        Ok(Controller {
            throttle,
            stop,
            handle,
        })
    }

    /// The workers' view of the decisions.
    pub fn throttle(&self) -> &Throttle {
        &self.throttle
    }

    /// Stops the controller; the work runs unthrottled after this (used once the
    /// paced phases are over), and returns every decision recorded.
    pub fn stop(self) -> Vec<ThrottleEvent> {
        self.throttle.stop();
        self.throttle.events()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.abort();
    }
}

async fn open(spec: &ConnectionSpec, run: i64) -> Result<Session, CasError> {
    let session = session::open(spec, &RunNames::new(run).throttle_application()).await?;
    session
        .client()
        // The probe commits as the application's writers do: the database's (or the
        // role's) synchronous_commit, not the engine's `on` (a writer with
        // remote_apply waits for a standby's replay, which `on` does not).
        .batch_execute(&format!(
            "SET statement_timeout = {STATEMENT_TIMEOUT_MS}; RESET synchronous_commit"
        ))
        .await
        .map_err(|e| CasError::db("preparing the throttle's session", e))?;
    Ok(session)
}

struct Tick {
    run: i64,
    limits: ThrottleLimits,
    workers: usize,
    signals: Signals,
    /// Probes a tick takes, [`PROBE_SPACING`] apart: its interval's worth.
    probes: usize,
    throttle: Throttle,
    last_event: Option<(Instant, Pace, String)>,
    last_state: String,
}

impl Tick {
    async fn once(&mut self, session: Option<&Session>, probes: usize) {
        let (pace, reason, sample) = match session {
            Some(session) => {
                let client = session.client();
                let sample = self.signals.read(client, probes).await;
                let readings = Readings {
                    replica_lag_ms: sample
                        .standbys
                        .iter()
                        .map(|s| (s.name.clone(), s.lag_ms.clone()))
                        .collect(),
                    writer_p99_ms: sample.writer_p99_ms.clone(),
                    writer_slowdown: sample.writer_slowdown.clone(),
                    wal_bytes_per_s: sample.wal_bytes_per_s.clone(),
                    operator_paused: record::operator_paused(client, self.run).await,
                };
                // The pace before the first decision (none recorded yet) is the
                // placeholder "no signal read yet": no pause to ease out of.
                let previous = if self.last_event.is_some() {
                    self.throttle.state().0
                } else {
                    Pace::Open
                };
                let allowed = decide(
                    &readings,
                    &self.limits,
                    self.workers,
                    previous == Pace::Paused,
                );
                let (pace, reason) = ease(previous, allowed, self.workers);
                (pace, reason, Some(sample))
            }
            // INV: OC-5 — no session to read the signals on: paused.
            None => (
                Pace::Paused,
                "cannot connect to read the signals".to_owned(),
                None,
            ),
        };
        if pace != Pace::Paused {
            // The work may start now: what the probe measures from here on is not
            // the writers' baseline.
            self.signals.close_baseline();
        }
        self.throttle.set(pace, reason.clone());
        let kind = reason_kind(&reason);
        let due = self
            .last_event
            .as_ref()
            .is_none_or(|(at, last, last_kind)| {
                *last != pace || *last_kind != kind || at.elapsed() >= EVENT_EVERY
            });
        if due {
            self.last_event = Some((Instant::now(), pace, kind));
            self.throttle.record(event(pace, &reason, sample.as_ref()));
        }
        let state = self.state(pace, &reason, sample.as_ref());
        if state != self.last_state || due {
            if let Some(session) = session {
                if record::set_state(session.client(), self.run, &state)
                    .await
                    .is_ok()
                {
                    self.last_state = state;
                }
            }
        }
    }
}

impl Tick {
    /// The state `status` shows: the decision, and when the slowdown is consulted the
    /// writers' baseline once measured, with the slowdown last read (whatever decided).
    fn state(&self, pace: Pace, reason: &str, sample: Option<&Sample>) -> String {
        let decision = describe(pace, reason);
        let (Some(_), Some(ms)) = (self.limits.max_writer_slowdown, self.signals.baseline_ms())
        else {
            return decision;
        };
        let baseline = if self.signals.baseline_quiet() {
            format!("writer baseline p95 {ms:.2} ms, measured with no application session at work")
        } else {
            format!("writer baseline p95 {ms:.2} ms")
        };
        match sample.and_then(|s| s.writer_slowdown.as_ref().ok()) {
            Some(now) if now.application_sessions == 0 => format!(
                "{decision}; {baseline} (now {:.1}×, no application session at work: not weighed)",
                now.ratio
            ),
            Some(now) => format!(
                "{decision}; {baseline} (now {:.1}×, {} application sessions at work)",
                now.ratio, now.application_sessions
            ),
            None => format!("{decision}; {baseline}"),
        }
    }
}

fn event(pace: Pace, reason: &str, sample: Option<&Sample>) -> ThrottleEvent {
    let at_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let largest = |values: Vec<Option<f64>>| -> Option<f64> {
        values
            .into_iter()
            .try_fold(0.0_f64, |most, v| v.map(|v| most.max(v)))
    };
    ThrottleEvent {
        at_unix_ms,
        pace,
        reason: reason.to_owned(),
        replica_lag_ms: sample.and_then(|s| {
            largest(
                s.standbys
                    .iter()
                    .map(|x| x.lag_ms.as_ref().ok().copied())
                    .collect(),
            )
        }),
        replica_lag_bytes: sample
            .and_then(|s| largest(s.standbys.iter().map(|x| x.lag_bytes).collect())),
        writer_p99_ms: sample.and_then(|s| s.writer_p99_ms.as_ref().ok().copied()),
        writer_slowdown: sample.and_then(|s| s.writer_slowdown.as_ref().ok().map(|w| w.ratio)),
        writer_baseline_ms: sample
            .and_then(|s| s.writer_slowdown.as_ref().ok().map(|w| w.baseline_ms)),
        application_sessions: sample.and_then(|s| {
            s.writer_slowdown
                .as_ref()
                .ok()
                .map(|w| w.application_sessions)
        }),
        wal_bytes_per_s: sample.and_then(|s| s.wal_bytes_per_s.as_ref().ok().copied()),
    }
}
