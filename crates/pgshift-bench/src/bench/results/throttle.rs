//! The throttle's decisions during a pgshift run, as the benchmark keeps them:
//! the limits the run had, and the spans of the load's timeline during which the
//! throttle slowed or paused the work (drawn on the writers' latency chart).
//!
//! The engine records a decision at each change of pace and every few seconds
//! meanwhile (`RunReport::throttle`); [`ThrottleFigures::from_events`] turns them
//! into spans, each lasting from its decision to the next one (the last one to
//! the end of the paced work).

use pgshift::cas::{Pace, ThrottleEvent, ThrottleLimits};
use serde::{Deserialize, Serialize};

/// One stretch of the run at one pace other than open, for one signal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThrottleSpan {
    /// `slow` or `paused`.
    pub pace: String,
    /// The signal that decided it (`writer p99 (probe)`, …), without its values.
    pub signal: String,
    /// The first decision's reason, as the engine gave it.
    pub reason: String,
    /// When it started, seconds since the load started.
    pub start_s: f64,
    /// When it ended.
    pub end_s: f64,
}

impl ThrottleSpan {
    /// Its length, seconds.
    pub fn seconds(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }
}

/// The throttle of one pgshift run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThrottleFigures {
    /// The limits, in words (`writer p99 ≤ 50 ms, replica lag ≤ 10000 ms, WAL rate off`).
    pub limits: String,
    /// `--max-writer-p99` of the run, ms (`None`: off).
    pub max_writer_p99_ms: Option<u64>,
    /// `--max-writer-slowdown` of the run (`None`: off, or a run measured before it).
    #[serde(default)]
    pub max_writer_slowdown: Option<f64>,
    /// Decisions the engine recorded.
    pub decisions: usize,
    /// Time the engine kept the work paused, ms (its own count).
    pub paused_ms: u64,
    /// The largest p99 of the engine's probe in any decision, ms.
    pub probe_p99_max_ms: Option<f64>,
    /// The largest slowdown of the probe over its baseline in any decision.
    #[serde(default)]
    pub probe_slowdown_max: Option<f64>,
    /// The spans slowed or paused, in order.
    pub spans: Vec<ThrottleSpan>,
}

impl ThrottleFigures {
    /// The figures of a run with `limits` from its decisions: `t0_unix_ms` is when
    /// the load started (the spans' zero), `end_s` when the paced work ended.
    pub fn from_events(
        limits: &ThrottleLimits,
        events: &[ThrottleEvent],
        paused_ms: u64,
        t0_unix_ms: f64,
        end_s: f64,
    ) -> Self {
        let at = |e: &ThrottleEvent| (e.at_unix_ms as f64 - t0_unix_ms) / 1000.0;
        let mut spans: Vec<ThrottleSpan> = Vec::new();
        for (i, event) in events.iter().enumerate() {
            let start_s = at(event);
            let end = events.get(i + 1).map_or(end_s, at).max(start_s);
            if event.pace == Pace::Open {
                continue;
            }
            let pace = event.pace.name().to_owned();
            let signal = signal_of(&event.reason);
            match spans.last_mut() {
                // The same pace for the same signal, decision after decision: one span.
                Some(last)
                    if last.pace == pace
                        && last.signal == signal
                        && (last.end_s - start_s).abs() < 1e-9 =>
                {
                    last.end_s = end;
                }
                _ => spans.push(ThrottleSpan {
                    pace,
                    signal,
                    reason: event.reason.clone(),
                    start_s,
                    end_s: end,
                }),
            }
        }
        ThrottleFigures {
            limits: limits_text(limits),
            max_writer_p99_ms: limits.max_writer_p99_ms,
            max_writer_slowdown: limits.max_writer_slowdown,
            decisions: events.len(),
            paused_ms,
            probe_p99_max_ms: events
                .iter()
                .filter_map(|e| e.writer_p99_ms)
                .fold(None, |most: Option<f64>, v| {
                    Some(most.map_or(v, |m| m.max(v)))
                }),
            probe_slowdown_max: events
                .iter()
                .filter_map(|e| e.writer_slowdown)
                .fold(None, |most: Option<f64>, v| {
                    Some(most.map_or(v, |m| m.max(v)))
                }),
            spans,
        }
    }

    /// Seconds spent at `pace` (`slow`, `paused`) by the spans.
    pub fn seconds_at(&self, pace: &str) -> f64 {
        self.spans
            .iter()
            .filter(|s| s.pace == pace)
            .map(ThrottleSpan::seconds)
            .sum()
    }
}

/// The limits in words.
pub fn limits_text(limits: &ThrottleLimits) -> String {
    let limit = |what: &str, value: Option<u64>, unit: &str| match value {
        Some(v) => format!("{what} ≤ {v} {unit}"),
        None => format!("{what} off"),
    };
    [
        limit("writer p99", limits.max_writer_p99_ms, "ms"),
        match limits.max_writer_slowdown {
            Some(r) => format!("writer slowdown ≤ {r}×"),
            None => "writer slowdown off".to_owned(),
        },
        limit("replica lag", limits.max_replica_lag_ms, "ms"),
        limit("WAL rate", limits.max_wal_bytes_per_s, "B/s"),
    ]
    .join(", ")
}

/// The signal a reason is about: its words before the first number or colon
/// (`writer p99 (probe) 62 ms (limit 50 ms)` → `writer p99 (probe)`).
pub fn signal_of(reason: &str) -> String {
    let head = reason.split(':').next().unwrap_or(reason);
    let words: Vec<&str> = head
        .split_whitespace()
        .take_while(|w| !w.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    let signal = words.join(" ");
    if signal.is_empty() {
        "unknown".to_owned()
    } else {
        signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at_unix_ms: u64, pace: Pace, reason: &str, p99: f64) -> ThrottleEvent {
        ThrottleEvent {
            at_unix_ms,
            pace,
            reason: reason.to_owned(),
            replica_lag_ms: None,
            replica_lag_bytes: None,
            writer_p99_ms: Some(p99),
            writer_slowdown: None,
            writer_baseline_ms: None,
            application_sessions: None,
            wal_bytes_per_s: None,
        }
    }

    #[test]
    fn decisions_become_spans_merged_per_pace_and_signal() {
        let slow = Pace::Slow {
            pause_ms: 200,
            workers: 1,
        };
        let events = [
            event(100_000, Pace::Open, "", 2.0),
            event(101_000, slow, "writer p99 (probe) 3 ms (limit 5 ms)", 3.0),
            event(102_000, slow, "writer p99 (probe) 4 ms (limit 5 ms)", 4.0),
            event(
                103_500,
                Pace::Paused,
                "writer p99 (probe) 6 ms (limit 5 ms)",
                6.0,
            ),
            event(104_000, Pace::Open, "", 1.0),
            event(
                106_000,
                Pace::Paused,
                "cannot read the WAL rate: timeout",
                1.0,
            ),
        ];
        let limits = ThrottleLimits {
            max_writer_p99_ms: Some(5),
            ..ThrottleLimits::default()
        };
        // The load started at 90 s; the paced work ended at 16.5 s into it.
        let figures = ThrottleFigures::from_events(&limits, &events, 1_000, 90_000.0, 16.5);
        let spans: Vec<(&str, &str, f64, f64)> = figures
            .spans
            .iter()
            .map(|s| (s.pace.as_str(), s.signal.as_str(), s.start_s, s.end_s))
            .collect();
        assert_eq!(
            spans,
            vec![
                ("slow", "writer p99 (probe)", 11.0, 13.5),
                ("paused", "writer p99 (probe)", 13.5, 14.0),
                ("paused", "cannot read the WAL rate", 16.0, 16.5),
            ]
        );
        assert_eq!(figures.decisions, 6);
        assert_eq!(figures.probe_p99_max_ms, Some(6.0));
        assert!((figures.seconds_at("paused") - 1.0).abs() < 1e-9);
        assert!((figures.seconds_at("slow") - 2.5).abs() < 1e-9);
        assert_eq!(
            figures.limits,
            "writer p99 ≤ 5 ms, writer slowdown ≤ 2×, replica lag ≤ 10000 ms, WAL rate off"
        );
    }

    #[test]
    fn a_slowdown_reason_is_one_signal_whatever_its_figures() {
        assert_eq!(
            signal_of("writer slowdown 2.4× over the baseline 1.10 ms (limit 2.0×)"),
            "writer slowdown"
        );
        assert_eq!(
            signal_of("writer p99 (probe) 62 ms (limit 50 ms)"),
            "writer p99 (probe)"
        );
    }

    #[test]
    fn a_run_that_never_left_open_has_no_span() {
        let events = [event(5_000, Pace::Open, "", 1.0)];
        let figures =
            ThrottleFigures::from_events(&ThrottleLimits::default(), &events, 0, 0.0, 9.0);
        assert!(figures.spans.is_empty());
        assert_eq!(signal_of(""), "unknown");
    }
}
