//! The schema and seed loaders give the same database as psql does.

use std::time::Duration;

use pgshift_bench::schema::{self, SEED_SQL};

use crate::common::connect;

/// A digest of every seeded row (of events, communities, channels and the
/// tables the triggers write), in key order.
const DIGEST: &str = "SELECT concat_ws(' ', \
    (SELECT md5(string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s', community_id, \
        encode(id, 'hex'), encode(pubkey, 'hex'), created_at, kind, tags, content, channel_id, \
        received_at, deleted_at, d_tag), E'\\n' ORDER BY community_id, created_at, id)) FROM events), \
    (SELECT md5(string_agg(format('%s|%s', id, host), ',' ORDER BY id)) FROM communities), \
    (SELECT md5(string_agg(format('%s|%s|%s|%s', community_id, id, name, ttl_seconds), ',' \
        ORDER BY community_id, id)) FROM channels), \
    (SELECT count(*) FROM event_outbox), (SELECT count(*) FROM event_watermarks))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_loads_the_same_relay_database_as_psql() {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let by_psql = cluster.fresh_database("bench_psql").expect("database");
    let wrapper = cluster.dir().join("bench-seed-20.sql");
    std::fs::write(&wrapper, format!("\\set rows_per_partition 20\n{SEED_SQL}")).expect("write");
    let schema_file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../workloads/relay/schema.sql"
    );
    cluster
        .psql_file(&by_psql, schema_file)
        .expect("psql loads the schema");
    cluster.psql_file(&by_psql, &wrapper).expect("psql seeds");

    let by_library = cluster.fresh_database("bench_lib").expect("database");
    let client = connect(&cluster.connection_string(&by_library)).await;
    let psql = schema::Psql::of_cluster(cluster, &by_library);
    let bound = Duration::from_secs(60);
    schema::load_schema(&psql, bound)
        .await
        .expect("schema loads");
    let report = schema::seed(&psql, 20, bound).await.expect("seed runs");
    assert_eq!(report.partitions.len(), 8, "{report:?}");
    assert!(
        report.partitions.iter().all(|(_, n)| *n == 20),
        "{report:?}"
    );
    assert_eq!(report.partitions[0].0, "events_past");

    // Loading both again over themselves changes nothing.
    schema::load_schema(&psql, bound)
        .await
        .expect("schema loads again");
    assert_eq!(
        schema::seed(&psql, 20, bound).await.expect("seed again"),
        report
    );

    let psql_client = connect(&cluster.connection_string(&by_psql)).await;
    let expected: String = psql_client
        .query_one(DIGEST, &[])
        .await
        .expect("digest")
        .get(0);
    let got: String = client.query_one(DIGEST, &[]).await.expect("digest").get(0);
    assert_eq!(got, expected);
}

/// A seed reports after each partition's INSERT, and its last report's events are
/// what the server counts in `events` afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_reports_its_progress_partition_by_partition() {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database("bench_progress").expect("database");
    let client = connect(&cluster.connection_string(&db)).await;
    let psql = schema::Psql::of_cluster(cluster, &db);
    let bound = Duration::from_secs(60);
    schema::load_schema(&psql, bound)
        .await
        .expect("schema loads");
    let mut seen = Vec::new();
    let report = schema::seed_with_progress(&psql, 30, bound, &mut |p| seen.push(p))
        .await
        .expect("seed runs");
    let partitions: Vec<(usize, usize, u64, u64)> = seen
        .iter()
        .map(|p| {
            (
                p.partitions_done,
                p.partitions_total,
                p.events_done,
                p.events_total,
            )
        })
        .collect();
    let expected: Vec<(usize, usize, u64, u64)> =
        (1..=8).map(|n| (n, 8, 30 * n as u64, 240)).collect();
    assert_eq!(partitions, expected);
    assert!(seen.windows(2).all(|w| w[0].elapsed <= w[1].elapsed));
    assert!(seen.iter().all(|p| p.rate() > 0.0));
    assert_eq!(seen[7].eta(), None, "nothing is left at the end");
    let counted: i64 = client
        .query_one("SELECT count(*) FROM events", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(counted as u64, seen[7].events_done);
    assert_eq!(report.total(), seen[7].events_done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_of_zero_rows_is_refused() {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database("bench_zero").expect("database");
    let psql = schema::Psql::of_cluster(cluster, &db);
    let err = schema::seed(&psql, 0, Duration::from_secs(10))
        .await
        .expect_err("0 rows is refused");
    assert!(
        matches!(
            err,
            pgshift_bench::Error::Config {
                field: "rows_per_partition",
                ..
            }
        ),
        "{err}"
    );
}
