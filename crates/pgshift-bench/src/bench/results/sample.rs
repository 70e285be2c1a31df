//! A complete result with plausible figures, for the tests of the results and
//! of their rendering.

use pgshift_workload::chart::PhaseMark;
use pgshift_workload::stats::{SteadyState, WindowStats};

use super::*;

pub(crate) fn window(first: u64, end: u64, p99_us: u64) -> WindowStats {
    WindowStats {
        from_s: first as f64,
        to_s: end as f64,
        writes: 100,
        acknowledged: 100,
        failed: 0,
        missed_slots: 0,
        acknowledged_per_s: 200.0,
        p50_us: p99_us / 4,
        p99_us,
        max_us: p99_us * 2,
    }
}

pub(crate) fn relay_run(label: &str) -> RelayRun {
    RelayRun {
        label: label.to_owned(),
        change_start_s: 10.0,
        change_end_s: 30.0,
        phases: vec![PhaseMark::new("copying", 10.0, 25.0)],
        before: window(2, 10, 4_000),
        during: window(10, 30, 9_000),
        around_cutover: Some(window(28, 31, 20_000)),
        after: window(31, 40, 4_100),
        writes_over_1s: 0,
        longest_write_ms: 80.0,
        cutover_spike_ms: Some(60.0),
        load: LoadFigures {
            target_rate: 200.0,
            writers: 4,
            replica_writers: 1,
            readers: 1,
            duration_s: 40.0,
            acknowledged: 7900,
            acknowledged_per_s: 197.5,
            ..LoadFigures::default()
        },
        oracle: Some(OracleFigures {
            relation: "events".to_owned(),
            keys_checked: 7000,
            acknowledged: 7900,
            clean: true,
            ..OracleFigures::default()
        }),
        engine: Some(EngineRun {
            wall_ms: 20_000.0,
            phases_ms: vec![("copying".to_owned(), 15_000)],
            rows_copied: 400_000,
            lock_held_us: Some(42_000),
            swap_attempts: Some(1),
            drained: Some(12),
            backlog_max: 150,
            vm_hwm_kib: None,
            standbys: Vec::new(),
            verified_beside_builds: false,
        }),
        backlog: vec![(11.0, 10), (12.0, 30)],
        series: Vec::new(),
        chart: "p3-pgshift.svg".to_owned(),
        throttle: Some(ThrottleFigures {
            limits: "writer p99 ≤ 50 ms, replica lag ≤ 10000 ms, WAL rate off".to_owned(),
            max_writer_p99_ms: Some(50),
            max_writer_slowdown: Some(3.0),
            decisions: 4,
            paused_ms: 0,
            probe_p99_max_ms: Some(3.5),
            probe_slowdown_max: Some(1.2),
            spans: Vec::new(),
        }),
    }
}

/// A pgshift run under load with a copy phase of `copying_ms`, throttled by the
/// writer p99 limit `limit_ms` (`None`: every limit off) during `spans`.
pub(crate) fn throttled_run(
    label: &str,
    copying_ms: u64,
    limit_ms: Option<u64>,
    spans: Vec<ThrottleSpan>,
) -> RelayRun {
    let mut run = relay_run(label);
    if let Some(engine) = run.engine.as_mut() {
        engine.phases_ms = vec![("copying".to_owned(), copying_ms)];
    }
    run.during = window(10, 30, 5_000);
    run.throttle = Some(ThrottleFigures {
        limits: format!("writer p99 limit {limit_ms:?}"),
        max_writer_p99_ms: limit_ms,
        max_writer_slowdown: None,
        decisions: spans.len() * 2 + 1,
        paused_ms: 0,
        probe_p99_max_ms: Some(6.0),
        probe_slowdown_max: None,
        spans,
    });
    run
}

/// A clean P8 run: a reader that read every pass exactly, through the swap.
pub(crate) fn replica_run(label: &str, chart: &str) -> ReplicaRun {
    let mut run = relay_run(label);
    run.phases.push(PhaseMark::new("cutover", 28.0, 28.2));
    if let Some(engine) = run.engine.as_mut() {
        engine.standbys = vec![StandbyLag {
            name: "walreceiver".to_owned(),
            lag_before_ms: Some(12),
            behind_at_swap_bytes: Some(4_096),
            replayed_swap_after_ms: Some(3),
        }];
    }
    let at_swap = run
        .engine
        .as_ref()
        .and_then(|e| e.standbys.first().cloned());
    ReplicaRun {
        lag: vec![
            LagSample {
                at_s: 12.0,
                bytes: 2_000_000,
                replay_lag_ms: Some(150.0),
            },
            LagSample {
                at_s: 28.1,
                bytes: 8_192,
                replay_lag_ms: Some(2.0),
            },
        ],
        max_lag_bytes: 2_000_000,
        max_lag_ms: Some(150.0),
        at_swap,
        reader: ReaderFigures {
            page_size: 100,
            fenced_rows_before: 16_000,
            fenced_rows_after: 16_000,
            passes: 6,
            passes_through_swap: 1,
            pages: 980,
            rows: 97_000,
            max_page_ms: 12.5,
            ..ReaderFigures::default()
        },
        conflicts: StandbyConflicts::default(),
        wall_s: 40.0,
        lag_chart: chart.to_owned(),
        run,
    }
}

/// A complete result with plausible figures.
pub(crate) fn sample() -> BenchResults {
    let engine = EngineRun {
        wall_ms: 7_800.0,
        phases_ms: vec![
            ("copying".to_owned(), 4_000),
            ("indexing".to_owned(), 3_000),
        ],
        rows_copied: 2_000_000,
        lock_held_us: Some(30_000),
        swap_attempts: Some(1),
        drained: Some(0),
        backlog_max: 0,
        vm_hwm_kib: Some(20_000),
        standbys: Vec::new(),
        verified_beside_builds: false,
    };
    let mut results = BenchResults {
        schema_version: SCHEMA_VERSION,
        tool: "pgshift-bench 0.1.0".to_owned(),
        started_at_utc: "2026-11-30T10:00:00Z".to_owned(),
        args: vec!["--out".to_owned(), "docs/bench".to_owned()],
        scenarios: crate::bench::Scenario::ALL
            .iter()
            .map(|s| s.name().to_owned())
            .collect(),
        command: "cargo run --release -p pgshift-bench --bin pgshift-bench -- --out docs/bench"
            .to_owned(),
        source_revision: "4720e89".to_owned(),
        runtime_s: 400.0,
        machine: Machine {
            cpus: 2,
            cpu_model: "Test CPU".to_owned(),
            memory_mib: 24_000,
            os: "Debian GNU/Linux 12 (bookworm)".to_owned(),
            kernel: "6.1.0".to_owned(),
            load_average_start: "0.10 0.20 0.30".to_owned(),
            load_average_end: "1.90 1.50 0.90".to_owned(),
        },
        postgres: PostgresInfo {
            version: "15.18".to_owned(),
            version_string: "PostgreSQL 15.18".to_owned(),
            bindir: "/usr/lib/postgresql/15/bin".to_owned(),
            settings: vec![("fsync".to_owned(), "off".to_owned())],
        },
        sizes: Sizes {
            quick: false,
            rows: 2_000_000,
            p1_large_rows: 0,
            small_rows: 200_000,
            relay_rows_per_partition: 50_000,
            relay_rate: 200.0,
            relay_before_s: 10,
            relay_after_s: 10,
            p5_seconds: 10,
            p5_rounds: 3,
            pair_rounds: 3,
            p3_rounds: 3,
            desired_tables: 1_000,
            desired_rounds: 3,
        },
        engine: EngineSettings {
            workers: 2,
            chunk_target_ms: 500,
            first_chunk_rows: 10_000,
            cutover_lock_timeout_ms: 1000,
            cutover_attempts: 10,
            max_drain: 10_000,
            verify: "digest".to_owned(),
        },
        p1: Some(P1 {
            statement: "ALTER TABLE p1 ALTER COLUMN qty TYPE bigint".to_owned(),
            rows: 2_000_000,
            table_bytes: 250_000_000,
            total_bytes: 370_000_000,
            indexes: 3,
            blocking_ms: 3_000.0,
            pgshift: engine.clone(),
            ratio: 2.6,
            rounds: [(false, 2.4), (true, 2.6), (false, 3.1)]
                .into_iter()
                .map(|(pgshift_first, ratio)| PairRound {
                    pgshift_first,
                    other_ms: 3_000.0,
                    pgshift: engine.clone(),
                    ratio,
                })
                .collect(),
        }),
        p1_large: None,
        p2: Some(P2 {
            statement: "VACUUM FULL p2".to_owned(),
            pg_repack_command: "pg_repack --table=public.p2".to_owned(),
            pg_repack_version: "pg_repack 1.4.8".to_owned(),
            rows: 2_000_000,
            total_bytes: 370_000_000,
            pgshift: engine.clone(),
            pg_repack_ms: 9_000.0,
            pgshift_bytes_after: 360_000_000,
            pg_repack_bytes_after: 360_000_000,
            ratio: 0.87,
            rounds: Vec::new(),
        }),
        p3: Some(P3 {
            statement: "ALTER TABLE events …".to_owned(),
            rows: 400_000,
            total_bytes: 450_000_000,
            blocking: RelayRun {
                engine: None,
                oracle: None,
                around_cutover: None,
                cutover_spike_ms: None,
                writes_over_1s: 5,
                longest_write_ms: 9_000.0,
                ..relay_run("blocking ALTER TABLE")
            },
            pgshift: relay_run("pgshift copy-and-swap"),
            pgshift_p99_ratio: 2.25,
            blocking_p99_ratio: 2_000.0,
            strict: Some(throttled_run(
                "pgshift, stricter throttle",
                18_000,
                Some(5),
                vec![ThrottleSpan {
                    pace: "paused".to_owned(),
                    signal: "writer p99 (probe)".to_owned(),
                    reason: "writer p99 (probe) 6 ms (limit 5 ms)".to_owned(),
                    start_s: 12.0,
                    end_s: 14.5,
                }],
            )),
            strict_p99_ratio: Some(1.25),
            pgshift_rounds: vec![2.5, 2.25, 1.9],
            strict_rounds: Vec::new(),
            unthrottled: Some(throttled_run(
                "pgshift, throttle off",
                12_000,
                None,
                Vec::new(),
            )),
        }),
        p4: Some(P4 {
            holds: vec![LockHold {
                run: "P3".to_owned(),
                under_load: true,
                lock_held_us: 42_000,
            }],
            max_hold_us: 42_000,
            relay_hold_us: 42_000,
            spike_ms: 60.0,
            around_p99_ms: 20.0,
            before_p99_ms: 4.0,
        }),
        p5: Some(P5 {
            method: "pgbench".to_owned(),
            clients: 2,
            seconds: 10,
            measurements: vec![Throughput {
                round: 1,
                label: "no trigger".to_owned(),
                tps: 20_000.0,
            }],
            rounds: vec![P5Round {
                baseline_tps: 20_000.0,
                naive_tps: 14_000.0,
                capture_engine_running_tps: 13_000.0,
                capture_only_tps: 15_000.0,
                baseline_spread: 0.05,
            }],
            max_baseline_spread: 0.05,
            baseline_tps: 20_000.0,
            capture_engine_running_tps: 13_000.0,
            capture_only_tps: 15_000.0,
            naive_tps: 14_000.0,
            ratio: 0.65,
            capture_only_ratio: 0.75,
            naive_ratio: 0.7,
        }),
        p6: Some(P6 {
            samples: vec![RssSample {
                run: "small".to_owned(),
                rows: 200_000,
                total_bytes: 37_000_000,
                vm_hwm_kib: 18_000,
                wall_ms: 900.0,
            }],
            max_kib: 20_000,
            growth: 1.1,
            size_factor: 10.0,
        }),
        p7: Some(P7 {
            demo_rate: 200.0,
            run: relay_run("pgshift at 400 writes/s"),
            backlog_max: 400,
            sampled_max: 380,
            steady: SteadyState {
                samples: 30,
                late_slope_per_s: Some(0.5),
                allowed_slope_per_s: 20.0,
                early_max: 300,
                late_max: 380,
                max_lag_s: 0.95,
                reached: true,
            },
            phases: vec![PhaseBacklog {
                phase: "indexing".to_owned(),
                samples: 5,
                max: 300,
                slope_per_s: Some(120.0),
            }],
            backlog_chart: "p7-backlog.svg".to_owned(),
        }),
        p8: Some(P8 {
            statement: "ALTER TABLE events …".to_owned(),
            standby_version: "15.18".to_owned(),
            max_standby_streaming_delay: "30s".to_owned(),
            runs: vec![
                replica_run("P8 default throttle", "p8-lag-throttled.svg"),
                replica_run("P8 throttle off", "p8-lag-unthrottled.svg"),
            ],
        }),
        d1: Some(d1()),
        failures: Vec::new(),
        targets: Vec::new(),
        notes: vec!["a note".to_owned()],
    };
    results.targets = evaluate(&results);
    results
}

/// D1 in three rounds.
pub(crate) fn d1() -> D1 {
    let round = |pull_ms: u64, diff_ms: u64| D1Round {
        pull: PullFigures {
            read_ms: 2_400,
            prove_ms: 11_700,
            total_ms: pull_ms,
            files: 1_002,
            statements: 5_004,
            fidelity: "exact".to_owned(),
            child: ChildProcess {
                wall_ms: pull_ms as f64 + 20.0,
                vm_hwm_kib: 116 * 1024,
            },
        },
        diff: DiffFigures {
            compare_ms: 25_900,
            plan_ms: 800,
            total_ms: diff_ms,
            changes: 10,
            added_columns: 10,
            destructive: 0,
            refused: 0,
            first_change: Some("ALTER TABLE app.t0001 ADD COLUMN d1_added text".to_owned()),
            child: ChildProcess {
                wall_ms: diff_ms as f64 + 20.0,
                vm_hwm_kib: 202 * 1024,
            },
        },
    };
    let rounds = vec![
        round(14_200, 26_700),
        round(13_100, 27_500),
        round(15_000, 26_000),
    ];
    D1 {
        schema: "app".to_owned(),
        tables: 1_000,
        shape: "a key".to_owned(),
        generated_statements: 5_001,
        edited_tables: 10,
        edit: "a column added to 10 tables".to_owned(),
        pull_median_ms: D1::median(&rounds, |r| r.pull.total_ms),
        diff_median_ms: D1::median(&rounds, |r| r.diff.total_ms),
        rounds,
    }
}
