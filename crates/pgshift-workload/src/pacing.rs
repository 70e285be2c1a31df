//! The shared token schedule that paces a group of workers (the writers, or
//! the readers) at a fixed total rate.
//!
//! Operation `k` of the run is due at `start + k / rate`; a worker claims the
//! next `k` from a shared counter and waits until its due time. Free workers
//! therefore keep the group on schedule whatever each one's latency is, and the
//! schedule never drifts as a sleep after every operation would. When the group
//! falls behind (the workers were all blocked), it may catch up by at most the
//! `catch_up` window: older slots are skipped and counted, so a stall shows as
//! missed operations rather than as a burst afterwards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The pace of a group of workers.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Pace {
    /// A fixed total rate, in operations per second.
    PerSecond(f64),
    /// As fast as the workers go (each starts its next operation at once).
    Unthrottled,
}

/// A claimed slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    /// When the operation is due.
    pub due: Instant,
    /// Slots skipped by this claim because they were older than the window.
    pub skipped: u64,
}

/// The shared schedule.
#[derive(Debug)]
pub(crate) struct Schedule {
    start: Instant,
    interval: Option<Duration>,
    catch_up_slots: u64,
    next: AtomicU64,
}

impl Schedule {
    /// A schedule starting at `start`. `pace` must be validated (a positive,
    /// finite rate).
    pub fn new(start: Instant, pace: Pace, catch_up: Duration) -> Self {
        let interval = match pace {
            Pace::PerSecond(rate) => Some(Duration::from_secs_f64(1.0 / rate)),
            Pace::Unthrottled => None,
        };
        let catch_up_slots = interval.map_or(0, |i| {
            (catch_up.as_nanos() / i.as_nanos().max(1)).min(u128::from(u64::MAX)) as u64
        });
        Schedule {
            start,
            interval,
            catch_up_slots,
            next: AtomicU64::new(0),
        }
    }

    /// Claims the next slot as of `now`.
    pub fn claim(&self, now: Instant) -> Claim {
        let Some(interval) = self.interval else {
            self.next.fetch_add(1, Ordering::Relaxed);
            return Claim {
                due: now,
                skipped: 0,
            };
        };
        let elapsed = now.saturating_duration_since(self.start);
        let current = (elapsed.as_nanos() / interval.as_nanos().max(1)) as u64;
        // Slots older than the window are skipped: move the counter up to it.
        let oldest = current.saturating_sub(self.catch_up_slots);
        let before = self.next.fetch_max(oldest, Ordering::Relaxed);
        let skipped = oldest.saturating_sub(before);
        let slot = self.next.fetch_add(1, Ordering::Relaxed);
        Claim {
            due: self.due(slot),
            skipped,
        }
    }

    fn due(&self, slot: u64) -> Instant {
        let nanos = self
            .interval
            .map_or(0, |i| i.as_nanos().saturating_mul(u128::from(slot)));
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.start + Duration::from_nanos(nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_spaced_by_the_rate_whoever_claims_them() {
        let start = Instant::now();
        let schedule = Schedule::new(start, Pace::PerSecond(100.0), Duration::from_secs(1));
        let dues: Vec<Duration> = (0..3).map(|_| schedule.claim(start).due - start).collect();
        assert_eq!(
            dues,
            vec![
                Duration::ZERO,
                Duration::from_millis(10),
                Duration::from_millis(20)
            ]
        );
    }

    #[test]
    fn a_stall_skips_slots_older_than_the_catch_up_window() {
        let start = Instant::now();
        let schedule = Schedule::new(start, Pace::PerSecond(100.0), Duration::from_millis(100));
        schedule.claim(start);
        // Five seconds later slot 500 is current and the window is 10 slots:
        // slots 1..490 are skipped.
        let claim = schedule.claim(start + Duration::from_secs(5));
        assert_eq!(claim.skipped, 489);
        assert_eq!(claim.due - start, Duration::from_millis(4900));
        // The next claims catch up from there, within the window.
        let next = schedule.claim(start + Duration::from_secs(5));
        assert_eq!(next.skipped, 0);
        assert_eq!(next.due - start, Duration::from_millis(4910));
    }

    #[test]
    fn unthrottled_slots_are_due_at_once() {
        let start = Instant::now();
        let schedule = Schedule::new(start, Pace::Unthrottled, Duration::from_secs(1));
        let now = start + Duration::from_millis(3);
        assert_eq!(
            schedule.claim(now),
            Claim {
                due: now,
                skipped: 0
            }
        );
    }
}
