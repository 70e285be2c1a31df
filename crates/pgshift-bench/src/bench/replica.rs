//! P8: a streaming replica of the bench cluster while the relay load runs on the
//! primary and pgshift copies and swaps `events` (P3's change, P3's machinery), once
//! with the default throttle (its `--max-replica-lag` sees the replica) and once
//! with every limit off, each on its own copy of the seeded database. A sampler
//! reads the replay lag from `pg_stat_replication` on the primary; a keyset reader
//! on the replica reads the newest fenced rows over and over through the run and the
//! swap, and its passes are checked against the primary afterwards.

use std::time::{Duration, Instant, SystemTime};

use pgshift::cas::ThrottleLimits;
use pgshift_embedded::Cluster;
use pgshift_workload::TableRef;
use tokio_postgres::Client;

use super::relay::{self, Change, Plan, NO_LIMITS, P8_WRITERS};
use super::results::{LagSample, ReaderFigures, ReplicaRun, StandbyConflicts, StandbyLag, P8};
use super::sampler::{Probe, Sampler};
use super::{connect, Bench, BenchError, BenchResult, Context};
use crate::standby_reader::{self, ReaderConfig, ReaderLog, ReaderVerdict, StandbyReader};

/// P8's copies of the seeded relay database: the default throttle's and the
/// unthrottled run's.
pub(super) const COPIES: [&str; 2] = ["relay_replica", "relay_replica_off"];

/// The reader reads the newest this many fenced rows (all of them on a smaller
/// seed), so that a pass stays a few seconds long at every size.
const READER_WINDOW_ROWS: i64 = 20_000;

/// Rows per page of the reader.
const PAGE_SIZE: i64 = 200;

/// How long the reader may take to finish its pass in progress once the run ended.
const READER_FINISH: Duration = Duration::from_secs(120);

/// Starts a streaming replica, runs both P8 runs, stops the replica.
pub(super) async fn p8(bench: &mut Bench, admin: &Client) -> BenchResult<P8> {
    bench.say("P8: starting a streaming replica (pg_basebackup)");
    let standby = bench
        .cluster
        .add_replica()
        .ctx("starting a streaming replica")?;
    let outcome = p8_with(bench, admin, &standby).await;
    let _ = standby.stop();
    outcome
}

async fn p8_with(bench: &mut Bench, admin: &Client, standby: &Cluster) -> BenchResult<P8> {
    let on_standby = connect(&standby.connection_string("postgres")).await?;
    let show = |sql: &'static str| {
        let client = &on_standby;
        async move {
            let row = client.query_one(sql, &[]).await.ctx(sql)?;
            row.try_get::<_, String>(0).ctx(sql)
        }
    };
    let standby_version = show("SHOW server_version").await?;
    let delay = show("SHOW max_standby_streaming_delay").await?;
    drop(on_standby);
    let mut runs = Vec::new();
    let rate = bench.options.rate;
    for (db, limits, label, chart, lag_chart) in [
        (
            COPIES[0],
            ThrottleLimits::default(),
            "pgshift with a replica, default throttle",
            "p8-pgshift.svg",
            "p8-lag.svg",
        ),
        (
            COPIES[1],
            NO_LIMITS,
            "pgshift with a replica, throttle off",
            "p8-pgshift-unthrottled.svg",
            "p8-lag-unthrottled.svg",
        ),
    ] {
        let plan = Plan {
            db,
            change: Change::Pgshift(limits),
            rate,
            writers: P8_WRITERS,
            label,
            chart,
        };
        let run = replica_run(bench, standby, &plan, lag_chart)
            .await
            .map_err(|e| BenchError(format!("{label}: {e}")))?;
        relay::drop_database(admin, db).await;
        runs.push(run);
    }
    Ok(P8 {
        statement: relay::STATEMENT.to_owned(),
        standby_version,
        max_standby_streaming_delay: delay,
        runs,
    })
}

/// Where the reader reads: the fence (every row the load inserts is after it) and
/// the window's lower bound.
struct Window {
    fence: SystemTime,
    since: Option<SystemTime>,
}

/// The fence is a second before now, read on the primary before the load starts:
/// the load's rows are stamped just before their insert, so all of them are after
/// it; the window is the newest [`READER_WINDOW_ROWS`] rows at or before it.
async fn window(primary: &Client) -> BenchResult<Window> {
    let fence: SystemTime = primary
        .query_one("SELECT now() - interval '1 second'", &[])
        .await
        .ctx("reading the fence")?
        .try_get(0)
        .ctx("reading the fence")?;
    let since: Option<SystemTime> = primary
        .query_opt(
            "SELECT created_at FROM events WHERE created_at <= $1 \
             ORDER BY created_at DESC OFFSET $2 LIMIT 1",
            &[&fence, &READER_WINDOW_ROWS],
        )
        .await
        .ctx("reading the reader's window")?
        .map(|row| row.try_get(0))
        .transpose()
        .ctx("reading the reader's window")?;
    Ok(Window { fence, since })
}

/// The partitions of `events` (and `events` itself): the relations a pass reads.
async fn relations(primary: &Client) -> BenchResult<Vec<u32>> {
    let rows = primary
        .query(
            "SELECT 'events'::regclass::oid UNION ALL \
             SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass",
            &[],
        )
        .await
        .ctx("reading the partitions of events")?;
    rows.iter()
        .map(|row| row.try_get::<_, u32>(0))
        .collect::<Result<_, _>>()
        .ctx("reading the partitions of events")
}

/// `pg_stat_database_conflicts` of the current database (on the standby).
async fn conflicts(standby: &Client) -> BenchResult<StandbyConflicts> {
    let sql = "SELECT confl_tablespace, confl_lock, confl_snapshot, confl_bufferpin, \
                      confl_deadlock \
                 FROM pg_stat_database_conflicts WHERE datname = current_database()";
    let row = standby.query_one(sql, &[]).await.ctx(sql)?;
    Ok(StandbyConflicts {
        tablespace: row.try_get(0).ctx(sql)?,
        lock: row.try_get(1).ctx(sql)?,
        snapshot: row.try_get(2).ctx(sql)?,
        bufferpin: row.try_get(3).ctx(sql)?,
        deadlock: row.try_get(4).ctx(sql)?,
    })
}

/// One P8 run: the window, the reader and the lag sampler around P3's change under
/// load, then the reader's passes checked against the primary.
async fn replica_run(
    bench: &mut Bench,
    standby: &Cluster,
    plan: &Plan<'_>,
    lag_chart: &str,
) -> BenchResult<ReplicaRun> {
    let primary = connect(&bench.conninfo(plan.db)).await?;
    let table = TableRef::events();
    let window = window(&primary).await?;
    let before = standby_reader::fenced_keys_since(&primary, &table, window.since, window.fence)
        .await
        .ctx("reading the fenced rows")?
        .len();
    let old_relations = relations(&primary).await?;
    bench
        .cluster
        .wait_for_replay(standby, Duration::from_secs(300))
        .ctx("waiting for the replica to replay the copy")?;
    let on_standby = connect(&standby.connection_string(plan.db)).await?;
    let conflicts_before = conflicts(&on_standby).await?;
    let reader = StandbyReader::start(ReaderConfig {
        since: window.since,
        page_size: PAGE_SIZE,
        ..ReaderConfig::new(
            standby.connection_string(plan.db),
            table.clone(),
            window.fence,
        )
    });
    let sampler = Sampler::start(
        &bench.conninfo("postgres"),
        "SET statement_timeout = '5s'",
        ReplayLag,
    )
    .await?;
    bench.say(format!(
        "{}: a reader on the replica over {before} fenced rows",
        plan.label
    ));
    let outcome = relay::change_under_load_at(bench, plan).await;
    let samples = sampler.finish().await;
    let log = reader.stop(READER_FINISH).await;
    let (run, t0) = outcome?;
    let expected = standby_reader::fenced_keys_since(&primary, &table, window.since, window.fence)
        .await
        .ctx("reading the fenced rows after the run")?;
    let verdict = standby_reader::check(&expected, &log);
    let conflicts = conflicts(&on_standby).await?.since(&conflicts_before);
    let new_relations = relations(&primary).await?;
    let lag = lag_samples(&samples, t0);
    let reader = reader_figures(
        &log,
        &verdict,
        (before, expected.len()),
        (&old_relations, &new_relations),
    );
    bench.say(format!(
        "{}: reader passes {}, skipped {}, repeated {}, cancelled {}; largest lag {} bytes",
        plan.label,
        reader.passes,
        reader.skipped,
        reader.repeated,
        reader.cancelled,
        lag.iter().map(|s| s.bytes).max().unwrap_or(0)
    ));
    Ok(assemble(run, lag, reader, conflicts, lag_chart))
}

/// The run's figures (pure).
fn assemble(
    run: super::results::RelayRun,
    lag: Vec<LagSample>,
    reader: ReaderFigures,
    conflicts: StandbyConflicts,
    lag_chart: &str,
) -> ReplicaRun {
    let at_swap: Option<StandbyLag> = run
        .engine
        .as_ref()
        .and_then(|e| e.standbys.first().cloned());
    ReplicaRun {
        max_lag_bytes: lag.iter().map(|s| s.bytes).max().unwrap_or(0),
        max_lag_ms: lag
            .iter()
            .filter_map(|s| s.replay_lag_ms)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
        at_swap,
        wall_s: run.load.duration_s,
        lag,
        reader,
        conflicts,
        lag_chart: lag_chart.to_owned(),
        run,
    }
}

/// The samples taken while the load ran, in seconds since it started.
fn lag_samples(samples: &[(Instant, i64, Option<f64>)], t0: Instant) -> Vec<LagSample> {
    samples
        .iter()
        .filter(|(at, _, _)| *at >= t0)
        .map(|(at, bytes, ms)| LagSample {
            at_s: (*at - t0).as_secs_f64(),
            bytes: *bytes,
            replay_lag_ms: *ms,
        })
        .collect()
}

/// The reader's figures from its log and its verdict (`fenced`: the fenced rows
/// before the load and after the run; `relations`: `events`' before and after).
fn reader_figures(
    log: &ReaderLog,
    verdict: &ReaderVerdict,
    fenced: (usize, usize),
    (old, new): (&[u32], &[u32]),
) -> ReaderFigures {
    let through_swap = log
        .passes
        .iter()
        .filter(|p| {
            p.relations
                .iter()
                .any(|r| old.contains(r) && !new.contains(r))
                && p.relations
                    .iter()
                    .any(|r| new.contains(r) && !old.contains(r))
        })
        .count();
    let mut examples: Vec<String> = Vec::new();
    for error in &log.errors {
        let text = format!(
            "{}: {}",
            error.sqlstate.as_deref().unwrap_or("-----"),
            error.message
        );
        if !examples.contains(&text) && examples.len() < 5 {
            examples.push(text);
        }
    }
    let unfinished = log.unfinished.iter();
    ReaderFigures {
        page_size: PAGE_SIZE,
        fenced_rows_before: fenced.0 as u64,
        fenced_rows_after: fenced.1 as u64,
        passes: verdict.passes as u64,
        passes_through_swap: through_swap as u64,
        pages: log
            .passes
            .iter()
            .chain(unfinished.clone())
            .map(|p| p.pages as u64)
            .sum(),
        rows: log
            .passes
            .iter()
            .chain(unfinished)
            .map(|p| p.keys.len() as u64)
            .sum(),
        skipped: verdict.skipped as u64,
        repeated: verdict.repeated as u64,
        unexpected: verdict.unexpected as u64,
        out_of_order: verdict.out_of_order as u64,
        errors: verdict.errors as u64,
        cancelled: verdict.cancelled as u64,
        max_page_ms: log.max_latency_us() as f64 / 1000.0,
        error_examples: examples,
    }
}

/// Every standby's replay lag on the primary: the largest bytes behind and
/// `replay_lag` over the standbys (the benchmark has one), with when.
struct ReplayLag;

impl Probe for ReplayLag {
    type Sample = (Instant, i64, Option<f64>);

    async fn take(&mut self, client: &Client) -> Option<(Instant, i64, Option<f64>)> {
        let at = Instant::now();
        let row = client
            .query_opt(
                "SELECT max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn))::bigint, \
                        (max(extract(epoch FROM replay_lag)) * 1000)::float8 \
                   FROM pg_stat_replication",
                &[],
            )
            .await
            .ok()??;
        let bytes = row.try_get::<_, Option<i64>>(0).ok()??;
        let ms = row.try_get::<_, Option<f64>>(1).ok()?;
        Some((at, bytes, ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standby_reader::{Pass, RowKey};

    fn pass(relations: Vec<u32>) -> Pass {
        Pass {
            keys: vec![RowKey {
                created_at_us: 1,
                id: vec![1],
            }],
            relations,
            pages: 2,
        }
    }

    #[test]
    fn a_pass_through_the_swap_reads_an_old_and_a_new_relation() {
        let log = ReaderLog {
            passes: vec![pass(vec![10, 11]), pass(vec![10, 20]), pass(vec![20, 21])],
            unfinished: Some(pass(vec![20])),
            ..ReaderLog::default()
        };
        let verdict = ReaderVerdict {
            passes: 3,
            ..ReaderVerdict::default()
        };
        // `events` itself (1) is in both lists: it is not a sign of either side.
        let figures = reader_figures(&log, &verdict, (1, 1), (&[1, 10, 11], &[1, 20, 21]));
        assert_eq!(figures.passes_through_swap, 1);
        assert_eq!((figures.pages, figures.rows), (8, 4));
    }

    #[test]
    fn lag_samples_before_the_load_are_left_out() {
        let t0 = Instant::now();
        let samples = [
            (t0 - Duration::from_millis(500), 7, None),
            (t0 + Duration::from_millis(1500), 9, Some(3.0)),
        ];
        let lag = lag_samples(&samples, t0);
        assert_eq!(lag.len(), 1);
        assert_eq!((lag[0].bytes, lag[0].replay_lag_ms), (9, Some(3.0)));
        assert!((lag[0].at_s - 1.5).abs() < 1e-9);
    }
}
