//! P1, P2 and P6's own run: identical plain tables, rewritten side by side.

use std::time::Instant;

use tokio_postgres::Client;

use super::engine::run_child;
use super::results::{LockHold, RssSample, P1, P2};
use super::{connect, scalar_i64, Bench, BenchError, BenchResult, Context, Scenario};

/// The statement of P1 (and P6) on `table`.
fn retype(table: &str) -> String {
    format!("ALTER TABLE {table} ALTER COLUMN qty TYPE bigint")
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
/// through pgshift (in a child process) on an identical one.
pub(crate) async fn p1(bench: &mut Bench, rows: u64) -> BenchResult<P1> {
    let conninfo = bench.conninfo("bench");
    let client = connect(&conninfo).await?;
    bench.say(format!("P1: creating two tables of {rows} rows"));
    create_table(&client, "p1_blocking", rows).await?;
    create_table(&client, "p1_pgshift", rows).await?;
    let (table_bytes, total_bytes, indexes) = sizes(&client, "p1_blocking").await?;

    checkpoint(&client).await?;
    let started = Instant::now();
    client
        .batch_execute(&retype("p1_blocking"))
        .await
        .ctx("the blocking ALTER")?;
    let blocking_ms = started.elapsed().as_secs_f64() * 1000.0;
    bench.say(format!("P1: blocking ALTER {:.2} s", blocking_ms / 1000.0));

    checkpoint_and_close(client).await?;
    let child = run_child(
        &conninfo,
        "p1_pgshift",
        &retype("p1_pgshift"),
        &bench.options.run_options(),
    )
    .await?;
    let client = connect(&conninfo).await?;
    let pgshift = child.engine_run()?;
    bench.say(format!(
        "P1: pgshift {:.2} s, peak RSS {} KiB",
        pgshift.wall_ms / 1000.0,
        child.peak_kib()
    ));
    check_table(&client, "p1_blocking", rows, "bigint").await?;
    check_table(&client, "p1_pgshift", rows, "bigint").await?;
    let run = if rows == bench.options.rows {
        "P1 (no load)".to_owned()
    } else {
        format!("P1 at {rows} rows (no load)")
    };
    record(bench, &run, rows, total_bytes, &pgshift);
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
        blocking_ms,
        ratio: pgshift.wall_ms / blocking_ms.max(f64::EPSILON),
        pgshift,
    })
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

    checkpoint_and_close(client).await?;
    let statement = "VACUUM FULL p2_pgshift";
    let child = run_child(
        &conninfo,
        "p2_pgshift",
        statement,
        &bench.options.run_options(),
    )
    .await?;
    let client = connect(&conninfo).await?;
    let pgshift = child.engine_run()?;
    bench.say(format!("P2: pgshift {:.2} s", pgshift.wall_ms / 1000.0));

    checkpoint(&client).await?;
    let table = "public.p2_repack";
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
    let pg_repack_ms = started.elapsed().as_secs_f64() * 1000.0;
    if !output.status.success() {
        return Err(BenchError(format!(
            "pg_repack failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    bench.say(format!("P2: pg_repack {:.2} s", pg_repack_ms / 1000.0));
    check_table(&client, "p2_pgshift", rows, "integer").await?;
    check_table(&client, "p2_repack", rows, "integer").await?;
    let (_, pgshift_bytes_after, _) = sizes(&client, "p2_pgshift").await?;
    let (_, pg_repack_bytes_after, _) = sizes(&client, "p2_repack").await?;
    record(bench, "P2 (no load)", rows, total_bytes, &pgshift);
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
        pg_repack_ms,
        pgshift_bytes_after,
        pg_repack_bytes_after,
        ratio: pgshift.wall_ms / pg_repack_ms.max(f64::EPSILON),
        pgshift,
    })
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
