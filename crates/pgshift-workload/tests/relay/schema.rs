//! What the schema and seed loaders add to psql, which runs the scripts: the
//! seed's report and progress, re-runs that change nothing, typed errors, and
//! a timeout that stops psql.

use std::time::{Duration, Instant};

use pgshift_embedded::Cluster;
use pgshift_workload::schema::{self, Psql, SeedProgress, SeedReport};
use pgshift_workload::Error;
use tokio_postgres::Client;

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

const PARTITIONS: [&str; 8] = [
    "events_past",
    "events_2026_09",
    "events_2026_10",
    "events_2026_11",
    "events_2026_12",
    "events_2027_01",
    "events_2027_02",
    "events_future",
];

async fn database(prefix: &str) -> (&'static Cluster, String, Client) {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database(prefix).expect("database");
    let client = connect(&cluster.connection_string(&db)).await;
    (cluster, db, client)
}

async fn digest(client: &Client) -> String {
    client.query_one(DIGEST, &[]).await.expect("digest").get(0)
}

/// A seed with its progress: `(partitions_done, partitions_total, events_done,
/// events_total)` of each call, and the report.
async fn seed(psql: &Psql, rows: u32) -> (Vec<(usize, usize, u64, u64)>, SeedReport) {
    let mut seen: Vec<SeedProgress> = Vec::new();
    let report =
        schema::seed_with_progress(psql, rows, Duration::from_secs(60), &mut |p| seen.push(p))
            .await
            .expect("seed runs");
    assert!(seen.windows(2).all(|w| w[0].elapsed <= w[1].elapsed));
    let calls = seen
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
    (calls, report)
}

/// One progress call per partition, in order, for `rows` per partition.
fn one_call_per_partition(rows: u64) -> Vec<(usize, usize, u64, u64)> {
    (1..=8).map(|n| (n, 8, rows * n as u64, rows * 8)).collect()
}

/// The report names every partition, oldest first, with the rows the server
/// counts; progress comes once per partition, in order; loading and seeding
/// again (with another size, too) leaves every row as it was, and still
/// reports each partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_reports_each_partition_and_running_it_again_changes_nothing() {
    let (cluster, db, client) = database("bench_seed").await;
    let psql = Psql::of_cluster(cluster, &db);
    let bound = Duration::from_secs(60);
    schema::load_schema(&psql, bound)
        .await
        .expect("schema loads");

    let (calls, report) = seed(&psql, 20).await;
    assert_eq!(calls, one_call_per_partition(20));
    let expected: Vec<(String, u64)> = PARTITIONS.iter().map(|p| ((*p).to_owned(), 20)).collect();
    assert_eq!(report.partitions, expected);
    let counted: i64 = client
        .query_one("SELECT count(*) FROM events", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(counted as u64, report.total());
    assert_eq!(report.total(), 160);
    let before = digest(&client).await;

    schema::load_schema(&psql, bound)
        .await
        .expect("schema loads again");
    let (calls, again) = seed(&psql, 20).await;
    assert_eq!(calls, one_call_per_partition(20));
    assert_eq!(again, report);
    // Partitions holding rows are skipped, whatever size is asked for.
    let (calls, bigger) = seed(&psql, 30).await;
    assert_eq!(calls, one_call_per_partition(30));
    assert_eq!(bigger, report);
    assert_eq!(digest(&client).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_of_zero_rows_is_refused() {
    let (cluster, db, _client) = database("bench_zero").await;
    let err = schema::seed(&Psql::of_cluster(cluster, &db), 0, Duration::from_secs(10))
        .await
        .expect_err("0 rows is refused");
    assert!(
        matches!(
            err,
            Error::Config {
                field: "rows_per_partition",
                ..
            }
        ),
        "{err}"
    );
}

/// psql's output comes back whole, however large, with large standard error
/// beside it; a failing statement gives its line and psql's message, and
/// nothing after it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_returns_its_output_or_the_line_that_failed() {
    let (cluster, db, client) = database("bench_script").await;
    let psql = Psql::of_cluster(cluster, &db);
    let bound = Duration::from_secs(60);

    // About 1 MB on stderr and 2 MB on stdout, all printed before psql has read
    // the last 1 MB of its script (a comment): none of the three pipes may wait
    // for another.
    let script = format!(
        "SET client_min_messages = warning;\n\
         DO $$ BEGIN FOR i IN 1..10000 LOOP RAISE WARNING '%', repeat('w', 100); END LOOP; END $$;\n\
         SELECT g, repeat('x', 1000) FROM generate_series(1, 2000) AS g;\n\
         SELECT 'done', 42;\n-- {}\n",
        "c".repeat(1 << 20)
    );
    let output = psql.run("big.sql", &script, bound).await.expect("runs");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 2001);
    assert_eq!(lines[1999], format!("2000|{}", "x".repeat(1000)));
    assert_eq!(lines[2000], "done|42");

    let err = psql
        .run(
            "bad.sql",
            "CREATE TABLE before_error ();\nSELECT 1,\n       1/0;\nCREATE TABLE after_error ();\n",
            bound,
        )
        .await
        .expect_err("division by zero");
    assert!(
        matches!(&err, Error::Psql { script: "bad.sql", line: Some(3), message }
            if message.starts_with("ERROR:  division by zero")),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("bad.sql line 3: ERROR:"),
        "{err}"
    );
    let row = client
        .query_one(
            "SELECT to_regclass('before_error') IS NOT NULL, to_regclass('after_error') IS NOT NULL",
            &[],
        )
        .await
        .expect("tables");
    let (before, after): (bool, bool) = (row.get(0), row.get(1));
    assert!(
        before && !after,
        "before_error: {before}, after_error: {after}"
    );
}

/// A psql that is not there, or cannot connect, is a typed error saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_psql_or_database_is_a_typed_error() {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let bound = Duration::from_secs(60);
    let missing = cluster.bindir().join("no-such-psql");
    let err = schema::load_schema(
        &Psql::new(&missing, cluster.connection_string("postgres")),
        bound,
    )
    .await
    .expect_err("no program");
    assert!(
        matches!(&err, Error::PsqlNotFound { program } if *program == missing),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&*missing.to_string_lossy()),
        "{err}"
    );

    let nowhere = Psql::of_cluster(cluster, "bench_no_such_database");
    let err = schema::load_schema(&nowhere, bound)
        .await
        .expect_err("no database");
    assert!(
        matches!(&err, Error::Psql { script: "schema.sql", line: None, message }
            if message.contains("\"bench_no_such_database\" does not exist")),
        "{err:?}"
    );
}

/// A statement psql was running when it timed out does not run on: the server
/// ends it within about a second of psql's death, where a `pg_sleep(600)` would
/// otherwise hold its session for ten minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_ends_psqls_statement_on_the_server() {
    let (cluster, db, client) = database("bench_timeout_statement").await;
    let psql = Psql::of_cluster(cluster, &db);
    let err = psql
        .run(
            "sleep.sql",
            "SELECT pg_sleep(600);\n",
            Duration::from_secs(2),
        )
        .await
        .expect_err("sleeps past its bound");
    assert!(matches!(&err, Error::Timeout { .. }), "{err:?}");
    until_no_other_session(
        &client,
        "query LIKE 'SELECT pg_sleep(600)%'",
        Duration::from_secs(20),
        "psql's pg_sleep still runs on the server 20 s after psql was killed",
    )
    .await;
}

/// Waits until no other session of the database matches `condition` (on
/// `pg_stat_activity`), failing with `stuck` after `limit`.
async fn until_no_other_session(client: &Client, condition: &str, limit: Duration, stuck: &str) {
    let deadline = Instant::now() + limit;
    loop {
        let others: i64 = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid() AND {condition}"
                ),
                &[],
            )
            .await
            .expect("sessions")
            .get(0);
        if others == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{stuck}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A script that outlasts its bound stops with a timeout, and psql is killed:
/// once the statement it was waiting on can go on, the rest of the script
/// never runs. (The script prints nothing, so a psql left alive would not die
/// of writing to a closed pipe, and would go on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_psql() {
    let (cluster, db, mut client) = database("bench_timeout").await;
    client
        .batch_execute("CREATE TABLE gate (i int)")
        .await
        .expect("gate");
    let holder = client.transaction().await.expect("BEGIN");
    holder
        .batch_execute("LOCK TABLE gate IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");

    let psql = Psql::of_cluster(cluster, &db);
    let bound = Duration::from_secs(1);
    let started = Instant::now();
    let err = psql
        .run(
            "gate.sql",
            "BEGIN;\nLOCK TABLE gate IN ACCESS SHARE MODE;\nCOMMIT;\nCREATE TABLE after_gate ();\n",
            bound,
        )
        .await
        .expect_err("waits on the lock");
    let took = started.elapsed();
    assert!(
        matches!(&err, Error::Timeout { waited, .. } if *waited == bound),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");

    holder.rollback().await.expect("ROLLBACK");
    // psql's session ends once its LOCK, let through, finds psql gone.
    until_no_other_session(
        &client,
        "backend_type = 'client backend'",
        Duration::from_secs(30),
        "psql's session is still there",
    )
    .await;
    let after: Option<String> = client
        .query_one("SELECT to_regclass('after_gate')::text", &[])
        .await
        .expect("lookup")
        .get(0);
    assert_eq!(after, None, "psql went on after its timeout");
}
