//! `pgshift demo`: a throwaway PostgreSQL with the relay workload, `plan` and `lint`
//! of a few changes (see `demo_front_door`), live writers and readers, and an online
//! rewrite of its partitioned `events` table through copy-and-swap; then the
//! lost-write oracle, a report (text, JSON, chart) and the cluster removed (or kept,
//! with `--keep`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pgshift::cas::{self, CasProgress, Phase, Request, RunReport};
use pgshift::connect::ConnectionSpec;
use pgshift_embedded::{Cluster, ClusterOptions};
use pgshift_sql::QualifiedName;
use pgshift_workload::chart::{self, PhaseMark};
use pgshift_workload::load::{self, LoadConfig, LoadReport};
use pgshift_workload::oracle::{self, OracleOptions, OracleReport};
use pgshift_workload::pacing::Pace;
use pgshift_workload::stats::{self, WindowStats};
use pgshift_workload::{schema, TableRef};
use serde::Serialize;

use crate::cli::DemoArgs;
use crate::exit;
use crate::render;

/// The rewrite the demo runs: the relay's migration 0008 — `kind` becomes bigint,
/// which needs the stored generated `search_tsv` (it reads `kind`) dropped and added
/// again with a new expression.
const REWRITE: &str = "ALTER TABLE events \
    DROP COLUMN search_tsv, \
    ALTER COLUMN kind TYPE bigint, \
    ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ( \
        CASE WHEN kind IN (1, 30023, 30024) THEN to_tsvector('english', content) END) STORED";

/// Seconds of load before the rewrite starts and after it ends.
const BEFORE: Duration = Duration::from_secs(5);
const AFTER: Duration = Duration::from_secs(3);

/// The demo's JSON report.
#[derive(Serialize)]
struct DemoReport<'a> {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    postgres_version: String,
    events_seeded: u64,
    statement: &'static str,
    write_rate_target: f64,
    writers: usize,
    replica_writers: usize,
    phases: &'a [PhaseMark],
    run: &'a RunReport,
    writers_before: WindowStats,
    writers_during: WindowStats,
    writers_at_cutover: WindowStats,
    writers_after: WindowStats,
    writes_acknowledged: u64,
    writes_refused_by_sqlstate: &'a std::collections::BTreeMap<String, u64>,
    writes_unknown: u64,
    oracle: &'a OracleReport,
    per_second: Vec<stats::SecondPoint>,
}

/// Runs `pgshift demo` and returns the exit code.
pub fn run(args: &DemoArgs) -> u8 {
    if args.cas.defer_cutover {
        // The demo's cluster lives only as long as the demo, behind a socket it does
        // not print, so nobody could ever run the `pgshift cutover` it would wait for.
        return crate::errors::CliError::new(
            "usage",
            "--defer-cutover would wait for a `pgshift cutover` nobody can send: the demo swaps by itself, then removes its cluster",
        )
        .hint("run the demo without --defer-cutover; try deferred cutover with `pgshift apply --defer-cutover` against your own database")
        .report("demo", crate::cli::Format::Text);
    }
    let runtime = match super::runtime() {
        Ok(runtime) => runtime,
        Err(err) => return err.report("demo", crate::cli::Format::Text),
    };
    let started = Instant::now();
    // Taken over before the cluster starts, so that no signal can leave it behind.
    let signals = {
        let _entered = runtime.enter();
        Signals::install()
    };
    let out = args.out.clone().map_or_else(default_out_dir, PathBuf::from);
    if let Err(err) = std::fs::create_dir_all(&out) {
        eprintln!("pgshift demo: cannot create {}: {err}", out.display());
        return exit::INPUT_ERROR;
    }
    step("starting a throwaway PostgreSQL");
    let cluster = match Cluster::start(&ClusterOptions::new().keep_on_exit(args.keep)) {
        Ok(cluster) => cluster,
        Err(err) => {
            eprintln!("pgshift demo: {err}");
            return exit::INPUT_ERROR;
        }
    };
    done(&format!(
        "PostgreSQL {} in {} (socket {}; removed at the end, or on Ctrl-C)",
        cluster.version(),
        cluster.dir().display(),
        cluster.socket_dir().display()
    ));
    let outcome = runtime.block_on(async {
        match signals {
            Some(signals) => tokio::select! {
                outcome = demo(&cluster, args, &out) => Ok(outcome),
                signal = signals.next() => Err(signal),
            },
            None => Ok(demo(&cluster, args, &out).await),
        }
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(signal) => {
            eprintln!(
                "\npgshift demo: {} received: stopping the load and removing the throwaway PostgreSQL",
                pgshift::exec::interrupt::signal_name(signal)
            );
            // The load's and the run's tasks end with their runtime, before the
            // server they talk to goes.
            drop(runtime);
            finish(cluster, args.keep);
            return u8::try_from(exit::killed_by(signal)).unwrap_or(exit::INPUT_ERROR);
        }
    };
    let code = match &outcome {
        Ok(true) => exit::OK,
        Ok(false) => exit::INPUT_ERROR,
        Err(message) => {
            eprintln!("pgshift demo: {message}");
            exit::INPUT_ERROR
        }
    };
    finish(cluster, args.keep);
    println!(
        "\nDemo finished in {:.1} s.",
        started.elapsed().as_secs_f64()
    );
    code
}

/// SIGINT and SIGTERM during the demo: the demo stops where it is (its load, its
/// rewrite), removes its cluster and exits 128 + the signal. Nothing of the demo is
/// worth resuming, unlike an `apply`'s run.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Takes the two signals over (inside a runtime); `None` if they cannot be, and
    /// the default stays (the process dies; the next start sweeps its cluster).
    fn install() -> Option<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(Signals {
            interrupt: signal(SignalKind::interrupt()).ok()?,
            terminate: signal(SignalKind::terminate()).ok()?,
        })
    }

    /// The number of the first of the two to arrive.
    async fn next(mut self) -> i32 {
        tokio::select! {
            _ = self.interrupt.recv() => libc::SIGINT,
            _ = self.terminate.recv() => libc::SIGTERM,
        }
    }
}

fn default_out_dir() -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from(format!("pgshift-demo-{stamp}"))
}

/// The demo proper; `Ok(true)` when the rewrite completed and the oracle is clean.
async fn demo(cluster: &Cluster, args: &DemoArgs, out: &Path) -> Result<bool, String> {
    let database = "relay";
    cluster
        .psql("postgres", "CREATE DATABASE relay")
        .map_err(|e| e.to_string())?;
    let conninfo = cluster.connection_string(database);
    let (mut client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    tokio::spawn(connection);

    step(&format!(
        "loading the relay schema (events: 8 range partitions, 6 indexes, a stored generated column, 5 triggers) and seeding {} events per partition",
        args.rows_per_partition
    ));
    let psql = schema::Psql::of_cluster(cluster, database);
    schema::load_schema(&psql, Duration::from_secs(120))
        .await
        .map_err(|e| e.to_string())?;
    let seeded = schema::seed_with_progress(
        &psql,
        args.rows_per_partition,
        Duration::from_secs(1_800),
        &mut |p| done(&seed_line(&p)),
    )
    .await
    .map_err(|e| e.to_string())?;
    client
        .batch_execute("ANALYZE")
        .await
        .map_err(|e| e.to_string())?;
    let events_seeded = seeded.total();
    done(&format!("{events_seeded} events"));
    let spec = ConnectionSpec::parse(&conninfo).map_err(|e| e.to_string())?;
    super::demo_front_door::show(&spec, REWRITE, &args.cas.options()).await?;

    let writers = 4;
    let replica_writers = 1;
    step(&format!(
        "starting the load: {writers} writers at {} writes/s in all (one as session_replication_role = replica), 1 keyset reader",
        args.rate
    ));
    let mut config = LoadConfig::new(conninfo.clone(), Duration::from_secs(6 * 3_600));
    config.writers = writers;
    config.replica_writers = replica_writers;
    config.write_pace = Pace::PerSecond(args.rate);
    let load = load::start(config).await.map_err(|e| e.to_string())?;
    tokio::time::sleep(BEFORE).await;

    let statements = pgshift_sql::parse(REWRITE).map_err(|e| e.to_string())?;

    println!("\n== pgshift: the rewrite, online, under that load\n");
    let table = QualifiedName::bare("events");
    let origin = load_origin(&load);
    let mut progress = Recorder::new(render::CasView::new(progress_style()), origin);
    let options = args.cas.options();
    let request = Request {
        statement: &statements[0],
        table: &table,
        search_path: &[],
        label: Some("demo"),
        standbys: &[],
    };
    let result = cas::start_request(&spec, request, options, &mut progress).await;
    let rewrite_end = origin.elapsed().as_secs_f64();
    tokio::time::sleep(AFTER).await;
    let stopped_at = origin.elapsed();
    let report = load.stop().await;
    let run = match result {
        Ok(run) => run,
        Err(err) => return Err(format!("the rewrite stopped: {err}")),
    };
    println!("\n{}", render::cas_report(&run));

    step("checking every acknowledged write against the new table (the lost-write oracle)");
    let verdict = oracle::check(
        &mut client,
        &report.ledger,
        &TableRef::events(),
        &OracleOptions::DEFAULT,
    )
    .await
    .map_err(|e| e.to_string())?;

    let phases = progress.marks(rewrite_end, Some(&run));
    let summary = summarize(&report, &phases, rewrite_end);
    print_summary(&summary, &report, &verdict);

    let postgres_version = cluster.version().to_string();
    // The last second of the load is cut short by the stop: left out.
    let mut series = stats::write_series(&report.timeline);
    series.truncate(stopped_at.as_secs() as usize);
    let json = DemoReport {
        format_version: pgshift::report::FORMAT_VERSION,
        tool: pgshift::report::TOOL,
        tool_version: pgshift::report::TOOL_VERSION,
        command: "demo",
        postgres_version: postgres_version.clone(),
        events_seeded,
        statement: REWRITE,
        write_rate_target: args.rate,
        writers,
        replica_writers,
        phases: &phases,
        run: &run,
        writers_before: summary.before.clone(),
        writers_during: summary.during.clone(),
        writers_at_cutover: summary.cutover.clone(),
        writers_after: summary.after.clone(),
        writes_acknowledged: report.ledger.counts().acknowledged_total(),
        writes_refused_by_sqlstate: &report.ledger.counts().refused_by_sqlstate,
        writes_unknown: report.ledger.counts().unknown,
        oracle: &verdict,
        per_second: series.clone(),
    };
    let json_path = out.join("report.json");
    let chart_path = out.join("writers.svg");
    let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    chart::write_latency_chart_from_series(
        &chart_path,
        &format!(
            "relay writers during an online rewrite of events (PostgreSQL {postgres_version})"
        ),
        &series,
        &phases,
    )
    .map_err(|e| format!("{}: {e}", chart_path.display()))?;
    println!("\n  report: {}", json_path.display());
    println!("  chart:  {}", chart_path.display());
    Ok(run.phase == "done" && verdict.is_clean())
}

/// A seed's progress for people: `partition 3 of 8 seeded · 6000 of 16000 events ·
/// 5200 events/s · about 2 s left`.
fn seed_line(p: &schema::SeedProgress) -> String {
    let mut line = format!(
        "partition {} of {} seeded · {} of {} events · {:.0} events/s",
        p.partitions_done,
        p.partitions_total,
        p.events_done,
        p.events_total,
        p.rate()
    );
    if let Some(eta) = p.eta() {
        line.push_str(&format!(" · about {:.0} s left", eta.as_secs_f64().ceil()));
    }
    line
}

/// The load's time origin (seconds of its timeline count from it).
fn load_origin(load: &load::LoadHandle) -> Instant {
    Instant::now() - load.elapsed()
}

fn progress_style() -> render::ProgressStyle {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        render::ProgressStyle::Bar
    } else {
        render::ProgressStyle::Lines
    }
}

/// Writer statistics in the windows the report shows.
struct Summary {
    before: WindowStats,
    during: WindowStats,
    cutover: WindowStats,
    /// The whole seconds of the load the cutover phase overlaps.
    cutover_seconds: std::ops::Range<usize>,
    after: WindowStats,
}

fn summarize(report: &LoadReport, phases: &[PhaseMark], rewrite_end: f64) -> Summary {
    let rewrite_start = phases.first().map_or(0.0, |p| p.start_s);
    let cutover = phases
        .iter()
        .find(|p| p.label == "cutover")
        .map_or((rewrite_end, rewrite_end), |p| (p.start_s, p.end_s));
    let seconds = report.timeline.seconds().len();
    let cutover_seconds = stats::seconds_overlapping(cutover.0, cutover.1);
    Summary {
        before: stats::write_window(&report.timeline, stats::seconds_before(1, rewrite_start)),
        during: stats::write_window(
            &report.timeline,
            stats::seconds_overlapping(rewrite_start, rewrite_end),
        ),
        cutover: stats::write_window(&report.timeline, cutover_seconds.clone()),
        cutover_seconds,
        after: stats::write_window(
            &report.timeline,
            (rewrite_end.ceil() as usize)..seconds.saturating_sub(1),
        ),
    }
}

fn print_summary(summary: &Summary, report: &LoadReport, verdict: &OracleReport) {
    println!("\n== what the writers saw (acknowledged writes/s; latency p50 / p99 / max)\n");
    // The seconds the cutover phase overlaps, as the chart's seconds count them.
    let cutover = if summary.cutover_seconds.len() == 1 {
        format!("cutover (second {})", summary.cutover_seconds.start)
    } else {
        format!(
            "cutover (seconds {}–{})",
            summary.cutover_seconds.start,
            summary.cutover_seconds.end - 1
        )
    };
    for (label, window) in [
        ("before the rewrite", &summary.before),
        ("during the rewrite", &summary.during),
        (cutover.as_str(), &summary.cutover),
        ("after the rewrite", &summary.after),
    ] {
        println!(
            "  {label:<24} {:>6.0}/s   {} / {} / {}",
            window.acknowledged_per_s,
            millis(window.p50_us),
            millis(window.p99_us),
            millis(window.max_us)
        );
    }
    let counts = report.ledger.counts();
    let refused: Vec<String> = counts
        .refused_by_sqlstate
        .iter()
        .map(|(state, n)| format!("{n} ({state})"))
        .collect();
    println!(
        "\n  writes acknowledged {}, refused {}, unknown outcome {}",
        counts.acknowledged_total(),
        if refused.is_empty() {
            "0".to_owned()
        } else {
            refused.join(", ")
        },
        counts.unknown
    );
    println!(
        "  oracle: {} lost, {} wrong content, {} resurrected, {} phantom, {} duplicated ({} keys checked on {})",
        verdict.lost.count,
        verdict.wrong_content.count,
        verdict.resurrected.count,
        verdict.phantom.count,
        verdict.duplicated.count,
        verdict.keys_checked,
        verdict.relation
    );
    if verdict.is_clean() {
        println!("  every acknowledged write is in the new table; no refused write is.");
    } else {
        println!("  THE ORACLE FOUND PROBLEMS: see the report's oracle section.");
    }
}

fn millis(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1_000.0)
}

/// A lock's hold, in the unit that reads best.
fn lock_text(us: u64) -> String {
    if us < 1_000_000 {
        millis(us)
    } else {
        format!("{:.2} s", us as f64 / 1_000_000.0)
    }
}

/// Passes progress on, and records when each phase started (seconds since `origin`).
struct Recorder {
    inner: render::CasView,
    origin: Instant,
    starts: Vec<(Phase, f64)>,
}

impl Recorder {
    fn new(inner: render::CasView, origin: Instant) -> Self {
        Recorder {
            inner,
            origin,
            starts: Vec::new(),
        }
    }

    /// The phases as marks, each ending where the next starts (the last at `end`),
    /// with the cutover as the report measured it: its band is the report's cutover
    /// phase, followed by `finishing` (dropping the old table, validating foreign
    /// keys: after the swap committed), and the lock's hold is a mark of its own at
    /// the end of the phase (the hold ends with the swap's `COMMIT`).
    fn marks(&self, end: f64, run: Option<&RunReport>) -> Vec<PhaseMark> {
        let mut marks: Vec<PhaseMark> = self
            .starts
            .iter()
            .enumerate()
            .filter(|(_, (phase, _))| !matches!(phase, Phase::Done | Phase::Failed))
            .map(|(i, (phase, start))| {
                let until = self.starts.get(i + 1).map_or(end, |(_, next)| *next);
                PhaseMark::new(phase.name(), *start, until)
            })
            .collect();
        let Some(run) = run else {
            return marks;
        };
        let phase_ms = run
            .phases_ms
            .iter()
            .find(|(phase, _)| phase == "cutover")
            .map(|(_, ms)| *ms);
        let Some(cutover) = marks.iter_mut().find(|m| m.label == "cutover") else {
            return marks;
        };
        let Some(phase_ms) = phase_ms else {
            return marks;
        };
        let swapped = (cutover.start_s + phase_ms as f64 / 1_000.0).min(cutover.end_s);
        let finished = cutover.end_s;
        cutover.end_s = swapped;
        if let Some(swap) = &run.swap {
            let held = swap.lock_held_us as f64 / 1_000_000.0;
            marks.push(PhaseMark::new(
                format!("ACCESS EXCLUSIVE held {}", lock_text(swap.lock_held_us)),
                (swapped - held).max(0.0),
                swapped,
            ));
        }
        if finished > swapped {
            marks.push(PhaseMark::new("finishing", swapped, finished));
        }
        marks
    }
}

impl CasProgress for Recorder {
    fn phase(&mut self, phase: Phase) {
        self.starts
            .push((phase, self.origin.elapsed().as_secs_f64()));
        self.inner.phase(phase);
    }
    fn copied(&mut self, rows: i64, estimate: i64, backlog: i64) {
        self.inner.copied(rows, estimate, backlog);
    }
    fn verified(&mut self, rows: i64, estimate: i64) {
        self.inner.verified(rows, estimate);
    }
    fn note(&mut self, text: &str) {
        self.inner.note(text);
    }
    fn index_build(&mut self, build: &pgshift::cas::IndexBuild) {
        self.inner.index_build(build);
    }
    fn throttled(&mut self, pace: &str, why: &str, paused_ms: u64) {
        self.inner.throttled(pace, why, paused_ms);
    }
}

fn finish(cluster: Cluster, keep: bool) {
    if !keep {
        step("stopping and removing the throwaway PostgreSQL");
        match cluster.stop() {
            Ok(()) => done("removed"),
            Err(err) => eprintln!("pgshift demo: {err}"),
        }
        return;
    }
    match cluster.keep() {
        Ok(kept) => {
            println!("\nThe cluster keeps running:");
            println!("  psql \"{}\"", kept.connection_string("relay"));
            println!("  stop it with: {}", kept.stop_command());
            println!("  then remove {}", kept.dir().display());
        }
        Err(err) => eprintln!("pgshift demo: cannot keep the cluster: {err}"),
    }
}

fn step(what: &str) {
    println!("* {what} …");
}

fn done(what: &str) {
    println!("  {what}");
}
