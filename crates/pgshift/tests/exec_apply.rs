//! `apply` on real PostgreSQL: partitioned index builds while writes continue,
//! refusals, failures with their committed prefix, statement timeouts, invalid indexes.
//! (Writers' waits are measured in `exec_latency.rs`.)

mod common;

use std::time::Duration;

use common::exec_tables::{EVENTS_WRITER, SCHEMA};
use common::*;
use pgshift::exec::{Outcome, StepBudgets};
use pgshift::refusal::RefusalCause;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_table_gets_a_valid_index_while_writes_continue() {
    let db = database("partidx", SCHEMA);
    let writer = Writer::start(&db, EVENTS_WRITER, Duration::from_millis(1)).await;
    // A writer already at work: its first write (a new session's first plan) once took
    // longer than the whole apply, which then saw no write during it.
    let warm = std::time::Instant::now();
    while writer.committed() < 5 {
        assert!(
            warm.elapsed() < Duration::from_secs(30),
            "the writer never wrote"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = writer.committed();
    let verdict = apply_sql(
        &db,
        "CREATE INDEX events_at_kind_idx ON events (at, kind)",
        TEST_BUDGETS,
        &[],
    )
    .await;
    let during = writer.committed() - before;
    let stats = writer.stop().await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:?}");
    assert_eq!(
        verdict.units.len(),
        1 + 2 * 4,
        "ON ONLY, then build and attach per partition"
    );
    let valid = cluster()
        .psql(
            &db,
            "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = 'events_at_kind_idx'::regclass",
        )
        .expect("query");
    assert_eq!(valid.trim(), "t", "the partitioned index is valid");
    let attached = cluster()
        .psql(
            &db,
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events_at_kind_idx'::regclass",
        )
        .expect("query");
    assert_eq!(attached.trim(), "4");
    assert!(
        during > 0,
        "writes committed while the index was built: {stats:?}"
    );
    assert_eq!(stats.failed, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrites_are_refused_unless_the_table_is_named() {
    let db = database("rewrite", SCHEMA);
    let verdict = apply_sql(
        &db,
        "ALTER TABLE accounts ALTER COLUMN kind TYPE bigint",
        TEST_BUDGETS,
        &[],
    )
    .await;
    assert_eq!(verdict.outcome, Outcome::Refused);
    assert_eq!(
        verdict.refusals[0].refusal.cause,
        RefusalCause::CopyAndSwapUnavailable
    );
    assert!(verdict.units.is_empty(), "nothing ran");
    let type_now = cluster()
        .psql(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'accounts'::regclass AND attname = 'kind'")
        .expect("query");
    assert_eq!(type_now.trim(), "integer");

    let verdict = apply_sql(
        &db,
        "ALTER TABLE accounts ALTER COLUMN kind TYPE bigint",
        TEST_BUDGETS,
        &["accounts"],
    )
    .await;
    assert_eq!(verdict.outcome, Outcome::DoneWithBlocking, "{verdict:?}");
    assert!(verdict.units[0].unit.accepted_blocking);
    let type_now = cluster()
        .psql(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'accounts'::regclass AND attname = 'kind'")
        .expect("query");
    assert_eq!(type_now.trim(), "bigint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_reports_the_committed_prefix() {
    let db = database("prefix", SCHEMA);
    // The CHECK's NOT VALID step commits; VALIDATE fails on an existing row.
    cluster()
        .psql(&db, "UPDATE accounts SET kind = -1 WHERE id = 7")
        .expect("a bad row");
    let verdict = apply_sql(
        &db,
        "ALTER TABLE accounts ADD CONSTRAINT accounts_kind_check CHECK (kind >= 0)",
        TEST_BUDGETS,
        &[],
    )
    .await;
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:?}");
    assert_eq!(verdict.committed_units, 1);
    assert_eq!(verdict.failed_unit, Some(1));
    let failure = verdict.units[1]
        .report
        .as_ref()
        .and_then(|r| r.failure.clone())
        .unwrap_or_default();
    assert!(failure.contains("23514"), "{failure}");
    let state = cluster()
        .psql(
            &db,
            "SELECT convalidated FROM pg_constraint WHERE conname = 'accounts_kind_check'",
        )
        .expect("query");
    assert_eq!(
        state.trim(),
        "f",
        "the committed NOT VALID step stands, unvalidated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_rf_3_missing_tables_are_refused_before_anything_runs() {
    let db = database("missing", SCHEMA);
    let verdict = apply_sql(
        &db,
        "ALTER TABLE accounts ADD COLUMN a int; ALTER TABLE nowhere ADD COLUMN b int",
        TEST_BUDGETS,
        &[],
    )
    .await;
    assert_eq!(verdict.outcome, Outcome::Refused);
    assert_eq!(
        verdict.refusals[0].refusal.cause,
        RefusalCause::TableMissing
    );
    let column = cluster()
        .psql(&db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'accounts'::regclass AND attname = 'a'")
        .expect("query");
    assert_eq!(column.trim(), "0", "the first statement did not run either");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_st_2_an_invalid_index_in_the_way_is_reported_not_dropped() {
    let db = database("invalid", SCHEMA);
    // A unique build that fails on duplicates leaves an invalid index behind.
    cluster()
        .psql(&db, "UPDATE accounts SET kind = 1")
        .expect("duplicates");
    let failed = cluster().psql(
        &db,
        "CREATE UNIQUE INDEX CONCURRENTLY accounts_kind_idx ON accounts (kind)",
    );
    assert!(failed.is_err(), "the build fails on duplicates");
    let oid = cluster()
        .psql(&db, "SELECT 'accounts_kind_idx'::regclass::oid")
        .expect("the invalid index exists");
    let verdict = apply_sql(
        &db,
        "CREATE INDEX CONCURRENTLY accounts_kind_idx ON accounts (kind)",
        TEST_BUDGETS,
        &[],
    )
    .await;
    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:?}");
    // Found before anything runs, by the judgement plan shares.
    assert_eq!(
        verdict.refusals.first().map(|r| r.refusal.cause),
        Some(RefusalCause::InvalidIndexExists)
    );
    let still = cluster()
        .psql(&db, "SELECT 'accounts_kind_idx'::regclass::oid")
        .expect("still there");
    assert_eq!(still.trim(), oid.trim(), "pgshift did not drop it");
}

// INV: LK-4 — real work cut short by statement_timeout is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_4_statement_timeouts_are_never_retried() {
    let db = database("stmt_timeout", "");
    let budgets = StepBudgets {
        statement_timeout_ms: 100,
        ..TEST_BUDGETS
    };
    let verdict = apply_sql(&db, "SELECT pg_sleep(5)", budgets, &[]).await;
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:?}");
    let report = verdict.units[0].report.as_ref().expect("ran");
    assert_eq!(report.attempts.len(), 1);
    assert_eq!(report.failure_kind, Some("statement-timeout"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_2_budgets_are_back_after_a_unit_outside_a_transaction() {
    // A concurrent index build runs outside a transaction with the step's budgets set
    // for the session; afterwards the session's own budgets are in force again (not the
    // server's defaults, where `lock_timeout = 0` waits forever).
    let db = database("exec_budgets_back", SCHEMA);
    let session = session(&db).await;
    let verdict = apply_on(
        &session,
        &db,
        "CREATE INDEX CONCURRENTLY accounts_kind_idx ON accounts (kind)",
        TEST_BUDGETS,
        &[],
    )
    .await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:?}");
    let row = session
        .client()
        .query_one(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('search_path')",
            &[],
        )
        .await
        .expect("settings");
    let settings: (String, String, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(
        settings,
        (
            "1s".to_owned(),
            "1min".to_owned(),
            "pg_catalog, pg_temp".to_owned()
        )
    );
}

/// `--max-table-size` refuses a blocking form the operator accepted on a table larger
/// than the limit, before anything runs; online forms on the same table are not
/// affected, and within the limit the blocking form runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_11_an_accepted_blocking_form_is_refused_on_a_table_over_the_size_limit() {
    let db = database("max_table_size", SCHEMA);
    let retype = "ALTER TABLE accounts ALTER COLUMN kind TYPE bigint";
    let kind = |db: &str| {
        cluster()
            .psql(db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'accounts'::regclass AND attname = 'kind'")
            .expect("query")
            .trim()
            .to_owned()
    };
    let verdict = apply_sql_within(&db, retype, TEST_BUDGETS, &["accounts"], Some(8192)).await;
    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:?}");
    assert_eq!(
        verdict.refusals[0].refusal.cause,
        RefusalCause::TableTooLarge
    );
    assert!(
        verdict.refusals[0]
            .refusal
            .message
            .contains("ACCESS EXCLUSIVE on \"accounts\" ("),
        "{}",
        verdict.refusals[0].refusal.message
    );
    assert!(verdict.units.is_empty(), "nothing ran");
    assert_eq!(kind(&db), "integer");

    let online = apply_sql_within(
        &db,
        "CREATE INDEX CONCURRENTLY accounts_kind_idx ON accounts (kind)",
        TEST_BUDGETS,
        &[],
        Some(8192),
    )
    .await;
    assert_eq!(online.outcome, Outcome::Done, "{online:?}");

    let verdict = apply_sql_within(&db, retype, TEST_BUDGETS, &["accounts"], Some(1 << 30)).await;
    assert_eq!(verdict.outcome, Outcome::DoneWithBlocking, "{verdict:?}");
    assert_eq!(kind(&db), "bigint");
}
