//! Statistics of a load run for the benchmarks and the demo: writer latency
//! and throughput per second and over windows of seconds (before, during,
//! around a cutover), exact counts of long waits from the ledger, ratios, and
//! the trend of a sampled series (is a backlog growing?).
//!
//! Everything here is pure: it reads a [`Timeline`] or a [`Ledger`] and
//! returns plain numbers, so it is unit-tested without a database.

use std::ops::Range;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::ledger::{Ledger, Outcome};
use crate::timeline::{OpKind, Timeline};

/// The kinds of operation that are writes (every kind but reads).
pub const WRITE_KINDS: [OpKind; 5] = [
    OpKind::Insert,
    OpKind::StaleInsert,
    OpKind::SoftDelete,
    OpKind::HardDelete,
    OpKind::Replay,
];

/// The writes of one second of a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondPoint {
    /// Seconds since the start of the run.
    pub second: u64,
    /// Writes started in this second (whatever their outcome).
    pub writes: u64,
    /// Of which acknowledged.
    pub acknowledged: u64,
    /// Of which refused, skipped or with an unknown outcome.
    pub failed: u64,
    /// Writer slots of the schedule skipped because every writer was busy.
    pub missed_slots: u64,
    /// Median write latency, microseconds (0 without writes).
    pub p50_us: u64,
    /// 99th percentile, microseconds.
    pub p99_us: u64,
    /// Largest, microseconds.
    pub max_us: u64,
}

/// The writes of a window of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Start of the window, seconds since the start of the run.
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// Writes started in the window.
    pub writes: u64,
    /// Of which acknowledged.
    pub acknowledged: u64,
    /// Of which not acknowledged.
    pub failed: u64,
    /// Writer slots skipped (writes the schedule wanted and no writer could
    /// start: every writer was waiting).
    pub missed_slots: u64,
    /// Acknowledged writes per second over the window.
    pub acknowledged_per_s: f64,
    /// Median latency, microseconds.
    pub p50_us: u64,
    /// 99th percentile, microseconds.
    pub p99_us: u64,
    /// Largest latency, microseconds.
    pub max_us: u64,
}

/// Latency of the writes of one second, all write kinds merged (`None`
/// without writes).
fn second_histogram(timeline: &Timeline, index: usize) -> Option<Histogram<u64>> {
    let second = timeline.seconds().get(index)?;
    let mut merged: Option<Histogram<u64>> = None;
    for kind in WRITE_KINDS {
        if let Some(stats) = second.ops.get(&kind) {
            match merged.as_mut() {
                None => merged = Some(stats.latency_us.clone()),
                Some(h) => {
                    // Both auto-resize, so adding cannot fail on range.
                    let _ = h.add(&stats.latency_us);
                }
            }
        }
    }
    merged
}

/// Counts of the writes of one second: (writes, acknowledged, failed).
fn second_counts(timeline: &Timeline, index: usize) -> (u64, u64, u64) {
    let Some(second) = timeline.seconds().get(index) else {
        return (0, 0, 0);
    };
    WRITE_KINDS
        .iter()
        .filter_map(|kind| second.ops.get(kind))
        .fold((0, 0, 0), |(w, a, f), s| {
            (w + s.total(), a + s.acknowledged, f + s.failed())
        })
}

/// One point per second of the run: writes, acknowledged, failed, missed
/// slots and latency quantiles.
pub fn write_series(timeline: &Timeline) -> Vec<SecondPoint> {
    (0..timeline.seconds().len())
        .map(|i| {
            let (writes, acknowledged, failed) = second_counts(timeline, i);
            let (p50_us, p99_us, max_us) = match second_histogram(timeline, i) {
                Some(h) if !h.is_empty() => {
                    (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max())
                }
                _ => (0, 0, 0),
            };
            SecondPoint {
                second: i as u64,
                writes,
                acknowledged,
                failed,
                missed_slots: timeline.seconds()[i].missed_slots,
                p50_us,
                p99_us,
                max_us,
            }
        })
        .collect()
}

/// The writes of the seconds in `seconds` (clamped to the run).
pub fn write_window(timeline: &Timeline, seconds: Range<usize>) -> WindowStats {
    let len = timeline.seconds().len();
    let range = seconds.start.min(len)..seconds.end.min(len).max(seconds.start.min(len));
    let mut merged: Option<Histogram<u64>> = None;
    let (mut writes, mut acknowledged, mut failed, mut missed) = (0, 0, 0, 0);
    for i in range.clone() {
        let (w, a, f) = second_counts(timeline, i);
        writes += w;
        acknowledged += a;
        failed += f;
        missed += timeline.seconds()[i].missed_slots;
        if let Some(h) = second_histogram(timeline, i) {
            match merged.as_mut() {
                None => merged = Some(h),
                Some(m) => {
                    let _ = m.add(&h);
                }
            }
        }
    }
    let (p50_us, p99_us, max_us) = match &merged {
        Some(h) if !h.is_empty() => (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max()),
        _ => (0, 0, 0),
    };
    let span = (seconds.end.saturating_sub(seconds.start)) as f64;
    WindowStats {
        from_s: seconds.start as f64,
        to_s: seconds.end as f64,
        writes,
        acknowledged,
        failed,
        missed_slots: missed,
        acknowledged_per_s: if span > 0.0 {
            acknowledged as f64 / span
        } else {
            0.0
        },
        p50_us,
        p99_us,
        max_us,
    }
}

/// The writes of the ledger that started within `[from, to)`, with exact
/// latencies (from each write's start and finish; a write cut short by the
/// end of the run counts until `run_end`). The skipped slots are those the
/// timeline noted in the seconds overlapping the window.
pub fn ledger_window(
    ledger: &Ledger,
    timeline: &Timeline,
    from: Duration,
    to: Duration,
    run_end: Duration,
) -> WindowStats {
    let mut latencies: Vec<u64> = Vec::new();
    let mut acknowledged = 0;
    for entry in ledger
        .entries()
        .iter()
        .filter(|e| e.started >= from && e.started < to)
    {
        let took = entry
            .finished
            .unwrap_or(run_end)
            .saturating_sub(entry.started);
        latencies.push(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
        if entry.outcome == Outcome::Acknowledged {
            acknowledged += 1;
        }
    }
    latencies.sort_unstable();
    let writes = latencies.len() as u64;
    let span = to.saturating_sub(from).as_secs_f64();
    let missed_slots = if to > from {
        let range = seconds_overlapping(from.as_secs_f64(), to.as_secs_f64());
        timeline
            .seconds()
            .iter()
            .skip(range.start)
            .take(range.end - range.start)
            .map(|s| s.missed_slots)
            .sum()
    } else {
        0
    };
    WindowStats {
        from_s: from.as_secs_f64(),
        to_s: to.as_secs_f64(),
        writes,
        acknowledged,
        failed: writes - acknowledged,
        missed_slots,
        acknowledged_per_s: if span > 0.0 {
            acknowledged as f64 / span
        } else {
            0.0
        },
        p50_us: nearest_rank(&latencies, 0.5),
        p99_us: nearest_rank(&latencies, 0.99),
        max_us: latencies.last().copied().unwrap_or(0),
    }
}

/// The nearest-rank `q` quantile of sorted `values` (0 when empty).
pub fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The whole seconds entirely before `t` seconds, from `from`: `from..floor(t)`.
pub fn seconds_before(from: usize, t: f64) -> Range<usize> {
    let end = t.max(0.0).floor() as usize;
    from.min(end)..end
}

/// The seconds that overlap `[from, to]`: `floor(from)..ceil(to)` (at least one).
pub fn seconds_overlapping(from: f64, to: f64) -> Range<usize> {
    let start = from.max(0.0).floor() as usize;
    let end = (to.max(from).max(0.0).ceil() as usize).max(start + 1);
    start..end
}

/// Writes of the ledger that started within `[from, to)` and took longer than
/// `limit` (a write still waiting when the run ended counts if it had already
/// waited longer than `limit` by `run_end`). Exact: from each write's start
/// and finish, not from a histogram.
pub fn writes_waiting_longer(
    ledger: &Ledger,
    from: Duration,
    to: Duration,
    limit: Duration,
    run_end: Duration,
) -> u64 {
    ledger
        .entries()
        .iter()
        .filter(|e| e.started >= from && e.started < to)
        .filter(|e| e.finished.unwrap_or(run_end).saturating_sub(e.started) > limit)
        .count() as u64
}

/// The longest write of the ledger that started within `[from, to)`.
pub fn longest_write(ledger: &Ledger, from: Duration, to: Duration, run_end: Duration) -> Duration {
    ledger
        .entries()
        .iter()
        .filter(|e| e.started >= from && e.started < to)
        .map(|e| e.finished.unwrap_or(run_end).saturating_sub(e.started))
        .max()
        .unwrap_or(Duration::ZERO)
}

/// The index of the median of `values` (of an even number, the higher of the two in
/// the middle: a round that is reported is always one that ran); `None` when empty.
pub fn upper_median_index(values: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order.get(order.len() / 2).copied()
}

/// `numerator / denominator`, `None` when the denominator is not positive or
/// either is not finite.
pub fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    if !(numerator.is_finite() && denominator.is_finite()) || denominator <= 0.0 {
        return None;
    }
    Some(numerator / denominator)
}

/// The least-squares slope of `points` (`(x, y)`), `None` with fewer than two
/// distinct x values.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx <= f64::EPSILON {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    Some(sxy / sxx)
}

/// Whether a sampled backlog reached a steady state, and the figures the
/// verdict rests on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// Samples considered (those before the cutover).
    pub samples: usize,
    /// Least-squares slope of the backlog over the second half of those
    /// samples, in entries per second.
    pub late_slope_per_s: Option<f64>,
    /// The growth allowed: `max_growth_share` of the write rate.
    pub allowed_slope_per_s: f64,
    /// Largest backlog in the first half of the samples.
    pub early_max: i64,
    /// Largest backlog in the second half.
    pub late_max: i64,
    /// The largest backlog, in seconds of writes at the measured rate.
    pub max_lag_s: f64,
    /// The verdict: the backlog did not keep growing.
    pub reached: bool,
}

/// Judges a backlog sampled as `(seconds, entries)` while writers ran at
/// `write_rate` per second: a steady state is reached when, over the second
/// half of the samples, the backlog grows by less than `max_growth_share` of
/// the write rate (the applier drains at least as fast as the writers fill,
/// give or take that share). With fewer than four samples there is nothing to
/// judge and the verdict is `false`.
pub fn steady_state(samples: &[(f64, i64)], write_rate: f64, max_growth_share: f64) -> SteadyState {
    let half = samples.len() / 2;
    let (early, late) = samples.split_at(half);
    let late_points: Vec<(f64, f64)> = late.iter().map(|(t, b)| (*t, *b as f64)).collect();
    let late_slope = slope(&late_points);
    let allowed = write_rate.max(0.0) * max_growth_share;
    let max_of = |s: &[(f64, i64)]| s.iter().map(|p| p.1).max().unwrap_or(0);
    let overall_max = max_of(samples);
    SteadyState {
        samples: samples.len(),
        late_slope_per_s: late_slope,
        allowed_slope_per_s: allowed,
        early_max: max_of(early),
        late_max: max_of(late),
        max_lag_s: ratio(overall_max as f64, write_rate).unwrap_or(0.0),
        reached: samples.len() >= 4 && late_slope.is_some_and(|s| s <= allowed),
    }
}

/// Microseconds as milliseconds.
pub fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{EventKey, PgUuid};
    use crate::ledger::{LedgerEntry, Outcome, RowState, WriteOp};
    use crate::timeline::OpResult;

    fn timeline() -> Timeline {
        let mut t = Timeline::default();
        // Second 0: 100 inserts of 1 ms, one of 9 ms; a read of 500 ms (ignored).
        for i in 0..100 {
            t.record(
                OpKind::Insert,
                Duration::from_millis(i * 9),
                Duration::from_millis(1),
                OpResult::Acknowledged,
            );
        }
        t.record(
            OpKind::SoftDelete,
            Duration::from_millis(950),
            Duration::from_millis(9),
            OpResult::Acknowledged,
        );
        t.record(
            OpKind::Read,
            Duration::from_millis(10),
            Duration::from_millis(500),
            OpResult::Acknowledged,
        );
        // Second 2: one insert that waited 3 s and was refused.
        t.record(
            OpKind::Insert,
            Duration::from_millis(2100),
            Duration::from_secs(3),
            OpResult::Refused,
        );
        t.note_schedule(Duration::from_millis(2500), 40, Duration::from_secs(1));
        t
    }

    #[test]
    fn the_series_has_a_point_per_second_with_writes_only() {
        let series = write_series(&timeline());
        assert_eq!(series.len(), 3);
        assert_eq!((series[0].writes, series[0].acknowledged), (101, 101));
        assert!((990..=1010).contains(&series[0].p50_us), "{:?}", series[0]);
        assert!((8900..=9100).contains(&series[0].max_us), "{:?}", series[0]);
        assert_eq!(series[1].writes, 0);
        assert_eq!((series[1].p50_us, series[1].max_us), (0, 0));
        assert_eq!((series[2].writes, series[2].failed), (1, 1));
        assert_eq!(series[2].missed_slots, 40);
        assert!(series[2].p99_us >= 2_970_000, "{:?}", series[2]);
    }

    #[test]
    fn windows_merge_seconds_and_clamp_to_the_run() {
        let t = timeline();
        let before = write_window(&t, 0..1);
        assert_eq!((before.writes, before.acknowledged), (101, 101));
        assert!((before.acknowledged_per_s - 101.0).abs() < 1e-9);
        assert!(before.p99_us < 10_000, "{before:?}");
        let all = write_window(&t, 0..10);
        assert_eq!((all.writes, all.failed, all.missed_slots), (102, 1, 40));
        assert!(all.max_us >= 2_970_000);
        assert!((all.acknowledged_per_s - 10.1).abs() < 1e-9, "{all:?}");
        let empty = write_window(&t, 5..8);
        assert_eq!((empty.writes, empty.p99_us), (0, 0));
    }

    #[test]
    fn second_ranges() {
        assert_eq!(seconds_before(2, 10.7), 2..10);
        assert_eq!(seconds_before(5, 3.0), 3..3);
        assert_eq!(seconds_overlapping(10.2, 11.5), 10..12);
        assert_eq!(seconds_overlapping(10.0, 10.0), 10..11);
        assert_eq!(seconds_overlapping(-1.0, 0.5), 0..1);
    }

    fn entry(started_ms: u64, took_ms: Option<u64>) -> LedgerEntry {
        LedgerEntry {
            key: EventKey {
                community_id: PgUuid([0; 16]),
                created_at_us: started_ms as i64,
                id: [1; 32],
            },
            op: WriteOp::Insert,
            after: Some(RowState::Absent),
            outcome: Outcome::Acknowledged,
            writer: 0,
            replica_role: false,
            started: Duration::from_millis(started_ms),
            finished: took_ms.map(|t| Duration::from_millis(started_ms + t)),
        }
    }

    #[test]
    fn long_waits_are_counted_exactly_from_the_ledger() {
        let mut ledger = Ledger::new();
        ledger.push(entry(100, Some(5)));
        ledger.push(entry(200, Some(1001)));
        ledger.push(entry(300, Some(1000)));
        ledger.push(entry(5000, Some(4000)));
        ledger.push(entry(6000, None)); // still waiting at the end (run_end 8 s)
        let s = Duration::from_secs;
        assert_eq!(writes_waiting_longer(&ledger, s(0), s(10), s(1), s(8)), 3);
        assert_eq!(writes_waiting_longer(&ledger, s(0), s(1), s(1), s(8)), 1);
        assert_eq!(longest_write(&ledger, s(0), s(10), s(8)), s(4));
        assert_eq!(longest_write(&ledger, s(20), s(30), s(8)), Duration::ZERO);
    }

    #[test]
    fn ledger_windows_are_exact() {
        let mut ledger = Ledger::new();
        for i in 0..99 {
            ledger.push(entry(1000 + i * 10, Some(2)));
        }
        ledger.push(entry(1500, Some(6000)));
        let mut refused = entry(2500, Some(1));
        refused.outcome = Outcome::Refused(crate::ledger::WriteError {
            sqlstate: Some("42804".to_owned()),
            message: "type of parameter".to_owned(),
        });
        ledger.push(refused);
        let t = timeline();
        let s = Duration::from_secs;
        let w = ledger_window(&ledger, &t, s(1), s(2), s(10));
        assert_eq!((w.writes, w.acknowledged, w.failed), (100, 100, 0));
        assert_eq!((w.p50_us, w.p99_us, w.max_us), (2000, 2000, 6_000_000));
        assert!((w.acknowledged_per_s - 100.0).abs() < 1e-9);
        let w = ledger_window(&ledger, &t, s(1), Duration::from_millis(2600), s(10));
        assert_eq!((w.writes, w.failed, w.missed_slots), (101, 1, 40));
        // Nearest rank: the 100th of 101 values, below the one 6 s wait.
        assert_eq!((w.p50_us, w.p99_us, w.max_us), (2000, 2000, 6_000_000));
        let empty = ledger_window(&ledger, &t, s(5), s(5), s(10));
        assert_eq!((empty.writes, empty.p99_us, empty.missed_slots), (0, 0, 0));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.5), 2);
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.99), 4);
        assert_eq!(nearest_rank(&[7], 0.0), 7);
    }

    #[test]
    fn ratio_and_slope() {
        assert_eq!(ratio(3.0, 2.0), Some(1.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        let line: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 * i as f64 + 1.0)).collect();
        assert!((slope(&line).unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 1.0)]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }

    #[test]
    fn a_flat_backlog_is_steady_and_a_growing_one_is_not() {
        let flat: Vec<(f64, i64)> = (0..40).map(|i| (i as f64, 100 + (i % 3) * 20)).collect();
        let verdict = steady_state(&flat, 400.0, 0.05);
        assert!(verdict.reached, "{verdict:?}");
        assert_eq!(verdict.samples, 40);
        assert!((verdict.allowed_slope_per_s - 20.0).abs() < 1e-9);
        assert!((verdict.max_lag_s - 0.35).abs() < 1e-9);

        let growing: Vec<(f64, i64)> = (0..40).map(|i| (i as f64, i * 100)).collect();
        let verdict = steady_state(&growing, 400.0, 0.05);
        assert!(!verdict.reached, "{verdict:?}");
        assert!(verdict.late_max > verdict.early_max);

        assert!(!steady_state(&flat[..3], 400.0, 0.05).reached);
    }
}
