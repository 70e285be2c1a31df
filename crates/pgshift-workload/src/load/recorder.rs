//! The state that all workers of a run share and report into: the ledger
//! (writes are entered *before* they run, so a write cut short by the end of
//! the run is still there, as unknown), the timeline, the error log and the
//! progress counters. One mutex, never held across an `.await`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::Progress;
use crate::errlog::ErrorLog;
use crate::key::EventKey;
use crate::ledger::{Ledger, LedgerEntry, Outcome, RowState, WriteError, WriteOp};
use crate::timeline::{OpKind, OpResult, Timeline};

/// The outcome given to writes still running when the run ends.
const CUT_SHORT: &str = "the load ended before the outcome was known";

/// A write entered in the ledger and not finished yet.
#[derive(Debug)]
pub(super) struct Ticket(usize);

/// A write about to run.
pub(super) struct PlannedWrite {
    pub key: EventKey,
    pub op: WriteOp,
    pub after: Option<RowState>,
    pub writer: u32,
    pub replica_role: bool,
    pub started: Duration,
}

/// Everything the recorder hands over at the end of a run.
pub(super) struct Recorded {
    pub ledger: Ledger,
    pub timeline: Timeline,
    pub errors: ErrorLog,
    pub reconnects: u64,
    pub keyset_anomalies: u64,
}

#[derive(Default)]
struct Counters {
    acknowledged: AtomicU64,
    skipped: AtomicU64,
    refused: AtomicU64,
    unknown: AtomicU64,
    reads: AtomicU64,
    read_failures: AtomicU64,
}

struct State {
    entries: Vec<LedgerEntry>,
    timeline: Timeline,
    errors: ErrorLog,
    reconnects: u64,
    keyset_anomalies: u64,
}

/// The shared recorder of a run.
pub(super) struct Recorder {
    start: Instant,
    state: Mutex<State>,
    counters: Counters,
}

impl Recorder {
    /// A recorder for a run that started at `start`.
    pub fn new(start: Instant, max_error_samples: usize) -> Self {
        Recorder {
            start,
            state: Mutex::new(State {
                entries: Vec::new(),
                timeline: Timeline::default(),
                errors: ErrorLog::new(max_error_samples),
                reconnects: 0,
                keyset_anomalies: 0,
            }),
            counters: Counters::default(),
        }
    }

    /// Time since the start of the run.
    pub fn offset(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.start)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panicking worker cannot leave the state half-updated in a way that
        // matters more than losing the whole report would.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enters a write in the ledger, as unknown until [`Recorder::finish_write`].
    pub fn begin_write(&self, write: PlannedWrite) -> Ticket {
        let mut state = self.state();
        state.entries.push(LedgerEntry {
            key: write.key,
            op: write.op,
            after: write.after,
            outcome: Outcome::Unknown {
                reason: CUT_SHORT.to_owned(),
            },
            writer: write.writer,
            replica_role: write.replica_role,
            started: write.started,
            finished: None,
        });
        Ticket(state.entries.len() - 1)
    }

    /// Records the outcome of a write that took `latency`.
    pub fn finish_write(&self, ticket: Ticket, outcome: Outcome, latency: Duration) {
        let (counter, result) = match &outcome {
            Outcome::Acknowledged => (&self.counters.acknowledged, OpResult::Acknowledged),
            Outcome::Skipped { .. } => (&self.counters.skipped, OpResult::Skipped),
            Outcome::Refused(_) => (&self.counters.refused, OpResult::Refused),
            Outcome::Unknown { .. } => (&self.counters.unknown, OpResult::Unknown),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut state = self.state();
        let State {
            entries,
            timeline,
            errors,
            ..
        } = &mut *state;
        let Some(entry) = entries.get_mut(ticket.0) else {
            return;
        };
        let kind = OpKind::from(entry.op);
        timeline.record(kind, entry.started, latency, result);
        match &outcome {
            Outcome::Refused(error) => errors.record(Some(kind), error, entry.started + latency),
            Outcome::Unknown { reason } => errors.record(
                Some(kind),
                &WriteError {
                    sqlstate: None,
                    message: reason.clone(),
                },
                entry.started + latency,
            ),
            Outcome::Acknowledged | Outcome::Skipped { .. } => {}
        }
        entry.finished = Some(entry.started + latency);
        entry.outcome = outcome;
    }

    /// Records one page read that started `started` into the run.
    pub fn record_read(&self, started: Duration, latency: Duration, error: Option<WriteError>) {
        let result = match &error {
            None => {
                self.counters.reads.fetch_add(1, Ordering::Relaxed);
                OpResult::Acknowledged
            }
            Some(_) => {
                self.counters.read_failures.fetch_add(1, Ordering::Relaxed);
                OpResult::Refused
            }
        };
        let mut state = self.state();
        state
            .timeline
            .record(OpKind::Read, started, latency, result);
        if let Some(error) = error {
            state
                .errors
                .record(Some(OpKind::Read), &error, started + latency);
        }
    }

    /// Records a claimed writer slot: `skipped` older slots, started `delay`
    /// after it was due.
    pub fn note_schedule(&self, at: Duration, skipped: u64, delay: Duration) {
        self.state().timeline.note_schedule(at, skipped, delay);
    }

    /// Counts a failed connection attempt.
    pub fn note_connect_failure(&self, error: &WriteError, at: Duration) {
        self.state().errors.record(None, error, at);
    }

    /// Counts a connection made again after one was lost.
    pub fn note_reconnect(&self) {
        self.state().reconnects += 1;
    }

    /// Counts a keyset page whose rows were out of order or not after the
    /// cursor.
    pub fn note_keyset_anomaly(&self) {
        self.state().keyset_anomalies += 1;
    }

    /// The counters so far.
    pub fn progress(&self) -> Progress {
        let c = &self.counters;
        Progress {
            acknowledged: c.acknowledged.load(Ordering::Relaxed),
            skipped: c.skipped.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            unknown: c.unknown.load(Ordering::Relaxed),
            reads: c.reads.load(Ordering::Relaxed),
            read_failures: c.read_failures.load(Ordering::Relaxed),
        }
    }

    /// Takes everything recorded; writes still running count as unknown, with
    /// the time up to `elapsed` as their latency.
    pub fn take(&self, elapsed: Duration) -> Recorded {
        let mut state = self.state();
        let mut entries = std::mem::take(&mut state.entries);
        let mut timeline = std::mem::take(&mut state.timeline);
        let mut errors = std::mem::replace(&mut state.errors, ErrorLog::new(0));
        for entry in entries.iter_mut().filter(|e| e.finished.is_none()) {
            let latency = elapsed.saturating_sub(entry.started);
            let kind = OpKind::from(entry.op);
            timeline.record(kind, entry.started, latency, OpResult::Unknown);
            errors.record(
                Some(kind),
                &WriteError {
                    sqlstate: None,
                    message: CUT_SHORT.to_owned(),
                },
                elapsed,
            );
        }
        timeline.pad_to(elapsed);
        let mut ledger = Ledger::new();
        for entry in entries {
            ledger.push(entry);
        }
        Recorded {
            ledger,
            timeline,
            errors,
            reconnects: state.reconnects,
            keyset_anomalies: state.keyset_anomalies,
        }
    }
}
