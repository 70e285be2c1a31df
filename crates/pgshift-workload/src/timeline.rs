//! Per-second operation statistics of a load run: for every second since the
//! start and every kind of operation, the acknowledged / skipped / refused /
//! unknown counts and an HdrHistogram of latencies in microseconds, plus
//! whole-run totals. A chart of these shows the before / during / cutover /
//! after shape of a run.
//!
//! An operation is attributed to the second in which it *started*. The
//! histogram holds the latency of every operation that finished, whatever its
//! outcome (a write that waited 5 s for a lock and then failed waited 5 s).
//! Slots of the pacing schedule that were skipped because every worker was
//! busy are counted per second too, with the longest delay between an
//! operation's due time and its actual start: together they expose the
//! operations a stalled run never issued (coordinated omission).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Significant digits of the per-second histograms (1 % precision keeps each
/// one a few kilobytes).
const SECOND_SIGFIG: u8 = 2;
/// Significant digits of the whole-run histograms.
const TOTAL_SIGFIG: u8 = 3;

/// A kind of operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// An event insert.
    Insert,
    /// An insert with `created_at` older than the floor (refused at COMMIT by
    /// the floor guard, unless the writer runs as `replica`).
    StaleInsert,
    /// `UPDATE … SET deleted_at` of an earlier acknowledged row.
    SoftDelete,
    /// `DELETE` of an earlier acknowledged row.
    HardDelete,
    /// An exact replay of an acknowledged replaceable event (the replay
    /// skipper makes it affect 0 rows).
    Replay,
    /// One keyset page of a channel window.
    Read,
}

/// How an operation ended, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// Committed with the expected row count (for reads: rows returned).
    Acknowledged,
    /// Committed with an unexpected row count.
    Skipped,
    /// Failed with an error the client saw.
    Refused,
    /// The outcome is unknown (the connection was lost during COMMIT).
    Unknown,
}

/// Counts and latencies of one kind of operation over some interval.
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Operations acknowledged.
    pub acknowledged: u64,
    /// Operations committed with an unexpected row count.
    pub skipped: u64,
    /// Operations refused with an error.
    pub refused: u64,
    /// Operations whose outcome is unknown.
    pub unknown: u64,
    /// Latencies in microseconds.
    pub latency_us: Histogram<u64>,
}

impl OpStats {
    fn new(sigfig: u8) -> Self {
        OpStats {
            acknowledged: 0,
            skipped: 0,
            refused: 0,
            unknown: 0,
            // Auto-resizing: it grows to the largest value recorded.
            latency_us: Histogram::new(sigfig).expect("sigfig is within hdrhistogram's 0..=5"),
        }
    }

    fn record(&mut self, latency: Duration, result: OpResult) {
        match result {
            OpResult::Acknowledged => self.acknowledged += 1,
            OpResult::Skipped => self.skipped += 1,
            OpResult::Refused => self.refused += 1,
            OpResult::Unknown => self.unknown += 1,
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        // `record` grows the auto-resizing histogram to hold the value;
        // `saturating_record` would clamp it to the current (initially tiny)
        // range instead: with 2 significant digits, every latency above
        // 255 us became 2 us.
        if self.latency_us.record(us).is_err() {
            self.latency_us.saturating_record(us);
        }
    }

    /// Operations counted, whatever their outcome.
    pub fn total(&self) -> u64 {
        self.acknowledged + self.skipped + self.refused + self.unknown
    }

    /// Refused plus unknown plus skipped: operations that were not acknowledged.
    pub fn failed(&self) -> u64 {
        self.skipped + self.refused + self.unknown
    }

    /// A serialisable summary.
    pub fn summary(&self) -> OpSummary {
        OpSummary {
            acknowledged: self.acknowledged,
            skipped: self.skipped,
            refused: self.refused,
            unknown: self.unknown,
            latency: LatencySummary::of(&self.latency_us),
        }
    }
}

/// Statistics of one second of the run.
#[derive(Clone, Debug, Default)]
pub struct Second {
    /// Per kind of operation, for the kinds seen in this second.
    pub ops: BTreeMap<OpKind, OpStats>,
    /// Writer slots skipped in this second because every writer was busy.
    pub missed_slots: u64,
    /// The longest delay between an operation's due time and its start, in
    /// microseconds.
    pub max_start_delay_us: u64,
}

/// The statistics of a run, per second and in total.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    seconds: Vec<Second>,
    totals: BTreeMap<OpKind, OpStats>,
}

impl Timeline {
    /// Records an operation that started `started` after the run began.
    pub(crate) fn record(
        &mut self,
        kind: OpKind,
        started: Duration,
        latency: Duration,
        result: OpResult,
    ) {
        self.second_mut(started)
            .ops
            .entry(kind)
            .or_insert_with(|| OpStats::new(SECOND_SIGFIG))
            .record(latency, result);
        self.totals
            .entry(kind)
            .or_insert_with(|| OpStats::new(TOTAL_SIGFIG))
            .record(latency, result);
    }

    /// Counts `skipped` writer slots and a start delay at `at`.
    pub(crate) fn note_schedule(&mut self, at: Duration, skipped: u64, delay: Duration) {
        let second = self.second_mut(at);
        second.missed_slots += skipped;
        let delay_us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        second.max_start_delay_us = second.max_start_delay_us.max(delay_us);
    }

    /// Makes sure there is an entry for every second up to `elapsed`.
    pub(crate) fn pad_to(&mut self, elapsed: Duration) {
        let wanted = usize::try_from(elapsed.as_secs()).unwrap_or(usize::MAX);
        if self.seconds.len() < wanted {
            self.seconds.resize_with(wanted, Second::default);
        }
    }

    fn second_mut(&mut self, at: Duration) -> &mut Second {
        let index = usize::try_from(at.as_secs()).unwrap_or(usize::MAX);
        if self.seconds.len() <= index {
            self.seconds.resize_with(index + 1, Second::default);
        }
        &mut self.seconds[index]
    }

    /// Second `i` of the run is `seconds()[i]`.
    pub fn seconds(&self) -> &[Second] {
        &self.seconds
    }

    /// Whole-run statistics per kind of operation (histograms with three
    /// significant digits).
    pub fn totals(&self) -> &BTreeMap<OpKind, OpStats> {
        &self.totals
    }

    /// A serialisable summary, one entry per second.
    pub fn summary(&self) -> TimelineSummary {
        TimelineSummary {
            seconds: self
                .seconds
                .iter()
                .enumerate()
                .map(|(i, s)| SecondSummary {
                    second: i as u64,
                    missed_slots: s.missed_slots,
                    max_start_delay_us: s.max_start_delay_us,
                    ops: s.ops.iter().map(|(k, v)| (*k, v.summary())).collect(),
                })
                .collect(),
            totals: self.totals.iter().map(|(k, v)| (*k, v.summary())).collect(),
        }
    }
}

/// Quantiles of a latency histogram, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest value.
    pub max_us: u64,
}

impl LatencySummary {
    /// Summarises `histogram` (all zeros when it is empty).
    pub fn of(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return LatencySummary {
                count: 0,
                p50_us: 0,
                p90_us: 0,
                p99_us: 0,
                p999_us: 0,
                max_us: 0,
            };
        }
        LatencySummary {
            count: histogram.len(),
            p50_us: histogram.value_at_quantile(0.5),
            p90_us: histogram.value_at_quantile(0.9),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
        }
    }
}

/// [`OpStats`] without the histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OpSummary {
    /// Operations acknowledged.
    pub acknowledged: u64,
    /// Operations committed with an unexpected row count.
    pub skipped: u64,
    /// Operations refused.
    pub refused: u64,
    /// Operations with an unknown outcome.
    pub unknown: u64,
    /// Latency quantiles.
    pub latency: LatencySummary,
}

/// One second of a [`TimelineSummary`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SecondSummary {
    /// Seconds since the start of the run.
    pub second: u64,
    /// Writer slots skipped.
    pub missed_slots: u64,
    /// Longest start delay, in microseconds.
    pub max_start_delay_us: u64,
    /// Per kind of operation.
    pub ops: BTreeMap<OpKind, OpSummary>,
}

/// A serialisable [`Timeline`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TimelineSummary {
    /// One entry per second.
    pub seconds: Vec<SecondSummary>,
    /// Whole-run figures.
    pub totals: BTreeMap<OpKind, OpSummary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_land_in_the_second_they_started_and_in_the_totals() {
        let mut timeline = Timeline::default();
        timeline.record(
            OpKind::Insert,
            Duration::from_millis(1500),
            Duration::from_micros(800),
            OpResult::Acknowledged,
        );
        timeline.record(
            OpKind::Insert,
            Duration::from_millis(1900),
            Duration::from_micros(1200),
            OpResult::Refused,
        );
        timeline.pad_to(Duration::from_secs(3));
        assert_eq!(timeline.seconds().len(), 3);
        assert!(timeline.seconds()[0].ops.is_empty());
        let second = &timeline.seconds()[1].ops[&OpKind::Insert];
        assert_eq!((second.acknowledged, second.refused), (1, 1));
        assert_eq!(second.latency_us.len(), 2);
        let per_second = second.summary().latency;
        assert!((790..=810).contains(&per_second.p50_us), "{per_second:?}");
        assert!((1190..=1210).contains(&per_second.max_us), "{per_second:?}");
        let total = timeline.totals()[&OpKind::Insert].summary();
        assert_eq!(total.latency.count, 2);
        assert!((1195..=1205).contains(&total.latency.max_us), "{total:?}");
    }

    #[test]
    fn long_latencies_are_recorded_not_clamped() {
        let mut timeline = Timeline::default();
        for latency in [Duration::from_micros(3), Duration::from_secs(7)] {
            timeline.record(
                OpKind::Insert,
                Duration::ZERO,
                latency,
                OpResult::Acknowledged,
            );
        }
        let second = timeline.seconds()[0].ops[&OpKind::Insert].summary().latency;
        let total = timeline.totals()[&OpKind::Insert].summary().latency;
        for summary in [second, total] {
            assert!(
                (6_900_000..=7_100_000).contains(&summary.max_us),
                "{summary:?}"
            );
            assert!(summary.p50_us <= 4, "{summary:?}");
        }
    }
}
