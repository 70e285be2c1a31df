//! The throttle: paces the copy, the index builds and verification from signals read
//! while the run goes — writer commit latency (the engine's own probe), absolute and
//! relative to its baseline before the work, the replay lag of every standby, the WAL
//! rate — against the user's limits, and an operator's pause.
//! Fail closed (INV: OC-5): a signal that cannot be read, and a throttle whose last
//! decision is too old, pause the work; nothing ever speeds it up past its settings.
//!
//! `controller` reads the signals on a session of its own and decides (`decide`, pure),
//! loosening the pace only step by step after a pause or a slowdown (`ease`, pure);
//! every worker asks [`Throttle::admit`] before each chunk (or index build: one
//! admitted while slowed is built without parallel maintenance workers). The
//! decisions are kept for the run's report ([`ThrottleEvent`]), and the state for
//! `status` in the run record (`record`). `standby` is the check the cutover makes of
//! the standbys before it takes the swap's lock.

mod controller;
pub mod decide;
pub mod ease;
pub mod record;
pub mod signals;
pub mod standby;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use controller::Controller;
pub use decide::{Pace, Slowdown, ThrottleLimits, DEFAULT_LIMITS, DEFAULT_WRITER_SLOWDOWN};

/// How often a waiting worker looks at the throttle again.
const WAIT: Duration = Duration::from_millis(100);
/// Events kept for the report (at one every few seconds, hours of a run).
const MAX_EVENTS: usize = 10_000;

/// One decision of the throttle, with the signals it was made from, for the run's
/// report (and the benchmark's charts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThrottleEvent {
    /// When (milliseconds since the Unix epoch).
    pub at_unix_ms: u64,
    /// The decision.
    #[serde(flatten)]
    pub pace: Pace,
    /// Why (empty when open).
    pub reason: String,
    /// The largest replay lag of any standby (ms), when every standby was read.
    pub replica_lag_ms: Option<f64>,
    /// The largest WAL not replayed by a standby (bytes).
    pub replica_lag_bytes: Option<f64>,
    /// The probe's 99th-percentile commit latency (ms).
    pub writer_p99_ms: Option<f64>,
    /// The probe's recent 95th percentile over its baseline's, when both were read.
    #[serde(default)]
    pub writer_slowdown: Option<f64>,
    /// The baseline's 95th percentile (ms), once measured.
    #[serde(default)]
    pub writer_baseline_ms: Option<f64>,
    /// The application's client sessions at work, when the slowdown was read (with
    /// none it decides nothing).
    #[serde(default)]
    pub application_sessions: Option<usize>,
    /// WAL bytes per second.
    pub wal_bytes_per_s: Option<f64>,
}

#[derive(Clone, Debug)]
struct Current {
    pace: Pace,
    reason: String,
    at: Instant,
}

struct Inner {
    current: Mutex<Current>,
    /// `None`: never stale (an unthrottled run).
    stale_after: Option<Duration>,
    events: Mutex<Vec<ThrottleEvent>>,
    paused_ms: AtomicU64,
    stopped: AtomicBool,
}

/// The throttle's decision as the workers see it; cheap to clone.
#[derive(Clone)]
pub struct Throttle(Arc<Inner>);

impl Throttle {
    fn new(pace: Pace, reason: String, stale_after: Option<Duration>) -> Self {
        Throttle(Arc::new(Inner {
            current: Mutex::new(Current {
                pace,
                reason,
                at: Instant::now(),
            }),
            stale_after,
            events: Mutex::new(Vec::new()),
            paused_ms: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }))
    }

    /// A throttle that always lets the work go (for work run outside a controlled run).
    pub fn unthrottled() -> Self {
        Throttle::new(Pace::Open, String::new(), None)
    }

    /// The decision in force and why; a decision older than the throttle's staleness
    /// bound is a pause (INV: OC-5: a controller that stopped reading stops the work).
    pub fn state(&self) -> (Pace, String) {
        let current = match self.0.current.lock() {
            Ok(current) => current.clone(),
            Err(_) => {
                return (
                    Pace::Paused,
                    "the throttle's state is unreadable".to_owned(),
                )
            }
        };
        match self.0.stale_after {
            // INV: OC-5 — no fresh decision: paused.
            Some(limit) if current.at.elapsed() > limit => (
                Pace::Paused,
                format!(
                    "the throttle has read no signal for {} s",
                    current.at.elapsed().as_secs()
                ),
            ),
            _ => (current.pace, current.reason),
        }
    }

    /// Waits until worker `worker` (numbered from 0) may start its next piece of work:
    /// at once when open; after the pause when slowed and among the workers allowed;
    /// not while paused. Returns the pace it was let go under (open or slow).
    pub async fn admit(&self, worker: usize) -> Pace {
        self.admit_unless(worker, || false)
            .await
            .unwrap_or(Pace::Open)
    }

    /// [`Self::admit`], unless `nothing_left` says that the work has nothing left for
    /// this worker (looked at before each wait): `None` then. A worker that a slowed
    /// pace holds back (`Slow { workers }` below its number) would otherwise wait for
    /// the pace to open after the others had done all of the phase's work, and the
    /// phase with it, for as long as the writers kept the throttle slowed.
    pub async fn admit_unless(
        &self,
        worker: usize,
        nothing_left: impl Fn() -> bool,
    ) -> Option<Pace> {
        loop {
            if nothing_left() {
                return None;
            }
            if self.0.stopped.load(Ordering::Relaxed) {
                return Some(Pace::Open);
            }
            match self.state().0 {
                Pace::Open => return Some(Pace::Open),
                pace @ Pace::Slow { pause_ms, workers } if worker < workers => {
                    tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                    return Some(pace);
                }
                Pace::Slow { .. } | Pace::Paused => tokio::time::sleep(WAIT).await,
            }
        }
    }

    /// Every decision recorded so far.
    pub fn events(&self) -> Vec<ThrottleEvent> {
        self.0.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Milliseconds spent paused so far.
    pub fn paused_ms(&self) -> u64 {
        self.0.paused_ms.load(Ordering::Relaxed)
    }

    fn set(&self, pace: Pace, reason: String) {
        if let Ok(mut current) = self.0.current.lock() {
            if current.pace == Pace::Paused {
                let ms = u64::try_from(current.at.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.0.paused_ms.fetch_add(ms, Ordering::Relaxed);
            }
            *current = Current {
                pace,
                reason,
                at: Instant::now(),
            };
        }
    }

    fn record(&self, event: ThrottleEvent) {
        if let Ok(mut events) = self.0.events.lock() {
            if events.len() < MAX_EVENTS {
                events.push(event);
            }
        }
    }

    fn stop(&self) {
        self.0.stopped.store(true, Ordering::Relaxed);
    }
}

/// One worker's view of the throttle: what the copy, index and verification workers
/// ask before each piece of work.
#[derive(Clone)]
pub struct Pacer {
    throttle: Throttle,
    worker: usize,
}

impl Pacer {
    /// Worker `worker` (numbered from 0) of work paced by `throttle`.
    pub fn new(throttle: Throttle, worker: usize) -> Self {
        Pacer { throttle, worker }
    }

    /// A pacer that never waits.
    pub fn unthrottled() -> Self {
        Pacer::new(Throttle::unthrottled(), 0)
    }

    /// Waits until this worker may start its next piece of work; the pace it was let
    /// go under (open or slow).
    pub async fn admit(&self) -> Pace {
        self.throttle.admit(self.worker).await
    }

    /// The pace in force now, without waiting ([`Throttle::state`]).
    pub fn pace(&self) -> Pace {
        self.throttle.state().0
    }

    /// [`Throttle::admit_unless`] for this worker.
    pub async fn admit_unless(&self, nothing_left: impl Fn() -> bool) -> Option<Pace> {
        self.throttle.admit_unless(self.worker, nothing_left).await
    }
}

/// A failed signal read as a reason says it: the server's message, or the driver's.
fn unread(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_owned())
}

/// What a reason is about, without the values it carries (a new value of the same
/// signal is not a new reason).
pub fn reason_kind(reason: &str) -> String {
    reason
        .chars()
        .filter(|c| !c.is_ascii_digit() && *c != '.')
        .collect()
}

/// A line for `status` and progress: `open`, `slow (…): why`, `paused: why`.
pub fn describe(pace: Pace, reason: &str) -> String {
    match pace {
        Pace::Open => "open".to_owned(),
        Pace::Slow { pause_ms, workers } => {
            format!("slowed ({pause_ms} ms between chunks, {workers} workers): {reason}")
        }
        Pace::Paused => format!("paused: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_decision_pauses_the_work() {
        let throttle = Throttle::new(Pace::Open, String::new(), Some(Duration::from_secs(5)));
        assert_eq!(throttle.state().0, Pace::Open);
        // The decision made six seconds ago, and none since.
        if let Ok(mut current) = throttle.0.current.lock() {
            current.at = Instant::now() - Duration::from_secs(6);
        }
        let (pace, why) = throttle.state();
        assert_eq!(pace, Pace::Paused);
        assert!(why.contains("no signal"), "{why}");
    }

    /// A throttle holding one decision, never stale: slowed to one worker.
    fn slowed_to_one_worker() -> Throttle {
        Throttle::new(
            Pace::Slow {
                pause_ms: 1,
                workers: 1,
            },
            "test".to_owned(),
            None,
        )
    }

    #[tokio::test]
    async fn inv_oc_5_a_worker_held_back_by_a_slowed_pace_is_let_go_once_nothing_is_left() {
        let throttle = slowed_to_one_worker();
        let left = Arc::new(AtomicBool::new(true));
        let flag = left.clone();
        let waiting = tokio::spawn({
            let throttle = throttle.clone();
            async move {
                throttle
                    .admit_unless(1, move || !flag.load(Ordering::Relaxed))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiting.is_finished(), "held back while work is left");
        // The other worker took the rest: nothing is left for this one.
        left.store(false, Ordering::Relaxed);
        let admitted = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("let go once nothing is left")
            .expect("the task ran");
        assert_eq!(admitted, None, "let go without work");
        // A worker the pace allows is admitted as before.
        let allowed = throttle.admit_unless(0, || false).await;
        assert!(matches!(allowed, Some(Pace::Slow { .. })), "{allowed:?}");
    }

    #[tokio::test]
    async fn slowed_work_admits_only_the_allowed_workers() {
        let throttle = slowed_to_one_worker();
        tokio::time::timeout(Duration::from_secs(5), throttle.admit(0))
            .await
            .expect("worker 0 is admitted");
        let second = tokio::time::timeout(Duration::from_millis(300), throttle.admit(1)).await;
        assert!(second.is_err(), "worker 1 waits while slowed to one worker");
    }
}
