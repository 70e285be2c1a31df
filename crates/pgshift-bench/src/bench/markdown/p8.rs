//! P8's section: the replica's replay lag in each run (at most, around the swap, at
//! the swap as the engine saw it), what the throttle decided, what the reader on the
//! replica read, and the replay lag charts.

use std::fmt::Write as _;

use super::throttle::spans_text;
use super::{count, secs, section};
use crate::bench::results::{ReplicaRun, P8};

/// The section, when P8 ran.
pub(super) fn render(out: &mut String, p8: Option<&P8>, chart_prefix: &str) {
    let Some(p8) = p8 else {
        return;
    };
    section(
        out,
        "P8: a streaming replica, its replay lag and a reader on it",
    );
    let _ = writeln!(
        out,
        "A streaming replica of the cluster (`pg_basebackup`, PostgreSQL {}, `max_standby_streaming_delay` {}) while P3's change `{}` runs through pgshift under P3's load, once with the default throttle (its replica-lag limit sees this replica) and once with every limit off, each on its own copy of the seeded database. The replay lag is sampled on the primary from `pg_stat_replication` twice a second; the lag at the swap is the engine's own report. A keyset reader on the replica reads the newest fenced rows in pages ordered by `(created_at, id)` over and over through the run and its swap; every complete pass is checked against the fenced rows read on the primary afterwards.\n",
        p8.standby_version, p8.max_standby_streaming_delay, p8.statement
    );
    out.push_str("| run | change wall | load wall | lag at most | `replay_lag` at most | lag sampled around the swap | behind at the swap (engine) | swap replayed after | throttle slowed / paused | lost writes |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for run in &p8.runs {
        let swap = run.at_swap.as_ref();
        let throttle = run.run.throttle.as_ref().map_or("–".to_owned(), |t| {
            let spans = |pace: &str| {
                let n = t.spans.iter().filter(|s| s.pace == pace).count();
                spans_text(t.seconds_at(pace), n)
            };
            format!("{} / {}", spans("slow"), spans("paused"))
        });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            run.run.label,
            secs((run.run.change_end_s - run.run.change_start_s) * 1000.0),
            secs(run.wall_s * 1000.0),
            lag_bytes(Some(run.max_lag_bytes)),
            run.max_lag_ms.map_or("–".to_owned(), secs),
            lag_bytes(run.lag_around_swap_bytes()),
            lag_bytes(swap.and_then(|s| s.behind_at_swap_bytes)),
            swap.and_then(|s| s.replayed_swap_after_ms)
                .map_or("not reported".to_owned(), |ms| secs(ms as f64)),
            throttle,
            lost(run)
        );
    }
    out.push_str("\nThe reader on the replica, per run (skips, repeats and cancelled queries are summed over its complete passes):\n\n");
    out.push_str("| run | fenced rows | page size | passes | through the swap | pages | rows read | skipped | repeated | not fenced / out of order | failed queries | cancelled | standby conflicts | slowest page |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for run in &p8.runs {
        let r = &run.reader;
        let fenced = if r.fenced_rows_before == r.fenced_rows_after {
            count(r.fenced_rows_after)
        } else {
            format!(
                "{} before, {} after",
                count(r.fenced_rows_before),
                count(r.fenced_rows_after)
            )
        };
        let _ = writeln!(
            out,
            "| {} | {fenced} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {:.1} ms |",
            run.run.label,
            r.page_size,
            r.passes,
            r.passes_through_swap,
            count(r.pages),
            count(r.rows),
            r.skipped,
            r.repeated,
            r.unexpected,
            r.out_of_order,
            r.errors,
            r.cancelled,
            run.conflicts.total(),
            r.max_page_ms
        );
    }
    out.push('\n');
    let errors: Vec<&String> = p8
        .runs
        .iter()
        .flat_map(|r| &r.reader.error_examples)
        .collect();
    if !errors.is_empty() {
        let list: Vec<String> = errors.iter().map(|e| format!("`{e}`")).collect();
        let _ = writeln!(out, "The reader's failed queries: {}.\n", list.join("; "));
    }
    for run in &p8.runs {
        let _ = writeln!(
            out,
            "![replica replay lag, {}]({chart_prefix}{})\n",
            run.run.label, run.lag_chart
        );
    }
    for run in &p8.runs {
        let _ = writeln!(
            out,
            "![writers during the {}]({chart_prefix}{})\n",
            run.run.label, run.run.chart
        );
    }
}

/// Lost, resurrected, wrong, phantom and duplicated writes of the oracle.
fn lost(run: &ReplicaRun) -> String {
    run.run
        .oracle
        .as_ref()
        .map_or("not checked".to_owned(), |o| {
            (o.lost + o.resurrected + o.wrong_content + o.phantom + o.duplicated).to_string()
        })
}

/// Bytes of WAL behind: `0 B`, `12 KiB`, `3.4 MiB`.
fn lag_bytes(bytes: Option<i64>) -> String {
    bytes.map_or("not measured".to_owned(), |b| {
        pgshift_workload::chart::format_bytes(b as f64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::sample::sample;

    #[test]
    fn p8_states_each_run_s_lag_and_reader_with_its_charts() {
        let results = sample();
        let mut out = String::new();
        render(&mut out, results.p8.as_ref(), "docs/bench/");
        assert!(out.contains("### P8"), "{out}");
        // The default run's row: lag at most, around the swap, at the swap.
        assert!(
            out.contains("| P8 default throttle | 20.00 s | 40.00 s | 1.9 MiB | 150 ms | 8 KiB | 4 KiB | 3 ms | none / none | 0 |"),
            "{out}"
        );
        assert!(
            out.contains("| P8 throttle off | 16,000 | 100 | 6 | 1 | 980 | 97,000 | 0 | 0 | 0 / 0 | 0 | 0 | 0 | 12.5 ms |"),
            "{out}"
        );
        assert!(out.contains(
            "![replica replay lag, P8 default throttle](docs/bench/p8-lag-throttled.svg)"
        ));
        assert!(!out.contains("failed queries:"));
    }

    #[test]
    fn a_changed_fence_and_failed_queries_are_said() {
        let mut results = sample();
        let reader = &mut results.p8.as_mut().expect("p8").runs[0].reader;
        reader.fenced_rows_after = 15_999;
        reader.error_examples =
            vec!["40001: canceling statement due to conflict with recovery".to_owned()];
        let mut out = String::new();
        render(&mut out, results.p8.as_ref(), "");
        assert!(out.contains("16,000 before, 15,999 after"), "{out}");
        assert!(out.contains("`40001: canceling statement due to conflict with recovery`"));
        let mut none = String::new();
        render(&mut none, None, "");
        assert!(none.is_empty());
    }

    #[test]
    fn lag_bytes_are_readable() {
        assert_eq!(lag_bytes(Some(0)), "0 B");
        assert_eq!(lag_bytes(Some(12 * 1024)), "12 KiB");
        assert_eq!(lag_bytes(None), "not measured");
    }
}
