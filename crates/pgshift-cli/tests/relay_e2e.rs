//! End to end on the relay workload: `pgshift apply` replaces the stored generated
//! `search_tsv` expression on the partitioned `events` table (and rebuilds its GIN
//! index) while writers insert, soft-delete, delete, replay and write stale rows at
//! 200/s — one writer as `session_replication_role = replica` — and a keyset reader
//! pages through. Then: the lost-write oracle finds every acknowledged write and no
//! refused one, the copy fired none of the relay's triggers (no duplicate outbox row,
//! no TTL refresh, no row lost to the replay skipper), and the floor guard still
//! rejects a stale channel row on every partition, through the parent or directly.

mod common;

use std::time::Duration;

use common::pgshift;
use pgshift_embedded::shared_cluster;
use pgshift_workload::load::{self, LoadConfig, OpMix};
use pgshift_workload::oracle::{self, OracleOptions};
use pgshift_workload::pacing::Pace;
use pgshift_workload::{schema, TableRef};

const MIGRATION: &str = "\
ALTER TABLE events
    DROP COLUMN search_tsv,
    ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
        CASE WHEN kind IN (1, 30023, 30024) THEN to_tsvector('english', content) END
    ) STORED;
CREATE INDEX events_search_tsv_idx ON events USING gin (search_tsv);
";

/// Partitions whose whole range lies before today's floor (a row there can be stale).
const PAST_PARTITIONS: &[(&str, &str)] = &[
    ("events_past", "2026-08-15"),
    ("events_2026_09", "2026-09-15"),
    ("events_2026_10", "2026-10-15"),
    ("events_2026_11", "2026-11-02"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_events_table_is_rewritten_online_under_its_real_workload() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("relay_e2e").expect("database");
    let conninfo = cluster.connection_string(&db);
    let (mut client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    let psql = schema::Psql::of_cluster(cluster, &db);
    schema::load_schema(&psql, Duration::from_secs(60))
        .await
        .expect("schema");
    schema::seed(&psql, 12_000, Duration::from_secs(300))
        .await
        .expect("seed");
    client
        .batch_execute(
            "ANALYZE; CREATE TABLE seed_keys AS SELECT community_id, created_at, id, content FROM events;",
        )
        .await
        .expect("setup");
    let before = stat_updates(&client, "channels").await;

    let mut config = LoadConfig::new(conninfo.clone(), Duration::from_secs(600));
    config.writers = 4;
    config.replica_writers = 1;
    config.write_pace = Pace::PerSecond(200.0);
    config.mix = OpMix {
        insert: 80,
        stale_insert: 4,
        soft_delete: 6,
        hard_delete: 4,
        replay: 6,
    };
    config.readers = 1;
    let load = load::start(config).await.expect("the load starts");
    tokio::time::sleep(Duration::from_secs(2)).await;

    let file = std::env::temp_dir().join(format!("relay_e2e_{}.sql", std::process::id()));
    std::fs::write(&file, MIGRATION).expect("migration file");
    let run = pgshift(&[
        "apply",
        "--url",
        &conninfo,
        "--format",
        "json",
        file.to_str().expect("utf-8 path"),
    ]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = load.stop().await;
    let _ = std::fs::remove_file(&file);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let verdict: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    let cas = &verdict["verdict"]["units"][0]["copy_and_swap"]["report"];
    assert_eq!(cas["phase"], "done", "{}", run.stdout);
    assert!(cas["swap"]["lock_held_us"].as_u64().is_some());

    // The oracle: every acknowledged write is there, no refused one is.
    let counts = report.ledger.counts();
    assert!(counts.acknowledged_total() > 300, "{counts:?}");
    assert!(
        counts.refused_by_sqlstate.keys().all(|s| s == "23514"),
        "only the floor guard refuses: {counts:?} {:?}",
        report.errors
    );
    assert_eq!(counts.unknown, 0, "{counts:?}");
    let oracle = oracle::check(
        &mut client,
        &report.ledger,
        &TableRef::events(),
        &OracleOptions::DEFAULT,
    )
    .await
    .expect("the oracle runs");
    assert!(oracle.is_clean(), "{oracle:#?}");

    // The copy fired no trigger of the relay: every seeded row is there unchanged
    // (the replay skipper would have dropped replays of watermarked rows), no event
    // was enqueued twice, and the TTL refresh updated channels only for new events.
    let seeded_missing = scalar(
        &client,
        "SELECT count(*) FROM seed_keys s LEFT JOIN events e USING (community_id, created_at, id) \
          WHERE e.id IS NULL OR e.content IS DISTINCT FROM s.content",
    )
    .await;
    assert_eq!(seeded_missing, 0, "every seeded row is kept, unchanged");
    let duplicated = scalar(
        &client,
        "SELECT count(*) FROM (SELECT event_id, event_created_at FROM event_outbox GROUP BY 1, 2 HAVING count(*) > 1) d",
    )
    .await;
    assert_eq!(duplicated, 0, "no event enqueued twice");
    // Each insert by an origin writer fires the refresh at most once (committed or not:
    // the statistics count both); replica writers fire none.
    let origin_inserts = report
        .ledger
        .entries()
        .iter()
        .filter(|e| {
            !e.replica_role
                && matches!(
                    e.op,
                    pgshift_workload::ledger::WriteOp::Insert
                        | pgshift_workload::ledger::WriteOp::StaleInsert
                )
        })
        .count() as i64;
    let ephemeral_seeded = scalar(
        &client,
        "SELECT count(*) FROM seed_keys s JOIN events e USING (community_id, created_at, id) \
           JOIN channels c ON c.community_id = e.community_id AND c.id = e.channel_id WHERE c.ttl_seconds IS NOT NULL",
    )
    .await;
    let updates = stat_updates(&client, "channels").await - before;
    assert!(
        ephemeral_seeded > origin_inserts,
        "the check means something: {ephemeral_seeded} seeded rows in ephemeral channels, {origin_inserts} inserts"
    );
    assert!(
        updates <= origin_inserts,
        "TTL refreshes ({updates}) come from new events ({origin_inserts}), none from the copy"
    );

    // The new generated expression, and the floor guard on every past partition.
    assert_eq!(
        scalar(
            &client,
            "SELECT count(*) FROM events WHERE search_tsv IS DISTINCT FROM \
               CASE WHEN kind IN (1, 30023, 30024) THEN to_tsvector('english', content) END",
        )
        .await,
        0
    );
    for (partition, day) in PAST_PARTITIONS {
        for target in ["events", partition] {
            let stale = format!(
                "BEGIN; SET LOCAL relay.created_at_floor = '600';
                 INSERT INTO {target} (community_id, id, pubkey, created_at, kind, content, channel_id)
                   SELECT c.community_id, '\\x0102', '\\x0304', '{day} 12:00+00', 9, 'stale', c.id
                     FROM channels c ORDER BY c.id LIMIT 1;
                 COMMIT;"
            );
            let err = client
                .batch_execute(&stale)
                .await
                .expect_err("the floor guard rejects it");
            let _ = client.batch_execute("ROLLBACK").await;
            assert_eq!(
                err.code().map(|c| c.code()),
                Some("23514"),
                "{target} ({partition}): {err}"
            );
        }
    }
}

async fn scalar(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client
        .query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// Rows updated in `table` according to the statistics (flushed first).
async fn stat_updates(client: &tokio_postgres::Client, table: &str) -> i64 {
    let _ = client
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    scalar(
        client,
        &format!(
            "SELECT coalesce(sum(n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relname = '{table}'"
        ),
    )
    .await
}
