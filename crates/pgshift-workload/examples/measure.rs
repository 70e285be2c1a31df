//! Measures the harness on this machine, on a throwaway cluster:
//!
//! 1. the relay load at its default settings (200 writes/s, 4 writers, one
//!    reader) with no schema change running: achieved rate, insert latency;
//! 2. the same writers unthrottled: the write ceiling;
//! 3. the oracle on a ledger of N acknowledged inserts (rows bulk-inserted
//!    from the client with their content hashes).
//!
//! ```sh
//! cargo run --release -p pgshift-workload --example measure -- \
//!     [seconds=20] [seed_rows_per_partition=10000] [ledger=300000]
//! ```

use std::error::Error;
use std::time::{Duration, Instant, SystemTime};

use pgshift_embedded::{Cluster, ClusterOptions};
use pgshift_workload::content::EventContent;
use pgshift_workload::key::{unix_us, EventKey, PgUuid};
use pgshift_workload::ledger::{Ledger, LedgerEntry, Outcome, RowState, WriteOp};
use pgshift_workload::load::{self, LoadConfig, LoadReport};
use pgshift_workload::oracle::{self, OracleOptions};
use pgshift_workload::pacing::Pace;
use pgshift_workload::timeline::OpKind;
use pgshift_workload::{schema, TableRef};
use tokio_postgres::{Client, NoTls};

type Res<T> = Result<T, Box<dyn Error>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let seconds = args.first().copied().unwrap_or(20);
    let seed_rows = args.get(1).copied().unwrap_or(10_000);
    let ledger_sizes = match args.get(2) {
        Some(n) => vec![*n],
        None => vec![10_000, 100_000, 300_000],
    };

    let cluster = Cluster::start(&ClusterOptions::new())?;
    cluster.psql("postgres", "CREATE DATABASE relay")?;
    let conninfo = cluster.connection_string("relay");
    let mut client = connect(&conninfo).await?;
    println!("PostgreSQL {}", cluster.version());
    let started = Instant::now();
    let psql = schema::Psql::of_cluster(&cluster, "relay");
    schema::load_schema(&psql, Duration::from_secs(60)).await?;
    let seeded = schema::seed(&psql, u32::try_from(seed_rows)?, Duration::from_secs(1800)).await?;
    println!(
        "schema + seed of {} events: {:.1} s",
        seeded.total(),
        started.elapsed().as_secs_f64()
    );

    let duration = Duration::from_secs(seconds);
    let paced = load::start(LoadConfig::new(&conninfo, duration))
        .await?
        .wait()
        .await;
    print_run("paced, target 200/s", &paced);
    let verdict = oracle::check(
        &mut client,
        &paced.ledger,
        &TableRef::events(),
        &OracleOptions::DEFAULT,
    )
    .await?;
    println!(
        "  oracle: clean={} over {} entries in {:.0} ms",
        verdict.is_clean(),
        paced.ledger.len(),
        verdict.elapsed.as_secs_f64() * 1000.0
    );

    let mut config = LoadConfig::new(&conninfo, Duration::from_secs(seconds.min(10)));
    config.write_pace = Pace::Unthrottled;
    config.readers = 0;
    let ceiling = load::start(config).await?.wait().await;
    print_run("unthrottled, 4 writers", &ceiling);

    for n in ledger_sizes {
        let ledger = bulk_ledger(&client, n).await?;
        let verdict = oracle::check(
            &mut client,
            &ledger,
            &TableRef::events(),
            &OracleOptions::DEFAULT,
        )
        .await?;
        println!(
            "oracle over {n} acknowledged inserts: {:.2} s (clean={})",
            verdict.elapsed.as_secs_f64(),
            verdict.is_clean()
        );
    }
    Ok(())
}

async fn connect(conninfo: &str) -> Res<Client> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

fn print_run(label: &str, report: &LoadReport) {
    let counts = report.ledger.counts();
    println!(
        "{label}: {:.1} acknowledged writes/s over {:.1} s ({} acknowledged, {} refused, {} unknown, {} missed slots)",
        report.acknowledged_writes_per_sec(),
        report.elapsed.as_secs_f64(),
        counts.acknowledged_total(),
        counts.refused_total(),
        counts.unknown,
        report
            .timeline
            .seconds()
            .iter()
            .map(|s| s.missed_slots)
            .sum::<u64>(),
    );
    for kind in [
        OpKind::Insert,
        OpKind::SoftDelete,
        OpKind::HardDelete,
        OpKind::Read,
    ] {
        if let Some(stats) = report.timeline.totals().get(&kind) {
            let l = stats.summary().latency;
            println!(
                "  {kind:?}: n={} p50={} us p90={} us p99={} us p99.9={} us max={} us",
                l.count, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
            );
        }
    }
}

/// Inserts `n` events in batches (triggers bypassed, for speed) and returns a
/// ledger acknowledging each.
async fn bulk_ledger(client: &Client, n: u64) -> Res<Ledger> {
    let community: PgUuid = client
        .query_one("SELECT id FROM communities ORDER BY id LIMIT 1", &[])
        .await?
        .get(0);
    client
        .batch_execute("SET session_replication_role = replica")
        .await?;
    let now_us = unix_us(SystemTime::now());
    let mut ledger = Ledger::new();
    let batch = 10_000;
    let mut i = 0;
    while i < n {
        let end = (i + batch).min(n);
        let mut ids = Vec::new();
        let mut created = Vec::new();
        let mut tags = Vec::new();
        let mut contents = Vec::new();
        let mut pubkeys = Vec::new();
        for k in i..end {
            let content = EventContent {
                pubkey: [(k % 251) as u8; 32],
                kind: 1,
                tags: vec![vec!["t".to_owned(), format!("bulk{}", k % 7)]],
                content: format!("bulk event {k} of {n}"),
                channel_id: None,
                d_tag: None,
                deleted_at_us: None,
            };
            let mut id = [0_u8; 32];
            id[..8].copy_from_slice(&k.to_be_bytes());
            id[8..16].copy_from_slice(&n.to_be_bytes());
            id[16..24].copy_from_slice(&now_us.to_be_bytes());
            let key = EventKey {
                community_id: community,
                created_at_us: now_us - i64::try_from(k)? * 1000,
                id,
            };
            ledger.push(LedgerEntry {
                key,
                op: WriteOp::Insert,
                after: Some(RowState::Present(content.hash())),
                outcome: Outcome::Acknowledged,
                writer: 0,
                replica_role: true,
                started: Duration::ZERO,
                finished: Some(Duration::ZERO),
            });
            ids.push(id.to_vec());
            created.push(key.created_at());
            tags.push(content.tags_json());
            pubkeys.push(content.pubkey.to_vec());
            contents.push(content.content);
        }
        client
            .execute(
                "INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content) \
                 SELECT $1::uuid, u.id, u.pubkey, u.created_at, 1, u.tags::jsonb, u.content \
                   FROM unnest($2::bytea[], $3::bytea[], $4::timestamptz[], $5::text[], $6::text[]) \
                        AS u(id, pubkey, created_at, tags, content)",
                &[&community, &ids, &pubkeys, &created, &tags, &contents],
            )
            .await?;
        i = end;
    }
    client
        .batch_execute("RESET session_replication_role; ANALYZE events")
        .await?;
    Ok(ledger)
}
