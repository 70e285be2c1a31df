//! One online rewrite per project under writers: the project's schema from its own
//! files (natively, up to the rewrite), seeded rows, then the rewrite through
//! `pgshift apply` while writers insert and update rows of the rewritten table, and
//! an acknowledged-write check afterwards.
//!
//! pgshift-workload's load generator and lost-write oracle are built for the relay's
//! `events` rows (their content hash is of those columns), so the writers and the
//! check here are table-generic instead: every write carries a number (`payload`) that
//! the project's own SQL stores in a column of the table, the writer keeps, for every
//! row it inserted and the server acknowledged, the payload of its last acknowledged
//! write, and the check reads them all back: a missing row or another payload is a
//! lost write. A write whose outcome is unknown (an error) may have landed or not, so
//! either payload is accepted for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_postgres::NoTls;

use super::harness::{cluster, pgshift_json};

/// A project's rewrite under load.
pub(crate) struct Scenario {
    /// The manifest's name of the directory.
    pub(crate) project: &'static str,
    /// Files whose names sort before this one run natively first; `None`: all.
    pub(crate) before: Option<&'static str>,
    /// Rows seeded before the load.
    pub(crate) seed: &'static str,
    /// How many rows the rewritten table holds after the seed (at least).
    pub(crate) seeded_rows: u64,
    /// The rewrite: a file of the directory, or a statement.
    pub(crate) rewrite: Rewrite,
    /// The rewritten table, as copy-and-swap's report names it.
    pub(crate) table: &'static str,
    /// Inserts a row carrying `$1` (bigint) and returns its key as bigint.
    pub(crate) insert: &'static str,
    /// Sets the payload of row `$1` to `$2` (both bigint).
    pub(crate) update: &'static str,
    /// The key and payload (both bigint) of the rows whose keys are in `$1` (bigint[]).
    pub(crate) read: &'static str,
    /// A finding that makes copy-and-swap refuse the rewrite before anything runs.
    pub(crate) refused_because: Option<&'static str>,
}

/// What the scenario rewrites.
pub(crate) enum Rewrite {
    /// A file of the project's directory, by name.
    File(&'static str),
    /// A statement of our own on the project's schema (a directory with no rewrite).
    Sql(&'static str),
}

/// What one writer saw.
#[derive(Default)]
struct Ledger {
    /// Key → the payloads that are acceptable (the acknowledged one, plus those of
    /// writes whose outcome is unknown).
    rows: HashMap<i64, Vec<i64>>,
    acknowledged: u64,
    acknowledged_during: u64,
    errors: u64,
    first_error: Option<String>,
}

/// The server's words for a failed statement (`tokio_postgres::Error` shows only
/// "db error").
fn describe(err: &tokio_postgres::Error) -> String {
    err.as_db_error().map_or_else(
        || err.to_string(),
        |db| format!("{} ({})", db.message(), db.code().code()),
    )
}

/// The writers' shared state.
struct Shared {
    stop: AtomicBool,
    /// Set while pgshift runs, so writes acknowledged then are counted apart.
    during: AtomicBool,
    next: AtomicU64,
}

async fn writer(conninfo: String, scenario: &'static Scenario, shared: Arc<Shared>) -> Ledger {
    let mut ledger = Ledger::default();
    let (client, connection) = tokio_postgres::connect(&conninfo, NoTls)
        .await
        .expect("writer connects");
    tokio::spawn(connection);
    client
        .batch_execute("SET statement_timeout = '20s'")
        .await
        .expect("writer's statement timeout set");
    let mut mine: Vec<i64> = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let payload = i64::try_from(shared.next.fetch_add(1, Ordering::Relaxed)).unwrap_or(0);
        let during = shared.during.load(Ordering::Relaxed);
        // One write in four updates one of this writer's rows.
        let update_of = (payload % 4 == 0 && !mine.is_empty())
            .then(|| mine[usize::try_from(payload).unwrap_or(0) % mine.len()]);
        let outcome = match update_of {
            Some(key) => client
                .execute(scenario.update, &[&key, &payload])
                .await
                .map(|_| key),
            None => client
                .query_one(scenario.insert, &[&payload])
                .await
                .map(|row| row.get::<_, i64>(0)),
        };
        match (outcome, update_of) {
            (Ok(key), _) => {
                if update_of.is_none() {
                    mine.push(key);
                }
                ledger.rows.insert(key, vec![payload]);
                ledger.acknowledged += 1;
                if during && shared.during.load(Ordering::Relaxed) {
                    ledger.acknowledged_during += 1;
                }
            }
            (Err(err), Some(key)) => {
                ledger.errors += 1;
                ledger.first_error.get_or_insert_with(|| describe(&err));
                ledger.rows.entry(key).or_default().push(payload);
            }
            (Err(err), None) => {
                ledger.errors += 1;
                ledger.first_error.get_or_insert_with(|| describe(&err));
            }
        }
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    ledger
}

/// What the check found.
pub(crate) struct LoadOutcome {
    pub(crate) pgshift: Value,
    pub(crate) code: i32,
    pub(crate) acknowledged: u64,
    pub(crate) acknowledged_during: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) lost: Vec<(i64, Vec<i64>, Option<i64>)>,
    pub(crate) rewrite_ms: u128,
}

/// Runs the rewrite of `scenario` on `db` (schema and seed in place) through
/// `pgshift apply` under `writers` writers, and checks every acknowledged write.
pub(crate) async fn rewrite_under_load(
    scenario: &'static Scenario,
    db: &str,
    rewrite_path: Option<String>,
    writers: usize,
) -> LoadOutcome {
    let conninfo = cluster().connection_string(db);
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        during: AtomicBool::new(false),
        next: AtomicU64::new(1),
    });
    let tasks: Vec<_> = (0..writers)
        .map(|_| tokio::spawn(writer(conninfo.clone(), scenario, Arc::clone(&shared))))
        .collect();
    // The writers are at work before the rewrite starts and after it ends.
    tokio::time::sleep(Duration::from_millis(500)).await;
    shared.during.store(true, Ordering::Relaxed);
    let started = Instant::now();
    let db_owned = db.to_owned();
    let (code, json) = tokio::task::spawn_blocking(move || match (scenario, rewrite_path) {
        (_, Some(path)) => pgshift_json(&db_owned, &["apply", &path]),
        (
            Scenario {
                rewrite: Rewrite::Sql(sql),
                ..
            },
            None,
        ) => pgshift_json(&db_owned, &["apply", "--sql", sql]),
        (_, None) => panic!("a file rewrite needs its path"),
    })
    .await
    .expect("pgshift runs");
    let rewrite_ms = started.elapsed().as_millis();
    shared.during.store(false, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    shared.stop.store(true, Ordering::Relaxed);
    let mut all = Ledger::default();
    for task in tasks {
        let ledger = task.await.expect("writer ends");
        all.acknowledged += ledger.acknowledged;
        all.acknowledged_during += ledger.acknowledged_during;
        all.errors += ledger.errors;
        if all.first_error.is_none() {
            all.first_error = ledger.first_error;
        }
        all.rows.extend(ledger.rows);
    }

    let (client, connection) = tokio_postgres::connect(&conninfo, NoTls)
        .await
        .expect("checker connects");
    tokio::spawn(connection);
    let keys: Vec<i64> = all.rows.keys().copied().collect();
    let found: HashMap<i64, i64> = client
        .query(scenario.read, &[&keys])
        .await
        .expect("rows read back")
        .iter()
        .map(|row| (row.get::<_, i64>(0), row.get::<_, i64>(1)))
        .collect();
    let mut lost: Vec<(i64, Vec<i64>, Option<i64>)> = all
        .rows
        .iter()
        .filter(|(key, accepted)| !found.get(key).is_some_and(|p| accepted.contains(p)))
        .map(|(key, accepted)| (*key, accepted.clone(), found.get(key).copied()))
        .collect();
    lost.sort();
    LoadOutcome {
        pgshift: json,
        code,
        acknowledged: all.acknowledged,
        acknowledged_during: all.acknowledged_during,
        errors: all.errors,
        first_error: all.first_error,
        lost,
        rewrite_ms,
    }
}
