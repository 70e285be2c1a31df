//! Writers' waits during `apply`, measured from the writer's side: every safer
//! sequence ends in the catalog state the blocking form produces while a writer
//! inserting throughout never waits longer than the lock budget (plus a margin), and a
//! held conflicting lock exhausts the budget, changing nothing. These tests have a
//! binary of their own and run one at a time, so that other tests do not load the
//! machine while waits are measured.

mod common;

use std::time::Duration;

use common::exec_tables::{EVENTS_WRITER, SCHEMA};
use common::*;
use pgshift::exec::{Outcome, StepBudgets};
use pgshift::migrate::{FileStatus, MigrateOutcome};
use pgshift::refusal::RefusalCause;

const ACCOUNTS_WRITER: &str =
    "INSERT INTO accounts (id, email, kind, owner_id, note) VALUES ($1::bigint, 'writer' || $1::bigint || '@example.com', 1, 1, 'w')";
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

/// One latency-measuring test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safer_sequences_end_where_the_blocking_form_ends_and_writers_never_wait_long() {
    let _serial = ONE_AT_A_TIME.lock().await;
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
async fn inv_lk_3_a_held_conflicting_lock_exhausts_the_budget_and_changes_nothing() {
    let _serial = ONE_AT_A_TIME.lock().await;
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
async fn a_relay_directory_applies_under_write_load_and_reruns_as_a_no_op() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let db = relay_database("relay_migrate");
    let dir = workspace().join("crates/pgshift/tests/data/migrations/relay_online");
    let writer = Writer::start(&db, RELAY_WRITER, Duration::from_millis(3)).await;
    let verdict = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs");
    let stats = writer.stop().await;
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    assert_eq!(verdict.files.len(), 8);
    assert!(
        verdict
            .files
            .iter()
            .all(|f| f.status == FileStatus::Applied),
        "{verdict:#?}"
    );
    let bound = Duration::from_millis(TEST_BUDGETS.lock_timeout_ms) + Duration::from_millis(900);
    assert!(
        stats.max_latency <= bound,
        "a writer waited {:?}",
        stats.max_latency
    );
    assert!(stats.committed > 20 && stats.failed == 0, "{stats:?}");

    let recorded = history(&db);
    assert_eq!(recorded.lines().count(), 8, "{recorded}");
    for line in recorded.lines() {
        let fields: Vec<&str> = line.split('|').collect();
        assert_eq!(fields[3], fields[4], "every unit committed: {line}");
        assert_eq!(fields[5], "done", "{line}");
    }
    let valid = cluster()
        .psql(&db, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'events_kind_created_idx'::regclass")
        .expect("query");
    assert_eq!(valid.trim(), "t");

    let again = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs again");
    assert_eq!(again.outcome, MigrateOutcome::Done);
    assert!(
        again
            .files
            .iter()
            .all(|f| f.status == FileStatus::AlreadyApplied),
        "{again:#?}"
    );
    assert_eq!(history(&db), recorded, "a second run changes nothing");
}
