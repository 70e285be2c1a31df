//! Helpers shared by the tests: a seeded relay database, a test-sized load
//! configuration, bounded polling, and oracle shortcuts.

use std::future::Future;
use std::time::{Duration, Instant};

use pgshift_workload::key::{unix_us, EventKey, PgUuid};
use pgshift_workload::ledger::Ledger;
use pgshift_workload::load::{LoadConfig, LoadHandle, Progress};
use pgshift_workload::oracle::{self, OracleOptions, OracleReport};
use pgshift_workload::{schema, TableRef};
use tokio_postgres::{Client, NoTls, Row};

/// A seeded relay database and a session on it.
pub struct RelayDb {
    pub conninfo: String,
    pub client: Client,
}

/// A client on `conninfo`.
pub async fn connect(conninfo: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .expect("connect to the test database");
    tokio::spawn(connection);
    client
}

/// A fresh database with the relay schema and `rows_per_partition` seed rows.
pub async fn relay_db(prefix: &str, rows_per_partition: u32) -> RelayDb {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database(prefix).expect("fresh database");
    let conninfo = cluster.connection_string(&db);
    let psql = schema::Psql::of_cluster(cluster, &db);
    schema::load_schema(&psql, Duration::from_secs(60))
        .await
        .expect("schema loads");
    schema::seed(&psql, rows_per_partition, Duration::from_secs(120))
        .await
        .expect("seed runs");
    let client = connect(&conninfo).await;
    RelayDb { conninfo, client }
}

/// A load of `duration` at `rate` writes per second, sized for tests.
pub fn config(conninfo: &str, duration: Duration, rate: f64) -> LoadConfig {
    let mut config = LoadConfig::new(conninfo, duration);
    config.write_pace = pgshift_workload::pacing::Pace::PerSecond(rate);
    config.writers = 2;
    config.readers = 1;
    config.statement_timeout = Duration::from_secs(20);
    config
}

/// Polls `handle` until `done` holds, for at most `bound`.
pub async fn wait_for_progress(
    handle: &LoadHandle,
    bound: Duration,
    done: impl Fn(&Progress) -> bool,
) -> Progress {
    let deadline = Instant::now() + bound;
    loop {
        let progress = handle.progress();
        if done(&progress) {
            return progress;
        }
        assert!(
            Instant::now() < deadline,
            "the load did not get there within {bound:?}: {progress:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `work` with a bound, failing the test if it does not finish.
pub async fn bounded<T>(what: &str, bound: Duration, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(bound, work)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {bound:?}"))
}

/// The oracle's verdict on `table`, keeping every finding.
pub async fn check(client: &mut Client, ledger: &Ledger, table: &TableRef) -> OracleReport {
    let options = OracleOptions {
        timeout: Duration::from_secs(60),
        max_examples: 100_000,
    };
    oracle::check(client, ledger, table, &options)
        .await
        .unwrap_or_else(|e| panic!("oracle check of {table}: {e}"))
}

/// The key of a row holding `(community_id, created_at, id)` in columns 0..3.
pub fn key_of(row: &Row) -> EventKey {
    let id: Vec<u8> = row.get(2);
    EventKey {
        community_id: row.get::<_, PgUuid>(0),
        created_at_us: unix_us(row.get(1)),
        id: id.as_slice().try_into().expect("32-byte id"),
    }
}

/// Rows the load wrote carry this tag.
pub const LOAD_ROWS: &str = r#"tags @> '[["client", "pgshift-bench"]]'"#;
