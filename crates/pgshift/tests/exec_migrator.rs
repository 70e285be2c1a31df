//! The library front door on real PostgreSQL: the startup example (`examples/startup.rs`,
//! its embedded sqlx-layout directory) migrates a fresh database, a second run has
//! nothing to do, a refused file stops the run with its refusal, a plan writes nothing,
//! sqlx's ledger is adopted on first run, another runner is waited for; and
//! `embed_migrations!` embeds exactly the directory's files.

mod common;

#[allow(dead_code)]
#[path = "../examples/startup.rs"]
mod startup;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use pgshift::migrate::adopt::Runner;
use pgshift::migrate::directory::scan_layout;
use pgshift::migrate::{FileStatus, MigrateError};
use pgshift::refusal::RefusalCause;
use pgshift::{EmbeddedMigrations, MigrateOutcome, Migrator, MigratorError};
use sha2::Digest;

fn url(db: &str) -> String {
    cluster().connection_string(db)
}

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/startup_migrations")
}

fn statuses(report: &pgshift::MigrationReport) -> Vec<FileStatus> {
    report.verdict.files.iter().map(|f| f.status).collect()
}

/// `SELECT` of one value, as psql prints it.
fn value(db: &str, sql: &str) -> String {
    cluster().psql(db, sql).expect("query").trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_startup_example_migrates_once_and_then_has_nothing_to_do() {
    let db = database("startup", "");
    let migrator = Migrator::new(&startup::MIGRATIONS);
    assert_eq!(startup::migrate(&migrator, &url(&db)).await, 0);
    assert_eq!(
        value(
            &db,
            "SELECT concat_ws(',', to_regclass('accounts'), to_regclass('orders'), \
             to_regclass('orders_account_placed_idx'), \
             (SELECT attname FROM pg_attribute WHERE attrelid = 'accounts'::regclass AND attname = 'display_name'))"
        ),
        "accounts,orders,orders_account_placed_idx,display_name"
    );
    let recorded = history(&db);
    let rows: Vec<(&str, &str, &str)> = recorded
        .lines()
        .map(|line| {
            let cols: Vec<&str> = line.split('|').collect();
            (cols[0], cols[1], cols[5])
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("20240105090000", "create_accounts", "done"),
            ("20240112143000", "create_orders", "done"),
            ("20240201101500", "orders_by_account", "done"),
        ],
        "{recorded}"
    );

    let again = migrator.run(&url(&db)).await.expect("runs");
    assert_eq!(again.outcome(), MigrateOutcome::Done);
    assert_eq!(again.applied().count(), 0);
    assert_eq!(statuses(&again), vec![FileStatus::AlreadyApplied; 3]);
    assert_eq!(again.migrations, "examples/startup_migrations");
    assert!(
        again.verdict.files[0]
            .path
            .starts_with("examples/startup_migrations/"),
        "reports name the embedded directory, not its temporary copy: {}",
        again.verdict.files[0].path
    );
    assert_eq!(history(&db), recorded, "a second run writes nothing");
    assert_eq!(startup::migrate(&migrator, &url(&db)).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_file_stops_the_run_with_its_refusal() {
    let db = database("startup_refused", "");
    let dir = temp_dir("migrator-refused");
    for entry in std::fs::read_dir(example_dir()).expect("example dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
    }
    // A misspelled table: refused before anything of the file runs.
    std::fs::write(
        dir.join("20240301000000_order_notes.sql"),
        "ALTER TABLE order_lines ADD COLUMN note text;\n",
    )
    .expect("write");
    let migrator = Migrator::from_path(&*dir);
    let report = migrator.run(&url(&db)).await.expect("runs");
    assert_eq!(report.outcome(), MigrateOutcome::Refused, "{report:#?}");
    assert!(!report.succeeded());
    assert_eq!(
        statuses(&report),
        vec![
            FileStatus::Applied,
            FileStatus::Applied,
            FileStatus::Applied,
            FileStatus::Refused
        ]
    );
    let stopped = report.stopped_at().expect("a file stopped the run");
    assert_eq!(stopped.name, "order_notes");
    let refusals = &stopped.schedule.as_ref().expect("planned").refusals;
    assert_eq!(refusals.len(), 1, "{refusals:#?}");
    assert_eq!(refusals[0].refusal.cause, RefusalCause::TableMissing);
    assert_eq!(
        value(&db, "SELECT count(*) FROM pgshift.migrations"),
        "3",
        "the refused file is not recorded"
    );
    // The example exits 2 on a refusal, and runs nothing again.
    assert_eq!(startup::migrate(&migrator, &url(&db)).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_writes_nothing() {
    let db = database("startup_plan", "");
    let report = Migrator::new(&startup::MIGRATIONS)
        .plan(&url(&db))
        .await
        .expect("plans");
    assert_eq!(report.outcome(), MigrateOutcome::Planned, "{report:#?}");
    assert!(report.verdict.dry_run);
    assert_eq!(statuses(&report), vec![FileStatus::Planned; 3]);
    assert_eq!(
        value(
            &db,
            "SELECT concat_ws(',', to_regclass('accounts'), to_regclass('pgshift.migrations'))"
        ),
        ""
    );
}

/// A database sqlx migrated up to the second file: sqlx's ledger (SHA-384 of each
/// file) is adopted on the first run, and only the third file runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlx_ledger_is_adopted_on_first_run() {
    let db = database("startup_sqlx", "");
    let mut setup = String::from(
        "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
         installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, \
         checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL);\n",
    );
    for (version, name) in [
        (20240105090000_i64, "create_accounts"),
        (20240112143000, "create_orders"),
    ] {
        let text = std::fs::read(example_dir().join(format!("{version}_{name}.sql")))
            .expect("example file");
        setup.push_str(std::str::from_utf8(&text).expect("utf-8"));
        let checksum: String = sha2::Sha384::digest(&text)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        setup.push_str(&format!(
            "\nINSERT INTO _sqlx_migrations VALUES ({version}, '{}', now(), true, '\\x{checksum}', 1);\n",
            name.replace('_', " ")
        ));
    }
    cluster().psql(&db, &setup).expect("sqlx's state");

    let plain = Migrator::new(&startup::MIGRATIONS).run(&url(&db)).await;
    assert!(
        matches!(
            plain,
            Err(MigratorError::Migrate(MigrateError::ForeignHistory {
                runner: Runner::Sqlx,
                ref dir,
                ..
            })) if dir == "examples/startup_migrations"
        ),
        "{plain:?}"
    );

    let migrator = Migrator::new(&startup::MIGRATIONS).adopt(Runner::Sqlx);
    let report = migrator.run(&url(&db)).await.expect("runs");
    assert_eq!(report.outcome(), MigrateOutcome::Done, "{report:#?}");
    let adopted = report.adopted.as_ref().expect("adopted");
    assert_eq!(adopted.files.len(), 3);
    assert_eq!(
        statuses(&report),
        vec![
            FileStatus::AlreadyApplied,
            FileStatus::AlreadyApplied,
            FileStatus::Applied
        ]
    );
    assert!(report.verdict.files[0].baselined.is_some());
    assert_eq!(
        value(&db, "SELECT to_regclass('orders_account_placed_idx')"),
        "orders_account_placed_idx"
    );
    let again = migrator.run(&url(&db)).await.expect("runs");
    assert!(again.adopted.is_none(), "adopted once");
    assert_eq!(statuses(&again), vec![FileStatus::AlreadyApplied; 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_runner_is_waited_for_when_asked() {
    let db = database("startup_wait", "");
    let holder = client(&db).await;
    holder
        .execute(
            "SELECT pg_advisory_lock(hashtextextended('pgshift.migrate', 0))",
            &[],
        )
        .await
        .expect("lock");
    let migrator = Migrator::new(&startup::MIGRATIONS);
    let busy = migrator.run(&url(&db)).await;
    assert!(
        matches!(
            busy,
            Err(MigratorError::Migrate(MigrateError::AnotherRunner { .. }))
        ),
        "{busy:?}"
    );
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(holder);
    });
    let report = migrator
        .wait_for_other_runner(Duration::from_secs(60))
        .run(&url(&db))
        .await
        .expect("runs once the lock is free");
    release.await.expect("released");
    assert_eq!(report.outcome(), MigrateOutcome::Done);
    assert_eq!(report.applied().count(), 3);
}

/// Every file under `dir` (relative path with `/`, bytes), by path.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).expect("dir") {
            let entry = entry.expect("entry");
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            if entry.path().is_dir() {
                walk(&entry.path(), &format!("{name}/"), out);
            } else {
                out.push((name, std::fs::read(entry.path()).expect("file")));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

fn embedded(tree: &EmbeddedMigrations) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = tree
        .files()
        .iter()
        .map(|f| (f.path().to_owned(), f.contents().to_vec()))
        .collect();
    out.sort();
    out
}

static RELAY: EmbeddedMigrations = pgshift::embed_migrations!("tests/data/migrations/relay");
static DIESEL: EmbeddedMigrations = pgshift::embed_migrations!("tests/data/migrations/diesel_tree");

#[test]
fn embedded_trees_hold_exactly_the_directories_files() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (tree, dir) in [
        (&startup::MIGRATIONS, example_dir()),
        (&RELAY, data.join("tests/data/migrations/relay")),
        (&DIESEL, data.join("tests/data/migrations/diesel_tree")),
    ] {
        assert_eq!(embedded(tree), self::tree(&dir), "{}", dir.display());
        // Written back, the engine reads the same layout and files as on disk.
        let written = tree.materialize().expect("materializes");
        assert_eq!(self::tree(written.path()), self::tree(&dir));
        let (on_disk, files) = scan_layout(&dir).expect("scans");
        let (copied, copied_files) = scan_layout(written.path()).expect("scans");
        assert_eq!(copied.describe(), on_disk.describe());
        let labels = |files: &[pgshift::migrate::MigrationFile]| -> Vec<(String, String)> {
            files
                .iter()
                .map(|f| (f.label(), format!("{:?}", f.transaction)))
                .collect()
        };
        assert_eq!(labels(&copied_files), labels(&files));
    }
    assert_eq!(
        DIESEL.folders(),
        &[
            "2024-01-01-000000_create_notes",
            "2024-02-01-000000_notes_index"
        ]
    );
}
