//! An autovacuum worker holding a table does not make pgshift's steps on it time out
//! (LK-10). This binary has a cluster of its own, whose autovacuum wakes every second,
//! so that a worker can be started on a table and kept there (a cost delay that makes
//! it crawl) while a step waits for its lock.

mod common;

use std::time::{Duration, Instant};

use common::*;
use pgshift::exec::{Outcome, StepBudgets};

/// A table autovacuum picks up at once and vacuums slowly: every insert counts toward
/// the insert threshold, and each page costs it about 400 ms of sleep.
const SCHEMA: &str = "
CREATE TABLE crawl (id bigint PRIMARY KEY, pad text NOT NULL)
  WITH (autovacuum_vacuum_insert_threshold = 1, autovacuum_vacuum_insert_scale_factor = 0,
        autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1);
INSERT INTO crawl SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g;
";

/// Waits until an autovacuum worker is vacuuming `crawl` in `db`.
async fn wait_for_autovacuum(db: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let pid = cluster()
            .psql(
                db,
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' \
                  AND datname = current_database() AND query LIKE '%crawl%'",
            )
            .expect("query");
        if pid.trim().parse::<i32>().is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no autovacuum worker started on crawl"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_10_an_autovacuum_worker_holding_the_table_yields_to_a_step() {
    for sql in [
        "ALTER SYSTEM SET autovacuum_naptime = 1",
        "SELECT pg_reload_conf()",
    ] {
        cluster()
            .psql("postgres", sql)
            .expect("autovacuum settings");
    }
    let db = database("autovacuum", SCHEMA);
    wait_for_autovacuum(&db).await;
    // The server's deadlock_timeout is 1 s: a budget equal to it lost the race against
    // the lock timeout on every attempt.
    let budgets = StepBudgets {
        lock_timeout_ms: 1_000,
        max_attempts: 3,
        ..TEST_BUDGETS
    };
    let verdict = apply_sql(&db, "ALTER TABLE crawl ADD COLUMN c int", budgets, &[]).await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:?}");
    let report = verdict.units[0].report.as_ref().expect("ran");
    assert_eq!(
        report.attempts.len(),
        1,
        "the worker was cancelled within the first wait: {:?}",
        report.attempts
    );
    let added = common::cas::value(
        &db,
        "SELECT count(*) FROM pg_attribute WHERE attrelid = 'crawl'::regclass AND attname = 'c'",
    );
    assert_eq!(added, "1", "the column was added");
}
