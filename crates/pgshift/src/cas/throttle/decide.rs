//! The throttle's decision: from one reading of every signal and the user's limits, how
//! the work may go on. Pure, so that every rule is tested without a server.
//!
//! Fail closed (INV: OC-5): a signal that could not be read pauses the work, as does an
//! operator's pause; a signal at or over its limit pauses it; one over half its limit
//! slows it (a pause between chunks and fewer workers, growing with the signal); below
//! half of every limit the work runs at full speed. Once paused, the work stays paused
//! until every signal is back under [`RESUME_BELOW`] of its limit, so that it does not
//! flap at the limit.

use serde::{Deserialize, Serialize};

/// The limits a user sets (`--max-replica-lag`, `--max-writer-p99`, `--max-wal-rate`);
/// `None` turns a signal off: it is still read and recorded where it can be, but it
/// decides nothing (and one that cannot be read pauses nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleLimits {
    /// The most replay lag of any standby, in milliseconds.
    pub max_replica_lag_ms: Option<u64>,
    /// The most 99th-percentile commit latency of the engine's probe, in milliseconds.
    pub max_writer_p99_ms: Option<u64>,
    /// The most WAL written per second, in bytes.
    pub max_wal_bytes_per_s: Option<u64>,
    /// How often the signals are read, in milliseconds.
    pub interval_ms: u64,
}

/// Defaults: standbys at most 10 s behind, probe commits at most 50 ms at the 99th
/// percentile, no WAL rate limit (the rate a disk and its standbys absorb is the
/// machine's; replica lag is what shows it is too much).
pub const DEFAULT_LIMITS: ThrottleLimits = ThrottleLimits {
    max_replica_lag_ms: Some(10_000),
    max_writer_p99_ms: Some(50),
    max_wal_bytes_per_s: None,
    interval_ms: 500,
};

impl Default for ThrottleLimits {
    fn default() -> Self {
        DEFAULT_LIMITS
    }
}

/// One signal as read: a value, or why it could not be read.
pub type Reading = Result<f64, String>;

/// Every signal read once.
#[derive(Clone, Debug, PartialEq)]
pub struct Readings {
    /// Replay lag of each standby (`application_name`, milliseconds).
    pub replica_lag_ms: Vec<(String, Reading)>,
    /// The probe's 99th-percentile commit latency over the recent window (ms).
    pub writer_p99_ms: Reading,
    /// WAL bytes per second over the recent window.
    pub wal_bytes_per_s: Reading,
    /// Whether an operator paused the run (`pgshift throttle TABLE --pause`); an
    /// error when the run record could not be read.
    pub operator_paused: Result<bool, String>,
}

/// How the work may go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "pace")]
pub enum Pace {
    /// Full speed.
    Open,
    /// Slowed: each worker waits `pause_ms` before each chunk, and only the first
    /// `workers` workers work.
    Slow {
        /// Pause before each chunk.
        pause_ms: u64,
        /// Workers allowed to work.
        workers: usize,
    },
    /// No new chunk starts.
    Paused,
}

impl Pace {
    /// `open`, `slow` or `paused`.
    pub fn name(self) -> &'static str {
        match self {
            Pace::Open => "open",
            Pace::Slow { .. } => "slow",
            Pace::Paused => "paused",
        }
    }
}

/// A paused run resumes once every signal is under this share of its limit.
pub const RESUME_BELOW: f64 = 0.8;
/// A signal over this share of its limit slows the work.
pub const SLOW_FROM: f64 = 0.5;
/// The longest pause before a chunk when slowed (at the limit), in milliseconds.
pub const MAX_PAUSE_MS: f64 = 1_000.0;

/// What the readings allow, and why (empty when open).
pub fn decide(
    readings: &Readings,
    limits: &ThrottleLimits,
    workers: usize,
    was_paused: bool,
) -> (Pace, String) {
    match &readings.operator_paused {
        Ok(true) => {
            return (
                Pace::Paused,
                "paused by an operator (pgshift throttle --resume resumes it)".to_owned(),
            )
        }
        Ok(false) => {}
        // INV: OC-5 — the operator's pause cannot be read: paused.
        Err(e) => return (Pace::Paused, format!("cannot read the run record: {e}")),
    }
    let mut signals: Vec<(String, &Reading, Option<u64>, &str)> = readings
        .replica_lag_ms
        .iter()
        .map(|(name, reading)| {
            (
                format!("replay lag of standby {name:?}"),
                reading,
                limits.max_replica_lag_ms,
                "ms",
            )
        })
        .collect();
    signals.push((
        "writer p99 (probe)".to_owned(),
        &readings.writer_p99_ms,
        limits.max_writer_p99_ms,
        "ms",
    ));
    signals.push((
        "WAL rate".to_owned(),
        &readings.wal_bytes_per_s,
        limits.max_wal_bytes_per_s,
        "B/s",
    ));
    let mut worst: Option<(f64, String)> = None;
    for (what, reading, limit, unit) in signals {
        // A limit turned off is the user's choice not to consult the signal.
        let Some(limit) = limit else { continue };
        let value = match reading {
            Ok(value) => *value,
            // INV: OC-5 — a signal that cannot be read pauses the work.
            Err(e) => return (Pace::Paused, format!("cannot read the {what}: {e}")),
        };
        let ratio = if limit == 0 {
            f64::INFINITY
        } else {
            value / limit as f64
        };
        if worst.as_ref().is_none_or(|(r, _)| ratio > *r) {
            worst = Some((
                ratio,
                format!("{what} {value:.0} {unit} (limit {limit} {unit})"),
            ));
        }
    }
    let Some((ratio, why)) = worst else {
        return (Pace::Open, String::new());
    };
    if ratio >= 1.0 || (was_paused && ratio >= RESUME_BELOW) {
        return (Pace::Paused, why);
    }
    if ratio >= SLOW_FROM {
        // 0 at half the limit, 1 at the limit.
        let over = ((ratio - SLOW_FROM) / (1.0 - SLOW_FROM)).clamp(0.0, 1.0);
        let pause_ms = (over * MAX_PAUSE_MS).round() as u64;
        let allowed = ((workers as f64) * (1.0 - over)).ceil() as usize;
        return (
            Pace::Slow {
                pause_ms,
                workers: allowed.clamp(1, workers.max(1)),
            },
            why,
        );
    }
    (Pace::Open, String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(lag: Reading, p99: Reading) -> Readings {
        Readings {
            replica_lag_ms: vec![("standby1".to_owned(), lag)],
            writer_p99_ms: p99,
            wal_bytes_per_s: Ok(1_000.0),
            operator_paused: Ok(false),
        }
    }

    #[test]
    fn under_half_of_every_limit_is_open() {
        let (pace, why) = decide(&readings(Ok(100.0), Ok(5.0)), &DEFAULT_LIMITS, 4, false);
        assert_eq!(pace, Pace::Open);
        assert!(why.is_empty());
    }

    #[test]
    fn an_unreadable_signal_pauses_whatever_the_others_say() {
        let (pace, why) = decide(
            &readings(Ok(0.0), Err("permission denied".to_owned())),
            &DEFAULT_LIMITS,
            4,
            false,
        );
        assert_eq!(pace, Pace::Paused);
        assert!(why.contains("cannot read the writer p99"), "{why}");
        let (pace, why) = decide(
            &readings(Err("hidden".to_owned()), Ok(1.0)),
            &DEFAULT_LIMITS,
            4,
            false,
        );
        assert_eq!(pace, Pace::Paused);
        assert!(why.contains("standby1"), "{why}");
        // A limit turned off is not consulted: its signal unread changes nothing.
        let limits = ThrottleLimits {
            max_replica_lag_ms: None,
            ..DEFAULT_LIMITS
        };
        let (pace, _) = decide(
            &readings(Err("hidden".to_owned()), Ok(1.0)),
            &limits,
            4,
            false,
        );
        assert_eq!(pace, Pace::Open);
        let mut r = readings(Ok(0.0), Ok(0.0));
        r.operator_paused = Err("gone".to_owned());
        assert_eq!(decide(&r, &DEFAULT_LIMITS, 4, false).0, Pace::Paused);
    }

    #[test]
    fn over_a_limit_pauses_and_stays_paused_until_well_under() {
        let (pace, why) = decide(&readings(Ok(12_000.0), Ok(1.0)), &DEFAULT_LIMITS, 2, false);
        assert_eq!(pace, Pace::Paused);
        assert!(why.contains("standby1") && why.contains("12000"), "{why}");
        // 90 % of the limit: slow when running, still paused when paused.
        let r = readings(Ok(9_000.0), Ok(1.0));
        assert!(matches!(
            decide(&r, &DEFAULT_LIMITS, 2, false).0,
            Pace::Slow { .. }
        ));
        assert_eq!(decide(&r, &DEFAULT_LIMITS, 2, true).0, Pace::Paused);
        let r = readings(Ok(7_000.0), Ok(1.0));
        assert!(matches!(
            decide(&r, &DEFAULT_LIMITS, 2, true).0,
            Pace::Slow { .. }
        ));
    }

    #[test]
    fn slowing_grows_with_the_signal() {
        let at = |lag: f64| decide(&readings(Ok(lag), Ok(1.0)), &DEFAULT_LIMITS, 4, false).0;
        assert_eq!(
            at(5_000.0),
            Pace::Slow {
                pause_ms: 0,
                workers: 4
            }
        );
        assert_eq!(
            at(7_500.0),
            Pace::Slow {
                pause_ms: 500,
                workers: 2
            }
        );
        assert_eq!(
            at(9_999.0),
            Pace::Slow {
                pause_ms: 1_000,
                workers: 1
            }
        );
    }

    #[test]
    fn an_operator_pause_wins() {
        let mut r = readings(Ok(0.0), Ok(0.0));
        r.operator_paused = Ok(true);
        assert_eq!(decide(&r, &DEFAULT_LIMITS, 4, false).0, Pace::Paused);
    }
}
