//! The throttle's decision: from one reading of every signal and the user's limits, how
//! the work may go on. Pure, so that every rule is tested without a server.
//!
//! Fail closed (INV: OC-5): a signal that could not be read pauses the work, as does an
//! operator's pause; a signal at or over its limit pauses it; one over half its limit
//! slows it (a pause between chunks and fewer workers, growing with the signal); below
//! half of every limit the work runs at full speed. Once paused, the work stays paused
//! until every signal is back under [`RESUME_BELOW`] of its limit, so that it does not
//! flap at the limit.
//!
//! The writer slowdown is a ratio to a baseline (at least
//! [`SLOWDOWN_FLOOR_MS`]), 1.0 when nothing changed: its share of
//! its limit is how far it is over 1 against how far the limit is (a limit of 2.0× is
//! half reached at 1.5×). A baseline that was not measured is a signal not read. While
//! no session of the application is at work the slowdown decides nothing: there is no
//! writer to protect, and the probe measures the run competing with itself.

use serde::{Deserialize, Serialize};

use super::signals::SLOWDOWN_FLOOR_MS;

/// The limits a user sets (`--max-replica-lag`, `--max-writer-p99`,
/// `--max-writer-slowdown`, `--max-wal-rate`); `None` turns a signal off: it is still
/// read and recorded where it can be, but it decides nothing (and one that cannot be
/// read pauses nothing).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThrottleLimits {
    /// The most replay lag of any standby, in milliseconds.
    pub max_replica_lag_ms: Option<u64>,
    /// The most 99th-percentile commit latency of the engine's probe, in milliseconds.
    pub max_writer_p99_ms: Option<u64>,
    /// The most the probe's recent commit latency may be over its baseline, measured
    /// before the work started (a ratio of 95th percentiles; 2.0 is twice as slow).
    /// Absent from the options of runs recorded before it existed: off.
    #[serde(default)]
    pub max_writer_slowdown: Option<f64>,
    /// The most WAL written per second, in bytes.
    pub max_wal_bytes_per_s: Option<u64>,
    /// How often the signals are read, in milliseconds.
    pub interval_ms: u64,
}

/// Defaults: standbys at most 10 s behind, probe commits at most 50 ms at the 99th
/// percentile and at most [`DEFAULT_WRITER_SLOWDOWN`] times slower than before the
/// work, no WAL rate limit (the rate a disk and its standbys absorb is the machine's;
/// replica lag is what shows it is too much).
pub const DEFAULT_LIMITS: ThrottleLimits = ThrottleLimits {
    max_replica_lag_ms: Some(10_000),
    max_writer_p99_ms: Some(50),
    max_writer_slowdown: Some(DEFAULT_WRITER_SLOWDOWN),
    max_wal_bytes_per_s: None,
    interval_ms: 500,
};

/// The default `--max-writer-slowdown`.
pub const DEFAULT_WRITER_SLOWDOWN: f64 = 2.0;

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
    /// The probe's recent latency over its baseline.
    pub writer_slowdown: Result<Slowdown, String>,
    /// WAL bytes per second over the recent window.
    pub wal_bytes_per_s: Reading,
    /// Whether an operator paused the run (`pgshift throttle TABLE --pause`); an
    /// error when the run record could not be read.
    pub operator_paused: Result<bool, String>,
}

/// The writer slowdown as read: the probe's recent 95th percentile over the same
/// percentile of its baseline, a baseline under [`SLOWDOWN_FLOOR_MS`] counted as that.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slowdown {
    /// Recent over baseline (1.0: no slower).
    pub ratio: f64,
    /// The baseline's 95th percentile, ms.
    pub baseline_ms: f64,
    /// The application's client sessions at work when read
    /// ([`super::signals::application_sessions`]); with none, the slowdown decides
    /// nothing.
    pub application_sessions: usize,
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

/// One signal as `decide` weighs it.
struct Signal {
    what: String,
    reading: Reading,
    limit: Option<f64>,
    scale: Scale,
}

/// How a signal's value compares with its limit.
#[derive(Clone, Copy)]
enum Scale {
    /// A quantity in this unit, 0 when idle.
    Absolute(&'static str),
    /// A ratio to a baseline (of this many ms), 1.0 when unchanged.
    OverBaseline(f64),
}

impl Scale {
    /// How much of its limit `value` is (1.0: at the limit).
    fn share(self, value: f64, limit: f64) -> f64 {
        let (value, limit) = match self {
            Scale::Absolute(_) => (value, limit),
            Scale::OverBaseline(_) => (value - 1.0, limit - 1.0),
        };
        if limit <= 0.0 {
            // A limit of nothing at all: reached by anything.
            if value > 0.0 {
                f64::INFINITY
            } else {
                0.0
            }
        } else {
            value.max(0.0) / limit
        }
    }

    /// The reason a decision gives for this signal.
    fn text(self, what: &str, value: f64, limit: f64) -> String {
        match self {
            Scale::Absolute(unit) => format!("{what} {value:.0} {unit} (limit {limit:.0} {unit})"),
            Scale::OverBaseline(baseline_ms) if baseline_ms < SLOWDOWN_FLOOR_MS => format!(
                "{what} {value:.1}× over the baseline {baseline_ms:.2} ms, counted as {SLOWDOWN_FLOOR_MS:.0} ms (limit {limit:.1}×)"
            ),
            Scale::OverBaseline(baseline_ms) => format!(
                "{what} {value:.1}× over the baseline {baseline_ms:.2} ms (limit {limit:.1}×)"
            ),
        }
    }
}

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
    let lag = limits.max_replica_lag_ms.map(|l| l as f64);
    let mut signals: Vec<Signal> = readings
        .replica_lag_ms
        .iter()
        .map(|(name, reading)| Signal {
            what: format!("replay lag of standby {name:?}"),
            reading: reading.clone(),
            limit: lag,
            scale: Scale::Absolute("ms"),
        })
        .collect();
    signals.push(Signal {
        what: "writer p99 (probe)".to_owned(),
        reading: readings.writer_p99_ms.clone(),
        limit: limits.max_writer_p99_ms.map(|l| l as f64),
        scale: Scale::Absolute("ms"),
    });
    let (slowdown, baseline_ms, writers) = match &readings.writer_slowdown {
        Ok(s) => (Ok(s.ratio), s.baseline_ms, s.application_sessions > 0),
        Err(e) => (Err(e.clone()), 0.0, true),
    };
    signals.push(Signal {
        what: "writer slowdown".to_owned(),
        reading: slowdown,
        limit: limits.max_writer_slowdown.filter(|_| writers),
        scale: Scale::OverBaseline(baseline_ms),
    });
    signals.push(Signal {
        what: "WAL rate".to_owned(),
        reading: readings.wal_bytes_per_s.clone(),
        limit: limits.max_wal_bytes_per_s.map(|l| l as f64),
        scale: Scale::Absolute("B/s"),
    });
    let mut worst: Option<(f64, String)> = None;
    for signal in signals {
        // A limit turned off is the user's choice not to consult the signal.
        let Some(limit) = signal.limit else { continue };
        let value = match signal.reading {
            Ok(value) => value,
            // INV: OC-5 — a signal that cannot be read pauses the work.
            Err(e) => {
                return (
                    Pace::Paused,
                    format!("cannot read the {}: {e}", signal.what),
                )
            }
        };
        let share = signal.scale.share(value, limit);
        if worst.as_ref().is_none_or(|(r, _)| share > *r) {
            worst = Some((share, signal.scale.text(&signal.what, value, limit)));
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
            writer_slowdown: Ok(Slowdown {
                ratio: 1.0,
                baseline_ms: 1.0,
                application_sessions: 1,
            }),
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

    fn slowed(ratio: f64) -> Readings {
        Readings {
            writer_slowdown: Ok(Slowdown {
                ratio,
                baseline_ms: 0.6,
                application_sessions: 3,
            }),
            ..readings(Ok(0.0), Ok(1.0))
        }
    }

    #[test]
    fn a_writer_slowdown_at_its_limit_pauses_and_says_over_what_baseline() {
        // 2.4× is 70 % of the way from 1 to 3×: slowed, not paused.
        let lenient = ThrottleLimits {
            max_writer_slowdown: Some(3.0),
            ..DEFAULT_LIMITS
        };
        let (pace, why) = decide(&slowed(2.4), &lenient, 4, false);
        assert!(matches!(pace, Pace::Slow { .. }), "{pace:?}: {why}");
        // The default, 2×.
        let limits = DEFAULT_LIMITS;
        assert_eq!(limits.max_writer_slowdown, Some(2.0));
        let (pace, why) = decide(&slowed(2.4), &limits, 4, false);
        assert_eq!(pace, Pace::Paused);
        assert_eq!(
            why,
            "writer slowdown 2.4× over the baseline 0.60 ms, counted as 1 ms (limit 2.0×)"
        );
        // Paused at 1.9× (90 % of the way from 1 to 2) until under 80 % of it.
        assert_eq!(decide(&slowed(1.9), &limits, 4, true).0, Pace::Paused);
        assert!(matches!(
            decide(&slowed(1.7), &limits, 4, true).0,
            Pace::Slow { .. }
        ));
    }

    #[test]
    fn a_writer_slowdown_is_weighed_by_its_excess_over_one() {
        let limits = ThrottleLimits {
            max_writer_slowdown: Some(2.0),
            ..DEFAULT_LIMITS
        };
        let at = |ratio: f64| decide(&slowed(ratio), &limits, 4, false).0;
        // No slower than before, and faster than before: open.
        assert_eq!(at(1.0), Pace::Open);
        assert_eq!(at(0.5), Pace::Open);
        assert_eq!(at(1.4), Pace::Open);
        // Half of the way to the limit slows, growing toward it.
        assert_eq!(
            at(1.5),
            Pace::Slow {
                pause_ms: 0,
                workers: 4
            }
        );
        assert_eq!(
            at(1.75),
            Pace::Slow {
                pause_ms: 500,
                workers: 2
            }
        );
        assert_eq!(at(2.0), Pace::Paused);
        // A limit of 1.0× (no slowdown at all) is reached by any slowdown.
        let none = ThrottleLimits {
            max_writer_slowdown: Some(1.0),
            ..DEFAULT_LIMITS
        };
        assert_eq!(decide(&slowed(1.01), &none, 4, false).0, Pace::Paused);
        assert_eq!(decide(&slowed(1.0), &none, 4, false).0, Pace::Open);
    }

    #[test]
    fn a_writer_slowdown_with_no_application_session_at_work_decides_nothing() {
        let mut r = slowed(9.0);
        assert_eq!(decide(&r, &DEFAULT_LIMITS, 4, false).0, Pace::Paused);
        if let Ok(s) = &mut r.writer_slowdown {
            s.application_sessions = 0;
        }
        let (pace, why) = decide(&r, &DEFAULT_LIMITS, 4, false);
        assert_eq!(pace, Pace::Open, "{why}");
        // The other signals still decide.
        r.writer_p99_ms = Ok(60.0);
        assert_eq!(decide(&r, &DEFAULT_LIMITS, 4, false).0, Pace::Paused);
    }

    #[test]
    fn inv_oc_5_an_unmeasured_writer_baseline_pauses_unless_the_limit_is_off() {
        let mut r = readings(Ok(0.0), Ok(1.0));
        r.writer_slowdown = Err("the writers' baseline is not measured yet".to_owned());
        let (pace, why) = decide(&r, &DEFAULT_LIMITS, 4, false);
        assert_eq!(pace, Pace::Paused);
        assert!(
            why.starts_with("cannot read the writer slowdown: the writers' baseline"),
            "{why}"
        );
        let off = ThrottleLimits {
            max_writer_slowdown: None,
            ..DEFAULT_LIMITS
        };
        assert_eq!(decide(&r, &off, 4, false).0, Pace::Open);
    }
}
