//! The benchmark command (issue 5): side-by-side comparisons on identical
//! tables in one run on a throwaway cluster, written out as versioned JSON,
//! SVG charts and a markdown section.
//!
//! * **P1** the same `ALTER … TYPE` blocking and through copy-and-swap;
//! * **P2** a plain rebuild (`VACUUM FULL` through copy-and-swap) against
//!   `pg_repack --table`;
//! * **P3/P4** the relay workload at a fixed rate during a blocking ALTER and
//!   during a pgshift run of relay migration 0008, the swap's lock hold and
//!   the writers' spike around it, the lost-write oracle;
//! * **P5** single-row insert throughput without triggers, with a naive
//!   capture, and with pgshift's capture (engine running, then killed);
//! * **P6** the engine's peak RSS in a child process at two table sizes;
//! * **P7** the change-log backlog at twice the demo rate;
//! * **P8** a streaming replica under the P3 load and change: its replay lag
//!   over time and at the swap, with the default throttle and with it off, and a
//!   keyset reader on it checked for skips, repeats and cancelled queries;
//! * **D1** desired state's `pull` and `diff` on a generated schema (1,000
//!   tables by default), in rounds (no target).
//!
//! [`run`] does it all; the program that calls it must hand the hidden
//! `engine-run` subcommand to [`engine::child_main`], because P1, P2, P5 and
//! P6 run the engine in a child process (the same executable), and the hidden
//! `desired-run` subcommand to [`desired::child_main`], D1's child.

pub mod desired;
pub mod engine;
pub mod env;
pub mod markdown;
pub mod results;

mod capture;
mod relay;
mod replica;
mod sampler;
mod tables;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use pgshift::cas::{CutoverBudgets, Mode, RunOptions, ThrottleLimits, VerifyMethod};
use pgshift_embedded::{Cluster, ClusterOptions, PgInstall};
use tokio_postgres::{Client, NoTls};

use self::results::{BenchResults, EngineSettings, Failure, LockHold, Sizes, P4, P6};

/// What went wrong in a step of the benchmark.
#[derive(Debug)]
pub struct BenchError(pub String);

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

/// The benchmark's result type.
pub type BenchResult<T> = Result<T, BenchError>;

/// Adds what was being done to an error.
pub(crate) trait Context<T> {
    /// `Err(e)` becomes `Err("{what}: {e}")`.
    fn ctx(self, what: &str) -> BenchResult<T>;
}

impl<T, E: std::error::Error> Context<T> for Result<T, E> {
    fn ctx(self, what: &str) -> BenchResult<T> {
        self.map_err(|e| BenchError(format!("{what}: {}", chain(&e))))
    }
}

/// An error with its sources (`db error: ERROR: …` rather than `db error`).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

/// A scenario of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    /// Rewrite cost against the blocking ALTER.
    P1,
    /// Plain rebuild against pg_repack.
    P2,
    /// Live writes during the change (with P4, the cutover).
    P3,
    /// Capture overhead.
    P5,
    /// Engine footprint.
    P6,
    /// Catch-up at twice the demo rate.
    P7,
    /// A streaming replica: replay lag and a reader on it.
    P8,
    /// Desired state: `pull` and `diff` on a generated schema.
    D1,
}

impl Scenario {
    /// Every scenario, in the order they run.
    pub const ALL: [Scenario; 8] = [
        Scenario::P1,
        Scenario::P2,
        Scenario::P6,
        Scenario::P5,
        Scenario::D1,
        Scenario::P3,
        Scenario::P7,
        Scenario::P8,
    ];

    /// Parses `P1`…`P8` (`P4` means P3, which measures it) and `D1`.
    pub fn parse(text: &str) -> Option<Scenario> {
        match text.trim().to_ascii_uppercase().as_str() {
            "P1" => Some(Scenario::P1),
            "P2" => Some(Scenario::P2),
            "P3" | "P4" => Some(Scenario::P3),
            "P5" => Some(Scenario::P5),
            "P6" => Some(Scenario::P6),
            "P7" => Some(Scenario::P7),
            "P8" => Some(Scenario::P8),
            "D1" => Some(Scenario::D1),
            _ => None,
        }
    }

    /// `P1`…, `D1`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::P1 => "P1",
            Scenario::P2 => "P2",
            Scenario::P3 => "P3",
            Scenario::P5 => "P5",
            Scenario::P6 => "P6",
            Scenario::P7 => "P7",
            Scenario::P8 => "P8",
            Scenario::D1 => "D1",
        }
    }
}

/// What to run, and how big.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Where the JSON, the charts and the markdown go.
    pub out: PathBuf,
    /// Rows of each P1/P2 table (and of P6's large one).
    pub rows: u64,
    /// Rows of each table of P1's larger size (0: P1 at the standard size only).
    pub p1_large_rows: u64,
    /// Rows of P6's small table.
    pub small_rows: u64,
    /// Seed rows per partition of the relay's `events`.
    pub relay_rows_per_partition: u32,
    /// The relay writers' rate for P3/P4 (P7 runs at twice this).
    pub rate: f64,
    /// Seconds of load before each relay change.
    pub before_s: u64,
    /// Seconds of load after.
    pub after_s: u64,
    /// Seconds of each P5 measurement.
    pub p5_seconds: u64,
    /// P5 rounds.
    pub p5_rounds: u32,
    /// Rounds of P1 (at each size) and of P2, alternating which side runs first.
    pub pair_rounds: u32,
    /// Rounds of P3's runs with the default and with the stricter throttle.
    pub p3_rounds: u32,
    /// Rows of the P5 table.
    pub p5_rows: u64,
    /// Tables of D1's generated schema.
    pub desired_tables: u32,
    /// Rounds of D1.
    pub desired_rounds: u32,
    /// Whether these are the `--quick` sizes (reported).
    pub quick: bool,
    /// The scenarios to run.
    pub only: BTreeSet<Scenario>,
    /// PostgreSQL's bin directory (default: discovered).
    pub pg_bin: Option<PathBuf>,
    /// Copy workers of every pgshift run.
    pub workers: usize,
    /// Chunk target duration of every pgshift run, ms.
    pub chunk_target_ms: u64,
    /// `--max-writer-slowdown` of P3's run with the stricter throttle (a ratio).
    pub strict_writer_slowdown: f64,
    /// Longest a pgshift run under the relay load may take before the benchmark
    /// gives up on it (a throttle that never lets the work go), seconds.
    pub change_timeout_s: u64,
    /// How every pgshift run verifies.
    pub verify: VerifyMethod,
    /// The arguments the command was given, for the report.
    pub args: Vec<String>,
}

impl BenchOptions {
    /// The default sizes.
    pub fn standard(out: impl Into<PathBuf>) -> Self {
        BenchOptions {
            out: out.into(),
            rows: 2_000_000,
            p1_large_rows: 10_000_000,
            small_rows: 200_000,
            relay_rows_per_partition: 100_000,
            rate: 200.0,
            before_s: 12,
            after_s: 8,
            p5_seconds: 5,
            p5_rounds: 3,
            pair_rounds: 3,
            p3_rounds: 3,
            p5_rows: 100_000,
            desired_tables: 1_000,
            desired_rounds: 3,
            quick: false,
            only: Scenario::ALL.into_iter().collect(),
            pg_bin: None,
            workers: 2,
            chunk_target_ms: 500,
            strict_writer_slowdown: 1.5,
            change_timeout_s: 900,
            verify: VerifyMethod::Digest,
            args: Vec::new(),
        }
    }

    /// The `--quick` sizes: everything runs, on small tables, in about a
    /// minute.
    pub fn quick(out: impl Into<PathBuf>) -> Self {
        BenchOptions {
            rows: 100_000,
            p1_large_rows: 300_000,
            change_timeout_s: 180,
            small_rows: 10_000,
            relay_rows_per_partition: 2_000,
            before_s: 4,
            after_s: 3,
            p5_seconds: 2,
            p5_rounds: 1,
            pair_rounds: 1,
            p3_rounds: 1,
            p5_rows: 10_000,
            desired_tables: 50,
            desired_rounds: 1,
            quick: true,
            ..BenchOptions::standard(out)
        }
    }

    /// The copy-and-swap options of P3's run with the stricter throttle: the
    /// default limits with a lower writer slowdown.
    pub fn strict_throttle(&self) -> ThrottleLimits {
        ThrottleLimits {
            max_writer_slowdown: Some(self.strict_writer_slowdown),
            ..ThrottleLimits::default()
        }
    }

    /// The copy-and-swap options of every run (the default throttle).
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            disk_room: None,
            mode: Mode::Live,
            workers: self.workers,
            chunk_target_ms: self.chunk_target_ms,
            first_chunk_rows: 10_000,
            cutover: CutoverBudgets {
                lock_timeout_ms: 1_000,
                attempts: 10,
                backoff_initial_ms: 200,
                backoff_max_ms: 5_000,
                max_drain: 10_000,
            },
            keep_old: false,
            repair: false,
            defer_cutover: false,
            throttle: ThrottleLimits::default(),
            verify: self.verify,
        }
    }

    fn engine_settings(&self) -> EngineSettings {
        let o = self.run_options();
        EngineSettings {
            workers: o.workers,
            chunk_target_ms: o.chunk_target_ms,
            first_chunk_rows: o.first_chunk_rows,
            cutover_lock_timeout_ms: o.cutover.lock_timeout_ms,
            cutover_attempts: o.cutover.attempts,
            max_drain: o.cutover.max_drain,
            verify: match o.verify {
                VerifyMethod::Digest => "digest".to_owned(),
                VerifyMethod::Exact => "exact".to_owned(),
            },
        }
    }

    fn sizes(&self) -> Sizes {
        Sizes {
            quick: self.quick,
            rows: self.rows,
            p1_large_rows: self.p1_large_rows,
            small_rows: self.small_rows,
            relay_rows_per_partition: self.relay_rows_per_partition,
            relay_rate: self.rate,
            relay_before_s: self.before_s,
            relay_after_s: self.after_s,
            p5_seconds: self.p5_seconds,
            p5_rounds: self.p5_rounds,
            pair_rounds: self.pair_rounds,
            p3_rounds: self.p3_rounds,
            desired_tables: self.desired_tables,
            desired_rounds: self.desired_rounds,
        }
    }
}

/// Server settings of the benchmark's cluster, on top of the throwaway
/// cluster's own (fsync off, synchronous_commit on, …): the blocking ALTER
/// and pg_repack get the `maintenance_work_mem` pgshift sets for its own
/// index builds, and checkpoints are spaced out.
pub const CLUSTER_SETTINGS: &[(&str, &str)] = &[
    ("maintenance_work_mem", "256MB"),
    ("max_wal_size", "8GB"),
    ("checkpoint_timeout", "30min"),
];

/// Where a run stands: the cluster, the benchmark database, the clock.
pub(crate) struct Bench {
    pub cluster: Cluster,
    pub options: BenchOptions,
    pub started: Instant,
    /// Every swap seen, for P4.
    pub holds: Vec<LockHold>,
    /// P6 samples gathered by other scenarios.
    pub rss: Vec<results::RssSample>,
}

impl Bench {
    /// The connection string of database `db`.
    pub fn conninfo(&self, db: &str) -> String {
        self.cluster.connection_string(db)
    }

    /// A progress line on stderr.
    pub fn say(&self, text: impl AsRef<str>) {
        eprintln!(
            "[{:>6.1} s] {}",
            self.started.elapsed().as_secs_f64(),
            text.as_ref()
        );
    }
}

/// A session on `conninfo` whose connection task runs on the current runtime.
pub(crate) async fn connect(conninfo: &str) -> BenchResult<Client> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .ctx("connecting")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// One `bigint` (or anything castable to it) from a query.
pub(crate) async fn scalar_i64(client: &Client, sql: &str) -> BenchResult<i64> {
    let row = client.query_one(sql, &[]).await.ctx(sql)?;
    row.try_get::<_, i64>(0).ctx(sql)
}

/// Runs the benchmark and writes `results.json`, the charts and
/// `results.md` into `options.out`. Scenarios that fail are reported in the
/// results (and the others still run); only a failure to start the cluster or
/// write the files is an error.
pub async fn run(options: BenchOptions) -> BenchResult<BenchResults> {
    let started = Instant::now();
    let started_at = SystemTime::now();
    std::fs::create_dir_all(&options.out).ctx("creating the output directory")?;
    let mut cluster_options = ClusterOptions::new();
    if let Some(bin) = &options.pg_bin {
        cluster_options =
            cluster_options.install(PgInstall::from_bindir(bin).ctx("using --pg-bin")?);
    }
    for (name, value) in CLUSTER_SETTINGS {
        cluster_options = cluster_options.setting(*name, *value);
    }
    eprintln!("starting a throwaway PostgreSQL cluster");
    let cluster = Cluster::start(&cluster_options).ctx("starting the cluster")?;
    let mut bench = Bench {
        cluster,
        options: options.clone(),
        started,
        holds: Vec::new(),
        rss: Vec::new(),
    };
    let admin = connect(&bench.conninfo("postgres")).await?;
    admin
        .batch_execute("CREATE DATABASE bench")
        .await
        .ctx("creating database bench")?;
    let postgres = env::postgres_info(&admin, &bench.cluster).await?;
    bench.say(format!(
        "PostgreSQL {} at {}",
        postgres.version, postgres.bindir
    ));

    let mut results = BenchResults {
        schema_version: results::SCHEMA_VERSION,
        tool: format!("pgshift-bench {}", env!("CARGO_PKG_VERSION")),
        started_at_utc: env::utc_iso8601(started_at),
        command: env::command_line(&options.args),
        source_revision: env::source_revision(),
        args: options.args.clone(),
        scenarios: Scenario::ALL
            .into_iter()
            .filter(|s| options.only.contains(s))
            .map(|s| s.name().to_owned())
            .collect(),
        runtime_s: 0.0,
        machine: env::machine(),
        postgres,
        sizes: options.sizes(),
        engine: options.engine_settings(),
        p1: None,
        p1_large: None,
        p2: None,
        p3: None,
        p4: None,
        p5: None,
        p6: None,
        p7: None,
        p8: None,
        d1: None,
        failures: Vec::new(),
        targets: Vec::new(),
        notes: notes(&options.only),
    };
    let selected = |s: Scenario| options.only.contains(&s);
    for scenario in Scenario::ALL.into_iter().filter(|s| selected(*s)) {
        bench.say(format!("{} starts", scenario.name()));
        let outcome = match scenario {
            Scenario::P1 => p1_at_both_sizes(&mut bench, &mut results).await,
            Scenario::P2 => tables::p2(&mut bench).await.map(|p| results.p2 = Some(p)),
            Scenario::P6 => tables::p6_small(&mut bench).await,
            Scenario::P5 => capture::p5(&mut bench).await.map(|p| results.p5 = Some(p)),
            Scenario::D1 => desired::d1(&mut bench).await.map(|d| results.d1 = Some(d)),
            Scenario::P3 | Scenario::P7 | Scenario::P8 => Ok(()),
        };
        if let Err(e) = outcome {
            bench.say(format!("{} failed: {e}", scenario.name()));
            results.failures.push(Failure {
                scenario: scenario.name().to_owned(),
                error: e.to_string(),
            });
        }
    }
    let wanted = relay::Wanted {
        p3: selected(Scenario::P3),
        p7: selected(Scenario::P7),
        p8: selected(Scenario::P8),
    };
    if wanted.p3 || wanted.p7 || wanted.p8 {
        match relay::run(&mut bench, wanted).await {
            Ok(relay) => {
                results.p3 = relay.p3;
                results.p7 = relay.p7;
                results.p8 = relay.p8;
                results.failures.extend(relay.failures);
            }
            Err(e) => {
                bench.say(format!("relay scenarios failed: {e}"));
                results.failures.push(Failure {
                    scenario: "P3/P7/P8".to_owned(),
                    error: e.to_string(),
                });
            }
        }
    }
    if selected(Scenario::P6) {
        results.p6 = p6(&bench, &mut results.failures);
    }
    if let Some(p3) = &results.p3 {
        results.p4 = Some(p4(&bench, p3));
    }
    results.runtime_s = started.elapsed().as_secs_f64();
    results.machine.load_average_end = env::load_average();
    results.targets = results::evaluate(&results);
    write_outputs(&options.out, &results)?;
    bench.say(format!(
        "done in {:.0} s; results in {}",
        results.runtime_s,
        options.out.display()
    ));
    drop(admin);
    Ok(results)
}

/// P1 at the standard size, then at the larger one (a failure at one size leaves
/// the other's figures).
async fn p1_at_both_sizes(bench: &mut Bench, results: &mut BenchResults) -> BenchResult<()> {
    let rows = bench.options.rows;
    results.p1 = Some(tables::p1(bench, rows).await?);
    let large = bench.options.p1_large_rows;
    if large > 0 {
        bench.say(format!("P1 at the larger size: {large} rows"));
        results.p1_large = Some(
            tables::p1(bench, large)
                .await
                .map_err(|e| BenchError(format!("at {large} rows: {e}")))?,
        );
    }
    Ok(())
}

/// P6 from the samples the other scenarios gathered.
fn p6(bench: &Bench, failures: &mut Vec<Failure>) -> Option<P6> {
    let mut samples = bench.rss.clone();
    samples.sort_by_key(|s| (s.rows, s.vm_hwm_kib));
    let (Some(small), Some(large)) = (samples.first(), samples.last()) else {
        failures.push(Failure {
            scenario: "P6".to_owned(),
            error: "no engine run in a child process finished".to_owned(),
        });
        return None;
    };
    if small.rows == large.rows {
        failures.push(Failure {
            scenario: "P6".to_owned(),
            error: "engine runs at only one table size (run P1 or P2 with P6)".to_owned(),
        });
        return None;
    }
    let largest_rows = large.rows;
    let large_peak = samples
        .iter()
        .filter(|s| s.rows == largest_rows)
        .map(|s| s.vm_hwm_kib)
        .max()
        .unwrap_or(0);
    Some(P6 {
        max_kib: samples.iter().map(|s| s.vm_hwm_kib).max().unwrap_or(0),
        growth: large_peak as f64 / small.vm_hwm_kib.max(1) as f64,
        size_factor: large.rows as f64 / small.rows.max(1) as f64,
        samples,
    })
}

/// P4 from the relay run's cutover and every swap's hold.
fn p4(bench: &Bench, p3: &results::P3) -> P4 {
    let relay = &p3.pgshift;
    let relay_hold_us = relay
        .engine
        .as_ref()
        .and_then(|e| e.lock_held_us)
        .unwrap_or(0);
    P4 {
        holds: bench.holds.clone(),
        max_hold_us: bench
            .holds
            .iter()
            .map(|h| h.lock_held_us)
            .max()
            .unwrap_or(0),
        relay_hold_us,
        spike_ms: relay.cutover_spike_ms.unwrap_or(0.0),
        around_p99_ms: relay
            .around_cutover
            .as_ref()
            .map_or(0.0, |w| pgshift_workload::stats::ms(w.p99_us)),
        before_p99_ms: pgshift_workload::stats::ms(relay.before.p99_us),
    }
}

/// `results.json`, `results.md` and the charts.
pub fn write_outputs(out: &Path, results: &BenchResults) -> BenchResult<()> {
    let json = serde_json::to_string_pretty(results).ctx("serialising the results")?;
    std::fs::write(out.join("results.json"), json + "\n").ctx("writing results.json")?;
    draw_charts(out, results)?;
    std::fs::write(out.join("results.md"), markdown::render(results, ""))
        .ctx("writing results.md")?;
    Ok(())
}

/// Draws every chart of `results` into `out` (from the series kept in the
/// JSON, so `render` can draw them again).
pub fn draw_charts(out: &Path, results: &BenchResults) -> BenchResult<()> {
    use pgshift_workload::chart::{
        write_backlog_chart, write_lag_chart, write_latency_chart_with_throttle, BacklogLine,
    };
    let mut runs = Vec::new();
    if let Some(p3) = &results.p3 {
        runs.push(&p3.blocking);
        runs.extend(p3.pgshift_runs());
    }
    if let Some(p7) = &results.p7 {
        runs.push(&p7.run);
    }
    if let Some(p8) = &results.p8 {
        runs.extend(p8.runs.iter().map(|r| &r.run));
    }
    for run in runs {
        let title = format!(
            "{} — {} writers at {:.0}/s on the relay's events",
            run.label, run.load.writers, run.load.target_rate
        );
        write_latency_chart_with_throttle(
            &out.join(&run.chart),
            &title,
            &run.series,
            &run.phases,
            &throttle_marks(run),
        )
        .ctx("drawing a latency chart")?;
    }
    if let Some(p7) = &results.p7 {
        let mut lines = vec![BacklogLine {
            label: format!("{:.0} writes/s (P7)", p7.run.load.target_rate),
            samples: p7.run.backlog.clone(),
        }];
        if let Some(p3) = &results.p3 {
            lines.push(BacklogLine {
                label: format!("{:.0} writes/s (P3)", p3.pgshift.load.target_rate),
                samples: p3.pgshift.backlog.clone(),
            });
        }
        write_backlog_chart(
            &out.join(&p7.backlog_chart),
            "pgshift change-log backlog (entries waiting for the applier)",
            &lines,
            &p7.run.phases,
        )
        .ctx("drawing the backlog chart")?;
    }
    for replica in results.p8.iter().flat_map(|p| &p.runs) {
        let line = BacklogLine {
            label: "bytes of WAL not replayed (pg_stat_replication)".to_owned(),
            samples: replica.lag.iter().map(|s| (s.at_s, s.bytes)).collect(),
        };
        write_lag_chart(
            &out.join(&replica.lag_chart),
            &format!("replica replay lag — {}", replica.run.label),
            &[line],
            &replica.run.phases,
            &throttle_marks(&replica.run),
        )
        .ctx("drawing a replay lag chart")?;
    }
    Ok(())
}

/// The throttle's spans of `run`, as the chart shades them.
fn throttle_marks(run: &results::RelayRun) -> Vec<pgshift_workload::chart::ThrottleMark> {
    run.throttle.as_ref().map_or_else(Vec::new, |t| {
        t.spans
            .iter()
            .map(|span| pgshift_workload::chart::ThrottleMark {
                label: format!("{}: {}", span_word(&span.pace), span.signal),
                paused: span.pace == "paused",
                start_s: span.start_s,
                end_s: span.end_s,
            })
            .collect()
    })
}

/// `slowed` or `paused`.
fn span_word(pace: &str) -> &str {
    if pace == "slow" {
        "slowed"
    } else {
        pace
    }
}

/// What the figures are and what is approximated: the notes of the scenarios in
/// `only`.
fn notes(only: &BTreeSet<Scenario>) -> Vec<String> {
    let any_p = only.iter().any(|s| *s != Scenario::D1);
    let p_notes = [
        "Every ratio is measured side by side in this one run, on identical tables (created by the same statements) or on identical copies of one seeded database (CREATE DATABASE … TEMPLATE), each side after a CHECKPOINT.",
        "Wall times of pgshift runs in a child process (P1, P2, P6) are from spawning the process to its exit; in-process runs (P3, P7) from the call to its return.",
        "Writer latencies are per write (BEGIN, statement, COMMIT). The windows' figures (before, during, around the cutover, after) are exact, from each write's start and finish in the ledger, over the writes that started in the window; a write still running when the load stopped counts until then. The charts use per-second HdrHistograms (2 significant digits, 1 % precision), each write in the second it started.",
        "A write slot the schedule skipped because every writer was waiting is counted, not issued later (the catch-up window is 1 s): a stall shows as skipped slots plus a few very long writes.",
        "P4's hold is the engine's own measure, from the granted LOCK TABLE to the end of COMMIT. 'p99 over runs' is taken as the largest hold, since the benchmark has fewer than 100 swaps. The spike is the longest write that started between 1 s before the cutover phase and 1 s after the run ended.",
        "P5 uses pgbench (single-row inserts into a table with a bigint identity key, 2 clients) like the ecosystem measurement, in rounds on a fresh table each: no trigger, naive capture, pgshift capture with the engine running, pgshift capture with the engine killed, no trigger again. 'Engine running' is pgshift waiting in `ready` (defer_cutover) with its applier draining the change log on the same 2 cores; 'capture only' is the same capture after the engine process was killed with SIGKILL (the run is then aborted, which removes the triggers). Each round's baseline is the mean of its first and last measurement; the figures are medians over the rounds of each round's ratios.",
        "P6 reads VmHWM of the child process from /proc/<pid>/status: the child reports its own at exit; the parent also samples it every 100 ms while the child runs.",
        "P1 runs at two sizes (the standard one and --p1-large-rows), each on its own pair of identical tables; its targets are held at the larger size.",
        "P3 runs pgshift three times under the same load, each on its own copy of the seeded database: with the default throttle, with a stricter --max-writer-slowdown, and with every throttle limit off. A run's copy slowdown is its copy phase over the unthrottled run's. The throttle's decisions are the engine's own (RunReport.throttle: one at each change of pace and every few seconds meanwhile); a span lasts from its decision to the next one, the last to the end of the paced work (copy, index builds, verification), and is shaded on the run's latency chart. A pgshift run under the relay load that has not finished after its budget (900 s; 180 s with --quick) is given up and reported as a failure with the throttle's state: a throttle that never lets the work go would otherwise hold the benchmark for ever.",
        "P7's backlog is count(*) of pgshift.log_<run> sampled every 500 ms by a separate session; 'steady state' means that over the second half of the samples taken before the cutover the backlog grows by less than 5 % of the write rate per second (least-squares slope).",
        "P8 adds a streaming replica (pg_basebackup -R -X stream, started after P3 and P7) and runs P3's change under P3's load on two more copies of the seeded database, with the default throttle and with every limit off. The replay lag is sampled every 500 ms on the primary from pg_stat_replication (pg_current_wal_lsn() - replay_lsn, and replay_lag, which is NULL once the standby is idle); 'around the swap' is the largest sample from 1 s before the cutover phase to 1 s after it; 'behind at the swap' and 'swap replayed after' are the engine's own report. The reader on the replica reads the newest 20,000 rows (or fewer) at or before a fence a second before the load started, 200 rows a page, 10 ms apart; the load never inserts, deletes or re-keys those rows, so every complete pass must read exactly the set read on the primary after the run. Skips, repeats (with rows out of order or not fenced) and queries cancelled by a conflict with recovery are P8's targets, from issue 12 (targets.md has none for P8); no target is set for the lag.",
    ];
    let d1_notes = [
        "D1 generates its schema (the same text for the same --desired-tables) in a database of its own on the benchmark's cluster, one transaction per table. Each round pulls it into a new folder, adds a column to a few tables' files there, and diffs the folder against the database. pull and diff run in a child process (the bench binary re-executing itself) that calls the library as `pgshift pull` and `pgshift diff` do: `desired::pull`; `desired::compare`, then `plan` of its statements against the database. The pull's times (read, proof, total) and the comparison's are the library's own (`Pulled.timings_ms`, `Compared.total_ms`); the plan is timed around the call, the diff from the call of `compare` to the plan's end. Peak RSS is VmHWM of the child process: pg_dump, psql and the throwaway clusters they use are processes of their own and not in it. targets.md sets no target for D1.",
    ];
    let mut notes = Vec::new();
    if any_p {
        notes.extend(p_notes);
    }
    if only.contains(&Scenario::D1) {
        notes.extend(d1_notes);
    }
    notes.into_iter().map(str::to_owned).collect()
}

/// Sleeps `seconds`.
pub(crate) async fn pause(seconds: f64) {
    tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))).await;
}
