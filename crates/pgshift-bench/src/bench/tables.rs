//! P1, P2 and P6's own run: identical plain tables, rewritten side by side.

use std::time::Instant;

use tokio_postgres::Client;

use super::engine::run_child;
use super::results::{EngineRun, LockHold, PairRound, RssSample, P1, P2};
use super::{connect, scalar_i64, Bench, BenchError, BenchResult, Context, Scenario};

/// The statement of P1 (and P6) on `table`.
fn retype(table: &str) -> String {
    retype_to(table, "bigint")
}

/// `qty` of `table` to type `to` (P1's later rounds change it back and forth).
fn retype_to(table: &str, to: &str) -> String {
    format!("ALTER TABLE {table} ALTER COLUMN qty TYPE {to}")
}

/// Creates `name` with `rows` rows (about 125 bytes each), a primary key and
/// two more indexes, vacuumed and analysed. Two calls with the same `rows`
/// give identical tables.
pub(crate) async fn create_table(client: &Client, name: &str, rows: u64) -> BenchResult<()> {
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {name};
             CREATE TABLE {name} (
                 id bigint NOT NULL,
                 qty int NOT NULL,
                 customer_id int NOT NULL,
                 note text NOT NULL,
                 created_at timestamptz NOT NULL);
             INSERT INTO {name}
             SELECT g, g % 1000, (g * 7919 % 50000)::int,
                    md5(g::text) || md5((g * 3)::text),
                    timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'
               FROM generate_series(1::bigint, {rows}::bigint) AS g;
             ALTER TABLE {name} ADD CONSTRAINT {name}_pkey PRIMARY KEY (id);
             CREATE INDEX {name}_qty_idx ON {name} (qty);
             CREATE INDEX {name}_customer_idx ON {name} (customer_id, created_at);"
        ))
        .await
        .ctx(&format!("creating table {name}"))?;
    client
        .batch_execute(&format!("VACUUM (ANALYZE) {name}"))
        .await
        .ctx(&format!("vacuuming {name}"))
}

/// `(heap bytes, heap and index bytes, indexes)` of `table`.
async fn sizes(client: &Client, table: &str) -> BenchResult<(u64, u64, u32)> {
    let row = client
        .query_one(
            "SELECT pg_table_size($1::text::regclass), pg_total_relation_size($1::text::regclass), \
                    (SELECT count(*) FROM pg_index WHERE indrelid = $1::text::regclass)",
            &[&table],
        )
        .await
        .ctx("reading table sizes")?;
    Ok((
        row.get::<_, i64>(0) as u64,
        row.get::<_, i64>(1) as u64,
        row.get::<_, i64>(2) as u32,
    ))
}

/// Fails unless `table` holds `rows` rows and `qty` is `qty_type`.
async fn check_table(client: &Client, table: &str, rows: u64, qty_type: &str) -> BenchResult<()> {
    let count = scalar_i64(client, &format!("SELECT count(*) FROM {table}")).await?;
    let found: String = client
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
              WHERE attrelid = $1::text::regclass AND attname = 'qty'",
            &[&table],
        )
        .await
        .ctx("reading the column type")?
        .get(0);
    if count as u64 != rows || found != qty_type {
        return Err(BenchError(format!(
            "{table} after the run: {count} rows with qty {found}, expected {rows} rows with qty {qty_type}"
        )));
    }
    Ok(())
}

async fn checkpoint(client: &Client) -> BenchResult<()> {
    client.batch_execute("CHECKPOINT").await.ctx("CHECKPOINT")
}

/// A checkpoint, then the bench's own session closed, before a run with no load: the
/// engine counts a client session that ran a statement in the last few seconds as the
/// application at work, and with one at work it spaces its writer baseline's probes
/// over a second. With none (what "no load" means) it takes them back to back, as it
/// would on a user's idle server. The caller connects again after the run.
async fn checkpoint_and_close(client: Client) -> BenchResult<()> {
    checkpoint(&client).await?;
    drop(client);
    Ok(())
}

/// P1 at `rows`: `ALTER COLUMN qty TYPE bigint`, blocking on one table and
/// through pgshift (in a child process) on an identical one, in rounds (each round
/// after the first changes the column back and forth, so that every round rewrites
/// the same rows; the order of the two sides alternates). The median round is
/// reported.
pub(crate) async fn p1(bench: &mut Bench, rows: u64) -> BenchResult<P1> {
    let conninfo = bench.conninfo("bench");
    let client = connect(&conninfo).await?;
    bench.say(format!("P1: creating two tables of {rows} rows"));
    create_table(&client, "p1_blocking", rows).await?;
    create_table(&client, "p1_pgshift", rows).await?;
    let (table_bytes, total_bytes, indexes) = sizes(&client, "p1_blocking").await?;
    drop(client);
    let mut rounds = Vec::new();
    let mut to = "integer";
    for round in 0..bench.options.pair_rounds.max(1) {
        to = if round % 2 == 0 { "bigint" } else { "integer" };
        let pgshift_first = round % 2 == 1;
        let mut blocking_ms = 0.0;
        let mut pgshift = None;
        for pgshift_turn in [pgshift_first, !pgshift_first] {
            if pgshift_turn {
                let statement = retype_to("p1_pgshift", to);
                let run = pgshift_side(bench, &conninfo, "p1_pgshift", &statement).await?;
                bench.say(format!(
                    "P1 round {}: pgshift {:.2} s",
                    round + 1,
                    run.wall_ms / 1000.0
                ));
                pgshift = Some(run);
            } else {
                let statement = retype_to("p1_blocking", to);
                blocking_ms = timed(&conninfo, &statement, "the blocking ALTER").await?;
                bench.say(format!(
                    "P1 round {}: blocking ALTER {:.2} s",
                    round + 1,
                    blocking_ms / 1000.0
                ));
            }
        }
        rounds.push(pair_round("P1", pgshift_first, blocking_ms, pgshift)?);
    }
    let client = connect(&conninfo).await?;
    check_table(&client, "p1_blocking", rows, to).await?;
    check_table(&client, "p1_pgshift", rows, to).await?;
    let median = PairRound::median(&rounds)
        .cloned()
        .ok_or_else(|| BenchError("P1: no round ran".to_owned()))?;
    let run = if rows == bench.options.rows {
        "P1 (no load)".to_owned()
    } else {
        format!("P1 at {rows} rows (no load)")
    };
    record(bench, &run, rows, total_bytes, &median.pgshift);
    client
        .batch_execute("DROP TABLE p1_blocking, p1_pgshift")
        .await
        .ctx("dropping the P1 tables")?;
    Ok(P1 {
        statement: retype("<table>"),
        rows,
        table_bytes,
        total_bytes,
        indexes,
        blocking_ms: median.other_ms,
        ratio: median.ratio,
        pgshift: median.pgshift,
        rounds,
    })
}

/// One round of `scenario` from what its two sides measured.
fn pair_round(
    scenario: &str,
    pgshift_first: bool,
    other_ms: f64,
    pgshift: Option<EngineRun>,
) -> BenchResult<PairRound> {
    let pgshift = pgshift.ok_or_else(|| BenchError(format!("{scenario}: pgshift did not run")))?;
    Ok(PairRound {
        pgshift_first,
        other_ms,
        ratio: pgshift.wall_ms / other_ms.max(f64::EPSILON),
        pgshift,
    })
}

/// Runs `statement` on a session of its own after a checkpoint: its wall time (ms).
async fn timed(conninfo: &str, statement: &str, what: &str) -> BenchResult<f64> {
    let client = connect(conninfo).await?;
    checkpoint(&client).await?;
    let started = Instant::now();
    client.batch_execute(statement).await.ctx(what)?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Runs `statement` through pgshift on `table` (a child process), after a checkpoint
/// and with no session of the bench's open (see [`checkpoint_and_close`]).
async fn pgshift_side(
    bench: &Bench,
    conninfo: &str,
    table: &str,
    statement: &str,
) -> BenchResult<EngineRun> {
    checkpoint_and_close(connect(conninfo).await?).await?;
    let child = run_child(conninfo, table, statement, &bench.options.run_options()).await?;
    child.engine_run()
}

/// Notes a child run's swap and peak RSS for P4 and P6.
fn record(
    bench: &mut Bench,
    run: &str,
    rows: u64,
    total_bytes: u64,
    engine: &super::results::EngineRun,
) {
    if let Some(held) = engine.lock_held_us {
        bench.holds.push(LockHold {
            run: run.to_owned(),
            under_load: false,
            lock_held_us: held,
        });
    }
    if let Some(kib) = engine.vm_hwm_kib {
        bench.rss.push(RssSample {
            run: run.to_owned(),
            rows,
            total_bytes,
            vm_hwm_kib: kib,
            wall_ms: engine.wall_ms,
        });
    }
}

/// P2: a plain rebuild through pgshift (`VACUUM FULL`) and by `pg_repack
/// --table` on identical tables.
pub(crate) async fn p2(bench: &mut Bench) -> BenchResult<P2> {
    let rows = bench.options.rows;
    let conninfo = bench.conninfo("bench");
    let client = connect(&conninfo).await?;
    let version = pg_repack_version(bench).await?;
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
        .await
        .ctx("CREATE EXTENSION pg_repack (apt-get install postgresql-NN-repack)")?;
    bench.say(format!("P2: creating two tables of {rows} rows"));
    create_table(&client, "p2_pgshift", rows).await?;
    create_table(&client, "p2_repack", rows).await?;
    let (_, total_bytes, _) = sizes(&client, "p2_pgshift").await?;
    drop(client);
    let statement = "VACUUM FULL p2_pgshift";
    let table = "public.p2_repack";
    let mut rounds = Vec::new();
    for round in 0..bench.options.pair_rounds.max(1) {
        let pgshift_first = round % 2 == 0;
        let mut pg_repack_ms = 0.0;
        let mut pgshift = None;
        for pgshift_turn in [pgshift_first, !pgshift_first] {
            if pgshift_turn {
                let run = pgshift_side(bench, &conninfo, "p2_pgshift", statement).await?;
                bench.say(format!(
                    "P2 round {}: pgshift {:.2} s",
                    round + 1,
                    run.wall_ms / 1000.0
                ));
                pgshift = Some(run);
            } else {
                pg_repack_ms = pg_repack(bench, &conninfo, table).await?;
                bench.say(format!(
                    "P2 round {}: pg_repack {:.2} s",
                    round + 1,
                    pg_repack_ms / 1000.0
                ));
            }
        }
        rounds.push(pair_round("P2", pgshift_first, pg_repack_ms, pgshift)?);
    }
    let median = PairRound::median(&rounds)
        .cloned()
        .ok_or_else(|| BenchError("P2: no round ran".to_owned()))?;
    let client = connect(&conninfo).await?;
    check_table(&client, "p2_pgshift", rows, "integer").await?;
    check_table(&client, "p2_repack", rows, "integer").await?;
    let (_, pgshift_bytes_after, _) = sizes(&client, "p2_pgshift").await?;
    let (_, pg_repack_bytes_after, _) = sizes(&client, "p2_repack").await?;
    record(bench, "P2 (no load)", rows, total_bytes, &median.pgshift);
    client
        .batch_execute("DROP TABLE p2_pgshift, p2_repack")
        .await
        .ctx("dropping the P2 tables")?;
    Ok(P2 {
        statement: "VACUUM FULL <table>".to_owned(),
        pg_repack_command: format!("pg_repack --table={table}"),
        pg_repack_version: version,
        rows,
        total_bytes,
        pg_repack_ms: median.other_ms,
        pgshift_bytes_after,
        pg_repack_bytes_after,
        ratio: median.ratio,
        pgshift: median.pgshift,
        rounds,
    })
}

/// Runs `pg_repack --table=TABLE` after a checkpoint: its wall time (ms).
async fn pg_repack(bench: &Bench, conninfo: &str, table: &str) -> BenchResult<f64> {
    checkpoint_and_close(connect(conninfo).await?).await?;
    let started = Instant::now();
    let output = tokio::process::Command::from(bench.cluster.command("pg_repack"))
        .arg("--host")
        .arg(bench.cluster.socket_dir())
        .arg("--port")
        .arg(bench.cluster.port().to_string())
        .arg("--username")
        .arg(bench.cluster.superuser())
        .arg("--dbname")
        .arg("bench")
        .arg(format!("--table={table}"))
        .output()
        .await
        .ctx("running pg_repack")?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if !output.status.success() {
        return Err(BenchError(format!(
            "pg_repack failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(ms)
}

async fn pg_repack_version(bench: &Bench) -> BenchResult<String> {
    let output = tokio::process::Command::from(bench.cluster.command("pg_repack"))
        .arg("--version")
        .output()
        .await
        .ctx("running pg_repack --version (apt-get install postgresql-NN-repack)")?;
    if !output.status.success() {
        return Err(BenchError(format!(
            "pg_repack --version failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// P6's own runs: the engine on a small table (and on a large one when
/// neither P1 nor P2 runs one).
pub(crate) async fn p6_small(bench: &mut Bench) -> BenchResult<()> {
    let conninfo = bench.conninfo("bench");
    let mut client = connect(&conninfo).await?;
    let mut sizes_to_run = vec![("p6_small", bench.options.small_rows)];
    let large_elsewhere =
        bench.options.only.contains(&Scenario::P1) || bench.options.only.contains(&Scenario::P2);
    if !large_elsewhere {
        sizes_to_run.push(("p6_large", bench.options.rows));
    }
    for (table, rows) in sizes_to_run {
        create_table(&client, table, rows).await?;
        let (_, total_bytes, _) = sizes(&client, table).await?;
        checkpoint_and_close(client).await?;
        let child = run_child(
            &conninfo,
            table,
            &retype(table),
            &bench.options.run_options(),
        )
        .await?;
        client = connect(&conninfo).await?;
        let engine = child.engine_run()?;
        check_table(&client, table, rows, "bigint").await?;
        bench.say(format!(
            "P6: {rows} rows: peak RSS {} KiB in {:.2} s",
            child.peak_kib(),
            engine.wall_ms / 1000.0
        ));
        record(
            bench,
            &format!("P6 ({rows} rows, no load)"),
            rows,
            total_bytes,
            &engine,
        );
        client
            .batch_execute(&format!("DROP TABLE {table}"))
            .await
            .ctx("dropping the P6 table")?;
    }
    Ok(())
}
