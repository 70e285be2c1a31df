//! Real migration directories on real PostgreSQL: sqlx's timestamp versions and
//! reversible pairs, Flyway names (dotted versions, repeatables run again when they
//! change), mixed layouts refused before anything is written, the history table of
//! the first format upgraded in place, adopting pgshift with `--baseline VERSION` and from sqlx's
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

/// Runs `dir` on `db`, which must end `Done`.
async fn migrate_done(db: &str, dir: &Path) -> pgshift::migrate::MigrateVerdict {
    let verdict = run_migrate(db, dir, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    verdict
}

/// A run of `dir` on `db` finds every file already applied.
async fn nothing_pending(db: &str, dir: &Path) {
    let again = migrate_done(db, dir).await;
    assert!(
        file_statuses(&again)
            .iter()
            .all(|s| *s == FileStatus::AlreadyApplied),
        "{again:#?}"
    );
}

fn file_statuses(verdict: &pgshift::migrate::MigrateVerdict) -> Vec<FileStatus> {
    verdict.files.iter().map(|f| f.status).collect()
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
    let versions: Vec<&str> = verdict
        .files
        .iter()
        .filter_map(|f| f.version.as_deref())
        .collect();
    assert_eq!(
        versions,
        vec!["20240101120000", "20240215083000", "20240302171500"]
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
    let versions: Vec<&str> = verdict
        .files
        .iter()
        .filter_map(|f| f.version.as_deref())
        .collect();
    assert_eq!(versions, vec!["1", "2", "10"]);
    assert_eq!(
        psql(&db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ledgers'::regclass AND attname = 'currency' AND NOT attisdropped"),
        "1",
        "the undo file U2 was not run"
    );

    let db = database("bad_layouts", "");
    let mixed = run_migrate(&db, &layouts("mixed"), &migrate_options()).await;
    match mixed {
        Err(MigrateError::Layout(LayoutError::Mixed { first, second, .. })) => {
            let both = format!("{first} {second}");
            assert!(both.contains("V1__create_ledgers.sql"), "{both}");
            assert!(
                both.contains("20240215083000_ledgers_add_currency.sql"),
                "{both}"
            );
        }
        other => panic!("mixed layout: {other:?}"),
    }
    let nothing = run_migrate(&db, &layouts("nothing"), &migrate_options()).await;
    assert!(
        matches!(&nothing, Err(MigrateError::NothingToRead { found, .. }) if found.contains("README.md") && found.contains("seeds/")),
        "{nothing:?}"
    );
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
    let up_to = |v: &str| BaselineSource::UpTo(v.to_owned());
    let unknown = baseline(&session, &dir, &up_to("20240101120001"), false).await;
    assert!(matches!(
        &unknown,
        Err(MigrateError::BaselineVersionUnknown { version }) if version == "20240101120001"
    ));
    let dry = baseline(&session, &dir, &up_to("20240101120000"), true)
        .await
        .expect("dry run");
    assert_eq!(dry.files[0].status, BaselineStatus::WouldBaseline);
    assert_eq!(
        psql(&db, "SELECT to_regclass('pgshift.migrations') IS NULL"),
        "t"
    );

    let done = baseline(&session, &dir, &up_to("20240101120000"), false)
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
    let again = baseline(&session, &dir, &up_to("20240101120000"), false)
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
    let verdict = migrate_done(&db, &dir).await;
    assert_eq!(
        file_statuses(&verdict),
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

/// `pgshift.migrations` as pgshift created it before versions were text: `version
/// bigint PRIMARY KEY`, with the `baselined` column added later.
const FIRST_FORMAT_HISTORY: &str = "
CREATE SCHEMA pgshift;
CREATE TABLE pgshift.migrations (
    version bigint PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    units jsonb NOT NULL,
    units_total integer NOT NULL,
    units_committed integer NOT NULL DEFAULT 0,
    outcome text NOT NULL CHECK (outcome IN ('running', 'done', 'failed')),
    error text,
    started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    finished_at timestamptz,
    pgshift_version text NOT NULL
);
ALTER TABLE pgshift.migrations ADD COLUMN IF NOT EXISTS baselined text;";

const HISTORY_COLUMNS: &str = "version, name, checksum, units::text, units_total, units_committed, outcome, error, baselined, started_at::text";

fn three_files(dir: &Path) {
    std::fs::write(
        dir.join("0001_items.sql"),
        "CREATE TABLE items (id bigint PRIMARY KEY);\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("0002_add_a.sql"),
        "ALTER TABLE items ADD COLUMN a int;\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("0003_add_b_and_seed.sql"),
        "ALTER TABLE items ADD COLUMN b int;\nINSERT INTO items (id) VALUES (1);\n",
    )
    .expect("write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_table_of_the_first_format_is_upgraded_and_every_row_keeps_its_meaning() {
    let dir = temp_dir("first_format");
    three_files(&dir);
    // A real history, written by a run: 1 baselined, 2 applied, 3 failed at its
    // INSERT (a row 1 is in the way) with its ADD COLUMN committed.
    let donor = database(
        "history_donor",
        "CREATE TABLE items (id bigint PRIMARY KEY); INSERT INTO items VALUES (1);",
    );
    baseline(
        &session(&donor).await,
        &dir,
        &BaselineSource::UpTo("1".to_owned()),
        false,
    )
    .await
    .expect("baselines 1");
    let failed = run_migrate(&donor, &dir, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(failed.outcome, MigrateOutcome::Failed, "{failed:#?}");
    let donor_rows = client(&donor)
        .await
        .query(
            "SELECT version::bigint, name, checksum, units::text, units_total, units_committed, outcome, error, baselined \
               FROM pgshift.migrations ORDER BY id",
            &[],
        )
        .await
        .expect("donor history");
    assert_eq!(donor_rows.len(), 3);

    // The same database state and history, in the first format.
    let db = database(
        "history_first_format",
        "CREATE TABLE items (id bigint PRIMARY KEY, a int, b int); INSERT INTO items VALUES (1);",
    );
    let old = client(&db).await;
    old.batch_execute(FIRST_FORMAT_HISTORY)
        .await
        .expect("old table");
    for row in &donor_rows {
        old.execute(
            "INSERT INTO pgshift.migrations (version, name, checksum, units, units_total, units_committed, outcome, error, baselined, pgshift_version) \
             VALUES ($1, $2, $3, $4::text::jsonb, $5, $6, $7, $8, $9, '0.1.0')",
            &[
                &row.get::<_, i64>(0),
                &row.get::<_, String>(1),
                &row.get::<_, String>(2),
                &row.get::<_, String>(3),
                &row.get::<_, i32>(4),
                &row.get::<_, i32>(5),
                &row.get::<_, String>(6),
                &row.get::<_, Option<String>>(7),
                &row.get::<_, Option<String>>(8),
            ],
        )
        .await
        .expect("old row");
    }
    let before = psql(
        &db,
        &format!("SELECT {HISTORY_COLUMNS} FROM pgshift.migrations ORDER BY version"),
    );
    assert!(before.contains("|failed|"), "{before}");

    // A dry run reads the old table as it is and writes nothing.
    let mut dry_options = migrate_options();
    dry_options.dry_run = true;
    let dry = run_migrate(&db, &dir, &dry_options).await.expect("dry run");
    assert_eq!(dry.files[2].status, FileStatus::Planned, "{dry:#?}");
    assert!(dry.files[2].resumed && dry.files[2].committed_before == 1);
    assert_eq!(
        psql(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'pgshift.migrations'::regclass AND attname = 'version'"),
        "bigint"
    );

    // Out of the way, and the run resumes file 3 at its second unit.
    cluster().psql(&db, "DELETE FROM items").expect("clear");
    let verdict = migrate_done(&db, &dir).await;
    assert_eq!(
        file_statuses(&verdict),
        vec![
            FileStatus::AlreadyApplied,
            FileStatus::AlreadyApplied,
            FileStatus::Applied
        ]
    );
    assert_eq!(verdict.files[0].baselined.as_deref(), Some("--baseline 1"));
    assert!(verdict.files[2].resumed);
    assert_eq!(verdict.files[2].committed_before, 1);
    assert_eq!(psql(&db, "SELECT count(*) FROM items WHERE id = 1"), "1");

    // Every row kept its columns; only file 3's run moved on; versions are text.
    let after = psql(
        &db,
        &format!("SELECT {HISTORY_COLUMNS} FROM pgshift.migrations ORDER BY version"),
    );
    let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
    let (before, after) = (lines(&before), lines(&after));
    assert_eq!(before.len(), 3);
    assert_eq!(
        before[..2],
        after[..2],
        "the baselined and the applied rows"
    );
    assert!(after[2].starts_with("3|add_b_and_seed|"), "{}", after[2]);
    assert!(after[2].contains("|2|2|done||"), "{}", after[2]);
    assert_eq!(
        psql(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'pgshift.migrations'::regclass AND attname = 'version'"),
        "text"
    );
    assert_eq!(
        psql(
            &db,
            "SELECT count(DISTINCT id) FROM pgshift.migrations WHERE id IS NOT NULL"
        ),
        "3"
    );
    // And the next run has nothing to do.
    nothing_pending(&db, &dir).await;
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flyway_dotted_versions_apply_and_a_repeatable_runs_again_when_it_changes() {
    let dir = temp_dir("flyway_repeatable");
    copy_dir(&layouts("flyway_repeatable"), &dir);
    let db = database("flyway_repeatable", "");
    let verdict = migrate_done(&db, &dir).await;
    let runs: Vec<(Option<&str>, &str, FileStatus)> = verdict
        .files
        .iter()
        .map(|f| (f.version.as_deref(), f.name.as_str(), f.status))
        .collect();
    assert_eq!(
        runs,
        vec![
            (Some("1"), "create_ledgers", FileStatus::Applied),
            (Some("1.1"), "ledgers_add_currency", FileStatus::Applied),
            (Some("2"), "ledgers_workspace_index", FileStatus::Applied),
            (None, "ledger_totals_view", FileStatus::Applied),
        ]
    );
    // Flyway runs the CONCURRENTLY file outside a transaction; the others in one.
    let modes: Vec<Option<TransactionMode>> =
        verdict.files.iter().map(|f| f.runner_transaction).collect();
    assert_eq!(
        modes,
        vec![
            Some(TransactionMode::File),
            Some(TransactionMode::File),
            Some(TransactionMode::Statement),
            Some(TransactionMode::File),
        ]
    );
    assert_eq!(
        psql(&db, "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'ledger_counts'::regclass AND attnum > 0"),
        "workspace,currency,n"
    );
    assert_eq!(
        psql(
            &db,
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'ledgers_workspace'::regclass"
        ),
        "t"
    );

    nothing_pending(&db, &dir).await;

    // The repeatable changed: it runs again, after the versioned files, as a new row.
    std::fs::write(
        dir.join("R__ledger_totals_view.sql"),
        "CREATE OR REPLACE VIEW ledger_counts AS SELECT workspace, currency, count(*) AS n, max(id) AS last_id FROM ledgers GROUP BY workspace, currency;\n",
    )
    .expect("edit");
    let rerun = migrate_done(&db, &dir).await;
    assert_eq!(
        file_statuses(&rerun),
        vec![
            FileStatus::AlreadyApplied,
            FileStatus::AlreadyApplied,
            FileStatus::AlreadyApplied,
            FileStatus::Applied
        ]
    );
    assert_eq!(
        psql(&db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ledger_counts'::regclass AND attname = 'last_id'"),
        "1"
    );
    assert_eq!(
        psql(&db, "SELECT count(*) || ':' || count(DISTINCT checksum) FROM pgshift.migrations WHERE version IS NULL AND name = 'ledger_totals_view' AND outcome = 'done'"),
        "2:2"
    );

    // A versioned file that changed after it applied is refused, dotted or not.
    std::fs::write(
        dir.join("V1.1__ledgers_add_currency.sql"),
        "ALTER TABLE ledgers ADD COLUMN currency varchar(3);\n",
    )
    .expect("edit");
    let changed = run_migrate(&db, &dir, &migrate_options()).await;
    assert!(
        matches!(&changed, Err(MigrateError::ChangedAfterApply { version, .. }) if version == "version 1.1"),
        "{changed:?}"
    );
}

/// One runner's history, as that runner creates its table and records what it applied,
/// next to the objects its applied files made.
struct Adopted {
    runner: pgshift::migrate::adopt::Runner,
    dir: &'static str,
    setup: &'static str,
    applied: usize,
    newest: &'static str,
    baselined: usize,
}

const LEDGERS: &str = "CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL);";

fn adopted_cases() -> Vec<Adopted> {
    use pgshift::migrate::adopt::Runner;
    vec![
        Adopted {
            runner: Runner::Flyway,
            dir: "flyway_repeatable",
            setup: "CREATE TABLE flyway_schema_history (installed_rank integer NOT NULL, version varchar(50), description varchar(200) NOT NULL, type varchar(20) NOT NULL, script varchar(1000) NOT NULL, checksum integer, installed_by varchar(100) NOT NULL, installed_on timestamp NOT NULL DEFAULT now(), execution_time integer NOT NULL, success boolean NOT NULL, CONSTRAINT flyway_schema_history_pk PRIMARY KEY (installed_rank));
                    CREATE INDEX flyway_schema_history_s_idx ON flyway_schema_history (success);
                    INSERT INTO flyway_schema_history VALUES (1, '1', 'create ledgers', 'SQL', 'V1__create_ledgers.sql', 1, 'app', now(), 5, true), (2, '1.1', 'ledgers add currency', 'SQL', 'V1.1__ledgers_add_currency.sql', 2, 'app', now(), 5, true);
                    CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL, currency text);",
            applied: 2,
            newest: "1.1",
            baselined: 2,
        },
        Adopted {
            runner: Runner::GolangMigrate,
            dir: "golang_migrate",
            setup: "CREATE TABLE IF NOT EXISTS schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
                    INSERT INTO schema_migrations VALUES (1, false);",
            applied: 1,
            newest: "1",
            baselined: 1,
        },
        Adopted {
            runner: Runner::Dbmate,
            dir: "dbmate",
            setup: "CREATE TABLE IF NOT EXISTS schema_migrations (version varchar(128) PRIMARY KEY);
                    INSERT INTO schema_migrations VALUES ('20240101120000');",
            applied: 1,
            newest: "20240101120000",
            baselined: 1,
        },
        Adopted {
            runner: Runner::Rails,
            dir: "pop",
            setup: "CREATE TABLE schema_migrations (version character varying NOT NULL PRIMARY KEY);
                    CREATE TABLE ar_internal_metadata (key character varying NOT NULL PRIMARY KEY, value character varying, created_at timestamp(6) NOT NULL, updated_at timestamp(6) NOT NULL);
                    INSERT INTO schema_migrations VALUES ('20240101120000');",
            applied: 1,
            newest: "20240101120000",
            baselined: 1,
        },
        Adopted {
            runner: Runner::Pop,
            dir: "pop",
            setup: "CREATE TABLE schema_migration (version varchar(14) NOT NULL);
                    CREATE UNIQUE INDEX schema_migration_version_idx ON schema_migration (version);
                    INSERT INTO schema_migration VALUES ('20240101120000');",
            applied: 1,
            newest: "20240101120000",
            baselined: 1,
        },
        Adopted {
            runner: Runner::Diesel,
            dir: "diesel",
            setup: "CREATE TABLE IF NOT EXISTS __diesel_schema_migrations (version VARCHAR(50) PRIMARY KEY NOT NULL, run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP);
                    INSERT INTO __diesel_schema_migrations (version) VALUES ('00000000000000'), ('20230101000000');
                    CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());",
            applied: 2,
            newest: "20230101000000",
            baselined: 2,
        },
        Adopted {
            runner: Runner::Refinery,
            dir: "flyway",
            setup: "CREATE TABLE IF NOT EXISTS refinery_schema_history (version int4 PRIMARY KEY, name VARCHAR(255), applied_on VARCHAR(255), checksum VARCHAR(255));
                    INSERT INTO refinery_schema_history VALUES (1, 'create_ledgers', '2024-01-01T12:00:00Z', '1'), (2, 'ledgers_add_currency', '2024-01-02T12:00:00Z', '2');
                    CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL, currency text);",
            applied: 2,
            newest: "2",
            baselined: 2,
        },
        Adopted {
            runner: Runner::Goose,
            dir: "goose",
            setup: "CREATE TABLE goose_db_version (id serial NOT NULL, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp NULL DEFAULT now(), PRIMARY KEY (id));
                    INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true), (2, true), (2, false);
                    CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL, updated_at timestamptz);
                    CREATE FUNCTION ledgers_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;",
            applied: 1,
            newest: "1",
            baselined: 1,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_another_runner_migrated_is_refused_once_and_baselined_from_its_table() {
    for case in adopted_cases() {
        let runner = case.runner;
        let setup = if case.setup.contains("CREATE TABLE ledgers")
            || case.setup.contains("CREATE TABLE IF NOT EXISTS ledgers")
        {
            case.setup.to_owned()
        } else {
            format!("{} {LEDGERS}", case.setup)
        };
        let db = database(
            &format!("adopt_{}", runner.name().replace('-', "_")),
            &setup,
        );
        let dir = layouts(case.dir);
        for dry_run in [true, false] {
            let mut options = migrate_options();
            options.dry_run = dry_run;
            match run_migrate(&db, &dir, &options).await {
                Err(MigrateError::ForeignHistory {
                    runner: found,
                    count,
                    newest,
                    ..
                }) => {
                    assert_eq!(found, runner);
                    assert_eq!(count, case.applied, "{runner}");
                    assert_eq!(newest, case.newest, "{runner}");
                }
                other => panic!("{runner}: refused naming the runner: {other:?}"),
            }
        }
        assert_eq!(
            psql(&db, "SELECT to_regclass('pgshift.migrations') IS NULL"),
            "t",
            "{runner}: nothing written"
        );
        let session = session(&db).await;
        let adopted = baseline(&session, &dir, &BaselineSource::Runner(runner), false)
            .await
            .unwrap_or_else(|err| panic!("{runner}: baselines: {err}"));
        let baselined = adopted
            .files
            .iter()
            .filter(|f| f.status == BaselineStatus::Baselined)
            .count();
        assert_eq!(baselined, case.baselined, "{runner}: {adopted:#?}");
        let verdict = run_migrate(&db, &dir, &migrate_options())
            .await
            .unwrap_or_else(|err| panic!("{runner}: continues: {err}"));
        assert_eq!(
            verdict.outcome,
            MigrateOutcome::Done,
            "{runner}: {verdict:#?}"
        );
        let applied_now = file_statuses(&verdict)
            .iter()
            .filter(|s| **s == FileStatus::Applied)
            .count();
        assert_eq!(
            applied_now + case.baselined,
            verdict.files.len(),
            "{runner}: {verdict:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runners_record_that_disagrees_with_the_directory_records_nothing() {
    use pgshift::migrate::adopt::Runner;
    let db = database(
        "adopt_mismatch",
        "CREATE TABLE schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
         INSERT INTO schema_migrations VALUES (2, true);",
    );
    let dirty = baseline(
        &session(&db).await,
        &layouts("golang_migrate"),
        &BaselineSource::Runner(Runner::GolangMigrate),
        false,
    )
    .await;
    assert!(
        matches!(&dirty, Err(MigrateError::RunnerMismatch { problems, .. }) if problems[0].contains("version 2 as failed")),
        "{dirty:?}"
    );
    let missing = baseline(
        &session(&db).await,
        &layouts("golang_migrate"),
        &BaselineSource::Runner(Runner::Goose),
        false,
    )
    .await;
    assert!(
        matches!(missing, Err(MigrateError::RunnerTableMissing { .. })),
        "{missing:?}"
    );
    let db = database(
        "adopt_unknown_version",
        "CREATE TABLE schema_migrations (version varchar(128) PRIMARY KEY);
         INSERT INTO schema_migrations VALUES ('20240101120000'), ('20991231000000');",
    );
    let unknown = baseline(
        &session(&db).await,
        &layouts("dbmate"),
        &BaselineSource::Runner(Runner::Dbmate),
        false,
    )
    .await;
    assert!(
        matches!(&unknown, Err(MigrateError::RunnerMismatch { problems, .. }) if problems.len() == 1 && problems[0].contains("20991231000000")),
        "{unknown:?}"
    );
    assert_eq!(
        psql(&db, "SELECT to_regclass('pgshift.migrations') IS NULL"),
        "t",
        "nothing written"
    );
}
