//! The targets judged from the figures (`shared/design/targets.md`).

use super::targets::{Direction, TargetResult};
use super::BenchResults;

/// The limits of the targets (`shared/design/targets.md`).
pub mod limits {
    /// P1: pgshift wall / blocking wall.
    pub const P1_RATIO: f64 = 1.5;
    /// P1, later.
    pub const P1_RATIO_LATER: f64 = 1.2;
    /// P2: pgshift wall / pg_repack wall.
    pub const P2_RATIO: f64 = 1.0;
    /// P3: p99 during / before.
    pub const P3_P99_RATIO: f64 = 2.0;
    /// P3: p99 during / before with the stricter throttle setting.
    pub const P3_STRICT_P99_RATIO: f64 = 1.5;
    /// P3: writes waiting longer than this, none allowed (ms).
    pub const P3_WAIT_MS: f64 = 1000.0;
    /// P4: hold, ms.
    pub const P4_HOLD_MS: f64 = 100.0;
    /// P4: spike, ms.
    pub const P4_SPIKE_MS: f64 = 250.0;
    /// P5: share of baseline throughput kept.
    pub const P5_KEPT: f64 = 0.80;
    /// P6: peak RSS, MiB.
    pub const P6_MAX_MIB: f64 = 100.0;
    /// P6: peak at the largest size / at the smallest ("flat").
    pub const P6_GROWTH: f64 = 1.25;
    /// P7: the backlog may grow by this share of the write rate per second
    /// over the second half of the run and still count as steady.
    pub const P7_GROWTH_SHARE: f64 = 0.05;
}

/// The targets of one scenario, judged from the figures.
pub type Judge = fn(&BenchResults) -> Vec<TargetResult>;

/// Every scenario's targets, in the order of the table (a scenario adds its
/// function here).
pub const JUDGES: &[Judge] = &[p1, p2, p3, p4, p5, p6, p7, p8];

/// The targets, judged from the figures.
pub fn evaluate(results: &BenchResults) -> Vec<TargetResult> {
    JUDGES.iter().flat_map(|judge| judge(results)).collect()
}

/// P1 is held at the larger size when it ran, else at the standard one.
fn p1(results: &BenchResults) -> Vec<TargetResult> {
    use limits::*;
    let held = results.p1_large.as_ref().or(results.p1.as_ref());
    let size = held.map_or(String::new(), |p| {
        format!(" at {} rows", super::super::markdown::count(p.rows))
    });
    vec![
        TargetResult::new(
            "P1",
            &format!("rewrite wall{size}: pgshift copy-and-swap / blocking ALTER"),
            held.map(|p| p.ratio),
            "×",
            Direction::AtMost,
            P1_RATIO,
        ),
        TargetResult::new(
            "P1 later",
            "the same, later target",
            held.map(|p| p.ratio),
            "×",
            Direction::AtMost,
            P1_RATIO_LATER,
        ),
    ]
}

fn p2(results: &BenchResults) -> Vec<TargetResult> {
    vec![TargetResult::new(
        "P2",
        "plain rebuild wall: pgshift / pg_repack",
        results.p2.as_ref().map(|p| p.ratio),
        "×",
        Direction::AtMost,
        limits::P2_RATIO,
    )]
}

fn p3(results: &BenchResults) -> Vec<TargetResult> {
    use limits::*;
    let p3 = results.p3.as_ref();
    let strict_what = p3
        .and_then(|p| p.strict.as_ref())
        .and_then(|r| r.throttle.as_ref())
        .and_then(|t| t.max_writer_slowdown)
        .map_or(String::new(), |r| format!(" (--max-writer-slowdown {r})"));
    vec![
        TargetResult::new(
            "P3 p99",
            "writer p99 during the pgshift run / before (default throttle)",
            p3.map(|p| p.pgshift_p99_ratio),
            "×",
            Direction::AtMost,
            P3_P99_RATIO,
        ),
        TargetResult::new(
            "P3 strict p99",
            &format!("writer p99 during the pgshift run / before, stricter throttle{strict_what}"),
            p3.and_then(|p| p.strict_p99_ratio),
            "×",
            Direction::AtMost,
            P3_STRICT_P99_RATIO,
        ),
        TargetResult::new(
            "P3 waits",
            "writes that waited > 1 s during the pgshift run",
            p3.map(|p| p.pgshift.writes_over_1s as f64),
            "",
            Direction::AtMost,
            0.0,
        ),
        TargetResult::new(
            "P3 lost",
            "acknowledged writes lost (oracle, every pgshift run under load)",
            p3.and_then(|p| {
                p.pgshift_runs()
                    .iter()
                    .map(|r| {
                        r.oracle.as_ref().map(|o| {
                            (o.lost + o.resurrected + o.wrong_content + o.phantom + o.duplicated)
                                as f64
                        })
                    })
                    .sum::<Option<f64>>()
            }),
            "",
            Direction::AtMost,
            0.0,
        ),
    ]
}

fn p4(results: &BenchResults) -> Vec<TargetResult> {
    use limits::*;
    vec![
        TargetResult::new(
            "P4 hold",
            "ACCESS EXCLUSIVE hold at the swap, largest over the runs",
            results.p4.as_ref().map(|p| p.max_hold_us as f64 / 1000.0),
            "ms",
            Direction::AtMost,
            P4_HOLD_MS,
        ),
        TargetResult::new(
            "P4 spike",
            "longest write within 1 s of the cutover, under load",
            results.p4.as_ref().map(|p| p.spike_ms),
            "ms",
            Direction::AtMost,
            P4_SPIKE_MS,
        ),
    ]
}

fn p5(results: &BenchResults) -> Vec<TargetResult> {
    vec![TargetResult::new(
        "P5",
        "write throughput kept with the capture installed (engine running)",
        results.p5.as_ref().map(|p| p.ratio * 100.0),
        "%",
        Direction::AtLeast,
        limits::P5_KEPT * 100.0,
    )]
}

fn p6(results: &BenchResults) -> Vec<TargetResult> {
    use limits::*;
    vec![
        TargetResult::new(
            "P6 peak",
            "engine peak RSS, largest over the sizes",
            results.p6.as_ref().map(|p| p.max_kib as f64 / 1024.0),
            "MiB",
            Direction::AtMost,
            P6_MAX_MIB,
        ),
        TargetResult::new(
            "P6 flat",
            "peak RSS at the largest table / at the smallest",
            results.p6.as_ref().map(|p| p.growth),
            "×",
            Direction::AtMost,
            P6_GROWTH,
        ),
    ]
}

fn p7(results: &BenchResults) -> Vec<TargetResult> {
    vec![TargetResult::new(
        "P7",
        "change log drained as fast as filled at 2× the demo rate (steady state)",
        results
            .p7
            .as_ref()
            .map(|p| if p.steady.reached { 1.0 } else { 0.0 }),
        "",
        Direction::Holds,
        1.0,
    )]
}

/// P8's targets are the (targets.md has none for P8): the replica reader
/// skips no row, repeats none, and has no query cancelled, over every run. The
/// replay lag figures are reported, with no target. A run whose reader completed no
/// pass has checked nothing: not measured, not met.
fn p8(results: &BenchResults) -> Vec<TargetResult> {
    let p8 = results.p8.as_ref();
    let reader = |f: fn(&super::ReaderFigures) -> u64| p8.and_then(|p| p.checked_sum(f));
    vec![
        TargetResult::new(
            "P8 skips",
            "fenced rows a replica reader's pass skipped, every run (issue 12's target)",
            reader(|r| r.skipped),
            "",
            Direction::AtMost,
            0.0,
        ),
        TargetResult::new(
            "P8 repeats",
            "rows a replica reader's pass read twice or out of order, or that are not fenced, every run (issue 12's target)",
            reader(|r| r.repeated + r.out_of_order + r.unexpected),
            "",
            Direction::AtMost,
            0.0,
        ),
        TargetResult::new(
            "P8 cancelled",
            "replica reader queries cancelled by a conflict with recovery, every run (issue 12's target)",
            reader(|r| r.cancelled),
            "",
            Direction::AtMost,
            0.0,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::sample::sample;
    use super::*;

    #[test]
    fn targets_are_judged_with_their_gaps() {
        let results = sample();
        let by_id = |id: &str| {
            results
                .targets
                .iter()
                .find(|t| t.id == id)
                .unwrap_or_else(|| panic!("{id}"))
                .clone()
        };
        let p1 = by_id("P1");
        assert_eq!(p1.met, Some(false));
        assert_eq!(p1.gap, "missed by 1.10× (73 %)");
        assert_eq!(p1.target_text(), "≤ 1.50×");
        let p2 = by_id("P2");
        assert_eq!(p2.met, Some(true));
        assert_eq!(p2.gap, "met, 0.13× under");
        let waits = by_id("P3 waits");
        assert_eq!(
            (waits.met, waits.value_text().as_str(), waits.gap.as_str()),
            (Some(true), "0", "met")
        );
        assert_eq!(by_id("P3 lost").value, Some(0.0));
        assert_eq!(by_id("P4 hold").value, Some(42.0));
        let p5 = by_id("P5");
        assert_eq!(p5.met, Some(false));
        assert_eq!(p5.value_text(), "65.0 %");
        assert_eq!(p5.gap, "missed by 15.0 % (19 %)");
        assert_eq!(by_id("P6 peak").met, Some(true));
        let p7 = by_id("P7");
        assert_eq!((p7.met, p7.value_text().as_str()), (Some(true), "yes"));
    }

    fn p8_targets(results: &BenchResults) -> Vec<(String, Option<bool>)> {
        evaluate(results)
            .into_iter()
            .filter(|t| t.id.starts_with("P8"))
            .map(|t| (t.id, t.met))
            .collect()
    }

    #[test]
    fn a_clean_replica_reader_meets_p8() {
        let met = p8_targets(&sample());
        assert_eq!(met.len(), 3, "{met:?}");
        assert!(met.iter().all(|(_, m)| *m == Some(true)), "{met:?}");
    }

    #[test]
    fn a_skip_a_repeat_or_a_cancelled_query_fails_p8() {
        type Spoil = fn(&mut super::super::ReaderFigures);
        let cases: [(&str, Spoil); 5] = [
            ("P8 skips", |r| r.skipped = 1),
            ("P8 repeats", |r| r.repeated = 1),
            ("P8 repeats", |r| r.out_of_order = 1),
            ("P8 repeats", |r| r.unexpected = 1),
            ("P8 cancelled", |r| r.cancelled = 1),
        ];
        for (id, spoil) in cases {
            let mut results = sample();
            // The run with the throttle off: a bad second run fails P8 too.
            spoil(&mut results.p8.as_mut().expect("p8").runs[1].reader);
            for (target, met) in p8_targets(&results) {
                let expected = if target == id {
                    Some(false)
                } else {
                    Some(true)
                };
                assert_eq!(met, expected, "{id}: {target}");
            }
        }
    }

    #[test]
    fn a_reader_that_finished_no_pass_has_not_measured_p8() {
        let mut results = sample();
        results.p8.as_mut().expect("p8").runs[0].reader.passes = 0;
        assert!(p8_targets(&results).iter().all(|(_, met)| met.is_none()));
        results.p8 = None;
        assert!(p8_targets(&results).iter().all(|(_, met)| met.is_none()));
    }

    #[test]
    fn a_missing_scenario_is_not_measured_rather_than_met() {
        let mut results = sample();
        results.p2 = None;
        results.targets = evaluate(&results);
        let p2 = results.targets.iter().find(|t| t.id == "P2").expect("P2");
        assert_eq!(p2.met, None);
        assert_eq!(p2.value_text(), "not measured");
        assert_eq!(p2.gap, "not measured");
    }
}
