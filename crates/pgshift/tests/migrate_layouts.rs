//! Real migration directories on real PostgreSQL: sqlx's timestamp versions and
//! reversible pairs, Flyway names, mixed and repeatable layouts refused before
//! anything is written, adopting pgshift with `--baseline VERSION` and from sqlx's
//! `_sqlx_migrations`, and `CREATE TABLE IF NOT EXISTS` judged against the live table.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use pgshift::layout::{LayoutError, LayoutKind};
use pgshift::migrate::{
    baseline, BaselineSource, BaselineStatus, FileStatus, MigrateError, MigrateOutcome,
};
use pgshift::plan::{plan, PlanInput};
use pgshift::route::Route;
use pgshift::script::TransactionMode;
use sha2::{Digest, Sha256, Sha384};

fn layouts(dir: &str) -> PathBuf {
    workspace()
        .join("crates/pgshift/tests/data/layouts")
        .join(dir)
}

fn sqlx_files() -> Vec<PathBuf> {
    let dir = layouts("sqlx_reversible");
    [
        "20240101120000_create_ledgers.up.sql",
        "20240215083000_ledgers_add_currency.up.sql",
        "20240302171500_ledgers_currency_required.up.sql",
    ]
    .iter()
    .map(|name| dir.join(name))
    .collect()
}

fn run_file_by_hand(db: &str, path: &Path) {
    cluster().psql_file(db, path).expect("file runs");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn psql(db: &str, sql: &str) -> String {
    cluster().psql(db, sql).expect("query").trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlx_directory_applies_its_up_files_in_order_and_never_a_down_file() {
    let db = database("sqlx_layout", "");
    let verdict = run_migrate(&db, &layouts("sqlx_reversible"), &migrate_options())
        .await
        .expect("timestamp versions are not gaps");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    assert_eq!(verdict.layout.kind, LayoutKind::Timestamp);
    assert!(verdict.layout.reversible);
    assert_eq!(
        verdict.layout.description,
        "sqlx (timestamp versions, reversible pairs, 3 down files not read)"
    );
    let versions: Vec<i64> = verdict.files.iter().map(|f| f.version).collect();
    assert_eq!(
        versions,
        vec![20240101120000, 20240215083000, 20240302171500]
    );
    assert!(verdict
        .files
        .iter()
        .all(|f| f.status == FileStatus::Applied));
    // Every down file would undo what its up file did (DROP TABLE, DROP COLUMN,
    // TRUNCATE): the table, its required column and the history say none ran.
    assert_eq!(
        psql(&db, "SELECT attnotnull FROM pg_attribute WHERE attrelid = 'ledgers'::regclass AND attname = 'currency'"),
        "t"
    );
    assert_eq!(psql(&db, "SELECT count(*) FROM pgshift.migrations"), "3");
    // The backfill and SET NOT NULL were one transaction under sqlx, and on a table
    // with no rows they stay one (TX-2): no file is split.
    assert!(
        verdict.files.iter().all(|f| f.split.is_none()),
        "{verdict:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flyway_names_apply_by_version_and_layout_errors_write_nothing() {
    let db = database("flyway_layout", "");
    let verdict = run_migrate(&db, &layouts("flyway"), &migrate_options())
        .await
        .expect("Flyway versions are not gaps");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    assert_eq!(verdict.layout.kind, LayoutKind::Flyway);
    let versions: Vec<i64> = verdict.files.iter().map(|f| f.version).collect();
    assert_eq!(versions, vec![1, 2, 10]);
    assert_eq!(
        psql(&db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ledgers'::regclass AND attname = 'currency' AND NOT attisdropped"),
        "1",
        "the undo file U2 was not run"
    );

    let db = database("bad_layouts", "");
    let mixed = run_migrate(&db, &layouts("mixed"), &migrate_options()).await;
    match mixed {
        Err(MigrateError::Layout(LayoutError::Mixed { first, second, .. })) => {
            assert!(first.contains("0001_create_ledgers.sql"), "{first}");
            assert!(
                second.contains("20240215083000_ledgers_add_currency.sql"),
                "{second}"
            );
        }
        other => panic!("mixed layout: {other:?}"),
    }
    let repeatable = run_migrate(&db, &layouts("flyway_repeatable"), &migrate_options()).await;
    match repeatable {
        Err(MigrateError::Layout(LayoutError::Repeatable { file })) => {
            assert!(file.ends_with("R__ledger_totals_view.sql"), "{file}");
        }
        other => panic!("repeatable: {other:?}"),
    }
    assert_eq!(
        psql(
            &db,
            "SELECT to_regclass('pgshift.migrations') IS NULL AND to_regclass('ledgers') IS NULL"
        ),
        "t",
        "nothing was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_up_to_a_version_records_without_running_and_migrate_continues() {
    let db = database("baseline_version", "");
    let files = sqlx_files();
    run_file_by_hand(&db, &files[0]);
    cluster()
        .psql(&db, "INSERT INTO ledgers (workspace) VALUES ('kept')")
        .expect("row");
    let session = session(&db).await;
    let dir = layouts("sqlx_reversible");
    let unknown = baseline(&session, &dir, &BaselineSource::UpTo(20240101120001), false).await;
    assert!(matches!(
        unknown,
        Err(MigrateError::BaselineVersionUnknown {
            version: 20240101120001
        })
    ));
    let dry = baseline(&session, &dir, &BaselineSource::UpTo(20240101120000), true)
        .await
        .expect("dry run");
    assert_eq!(dry.files[0].status, BaselineStatus::WouldBaseline);
    assert_eq!(
        psql(&db, "SELECT to_regclass('pgshift.migrations') IS NULL"),
        "t"
    );

    let done = baseline(&session, &dir, &BaselineSource::UpTo(20240101120000), false)
        .await
        .expect("baselines");
    let statuses: Vec<BaselineStatus> = done.files.iter().map(|f| f.status).collect();
    assert_eq!(
        statuses,
        vec![
            BaselineStatus::Baselined,
            BaselineStatus::Pending,
            BaselineStatus::Pending
        ]
    );
    let sha256 = hex(&Sha256::digest(std::fs::read(&files[0]).expect("read")));
    assert_eq!(
        psql(&db, "SELECT checksum || '|' || units_total || '|' || outcome || '|' || baselined FROM pgshift.migrations"),
        format!("{sha256}|0|done|--baseline 20240101120000")
    );
    let again = baseline(&session, &dir, &BaselineSource::UpTo(20240101120000), false)
        .await
        .expect("idempotent");
    assert_eq!(again.files[0].status, BaselineStatus::AlreadyApplied);

    let verdict = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("continues");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    assert_eq!(verdict.files[0].status, FileStatus::AlreadyApplied);
    assert_eq!(
        verdict.files[0].baselined.as_deref(),
        Some("--baseline 20240101120000")
    );
    assert_eq!(verdict.files[1].status, FileStatus::Applied);
    assert_eq!(verdict.files[2].status, FileStatus::Applied);
    assert_eq!(
        psql(
            &db,
            "SELECT string_agg(workspace || ':' || currency, ',') FROM ledgers"
        ),
        "kept:EUR"
    );
}

/// `_sqlx_migrations` as sqlx 0.7 and 0.8 create it on PostgreSQL.
const SQLX_TABLE: &str = "CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
);";

async fn record_in_sqlx(db: &str, version: i64, description: &str, checksum: &[u8], success: bool) {
    client(db)
        .await
        .execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES ($1, $2, $3, $4, 1843000)",
            &[&version, &description, &success, &checksum],
        )
        .await
        .expect("sqlx row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_sqlx_imports_successful_versions_and_reports_mismatches() {
    let dir = layouts("sqlx_reversible");
    let files = sqlx_files();
    let fresh = database("sqlx_missing", "");
    let missing = baseline(&session(&fresh).await, &dir, &BaselineSource::Sqlx, false).await;
    assert!(
        matches!(missing, Err(MigrateError::SqlxTableMissing)),
        "{missing:?}"
    );

    let db = database("sqlx_import", SQLX_TABLE);
    run_file_by_hand(&db, &files[0]);
    run_file_by_hand(&db, &files[1]);
    let sha384 = |path: &Path| Sha384::digest(std::fs::read(path).expect("read")).to_vec();
    record_in_sqlx(
        &db,
        20240101120000,
        "create ledgers",
        &sha384(&files[0]),
        true,
    )
    .await;
    // sqlx recorded version 2 from a file that has changed since.
    let stale = Sha384::digest(b"ALTER TABLE ledgers ADD COLUMN currency varchar(3);\n").to_vec();
    record_in_sqlx(&db, 20240215083000, "ledgers add currency", &stale, true).await;
    let session = session(&db).await;
    match baseline(&session, &dir, &BaselineSource::Sqlx, false).await {
        Err(MigrateError::SqlxMismatch { mismatches }) => {
            assert_eq!(mismatches.len(), 1, "{mismatches:?}");
            assert_eq!(mismatches[0].version, 20240215083000);
            assert!(
                mismatches[0].problem.contains(&hex(&stale)),
                "{mismatches:?}"
            );
            assert!(mismatches[0].problem.contains(&hex(&sha384(&files[1]))));
        }
        other => panic!("a checksum mismatch is reported: {other:?}"),
    }
    assert_eq!(
        psql(&db, "SELECT to_regclass('pgshift.migrations') IS NULL"),
        "t",
        "nothing written"
    );

    // A failed sqlx record is reported too.
    cluster()
        .psql(&db, "UPDATE _sqlx_migrations SET success = false, checksum = sha384(convert_to('x', 'UTF8')) WHERE version = 20240215083000")
        .expect("dirty");
    let dirty = baseline(&session, &dir, &BaselineSource::Sqlx, false).await;
    assert!(
        matches!(&dirty, Err(MigrateError::SqlxMismatch { mismatches }) if mismatches[0].problem.contains("success = false")),
        "{dirty:?}"
    );

    client(&db)
        .await
        .execute(
            "UPDATE _sqlx_migrations SET success = true, checksum = $1 WHERE version = 20240215083000",
            &[&sha384(&files[1])],
        )
        .await
        .expect("repair");
    let imported = baseline(&session, &dir, &BaselineSource::Sqlx, false)
        .await
        .expect("imports");
    assert_eq!(imported.sqlx_schema.as_deref(), Some("public"));
    let statuses: Vec<BaselineStatus> = imported.files.iter().map(|f| f.status).collect();
    assert_eq!(
        statuses,
        vec![
            BaselineStatus::Baselined,
            BaselineStatus::Baselined,
            BaselineStatus::Pending
        ]
    );
    let verdict = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("continues");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    let statuses: Vec<FileStatus> = verdict.files.iter().map(|f| f.status).collect();
    assert_eq!(
        statuses,
        vec![
            FileStatus::AlreadyApplied,
            FileStatus::AlreadyApplied,
            FileStatus::Applied
        ]
    );
    assert_eq!(
        psql(&db, "SELECT count(*) FILTER (WHERE baselined LIKE '--baseline sqlx%') || '/' || count(*) FROM pgshift.migrations"),
        "2/3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_if_not_exists_is_judged_against_the_live_table() {
    let path = layouts("if_not_exists.sql");
    let text = std::fs::read_to_string(&path).expect("read");
    let input = || PlanInput {
        path: path.display().to_string(),
        statements: pgshift_sql::parse(&text).expect("parses"),
    };
    let empty = database("inexists_absent", "");
    let planned = plan(&session(&empty).await, vec![input()], TransactionMode::File)
        .await
        .expect("plans");
    let script = &planned.files[0].script;
    assert_eq!(
        script.statements[1].new_relations.len(),
        1,
        "absent: a new table"
    );
    assert_eq!(script.statements[1].classification.route, Route::Native);

    let existing = database(
        "inexists_present",
        "CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL); INSERT INTO ledgers SELECT g, 'w' || g FROM generate_series(1, 100) g;",
    );
    let planned = plan(
        &session(&existing).await,
        vec![input()],
        TransactionMode::File,
    )
    .await
    .expect("plans");
    let script = &planned.files[0].script;
    assert!(
        script.statements[1].new_relations.is_empty(),
        "the index is built on the existing table"
    );
    assert!(
        matches!(
            script.statements[1].classification.route,
            Route::NativeSequence { .. }
        ),
        "{:?}",
        script.statements[1].classification.route
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_refuses_a_lock_table_that_its_split_would_release_early() {
    let db = database(
        "lock_lost",
        "CREATE TABLE ledgers (id bigint PRIMARY KEY, currency text); INSERT INTO ledgers VALUES (1, NULL);",
    );
    let dir = temp_dir("lock_lost");
    std::fs::write(
        dir.join("0001_currency_required.sql"),
        "LOCK TABLE ledgers IN SHARE MODE;\nUPDATE ledgers SET currency = 'EUR' WHERE currency IS NULL;\nALTER TABLE ledgers ALTER COLUMN currency SET NOT NULL;\n",
    )
    .expect("write");
    let verdict = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("judged");
    assert_eq!(verdict.outcome, MigrateOutcome::Refused, "{verdict:#?}");
    let schedule = verdict.files[0].schedule.as_ref().expect("schedule");
    assert_eq!(
        schedule.refusals[0].refusal.cause,
        pgshift::refusal::RefusalCause::NotSplittable
    );
    assert_eq!(
        psql(&db, "SELECT count(*) FROM ledgers WHERE currency IS NULL"),
        "1",
        "nothing ran"
    );
}
