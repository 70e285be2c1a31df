//! P3, P4 and P7: the relay workload on identical copies of one seeded
//! database, while relay migration 0008 runs blocking on one copy and through
//! pgshift on another (P3/P4), and through pgshift at twice the demo rate on a
//! third (P7); P8's copies are made here too and run by [`super::replica`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgshift::cas::{self, CasProgress, Phase, RunOptions, ThrottleLimits};
use pgshift::connect::ConnectionSpec;
use pgshift_sql::QualifiedName;
use pgshift_workload::chart::PhaseMark;
use pgshift_workload::load::{self, LoadConfig, LoadReport};
use pgshift_workload::oracle::{self, OracleOptions};
use pgshift_workload::pacing::Pace;
use pgshift_workload::stats::{
    ledger_window, longest_write, slope, steady_state, write_series, writes_waiting_longer,
};
use pgshift_workload::{schema, TableRef};
use tokio_postgres::Client;

use super::engine::engine_run_of;
use super::results::{
    limits, Failure, LoadFigures, LockHold, OracleFigures, PhaseBacklog, RelayRun, ThrottleFigures,
    P3, P7, P8,
};
use super::sampler::{Probe, Sampler};
use super::{connect, pause, scalar_i64, Bench, BenchError, BenchResult, Context};

/// Relay migration 0008: `kind` becomes bigint, which needs the stored
/// generated `search_tsv` (it reads `kind`) dropped and added again with the
/// new expression: a full rewrite of every partition.
pub const STATEMENT: &str = "ALTER TABLE events DROP COLUMN search_tsv, \
    ALTER COLUMN kind TYPE bigint, \
    ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS \
    (CASE WHEN kind IN (1, 30023, 30024) THEN to_tsvector('english', content) END) STORED";

/// Seconds at the start of a load left out of "before" (connections, caches).
const WARM_UP_S: f64 = 2.0;

/// Writer connections of P3 (the relay default) and of P7 (twice the rate).
const P3_WRITERS: usize = 4;
const P7_WRITERS: usize = 8;

/// How the change runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Change {
    Blocking,
    /// Through pgshift, with these throttle limits.
    Pgshift(ThrottleLimits),
}

/// Every throttle limit off: the copy at the speed of its settings, for the
/// throttled runs' slowdown.
pub(super) const NO_LIMITS: ThrottleLimits = ThrottleLimits {
    max_replica_lag_ms: None,
    max_writer_p99_ms: None,
    max_writer_slowdown: None,
    max_wal_bytes_per_s: None,
    interval_ms: pgshift::cas::throttle::DEFAULT_LIMITS.interval_ms,
};

/// Writer connections of P8 (as P3).
pub(super) const P8_WRITERS: usize = P3_WRITERS;

/// One relay scenario run: where, how, how fast.
pub(super) struct Plan<'a> {
    pub db: &'a str,
    pub change: Change,
    pub rate: f64,
    pub writers: usize,
    pub label: &'a str,
    pub chart: &'a str,
}

/// Which relay scenarios to run.
pub(crate) struct Wanted {
    pub p3: bool,
    pub p7: bool,
    pub p8: bool,
}

/// What the relay scenarios measured, and which of them failed.
pub(crate) struct RelayResults {
    pub p3: Option<P3>,
    pub p7: Option<P7>,
    pub p8: Option<P8>,
    pub failures: Vec<Failure>,
}

/// The databases, and what to measure.
pub(crate) async fn run(bench: &mut Bench, wanted: Wanted) -> BenchResult<RelayResults> {
    let (want_p3, want_p7) = (wanted.p3, wanted.p7);
    let per_partition = bench.options.relay_rows_per_partition;
    let admin = connect(&bench.conninfo("postgres")).await?;
    admin
        .batch_execute("CREATE DATABASE relay_seed")
        .await
        .ctx("creating relay_seed")?;
    {
        let client = connect(&bench.conninfo("relay_seed")).await?;
        bench.say(format!(
            "relay: loading the schema and seeding {per_partition} rows per partition"
        ));
        let psql = schema::Psql::of_cluster(&bench.cluster, "relay_seed");
        schema::load_schema(&psql, Duration::from_secs(120))
            .await
            .ctx("loading the relay schema")?;
        let seeded = schema::seed(&psql, per_partition, Duration::from_secs(3600))
            .await
            .ctx("seeding the relay")?;
        client
            .batch_execute("VACUUM (ANALYZE)")
            .await
            .ctx("vacuuming the relay")?;
        client.batch_execute("CHECKPOINT").await.ctx("CHECKPOINT")?;
        bench.say(format!("relay: {} events seeded", seeded.total()));
    }
    let p3_rounds = bench.options.p3_rounds.max(1);
    let mut copies: Vec<String> = Vec::new();
    if want_p3 {
        copies.extend(["relay_blocking".to_owned(), "relay_unthrottled".to_owned()]);
        for round in 1..=p3_rounds {
            copies.extend([
                round_db("relay_pgshift", round),
                round_db("relay_strict", round),
            ]);
        }
    }
    if want_p7 {
        copies.push("relay_2x".to_owned());
    }
    if wanted.p8 {
        copies.extend(super::replica::COPIES.iter().map(|c| (*c).to_owned()));
    }
    let file_copy = scalar_i64(
        &admin,
        "SELECT current_setting('server_version_num')::bigint",
    )
    .await?
        >= 150_000;
    for copy in &copies {
        clone_database(&admin, "relay_seed", copy, file_copy).await?;
    }
    admin
        .batch_execute("DROP DATABASE relay_seed")
        .await
        .ctx("dropping relay_seed")?;
    let (rows, total_bytes) = {
        let client = connect(&bench.conninfo(&copies[0])).await?;
        events_size(&client).await?
    };
    bench.say(format!(
        "relay: {} copies of {rows} events ({} MiB)",
        copies.len(),
        total_bytes / (1024 * 1024)
    ));

    let mut failures = Vec::new();
    let mut p3 = None;
    if want_p3 {
        let rate = bench.options.rate;
        let blocking = change_under_load(
            bench,
            &Plan {
                db: "relay_blocking",
                change: Change::Blocking,
                rate,
                writers: P3_WRITERS,
                label: "blocking ALTER TABLE",
                chart: "p3-blocking.svg",
            },
        )
        .await;
        drop_database(&admin, "relay_blocking").await;
        let strict_label = format!(
            "pgshift, stricter throttle (--max-writer-slowdown {})",
            bench.options.strict_writer_slowdown
        );
        let settings = [
            (
                "relay_pgshift",
                ThrottleLimits::default(),
                "pgshift copy-and-swap".to_owned(),
                "p3-pgshift.svg",
            ),
            (
                "relay_strict",
                bench.options.strict_throttle(),
                strict_label,
                "p3-pgshift-strict.svg",
            ),
        ];
        // Each round runs both settings, then the next round: the rounds of a setting
        // spread over the run rather than one after the other. The run with the
        // throttle off (what the copy's slowdown is measured against) runs once.
        let mut rounds: [Vec<Result<RelayRun, Failure>>; 2] = [Vec::new(), Vec::new()];
        let mut unthrottled = missing();
        for round in 1..=p3_rounds {
            for (i, (db, limits, label, chart)) in settings.iter().enumerate() {
                let db = round_db(db, round);
                let label = round_label(label, round);
                let run = pgshift_p3_run(bench, &admin, &db, *limits, &label, chart).await;
                rounds[i].push(run);
            }
            if round == 1 {
                unthrottled = pgshift_p3_run(
                    bench,
                    &admin,
                    "relay_unthrottled",
                    NO_LIMITS,
                    "pgshift, throttle off",
                    "p3-pgshift-unthrottled.svg",
                )
                .await;
            }
        }
        let [pgshift_rounds, strict_rounds] = rounds;
        let (pgshift, pgshift_ratios) = median_run(pgshift_rounds, &mut failures);
        let (strict, strict_ratios) = median_run(strict_rounds, &mut failures);
        let pgshift = pgshift.ok_or_else(|| Failure {
            scenario: "P3 (pgshift copy-and-swap)".to_owned(),
            error: "no round with the default throttle completed".to_owned(),
        });
        let unthrottled = match unthrottled {
            Ok(run) => Some(run),
            Err(failure) => {
                failures.push(failure);
                None
            }
        };
        match (blocking, pgshift) {
            (Ok(blocking), Ok(pgshift)) => {
                p3 = Some(P3 {
                    statement: STATEMENT.to_owned(),
                    rows,
                    total_bytes,
                    pgshift_p99_ratio: p99_ratio(&pgshift),
                    blocking_p99_ratio: p99_ratio(&blocking),
                    strict_p99_ratio: strict.as_ref().map(p99_ratio),
                    blocking,
                    pgshift,
                    strict,
                    unthrottled,
                    pgshift_rounds: pgshift_ratios,
                    strict_rounds: strict_ratios,
                });
            }
            (blocking, pgshift) => {
                if let Err(e) = blocking {
                    failures.push(Failure {
                        scenario: "P3 (blocking)".to_owned(),
                        error: e.to_string(),
                    });
                }
                if let Err(failure) = pgshift {
                    failures.push(failure);
                }
            }
        }
    }
    let mut p7 = None;
    if want_p7 {
        let demo_rate = bench.options.rate;
        let run = change_under_load(
            bench,
            &Plan {
                db: "relay_2x",
                change: Change::Pgshift(ThrottleLimits::default()),
                rate: demo_rate * 2.0,
                writers: P7_WRITERS,
                label: "pgshift copy-and-swap at 2× the demo rate",
                chart: "p7-pgshift-2x.svg",
            },
        )
        .await;
        drop_database(&admin, "relay_2x").await;
        match run {
            Ok(run) => p7 = Some(judge_p7(run, demo_rate)),
            Err(e) => failures.push(Failure {
                scenario: "P7".to_owned(),
                error: e.to_string(),
            }),
        }
    }
    let mut p8 = None;
    if wanted.p8 {
        match super::replica::p8(bench, &admin).await {
            Ok(p) => p8 = Some(p),
            Err(e) => failures.push(Failure {
                scenario: "P8".to_owned(),
                error: e.to_string(),
            }),
        }
        for db in super::replica::COPIES {
            drop_database(&admin, db).await;
        }
    }
    Ok(RelayResults {
        p3,
        p7,
        p8,
        failures,
    })
}

/// The copy of the seeded database for `round` of a P3 setting (`base` for the first).
fn round_db(base: &str, round: u32) -> String {
    if round == 1 {
        base.to_owned()
    } else {
        format!("{base}_{round}")
    }
}

/// A P3 run's label in `round` (the first keeps the setting's own).
fn round_label(label: &str, round: u32) -> String {
    if round == 1 {
        label.to_owned()
    } else {
        format!("{label}, round {round}")
    }
}

/// p99 during / p99 before.
fn p99_ratio(run: &RelayRun) -> f64 {
    run.during.p99_us as f64 / run.before.p99_us.max(1) as f64
}

/// One of P3's pgshift runs on its copy `db`, which is dropped after.
async fn pgshift_p3_run(
    bench: &mut Bench,
    admin: &Client,
    db: &str,
    limits: ThrottleLimits,
    label: &str,
    chart: &str,
) -> Result<RelayRun, Failure> {
    let run = change_under_load(
        bench,
        &Plan {
            db,
            change: Change::Pgshift(limits),
            rate: bench.options.rate,
            writers: P3_WRITERS,
            label,
            chart,
        },
    )
    .await;
    drop_database(admin, db).await;
    run.map_err(|e| Failure {
        scenario: format!("P3 ({label})"),
        error: e.to_string(),
    })
}

/// The round of a setting whose p99 ratio is the median (of an even number of
/// completed rounds, the higher of the two in the middle), and every completed
/// round's ratio in the order run; a round that failed is a failure.
fn median_run(
    rounds: Vec<Result<RelayRun, Failure>>,
    failures: &mut Vec<Failure>,
) -> (Option<RelayRun>, Vec<f64>) {
    let mut done = Vec::new();
    for round in rounds {
        match round {
            Ok(run) => done.push(run),
            Err(failure) => failures.push(failure),
        }
    }
    let ratios: Vec<f64> = done.iter().map(p99_ratio).collect();
    let run = pgshift_workload::stats::upper_median_index(&ratios).map(|i| done.swap_remove(i));
    (run, ratios)
}

/// The outcome of a run that was never made.
fn missing() -> Result<RelayRun, Failure> {
    Err(Failure {
        scenario: "P3".to_owned(),
        error: "a pgshift run is missing".to_owned(),
    })
}

/// P7's verdict on a run: the backlog between the start of the copy and the
/// cutover.
fn judge_p7(run: RelayRun, demo_rate: f64) -> P7 {
    let start = run
        .phases
        .iter()
        .find(|p| p.label == "copying")
        .map_or(run.change_start_s, |p| p.start_s);
    let end = run
        .phases
        .iter()
        .find(|p| p.label == "cutover")
        .map_or(run.change_end_s, |p| p.start_s);
    let samples: Vec<(f64, i64)> = run
        .backlog
        .iter()
        .copied()
        .filter(|(t, _)| *t >= start && *t < end)
        .collect();
    let steady = steady_state(
        &samples,
        run.during.acknowledged_per_s,
        limits::P7_GROWTH_SHARE,
    );
    let phases = run
        .phases
        .iter()
        .map(|phase| {
            let inside: Vec<(f64, i64)> = run
                .backlog
                .iter()
                .copied()
                .filter(|(t, _)| *t >= phase.start_s && *t < phase.end_s)
                .collect();
            let points: Vec<(f64, f64)> = inside.iter().map(|(t, b)| (*t, *b as f64)).collect();
            PhaseBacklog {
                phase: phase.label.clone(),
                samples: inside.len(),
                max: inside.iter().map(|s| s.1).max().unwrap_or(0),
                slope_per_s: slope(&points),
            }
        })
        .collect();
    P7 {
        demo_rate,
        phases,
        backlog_max: run.engine.as_ref().map_or(0, |e| e.backlog_max),
        sampled_max: run.backlog.iter().map(|s| s.1).max().unwrap_or(0),
        steady,
        backlog_chart: "p7-backlog.svg".to_owned(),
        run,
    }
}

/// `CREATE DATABASE copy TEMPLATE source`, waiting out the source's closing
/// sessions.
async fn clone_database(
    admin: &Client,
    source: &str,
    copy: &str,
    file_copy: bool,
) -> BenchResult<()> {
    let strategy = if file_copy {
        " STRATEGY = FILE_COPY"
    } else {
        ""
    };
    let sql = format!("CREATE DATABASE {copy} TEMPLATE {source}{strategy}");
    let mut attempt = 0;
    loop {
        attempt += 1;
        match admin.batch_execute(&sql).await {
            Ok(()) => return Ok(()),
            Err(e)
                if attempt < 100
                    && e.code() == Some(&tokio_postgres::error::SqlState::OBJECT_IN_USE) =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(BenchError(format!("{sql}: {e}"))),
        }
    }
}

pub(super) async fn drop_database(admin: &Client, db: &str) {
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .await;
}

/// Rows and bytes (partitions with their indexes) of `events`.
pub(super) async fn events_size(client: &Client) -> BenchResult<(u64, u64)> {
    let rows = scalar_i64(client, "SELECT count(*) FROM events").await?;
    let bytes = scalar_i64(
        client,
        "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0)::bigint \
           FROM pg_inherits WHERE inhparent = 'events'::regclass",
    )
    .await?;
    Ok((rows as u64, bytes as u64))
}

/// Records the instant of each phase of a run.
struct PhaseClock {
    marks: Arc<Mutex<Vec<(Phase, Instant)>>>,
}

impl CasProgress for PhaseClock {
    fn phase(&mut self, phase: Phase) {
        if let Ok(mut marks) = self.marks.lock() {
            marks.push((phase, Instant::now()));
        }
    }
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, text: &str) {
        eprintln!("           engine: {text}");
    }
    fn throttled(&mut self, pace: &str, why: &str, paused_ms: u64) {
        eprintln!("           engine: throttle {pace} {why} (paused {paused_ms} ms so far)");
    }
}

/// `count(*)` of the newest active run's change log on `events`, with when.
struct Backlog {
    t0: Instant,
    run: Option<i64>,
}

impl Probe for Backlog {
    type Sample = (f64, i64);

    async fn take(&mut self, client: &Client) -> Option<(f64, i64)> {
        if self.run.is_none() {
            self.run = client
                .query_opt(
                    "SELECT id FROM pgshift.runs WHERE source_name = 'events' \
                       AND phase NOT IN ('done', 'aborted', 'failed') \
                     ORDER BY id DESC LIMIT 1",
                    &[],
                )
                .await
                .ok()
                .flatten()
                .map(|row| row.get(0));
        }
        let id = self.run?;
        let at = self.t0.elapsed().as_secs_f64();
        let sql = format!("SELECT count(*) FROM pgshift.log_{id}");
        let row = client.query_one(&sql, &[]).await.ok()?;
        Some((at, row.get::<_, i64>(0)))
    }
}

/// What the change itself gave.
struct ChangeOutcome {
    started: Instant,
    ended: Instant,
    phases: Vec<PhaseMark>,
    engine: Option<super::results::EngineRun>,
    backlog: Vec<(f64, i64)>,
    cutover: Option<(f64, f64)>,
    throttle: Option<ThrottleFigures>,
}

/// Runs the relay load, the change after `before_s` seconds, `after_s`
/// seconds more, then the oracle.
async fn change_under_load(bench: &mut Bench, plan: &Plan<'_>) -> BenchResult<RelayRun> {
    change_under_load_at(bench, plan).await.map(|(run, _)| run)
}

/// [`change_under_load`], with the instant the load started (the origin of the
/// run's seconds).
pub(super) async fn change_under_load_at(
    bench: &mut Bench,
    plan: &Plan<'_>,
) -> BenchResult<(RelayRun, Instant)> {
    let conninfo = bench.conninfo(plan.db);
    let mut config = LoadConfig::new(&conninfo, Duration::from_secs(24 * 3600));
    config.writers = plan.writers;
    config.replica_writers = 1;
    config.write_pace = Pace::PerSecond(plan.rate);
    // A write blocked by the ALTER waits for it rather than timing out.
    config.statement_timeout = Duration::from_secs(1800);
    let handle = load::start(config).await.ctx("starting the relay load")?;
    let t0 = Instant::now()
        .checked_sub(handle.elapsed())
        .unwrap_or_else(Instant::now);
    let t0_unix_ms = unix_ms() - handle.elapsed().as_secs_f64() * 1000.0;
    let at = move |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
    bench.say(format!(
        "{}: {} writers at {:.0}/s on {}",
        plan.label, plan.writers, plan.rate, plan.db
    ));
    pause(bench.options.before_s as f64).await;

    let outcome = match plan.change {
        Change::Blocking => {
            let client = connect(&conninfo).await?;
            let started = Instant::now();
            client
                .batch_execute(STATEMENT)
                .await
                .ctx("the blocking ALTER")?;
            let ended = Instant::now();
            ChangeOutcome {
                started,
                ended,
                phases: vec![PhaseMark::new(
                    "blocking ALTER TABLE",
                    at(started),
                    at(ended),
                )],
                engine: None,
                backlog: Vec::new(),
                cutover: None,
                throttle: None,
            }
        }
        Change::Pgshift(limits) => {
            pgshift_change(bench, &conninfo, (t0, t0_unix_ms), limits).await?
        }
    };
    let (started, ended) = (outcome.started, outcome.ended);
    bench.say(format!(
        "{}: the change took {:.2} s",
        plan.label,
        (ended - started).as_secs_f64()
    ));
    pause(bench.options.after_s as f64).await;
    let report = handle.stop().await;

    let mut client = connect(&conninfo).await?;
    let verdict = oracle::check(
        &mut client,
        &report.ledger,
        &TableRef::events(),
        &OracleOptions::DEFAULT,
    )
    .await
    .ctx("the lost-write oracle")?;
    let oracle_figures = OracleFigures {
        relation: verdict.relation.clone(),
        keys_checked: verdict.keys_checked,
        acknowledged: verdict.ledger.acknowledged_total(),
        unknown_keys: verdict.unknown_keys,
        lost: verdict.lost.count,
        resurrected: verdict.resurrected.count,
        wrong_content: verdict.wrong_content.count,
        phantom: verdict.phantom.count,
        duplicated: verdict.duplicated.count,
        clean: verdict.is_clean(),
    };
    bench.say(format!(
        "{}: oracle over {} keys: lost {}, clean {}",
        plan.label, oracle_figures.keys_checked, oracle_figures.lost, oracle_figures.clean
    ));
    if let Some(engine) = &outcome.engine {
        if let Some(held) = engine.lock_held_us {
            bench.holds.push(LockHold {
                run: format!("{} ({:.0} writes/s)", plan.label, plan.rate),
                under_load: true,
                lock_held_us: held,
            });
        }
    }
    Ok((
        relay_run(
            plan,
            &report,
            at(started),
            at(ended),
            outcome,
            oracle_figures,
        ),
        t0,
    ))
}

/// The throttle's state of the newest run on `events`, as `status` shows it.
async fn throttle_state(conninfo: &str) -> String {
    let Ok(client) = connect(conninfo).await else {
        return "unknown (cannot connect)".to_owned();
    };
    client
        .query_opt(
            "SELECT coalesce(throttle, '') FROM pgshift.runs WHERE source_name = 'events' \
             ORDER BY id DESC LIMIT 1",
            &[],
        )
        .await
        .ok()
        .flatten()
        .map_or("unknown (no run recorded)".to_owned(), |row| row.get(0))
}

/// Now, milliseconds since the Unix epoch (the clock of the throttle's decisions).
fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// The pgshift side of a change with the throttle at `limits`: the run, its
/// phases, its backlog and the throttle's decisions (`t0`: when the load started,
/// as an instant and in Unix milliseconds).
async fn pgshift_change(
    bench: &Bench,
    conninfo: &str,
    (t0, t0_unix_ms): (Instant, f64),
    limits: ThrottleLimits,
) -> BenchResult<ChangeOutcome> {
    let at = |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
    let sampler = Sampler::start(
        conninfo,
        "SET statement_timeout = '5s'; SET lock_timeout = '1s'",
        Backlog { t0, run: None },
    )
    .await?;
    let marks = Arc::new(Mutex::new(Vec::new()));
    let mut clock = PhaseClock {
        marks: marks.clone(),
    };
    let spec = ConnectionSpec::parse(conninfo).ctx("the connection string")?;
    let statements = pgshift_sql::parse(STATEMENT).ctx("the relay statement")?;
    let started = Instant::now();
    let budget = Duration::from_secs(bench.options.change_timeout_s);
    // A throttle that keeps the work paused (a limit the machine never gets under)
    // would keep the run going for ever: the benchmark gives up on it after its
    // budget and says what the throttle was doing.
    let result = tokio::time::timeout(
        budget,
        cas::start(
            &spec,
            &statements[0],
            &QualifiedName::bare("events"),
            RunOptions {
                disk_room: None,
                throttle: limits,
                ..bench.options.run_options()
            },
            &mut clock,
        ),
    )
    .await;
    let ended = Instant::now();
    let backlog = sampler.finish().await;
    let Ok(result) = result else {
        return Err(BenchError(format!(
            "the pgshift run did not finish within {} s; its throttle: {}",
            budget.as_secs(),
            throttle_state(conninfo).await
        )));
    };
    let report = result.ctx("the pgshift run")?;
    let marks = marks.lock().map(|m| m.clone()).unwrap_or_default();
    let mut phases = Vec::new();
    let mut cutover = None;
    for (i, (phase, start)) in marks.iter().enumerate() {
        if matches!(phase, Phase::Done | Phase::Failed | Phase::Aborted) {
            continue;
        }
        let end = marks.get(i + 1).map_or(ended, |next| next.1);
        let label = match phase {
            Phase::Prepared => "prepare",
            other => other.name(),
        };
        if *phase == Phase::Cutover {
            cutover = Some((at(*start), at(end)));
        }
        phases.push(PhaseMark::new(label, at(*start), at(end)));
    }
    // The throttle paces the copy, the index builds and verification: its last
    // decision lasts until the end of the last of them.
    let paced_end = phases
        .iter()
        .filter(|p| matches!(p.label.as_str(), "copying" | "indexing" | "verifying"))
        .map(|p| p.end_s)
        .fold(None, |last: Option<f64>, end| {
            Some(last.map_or(end, |l| l.max(end)))
        })
        .unwrap_or(at(ended));
    let throttle = ThrottleFigures::from_events(
        &limits,
        &report.throttle,
        report.throttled_ms,
        t0_unix_ms,
        paced_end,
    );
    Ok(ChangeOutcome {
        throttle: Some(throttle),
        started,
        ended,
        phases,
        engine: Some(engine_run_of(
            &report,
            (ended - started).as_secs_f64() * 1000.0,
        )),
        backlog,
        cutover,
    })
}

/// The figures of one relay run (pure: from the load report and the times).
fn relay_run(
    plan: &Plan<'_>,
    report: &LoadReport,
    change_start_s: f64,
    change_end_s: f64,
    outcome: ChangeOutcome,
    oracle: OracleFigures,
) -> RelayRun {
    let timeline = &report.timeline;
    let end = report.elapsed;
    let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
    let window =
        |from: f64, to: f64| ledger_window(&report.ledger, timeline, secs(from), secs(to), end);
    let from = secs(change_start_s);
    let to = secs(change_end_s);
    let counts = report.ledger.counts();
    let around_cutover = outcome.cutover.map(|(c0, c1)| window(c0 - 1.0, c1 + 1.0));
    let cutover_spike_ms = outcome.cutover.map(|(c0, c1)| {
        longest_write(&report.ledger, secs(c0 - 1.0), secs(c1 + 1.0), end).as_secs_f64() * 1000.0
    });
    RelayRun {
        label: plan.label.to_owned(),
        change_start_s,
        change_end_s,
        phases: outcome.phases,
        before: window(WARM_UP_S, change_start_s),
        during: window(change_start_s, change_end_s),
        around_cutover,
        after: window(change_end_s, end.as_secs_f64()),
        writes_over_1s: writes_waiting_longer(
            &report.ledger,
            from,
            to,
            Duration::from_secs(1),
            end,
        ),
        longest_write_ms: longest_write(&report.ledger, from, to, end).as_secs_f64() * 1000.0,
        cutover_spike_ms,
        load: LoadFigures {
            target_rate: plan.rate,
            writers: report.settings.writers,
            replica_writers: report.settings.replica_writers,
            readers: report.settings.readers,
            duration_s: end.as_secs_f64(),
            acknowledged: counts.acknowledged_total(),
            refused: counts.refused_total(),
            unknown: counts.unknown,
            skipped: counts.skipped,
            acknowledged_per_s: report.acknowledged_writes_per_sec(),
            missed_slots: timeline.seconds().iter().map(|s| s.missed_slots).sum(),
            reconnects: report.reconnects,
            errors_by_sqlstate: report.errors.by_sqlstate.clone(),
            error_examples: error_examples(report),
        },
        oracle: Some(oracle),
        engine: outcome.engine,
        backlog: outcome.backlog,
        // The last second of the load is cut short by the stop: left out.
        series: {
            let mut series = write_series(timeline);
            series.truncate(end.as_secs() as usize);
            series
        },
        chart: plan.chart.to_owned(),
        throttle: outcome.throttle,
    }
}

/// The first few distinct errors of a load, `SQLSTATE: message`.
fn error_examples(report: &LoadReport) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for sample in &report.errors.samples {
        let text = format!("{}: {}", sample.error.code(), sample.error.message);
        if !out.contains(&text) {
            out.push(text);
        }
        if out.len() == 5 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::results::sample::sample;

    fn run(before_us: u64, during_us: u64) -> Result<RelayRun, Failure> {
        let mut run = sample().p3.expect("the sample has P3").pgshift;
        run.before.p99_us = before_us;
        run.during.p99_us = during_us;
        Ok(run)
    }

    #[test]
    fn the_median_round_is_shown_and_every_ratio_kept_in_order() {
        let mut failures = Vec::new();
        let (median, ratios) = median_run(
            vec![
                run(1_000, 2_500),
                Err(Failure {
                    scenario: "P3 (round 2)".to_owned(),
                    error: "it failed".to_owned(),
                }),
                run(1_000, 1_500),
                run(1_000, 2_000),
            ],
            &mut failures,
        );
        assert_eq!(ratios, vec![2.5, 1.5, 2.0]);
        assert_eq!(median.map(|r| p99_ratio(&r)), Some(2.0));
        assert_eq!(failures.len(), 1);
        let (none, empty) = median_run(Vec::new(), &mut failures);
        assert!(none.is_none() && empty.is_empty());
    }
}
