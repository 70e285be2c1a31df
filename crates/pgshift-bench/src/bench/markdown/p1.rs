//! P1's section: the rewrite at each size measured, and how the ratio grew.

use std::fmt::Write as _;

use super::{bytes, count, phases, secs, section};
use crate::bench::results::{limits, BenchResults, PairRound, P1};

/// The P1 section, when P1 ran at any size.
pub(super) fn render(out: &mut String, results: &BenchResults) {
    let sizes: Vec<&P1> = results.p1.iter().chain(results.p1_large.iter()).collect();
    let Some(first) = sizes.first() else {
        return;
    };
    section(out, "P1: rewrite cost against the blocking ALTER");
    let _ = writeln!(
        out,
        "`{}` on two identical tables ({} indexes each) at each size, no load; the targets are held at the largest size measured.\n",
        first.statement, first.indexes
    );
    out.push_str(
        "| rows | heap | with indexes | blocking `ALTER TABLE` | pgshift copy-and-swap | pgshift phases | ratio |\n|---:|---:|---:|---:|---:|---|---:|\n",
    );
    for p1 in &sizes {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | **{:.2}×** |",
            count(p1.rows),
            bytes(p1.table_bytes),
            bytes(p1.total_bytes),
            secs(p1.blocking_ms),
            secs(p1.pgshift.wall_ms),
            phases(&p1.pgshift),
            p1.ratio
        );
    }
    if let [small, large] = sizes[..] {
        let _ = writeln!(
            out,
            "\nFrom {} to {} rows ({:.1}× the bytes) the ratio went from {:.2}× to {:.2}×; the blocking ALTER took {:.1}× as long, pgshift {:.1}×.",
            count(small.rows),
            count(large.rows),
            large.total_bytes as f64 / small.total_bytes.max(1) as f64,
            small.ratio,
            large.ratio,
            large.blocking_ms / small.blocking_ms.max(f64::EPSILON),
            large.pgshift.wall_ms / small.pgshift.wall_ms.max(f64::EPSILON)
        );
    }
    for p1 in &sizes {
        if let Some(line) = rounds_line(&p1.rounds, "the blocking ALTER") {
            let _ = writeln!(out, "\nAt {} rows: {line}", count(p1.rows));
        }
    }
    let _ = writeln!(
        out,
        "\nTarget ≤ {}× (later ≤ {}×).\n",
        limits::P1_RATIO,
        limits::P1_RATIO_LATER
    );
}

/// The ratio of every round, in the order run, and which is shown (`None` for
/// results without rounds). `other` names the other side.
pub(super) fn rounds_line(rounds: &[PairRound], other: &str) -> Option<String> {
    let median = PairRound::median(rounds)?;
    let each: Vec<String> = rounds
        .iter()
        .map(|r| {
            format!(
                "{:.2}× ({} first)",
                r.ratio,
                if r.pgshift_first { "pgshift" } else { other }
            )
        })
        .collect();
    Some(format!(
        "{} round(s), the order alternating: {}; the figures shown are the median round's ({:.2}×, range {:.2}–{:.2}×).",
        rounds.len(),
        each.join(", "),
        median.ratio,
        rounds.iter().map(|r| r.ratio).fold(f64::INFINITY, f64::min),
        rounds.iter().map(|r| r.ratio).fold(0.0, f64::max),
    ))
}
