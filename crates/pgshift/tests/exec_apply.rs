//! `apply` on real PostgreSQL: every safer sequence ends in the catalog state the
//! blocking form produces, while a writer inserting throughout never waits longer
//! than the lock budget (plus a margin); a held conflicting lock exhausts the budget
//! and leaves the catalog unchanged.

mod common;

use std::time::Duration;

use common::*;
use pgshift::exec::{Outcome, StepBudgets};
use pgshift::refusal::RefusalCause;

const SCHEMA: &str = "
CREATE TABLE owners (id bigint PRIMARY KEY);
INSERT INTO owners SELECT g FROM generate_series(1, 100) g;
CREATE TABLE accounts (id bigint PRIMARY KEY, email text, kind int, owner_id bigint, note text);
INSERT INTO accounts SELECT g, 'user' || g || '@example.com', g % 5, (g % 100) + 1, 'n'
  FROM generate_series(1, 20000) g;
CREATE INDEX accounts_note_idx ON accounts (note);
CREATE TABLE keyless (id bigint, v int);
INSERT INTO keyless SELECT g, g FROM generate_series(1, 5000) g;
CREATE FUNCTION guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE events (id bigint NOT NULL, at timestamptz NOT NULL, kind int, PRIMARY KEY (id, at))
  PARTITION BY RANGE (at);
CREATE TABLE events_a PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2026-04-01');
CREATE TABLE events_b PARTITION OF events FOR VALUES FROM ('2026-04-01') TO ('2026-07-01');
CREATE TABLE events_c PARTITION OF events FOR VALUES FROM ('2026-07-01') TO ('2026-10-01');
CREATE TABLE events_d PARTITION OF events FOR VALUES FROM ('2026-10-01') TO ('2027-01-01');
INSERT INTO events SELECT g, '2026-01-01'::timestamptz + (g % 360) * interval '1 day', g % 7
  FROM generate_series(1, 20000) g;
ANALYZE;
";

const ACCOUNTS_WRITER: &str =
    "INSERT INTO accounts (id, email, kind, owner_id, note) VALUES ($1::bigint, 'writer' || $1::bigint || '@example.com', 1, 1, 'w')";
const EVENTS_WRITER: &str =
    "INSERT INTO events (id, at, kind) VALUES ($1::bigint, '2026-01-01'::timestamptz + ($1::bigint % 270) * interval '1 day', 1)";

/// The lock budget of these tests, and the margin allowed on top of it for a
/// writer's wait (scheduling noise on a small, busy machine).
const MARGIN: Duration = Duration::from_millis(900);

struct Case {
    name: &'static str,
    table: &'static str,
    sql: &'static str,
    writer: &'static str,
}

const CASES: &[Case] = &[
    Case { name: "index", table: "accounts", sql: "CREATE INDEX accounts_kind_idx ON accounts (kind)", writer: ACCOUNTS_WRITER },
    Case { name: "unique", table: "accounts", sql: "ALTER TABLE accounts ADD CONSTRAINT accounts_email_key UNIQUE (email)", writer: ACCOUNTS_WRITER },
    Case { name: "check", table: "accounts", sql: "ALTER TABLE accounts ADD CONSTRAINT accounts_kind_check CHECK (kind >= 0)", writer: ACCOUNTS_WRITER },
    Case { name: "foreign key", table: "accounts", sql: "ALTER TABLE accounts ADD CONSTRAINT accounts_owner_fkey FOREIGN KEY (owner_id) REFERENCES owners (id)", writer: ACCOUNTS_WRITER },
    Case { name: "not null", table: "accounts", sql: "ALTER TABLE accounts ALTER COLUMN email SET NOT NULL", writer: ACCOUNTS_WRITER },
    Case { name: "primary key", table: "keyless", sql: "ALTER TABLE keyless ADD PRIMARY KEY (id)", writer: "INSERT INTO keyless (id, v) VALUES ($1::bigint, 1)" },
    Case { name: "partitioned index", table: "events", sql: "CREATE INDEX events_kind_idx ON events (kind)", writer: EVENTS_WRITER },
    Case { name: "detach", table: "events", sql: "ALTER TABLE events DETACH PARTITION events_d", writer: EVENTS_WRITER },
    Case { name: "trigger", table: "accounts", sql: "CREATE TRIGGER accounts_guard BEFORE INSERT ON accounts FOR EACH ROW EXECUTE FUNCTION guard()", writer: ACCOUNTS_WRITER },
    Case { name: "drop index", table: "accounts", sql: "DROP INDEX accounts_note_idx", writer: ACCOUNTS_WRITER },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safer_sequences_end_where_the_blocking_form_ends_and_writers_never_wait_long() {
    let mut problems = Vec::new();
    for case in CASES {
        let blocking_db = database("blocking", SCHEMA);
        cluster()
            .psql(&blocking_db, case.sql)
            .expect("the blocking form runs");
        let expected = table_shape(&blocking_db, case.table).await;

        let online_db = database("online", SCHEMA);
        let writer = Writer::start(&online_db, case.writer, Duration::from_millis(2)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let verdict = apply_sql(&online_db, case.sql, TEST_BUDGETS, &[]).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let stats = writer.stop().await;
        let actual = table_shape(&online_db, case.table).await;

        if verdict.outcome != Outcome::Done {
            problems.push(format!(
                "{}: outcome {:?}: {verdict:?}",
                case.name, verdict.outcome
            ));
            continue;
        }
        if actual != expected {
            problems.push(format!(
                "{}: catalog differs\n--- blocking form\n{expected}--- pgshift\n{actual}",
                case.name
            ));
        }
        let bound = Duration::from_millis(TEST_BUDGETS.lock_timeout_ms) + MARGIN;
        if stats.max_latency > bound {
            problems.push(format!(
                "{}: a writer waited {:?} (bound {bound:?})",
                case.name, stats.max_latency
            ));
        }
        if stats.committed == 0 || stats.failed > 0 {
            problems.push(format!("{}: writer {stats:?}", case.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_table_gets_a_valid_index_while_writes_continue() {
    let db = database("partidx", SCHEMA);
    let writer = Writer::start(&db, EVENTS_WRITER, Duration::from_millis(1)).await;
    let verdict = apply_sql(
        &db,
        "CREATE INDEX events_at_kind_idx ON events (at, kind)",
        TEST_BUDGETS,
        &[],
    )
    .await;
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
    assert!(stats.committed > 10, "writes continued: {stats:?}");
    assert_eq!(stats.failed, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_3_a_held_conflicting_lock_exhausts_the_budget_and_changes_nothing() {
    let db = database("lockheld", SCHEMA);
    let before = table_shape(&db, "accounts").await;
    let holder = client(&db).await;
    holder
        .batch_execute("BEGIN; SELECT count(*) FROM accounts;")
        .await
        .expect("holds ACCESS SHARE");
    let writer = Writer::start(&db, ACCOUNTS_WRITER, Duration::from_millis(5)).await;
    let budgets = StepBudgets {
        lock_timeout_ms: 100,
        max_attempts: 4,
        backoff_initial_ms: 20,
        backoff_max_ms: 50,
        ..TEST_BUDGETS
    };
    let verdict = apply_sql(
        &db,
        "ALTER TABLE accounts ADD COLUMN flag boolean",
        budgets,
        &[],
    )
    .await;
    let stats = writer.stop().await;
    holder.batch_execute("ROLLBACK").await.expect("release");

    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:?}");
    let refusal = verdict.runtime_refusal.as_ref().expect("a runtime refusal");
    assert_eq!(refusal.cause, RefusalCause::LockBudgetExhausted);
    let attempts = verdict.units[0]
        .report
        .as_ref()
        .expect("ran")
        .attempts
        .len();
    assert_eq!(attempts, 4, "every attempt was made");
    assert!(
        refusal.message.contains("4 attempts"),
        "{}",
        refusal.message
    );
    assert_eq!(verdict.committed_units, 0);
    assert_eq!(
        table_shape(&db, "accounts").await,
        before,
        "the catalog is unchanged"
    );
    let bound = Duration::from_millis(budgets.lock_timeout_ms) + MARGIN;
    assert!(
        stats.max_latency <= bound,
        "writers waited {:?} > {bound:?}",
        stats.max_latency
    );
    assert_eq!(stats.failed, 0);
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
    assert_eq!(
        verdict.runtime_refusal.as_ref().map(|r| r.cause),
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
