//! The markdown section of a benchmark run, generated from its
//! [`BenchResults`] only (so `pgshift-bench render` gives the same text from
//! the JSON file as the run did).

use std::fmt::Write as _;

mod d1;
mod p1;
mod p8;
mod throttle;

use pgshift_workload::stats::{ms, WindowStats};

use super::results::{BenchResults, EngineRun, RelayRun, TargetResult};

/// Renders the section. Charts are linked as `{chart_prefix}{file}` (for
/// example `docs/bench/` from the repository root, or empty beside the JSON).
pub fn render(results: &BenchResults, chart_prefix: &str) -> String {
    let mut out = String::new();
    header(&mut out, results);
    if results.asked_for_any_p() {
        targets(&mut out, &results.targets);
    }
    p1::render(&mut out, results);
    if let Some(p2) = &results.p2 {
        section(&mut out, "P2: plain rebuild against pg_repack");
        let _ = writeln!(
            out,
            "Two identical tables of {} rows ({} with indexes), no load: `{}` through copy-and-swap, and `{}` ({}).\n",
            count(p2.rows),
            bytes(p2.total_bytes),
            p2.statement,
            p2.pg_repack_command,
            p2.pg_repack_version
        );
        out.push_str("| run | wall | phases | size after |\n|---|---:|---|---:|\n");
        let _ = writeln!(
            out,
            "| pgshift copy-and-swap | {} | {} | {} |",
            secs(p2.pgshift.wall_ms),
            phases(&p2.pgshift),
            bytes(p2.pgshift_bytes_after)
        );
        let _ = writeln!(
            out,
            "| pg_repack | {} | one command | {} |",
            secs(p2.pg_repack_ms),
            bytes(p2.pg_repack_bytes_after)
        );
        let _ = writeln!(
            out,
            "| **ratio** | **{:.2}×** | target ≤ 1× | |\n",
            p2.ratio
        );
        if let Some(line) = p1::rounds_line(&p2.rounds, "pg_repack") {
            let _ = writeln!(out, "{line}\n");
        }
    }
    if let Some(p3) = &results.p3 {
        section(&mut out, "P3: live writes during the change");
        let load = &p3.pgshift.load;
        let _ = writeln!(
            out,
            "The relay workload on `events` ({} rows in 8 partitions, {} with indexes): {} writers ({} as `session_replication_role = replica`) at {:.0} writes/s, {} reader; `{}`, blocking on one copy of the database and through pgshift on another. Latencies are per write (BEGIN, statement, COMMIT), exact, from each write's start and finish in the ledger, for the writes that started in the window (a blocked write counts in the window it started in).\n",
            count(p3.rows),
            bytes(p3.total_bytes),
            load.writers,
            load.replica_writers,
            load.target_rate,
            load.readers,
            p3.statement
        );
        out.push_str(
            "| window | run | writes/s | p50 | p99 | max | skipped slots |\n|---|---|---:|---:|---:|---:|---:|\n",
        );
        for (name, pick) in [
            (
                "before",
                (|r: &RelayRun| Some(r.before.clone())) as fn(&RelayRun) -> Option<WindowStats>,
            ),
            ("during", |r: &RelayRun| Some(r.during.clone())),
            ("around the cutover", |r: &RelayRun| {
                r.around_cutover.clone()
            }),
            ("after", |r: &RelayRun| Some(r.after.clone())),
        ] {
            for run in std::iter::once(&p3.blocking).chain(p3.pgshift_runs()) {
                if let Some(w) = pick(run) {
                    let _ = writeln!(
                        out,
                        "| {name} (s {:.1}–{:.1}) | {} | {:.0} | {} | {} | {} | {} |",
                        w.from_s,
                        w.to_s,
                        run.label,
                        w.acknowledged_per_s,
                        lat(w.p50_us),
                        lat(w.p99_us),
                        lat(w.max_us),
                        w.missed_slots
                    );
                }
            }
        }
        out.push('\n');
        out.push_str("| | blocking | pgshift |\n|---|---:|---:|\n");
        let _ = writeln!(
            out,
            "| change wall | {} | {} |",
            secs((p3.blocking.change_end_s - p3.blocking.change_start_s) * 1000.0),
            secs((p3.pgshift.change_end_s - p3.pgshift.change_start_s) * 1000.0)
        );
        let _ = writeln!(
            out,
            "| p99 during / before | {:.1}× | {:.2}× |",
            p3.blocking_p99_ratio, p3.pgshift_p99_ratio
        );
        let _ = writeln!(
            out,
            "| writes that waited > 1 s | {} | {} |",
            p3.blocking.writes_over_1s, p3.pgshift.writes_over_1s
        );
        let _ = writeln!(
            out,
            "| longest write during the change | {} | {} |",
            secs(p3.blocking.longest_write_ms),
            secs(p3.pgshift.longest_write_ms)
        );
        let _ = writeln!(
            out,
            "| writer slots skipped during the change (every writer waiting) | {} | {} |",
            p3.blocking.during.missed_slots, p3.pgshift.during.missed_slots
        );
        let _ = writeln!(
            out,
            "| writes acknowledged / refused / unknown (whole load) | {} / {} / {} | {} / {} / {} |",
            p3.blocking.load.acknowledged,
            p3.blocking.load.refused,
            p3.blocking.load.unknown,
            p3.pgshift.load.acknowledged,
            p3.pgshift.load.refused,
            p3.pgshift.load.unknown
        );
        let errors = |r: &RelayRun| {
            if r.load.errors_by_sqlstate.is_empty() {
                "none".to_owned()
            } else {
                r.load
                    .errors_by_sqlstate
                    .iter()
                    .map(|(code, n)| format!("{n} × {code}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        let _ = writeln!(
            out,
            "| errors seen by the load (per SQLSTATE) | {} | {} |",
            errors(&p3.blocking),
            errors(&p3.pgshift)
        );
        let oracle = |r: &RelayRun| {
            r.oracle.as_ref().map_or("not checked".to_owned(), |o| {
                format!(
                    "{} keys: lost {}, resurrected {}, wrong {}, phantom {}, duplicated {}",
                    o.keys_checked, o.lost, o.resurrected, o.wrong_content, o.phantom, o.duplicated
                )
            })
        };
        let _ = writeln!(
            out,
            "| lost-write oracle | {} | {} |\n",
            oracle(&p3.blocking),
            oracle(&p3.pgshift)
        );
        if let Some(engine) = &p3.pgshift.engine {
            let _ = writeln!(out, "pgshift phases under load: {}.\n", phases(engine));
        }
        for run in [&p3.blocking, &p3.pgshift] {
            for example in &run.load.error_examples {
                let _ = writeln!(out, "- {} run, error seen: `{example}`", run.label);
            }
        }
        if p3.blocking.load.errors_by_sqlstate.contains_key("42804") {
            out.push_str("- 42804 after the blocking ALTER: the relay's plpgsql trigger functions keep, per session, plans made for the old type of `kind`; every writer session that had fired them fails its inserts until it reconnects. After a swap the table is a new relation, its triggers are compiled afresh, and no write fails.\n");
        }
        if [&p3.blocking, &p3.pgshift]
            .iter()
            .any(|r| !r.load.error_examples.is_empty())
        {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "![writers during the blocking ALTER]({chart_prefix}{})\n",
            p3.blocking.chart
        );
        let _ = writeln!(
            out,
            "![writers during the pgshift run]({chart_prefix}{})\n",
            p3.pgshift.chart
        );
        throttle::render(&mut out, p3, chart_prefix);
        for (setting, ratios) in [
            ("the default throttle", &p3.pgshift_rounds),
            ("the stricter throttle", &p3.strict_rounds),
        ] {
            if ratios.len() > 1 {
                let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}×")).collect();
                let _ = writeln!(
                    out,
                    "With {setting}, {} rounds, each on its own copy of the database, the two settings' rounds interleaved: p99 during / before {} (in the order run); the tables and charts above show the median round.\n",
                    ratios.len(),
                    each.join(", ")
                );
            }
        }
    }
    if let Some(p4) = &results.p4 {
        section(&mut out, "P4: the cutover");
        let _ = writeln!(
            out,
            "ACCESS EXCLUSIVE is held from the granted `LOCK TABLE` to the end of `COMMIT` (the engine's `swap.lock_held_us`). Under the relay load: held {}; the longest write started from 1 s before the cutover to 1 s after it took {} (p99 of those writes {}, p99 before the change {}).\n",
            lat(p4.relay_hold_us),
            secs(p4.spike_ms),
            secs(p4.around_p99_ms),
            secs(p4.before_p99_ms)
        );
        out.push_str("| run | writers | hold |\n|---|---|---:|\n");
        for hold in &p4.holds {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                hold.run,
                if hold.under_load { "yes" } else { "no" },
                lat(hold.lock_held_us)
            );
        }
        let _ = writeln!(
            out,
            "\nLargest over the {} swaps: {}.\n",
            p4.holds.len(),
            lat(p4.max_hold_us)
        );
    }
    if let Some(p5) = &results.p5 {
        section(&mut out, "P5: capture overhead");
        let _ = writeln!(
            out,
            "{}, {} clients, {} s per measurement; {} round(s), each on a fresh table, in this order:\n",
            p5.method,
            p5.clients,
            p5.seconds,
            p5.rounds.len()
        );
        out.push_str("| round | installed | inserts/s |\n|---:|---|---:|\n");
        for m in &p5.measurements {
            let _ = writeln!(out, "| {} | {} | {:.0} |", m.round, m.label, m.tps);
        }
        out.push_str("\n| round | baseline (mean of start and end) | naive | pgshift, engine running | pgshift, capture only | baseline spread |\n|---:|---:|---:|---:|---:|---:|\n");
        for (i, r) in p5.rounds.iter().enumerate() {
            let share = |tps: f64| {
                format!(
                    "{:.0}/s ({:.0} %)",
                    tps,
                    tps / r.baseline_tps.max(f64::EPSILON) * 100.0
                )
            };
            let _ = writeln!(
                out,
                "| {} | {:.0}/s | {} | {} | {} | {:.0} % |",
                i + 1,
                r.baseline_tps,
                share(r.naive_tps),
                share(r.capture_engine_running_tps),
                share(r.capture_only_tps),
                r.baseline_spread * 100.0
            );
        }
        let _ = writeln!(
            out,
            "\nMedians over the rounds: pgshift's capture with the engine running kept **{:.0} %** of the baseline, the capture triggers alone (engine process killed) {:.0} %, a naive plpgsql capture {:.0} % (baseline {:.0} inserts/s).{}\n",
            p5.ratio * 100.0,
            p5.capture_only_ratio * 100.0,
            p5.naive_ratio * 100.0,
            p5.baseline_tps,
            if p5.max_baseline_spread > 0.2 {
                format!(
                    " The baselines of one round differ by up to {:.0} %: the machine was not quiet, read these with care.",
                    p5.max_baseline_spread * 100.0
                )
            } else {
                String::new()
            }
        );
    }
    if let Some(p6) = &results.p6 {
        section(&mut out, "P6: engine footprint");
        out.push_str("The engine ran in a child process (the bench binary re-executing itself); its peak RSS is `VmHWM` from `/proc/<pid>/status`.\n\n");
        out.push_str(
            "| run | rows | table + indexes | peak RSS | wall |\n|---|---:|---:|---:|---:|\n",
        );
        for s in &p6.samples {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} MiB | {} |",
                s.run,
                count(s.rows),
                bytes(s.total_bytes),
                s.vm_hwm_kib as f64 / 1024.0,
                secs(s.wall_ms)
            );
        }
        let _ = writeln!(
            out,
            "\n{:.0}× the rows, {:.2}× the peak; largest {:.1} MiB.\n",
            p6.size_factor,
            p6.growth,
            p6.max_kib as f64 / 1024.0
        );
    }
    if let Some(p7) = &results.p7 {
        section(&mut out, "P7: catch-up at twice the demo rate");
        let run = &p7.run;
        let _ = writeln!(
            out,
            "The same change on another copy of the relay database with {} writers at {:.0} writes/s (2 × {:.0}); achieved {:.0} acknowledged writes/s over the load. The backlog is `count(*)` of the run's change log, sampled twice a second by a separate session.\n",
            run.load.writers,
            run.load.target_rate,
            p7.demo_rate,
            run.load.acknowledged_per_s
        );
        out.push_str("| figure | value |\n|---|---:|\n");
        let _ = writeln!(out, "| largest backlog (engine) | {} |", p7.backlog_max);
        let _ = writeln!(out, "| largest backlog (sampled) | {} |", p7.sampled_max);
        let _ = writeln!(
            out,
            "| largest backlog in seconds of writes | {:.2} s |",
            p7.steady.max_lag_s
        );
        let _ = writeln!(
            out,
            "| backlog slope, second half of the run | {} entries/s (allowed {:.0}) |",
            p7.steady
                .late_slope_per_s
                .map_or("n/a".to_owned(), |s| format!("{s:.1}")),
            p7.steady.allowed_slope_per_s
        );
        let _ = writeln!(
            out,
            "| largest backlog, first half / second half | {} / {} |",
            p7.steady.early_max, p7.steady.late_max
        );
        if let Some(engine) = &run.engine {
            let _ = writeln!(
                out,
                "| drained under the lock at the swap | {} |",
                engine.drained.unwrap_or(0)
            );
        }
        let _ = writeln!(
            out,
            "| steady state | {} |\n",
            if p7.steady.reached {
                "reached"
            } else {
                "not reached"
            }
        );
        if let Some(oracle) = &run.oracle {
            let _ = writeln!(
                out,
                "Oracle after the run: {} keys, lost {}, resurrected {}, wrong {}, phantom {}, duplicated {}.\n",
                oracle.keys_checked,
                oracle.lost,
                oracle.resurrected,
                oracle.wrong_content,
                oracle.phantom,
                oracle.duplicated
            );
        }
        let _ = writeln!(
            out,
            "![change-log backlog]({chart_prefix}{})\n",
            p7.backlog_chart
        );
        let _ = writeln!(
            out,
            "![writers at 2× the demo rate]({chart_prefix}{})\n",
            run.chart
        );
    }
    p8::render(&mut out, results.p8.as_ref(), chart_prefix);
    d1::render(&mut out, results.d1.as_ref());
    if !results.failures.is_empty() {
        section(&mut out, "Scenarios that did not run to the end");
        for failure in &results.failures {
            let _ = writeln!(out, "- {}: {}", failure.scenario, failure.error);
        }
        out.push('\n');
    }
    if !results.notes.is_empty() {
        section(
            &mut out,
            "How the figures are taken (and what is approximated)",
        );
        for note in &results.notes {
            let _ = writeln!(out, "- {note}");
        }
        out.push('\n');
    }
    out
}

fn header(out: &mut String, r: &BenchResults) {
    // A run of some scenarios only says which; results written before the list
    // are of P1–P8.
    let partial = !r.scenarios.is_empty()
        && !super::Scenario::ALL
            .iter()
            .all(|s| r.scenarios.iter().any(|n| n == s.name()));
    let _ = writeln!(
        out,
        "## Results of {}{} ({}, JSON schema {})\n",
        r.started_at_utc,
        if partial {
            format!(": {} only", r.scenarios.join(", "))
        } else {
            String::new()
        },
        r.tool,
        r.schema_version
    );
    let _ = writeln!(
        out,
        "Produced by this command, from the workspace at {}:\n\n```sh\n{}\n```\n",
        r.source_revision, r.command
    );
    let _ = writeln!(
        out,
        "- Machine: {} CPUs ({}), {} MiB of memory, {}, Linux {}; load average {} at the start, {} at the end (the benchmark itself keeps both cores busy).",
        r.machine.cpus,
        r.machine.cpu_model,
        r.machine.memory_mib,
        r.machine.os,
        r.machine.kernel,
        r.machine.load_average_start,
        r.machine.load_average_end
    );
    let settings = r
        .postgres
        .settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "- PostgreSQL {} ({}), a throwaway cluster started by the command: {}.",
        r.postgres.version, r.postgres.bindir, settings
    );
    if r.asked_for_any_p() {
        sizes_and_engine(out, r);
    }
    if r.asked_for("D1") {
        let _ = writeln!(
            out,
            "- D1: a generated schema of {} tables{}, {} round(s).",
            count(u64::from(r.sizes.desired_tables)),
            if r.sizes.quick { " (`--quick`)" } else { "" },
            r.sizes.desired_rounds
        );
    }
    let _ = writeln!(
        out,
        "- The whole benchmark took {}.\n",
        minutes(r.runtime_s)
    );
}

/// The sizes and the copy-and-swap options of P1–P8.
fn sizes_and_engine(out: &mut String, r: &BenchResults) {
    let _ = writeln!(
        out,
        "- Sizes{}: P1/P2 tables of {} rows{}{}; P6 also at {} rows; relay `events` seeded with {} rows per partition; relay writers at {:.0}/s with {} s of load before and {} s after each change; P5 measurements of {} s.",
        if r.sizes.quick { " (`--quick`)" } else { "" },
        count(r.sizes.rows),
        if r.sizes.p1_large_rows > 0 {
            format!(", P1 also at {} rows", count(r.sizes.p1_large_rows))
        } else {
            String::new()
        },
        match (r.sizes.pair_rounds > 1, r.sizes.p3_rounds > 1) {
            (true, true) => format!(
                " ({} rounds of P1 at each size and of P2, {} of P3 with each throttle setting, each reporting its median round)",
                r.sizes.pair_rounds, r.sizes.p3_rounds
            ),
            (true, false) => format!(
                " ({} rounds of P1 at each size and of P2, each reporting its median round)",
                r.sizes.pair_rounds
            ),
            (false, true) => format!(
                " ({} rounds of P3 with each throttle setting, reporting the median round)",
                r.sizes.p3_rounds
            ),
            (false, false) => String::new(),
        },
        count(r.sizes.small_rows),
        count(u64::from(r.sizes.relay_rows_per_partition)),
        r.sizes.relay_rate,
        r.sizes.relay_before_s,
        r.sizes.relay_after_s,
        r.sizes.p5_seconds
    );
    let _ = writeln!(
        out,
        "- pgshift options: {} copy workers, chunks aimed at {} ms (first {} rows), swap `lock_timeout` {} ms × {} attempts, at most {} entries drained under the lock{}.",
        r.engine.workers,
        r.engine.chunk_target_ms,
        r.engine.first_chunk_rows,
        r.engine.cutover_lock_timeout_ms,
        r.engine.cutover_attempts,
        r.engine.max_drain,
        if r.engine.verify.is_empty() {
            String::new()
        } else {
            format!(", verification by {}", r.engine.verify)
        }
    );
}

fn targets(out: &mut String, targets: &[TargetResult]) {
    section(out, "Targets");
    out.push_str("| id | what | measured | target | met | gap |\n|---|---|---:|---:|---|---|\n");
    for t in targets {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            t.id,
            t.what,
            t.value_text(),
            t.target_text(),
            met,
            t.gap
        );
    }
    out.push('\n');
    let plain = |met: Option<bool>| {
        targets
            .iter()
            .filter(|t| t.met == met)
            .map(|t| match met {
                Some(false) => format!(
                    "{} ({} against {}: {})",
                    t.id,
                    t.value_text(),
                    t.target_text(),
                    t.gap
                ),
                _ => t.id.clone(),
            })
            .collect::<Vec<_>>()
    };
    for (label, met) in [
        ("Met", Some(true)),
        ("Not met", Some(false)),
        ("Not measured", None),
    ] {
        let list = plain(met);
        if !list.is_empty() {
            let _ = writeln!(out, "**{label}:** {}.\n", list.join("; "));
        }
    }
}

fn section(out: &mut String, title: &str) {
    let _ = writeln!(out, "### {title}\n");
}

fn phases(run: &EngineRun) -> String {
    let listed = run
        .phases_ms
        .iter()
        .map(|(name, ms)| {
            if name == "verifying" && run.verified_beside_builds {
                format!("{name} {} beside the index builds", secs(*ms as f64))
            } else {
                format!("{name} {}", secs(*ms as f64))
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    match run.verify_copy_ratio() {
        Some(ratio) => format!("{listed}; verifying / copying {ratio:.2}×"),
        None => listed,
    }
}

/// Milliseconds as seconds (`2.95 s`) or milliseconds (`840 ms`).
fn secs(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// Microseconds, readably.
fn lat(us: u64) -> String {
    let m = ms(us);
    if m >= 1000.0 {
        format!("{:.2} s", m / 1000.0)
    } else if m >= 10.0 {
        format!("{m:.0} ms")
    } else {
        format!("{m:.1} ms")
    }
}

fn minutes(s: f64) -> String {
    let whole = s.round() as u64;
    format!("{} min {:02} s", whole / 60, whole % 60)
}

fn bytes(b: u64) -> String {
    let mib = b as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else {
        format!("{mib:.0} MiB")
    }
}

/// `2000000` as `2,000,000`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::sample::sample;
    use crate::bench::Scenario;

    #[test]
    fn the_section_states_command_machine_version_and_every_target() {
        let results = sample();
        let text = render(&results, "docs/bench/");
        assert!(text.contains(&results.command), "{text}");
        assert!(text.contains("PostgreSQL 15.18"));
        assert!(text.contains("2 CPUs (Test CPU)"));
        for target in &results.targets {
            assert!(
                text.contains(&format!("| {} | {} |", target.id, target.what)),
                "{} missing",
                target.id
            );
        }
        assert!(text.contains("| P1 | rewrite wall at 2,000,000 rows: pgshift copy-and-swap / blocking ALTER | 2.60× | ≤ 1.50× | **no** | missed by 1.10× (73 %) |"), "{text}");
        assert!(text.contains("![writers during the pgshift run](docs/bench/p3-pgshift.svg)"));
        assert!(text.contains("![change-log backlog](docs/bench/p7-backlog.svg)"));
        assert!(text.contains("| 2,000,000 | 238 MiB | 353 MiB | 3.00 s | 7.80 s | copying 4.00 s, indexing 3.00 s | **2.60×** |"), "{text}");
        assert!(text.contains("The whole benchmark took 6 min 40 s."));
        assert!(text.contains("- a note"));
        assert!(
            text.contains(
                "**Not met:** P1 (2.60× against ≤ 1.50×: missed by 1.10× (73 %)); P1 later"
            ),
            "{text}"
        );
        assert!(
            text.contains("**Met:** P2; P3 strict p99; P3 waits; P3 lost"),
            "{text}"
        );
        assert!(text.contains("from the workspace at 4720e89"));
    }

    #[test]
    fn rounds_are_listed_in_order_with_the_median_shown() {
        let results = sample();
        let text = render(&results, "docs/bench/");
        assert!(
            text.contains(
                "At 2,000,000 rows: 3 round(s), the order alternating: 2.40× (the blocking ALTER first), \
                 2.60× (pgshift first), 3.10× (the blocking ALTER first); the figures shown are the \
                 median round's (2.60×, range 2.40–3.10×)."
            ),
            "{text}"
        );
        // P2 of the sample has no rounds (results written before them): no line.
        assert!(!text.contains("(pg_repack first)"), "{text}");
        assert!(
            text.contains(
                "With the default throttle, 3 rounds, each on its own copy of the database, \
                 the two settings' rounds interleaved: p99 during / before 2.50×, 2.25×, 1.90× \
                 (in the order run); the tables and charts above show the median round."
            ),
            "{text}"
        );
        assert!(!text.contains("With the stricter throttle, "), "{text}");
    }

    #[test]
    fn missing_scenarios_and_failures_are_said() {
        let mut results = sample();
        results.p2 = None;
        results.failures.push(super::super::results::Failure {
            scenario: "P2".to_owned(),
            error: "pg_repack is not installed".to_owned(),
        });
        results.targets = super::super::results::evaluate(&results);
        let text = render(&results, "");
        assert!(!text.contains("### P2"));
        assert!(text.contains("- P2: pg_repack is not installed"));
        assert!(text.contains("| P2 | plain rebuild wall: pgshift / pg_repack | not measured |"));
    }

    #[test]
    fn a_run_that_copied_and_verified_states_their_ratio() {
        let mut results = sample();
        let p1 = results.p1.as_mut().expect("the sample has P1");
        assert_eq!(p1.pgshift.verify_copy_ratio(), None);
        assert!(!render(&results, "").contains("verifying / copying"));
        let p1 = results.p1.as_mut().expect("the sample has P1");
        p1.pgshift.phases_ms.push(("verifying".to_owned(), 1_000));
        let text = render(&results, "");
        assert!(
            text.contains(
                "copying 4.00 s, indexing 3.00 s, verifying 1.00 s; verifying / copying 0.25×"
            ),
            "{text}"
        );
        let p1 = results.p1.as_mut().expect("the sample has P1");
        p1.pgshift.verified_beside_builds = true;
        let text = render(&results, "");
        assert!(
            text.contains("indexing 3.00 s, verifying 1.00 s beside the index builds;"),
            "{text}"
        );
    }

    #[test]
    fn p1_shows_both_sizes_and_how_the_ratio_grew() {
        let mut results = sample();
        let mut large = results.p1.clone().expect("the sample has P1");
        large.rows = 10_000_000;
        large.table_bytes *= 5;
        large.total_bytes *= 5;
        large.blocking_ms = 15_000.0;
        large.pgshift.wall_ms = 22_500.0;
        large.ratio = 1.5;
        results.p1_large = Some(large);
        results.sizes.p1_large_rows = 10_000_000;
        results.targets = super::super::results::evaluate(&results);
        let text = render(&results, "");
        assert!(
            text.contains("| 2,000,000 | 238 MiB | 353 MiB | 3.00 s | 7.80 s |"),
            "{text}"
        );
        assert!(
            text.contains("| 10,000,000 | 1.16 GiB | 1.72 GiB | 15.00 s | 22.50 s |"),
            "{text}"
        );
        assert!(
            text.contains("From 2,000,000 to 10,000,000 rows (5.0× the bytes) the ratio went from 2.60× to 1.50×; the blocking ALTER took 5.0× as long, pgshift 2.9×."),
            "{text}"
        );
        assert!(text.contains("P1 also at 10,000,000 rows"));
        // The target is held at the larger size.
        assert!(text.contains("| P1 | rewrite wall at 10,000,000 rows: pgshift copy-and-swap / blocking ALTER | 1.50× | ≤ 1.50× | yes |"), "{text}");
    }

    #[test]
    fn p3_states_each_throttle_setting_with_its_slowdown_and_spans() {
        let results = sample();
        let text = render(&results, "c/");
        assert!(text.contains("| pgshift, stricter throttle | writer p99 limit Some(5) | 4.0 ms | 5.0 ms | 1.25× | 20.00 s | 18.00 s | 1.50× | none | 2.50 s in 1 span | 3 | 6.0 ms | 0 |"), "{text}");
        assert!(text.contains("| pgshift, throttle off | writer p99 limit None | 4.0 ms | 5.0 ms | 1.25× | 20.00 s | 12.00 s | (baseline) | none | none | 1 | 6.0 ms | 0 |"), "{text}");
        // The default run: 15 s of copy against 12 s unthrottled.
        assert!(
            text.contains("| 20.00 s | 15.00 s | 1.25× | none | none | 4 | 3.5 ms | 0 |"),
            "{text}"
        );
        assert!(text.contains("![writers during the pgshift, stricter throttle](c/p3-pgshift.svg)"));
        assert!(
            text.contains("| during (s 10.0–30.0) | pgshift, throttle off |"),
            "{text}"
        );
    }

    #[test]
    fn results_written_before_the_throttle_render_without_its_table() {
        let mut results = sample();
        if let Some(p3) = results.p3.as_mut() {
            p3.strict = None;
            p3.unthrottled = None;
            p3.strict_p99_ratio = None;
            p3.pgshift.throttle = None;
        }
        results.targets = super::super::results::evaluate(&results);
        let text = render(&results, "");
        assert!(!text.contains("copy slowdown"), "{text}");
        assert!(text.contains("| P3 strict p99 | writer p99 during the pgshift run / before, stricter throttle | not measured |"), "{text}");
    }

    #[test]
    fn a_run_of_d1_only_says_so_with_its_sizes_and_no_targets() {
        let mut results = sample();
        results.scenarios = vec!["D1".to_owned()];
        results.args = vec!["--only".to_owned(), "D1".to_owned()];
        (results.p1, results.p2, results.p3, results.p4) = (None, None, None, None);
        (results.p5, results.p6, results.p7, results.p8) = (None, None, None, None);
        results.targets = super::super::results::evaluate(&results);
        let text = render(&results, "");
        assert!(
            text.starts_with(
                "## Results of 2026-11-30T10:00:00Z: D1 only (pgshift-bench 0.1.0, JSON schema 1)"
            ),
            "{text}"
        );
        assert!(
            text.contains("- D1: a generated schema of 1,000 tables, 3 round(s)."),
            "{text}"
        );
        assert!(text.contains("from the workspace at 4720e89"), "{text}");
        assert!(text.contains("2 CPUs (Test CPU)"), "{text}");
        for absent in ["### Targets", "P1/P2 tables", "pgshift options", "### P"] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert!(text.contains("### D1"), "{text}");
    }

    #[test]
    fn a_full_run_has_d1_beside_the_targets_and_older_results_render_without_it() {
        let mut results = sample();
        results.scenarios = Scenario::ALL.iter().map(|s| s.name().to_owned()).collect();
        let text = render(&results, "");
        assert!(
            text.starts_with("## Results of 2026-11-30T10:00:00Z (pgshift-bench"),
            "{text}"
        );
        assert!(
            text.contains("### Targets") && text.contains("### D1"),
            "{text}"
        );
        assert!(text.contains("P1/P2 tables") && text.contains("- D1: a generated schema"));
        assert!(!text.contains("| D1 |"), "D1 has no target: {text}");
        results.scenarios = Vec::new();
        results.d1 = None;
        let older = render(&results, "");
        assert!(!older.contains("D1"), "{older}");
        assert!(older.contains("### Targets"), "{older}");
    }

    #[test]
    fn number_formats() {
        assert_eq!(count(2_000_000), "2,000,000");
        assert_eq!(count(999), "999");
        assert_eq!(secs(2950.0), "2.95 s");
        assert_eq!(secs(84.4), "84 ms");
        assert_eq!(lat(4_200), "4.2 ms");
        assert_eq!(lat(42_000), "42 ms");
        assert_eq!(lat(3_000_000), "3.00 s");
        assert_eq!(bytes(370 * 1024 * 1024), "370 MiB");
        assert_eq!(minutes(125.4), "2 min 05 s");
    }
}
