//! `migrate` on real PostgreSQL: a relay-like directory under write load, idempotent
//! re-runs, a failed file resumed from its first uncommitted unit, a lost connection,
//! and directory problems — with the history table truthful throughout.

mod common;

use std::time::Duration;

use common::*;
use pgshift::migrate::{FileStatus, MigrateError, MigrateOutcome};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_file_stops_the_run_and_resumes_where_it_stopped() {
    let db = database("resume", "CREATE TABLE items (id bigint PRIMARY KEY, qty int); INSERT INTO items SELECT g, g FROM generate_series(1, 1000) g; UPDATE items SET qty = -1 WHERE id = 500;");
    let dir = temp_dir("resume");
    std::fs::write(
        dir.join("0001_note.sql"),
        "ALTER TABLE items ADD COLUMN note text;",
    )
    .expect("write");
    std::fs::write(
        dir.join("0002_qty.sql"),
        "ALTER TABLE items ADD COLUMN tag text;\nALTER TABLE items ADD CONSTRAINT items_qty_check CHECK (qty >= 0);\nCOMMENT ON TABLE items IS 'stock';",
    )
    .expect("write");
    std::fs::write(
        dir.join("0003_later.sql"),
        "ALTER TABLE items ADD COLUMN later int;",
    )
    .expect("write");

    let first = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(first.outcome, MigrateOutcome::Failed, "{first:#?}");
    let statuses: Vec<FileStatus> = first.files.iter().map(|f| f.status).collect();
    assert_eq!(
        statuses,
        vec![FileStatus::Applied, FileStatus::Failed, FileStatus::NotRun]
    );
    let failed = first.files[1].verdict.as_ref().expect("ran");
    assert_eq!(
        failed.committed_units, 2,
        "ADD COLUMN and ADD CONSTRAINT … NOT VALID committed"
    );
    let recorded = history(&db);
    let row: Vec<&str> = recorded
        .lines()
        .nth(1)
        .expect("row of 0002")
        .split('|')
        .collect();
    assert_eq!((row[3], row[4], row[5]), ("4", "2", "failed"), "{recorded}");
    assert!(row[6].contains("23514"), "{recorded}");

    cluster()
        .psql(&db, "UPDATE items SET qty = 0 WHERE qty < 0")
        .expect("fix the data");
    let second = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(second.outcome, MigrateOutcome::Done, "{second:#?}");
    assert!(second.files[1].resumed);
    assert_eq!(second.files[1].committed_before, 2);
    assert_eq!(second.files[2].status, FileStatus::Applied);
    let validated = cluster()
        .psql(
            &db,
            "SELECT convalidated FROM pg_constraint WHERE conname = 'items_qty_check'",
        )
        .expect("query");
    assert_eq!(validated.trim(), "t");
    let tags = cluster()
        .psql(&db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'tag' AND NOT attisdropped")
        .expect("query");
    assert_eq!(
        tags.trim(),
        "1",
        "the committed ADD COLUMN was not run twice"
    );
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_st_1_a_lost_connection_leaves_a_truthful_history_and_resumes() {
    // A row, so that the file is split into units (on an empty table it would run
    // whole, as its runner runs it: TX-2).
    let db = database(
        "lost",
        "CREATE TABLE items (id bigint PRIMARY KEY); INSERT INTO items VALUES (1);",
    );
    let dir = temp_dir("lost");
    std::fs::write(
        dir.join("0001_slow.sql"),
        "ALTER TABLE items ADD COLUMN a int;\nSELECT pg_sleep(30);\nALTER TABLE items ADD COLUMN b int;",
    )
    .expect("write");
    let killer_db = db.clone();
    let killer = tokio::spawn(async move {
        let admin = client(&killer_db).await;
        for _ in 0..300 {
            let killed = admin
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                      WHERE application_name = 'pgshift' AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .map(|row| row.get::<_, i64>(0))
                .unwrap_or(0);
            if killed > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    let first = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs");
    assert!(
        killer.await.expect("killer task"),
        "the sleeping step was found and killed"
    );
    assert_eq!(first.outcome, MigrateOutcome::Failed, "{first:#?}");
    let failure = first.files[0]
        .verdict
        .as_ref()
        .and_then(|v| v.units.get(1))
        .and_then(|u| u.report.as_ref())
        .and_then(|r| r.failure_kind);
    assert_eq!(failure, Some("connection-lost"));
    let recorded = history(&db);
    let row: Vec<&str> = recorded.lines().next().expect("row").split('|').collect();
    assert_eq!(
        row[4], "1",
        "exactly the first unit is recorded as committed: {recorded}"
    );

    // The file is unchanged, so the run resumes the recorded schedule at its second
    // unit (the sleep); a short statement timeout now stops it, and a statement
    // timeout is never retried.
    let mut quick = migrate_options();
    quick.apply.budgets.statement_timeout_ms = 100;
    let second = run_migrate(&db, &dir, &quick).await.expect("runs");
    let resumed = &second.files[0];
    assert!(resumed.resumed, "{second:#?}");
    assert_eq!(resumed.committed_before, 1);
    assert_eq!(
        second.outcome,
        MigrateOutcome::Failed,
        "the sleep now hits the statement timeout"
    );
    let kind = resumed
        .verdict
        .as_ref()
        .and_then(|v| v.units.get(1))
        .and_then(|u| u.report.as_ref())
        .and_then(|r| r.failure_kind);
    assert_eq!(kind, Some("statement-timeout"), "never retried");
    let attempts = resumed
        .verdict
        .as_ref()
        .and_then(|v| v.units[1].report.as_ref())
        .map(|r| r.attempts.len());
    assert_eq!(attempts, Some(1));
    let column_a = cluster()
        .psql(&db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'a' AND NOT attisdropped")
        .expect("query");
    assert_eq!(column_a.trim(), "1");
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_problems_stop_the_run_before_anything_happens() {
    let db = database("dirs", "CREATE TABLE items (id bigint PRIMARY KEY);");
    let gap = temp_dir("gap");
    std::fs::write(
        gap.join("0001_a.sql"),
        "ALTER TABLE items ADD COLUMN a int;",
    )
    .expect("write");
    std::fs::write(
        gap.join("0003_c.sql"),
        "ALTER TABLE items ADD COLUMN c int;",
    )
    .expect("write");
    assert!(matches!(
        run_migrate(&db, &gap, &migrate_options()).await,
        Err(MigrateError::Gap { ref after, ref next }) if after == "1" && next == "3"
    ));
    let exists = cluster()
        .psql(&db, "SELECT to_regclass('pgshift.migrations') IS NULL")
        .expect("query");
    assert_eq!(
        exists.trim(),
        "t",
        "nothing was written, not even the history table"
    );
    let mut allow = migrate_options();
    allow.allow_gaps = true;
    assert_eq!(
        run_migrate(&db, &gap, &allow).await.expect("runs").outcome,
        MigrateOutcome::Done
    );

    let duplicate = temp_dir("duplicate");
    std::fs::write(duplicate.join("0001_a.sql"), "SELECT 1;").expect("write");
    std::fs::write(duplicate.join("001_b.sql"), "SELECT 2;").expect("write");
    assert!(matches!(
        run_migrate(&db, &duplicate, &migrate_options()).await,
        Err(MigrateError::DuplicateVersion { ref version, .. }) if version == "1"
    ));

    std::fs::write(
        gap.join("0001_a.sql"),
        "ALTER TABLE items ADD COLUMN a2 int;",
    )
    .expect("edit");
    assert!(matches!(
        run_migrate(&db, &gap, &allow).await,
        Err(MigrateError::ChangedAfterApply { ref version, .. }) if version == "version 1"
    ));

    let bad = temp_dir("bad");
    std::fs::write(bad.join("0001_bad.sql"), "ALTER TABLE items ADD COLUMN;").expect("write");
    let db3 = database("dirs3", "CREATE TABLE items (id bigint PRIMARY KEY);");
    let verdict = run_migrate(&db3, &bad, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(verdict.outcome, MigrateOutcome::Failed);
    assert!(verdict.files[0]
        .error
        .as_deref()
        .unwrap_or("")
        .contains("syntax error"));

    let missing = temp_dir("missing");
    std::fs::write(
        missing.join("0001_m.sql"),
        "ALTER TABLE nowhere ADD COLUMN x int;",
    )
    .expect("write");
    let db2 = database("dirs2", "");
    let verdict = run_migrate(&db2, &missing, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(verdict.outcome, MigrateOutcome::Refused);
    assert_eq!(
        history(&db2),
        "",
        "a refused file is not recorded as applied or failed"
    );
    for dir in [gap, duplicate, bad, missing] {
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_oc_1_only_one_runner_at_a_time() {
    let db = database("lockrun", "CREATE TABLE items (id bigint PRIMARY KEY);");
    let holder = client(&db).await;
    holder
        .query_one(
            "SELECT pg_advisory_lock(hashtextextended('pgshift.migrate', 0))",
            &[],
        )
        .await
        .expect("takes the runner lock");
    let dir = temp_dir("lockrun");
    std::fs::write(
        dir.join("0001_a.sql"),
        "ALTER TABLE items ADD COLUMN a int;",
    )
    .expect("write");
    match run_migrate(&db, &dir, &migrate_options()).await {
        Err(MigrateError::AnotherRunner { holder: Some(_) }) => {}
        other => panic!("expected another-runner, got {other:?}"),
    }
    std::fs::remove_dir_all(dir).expect("cleanup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_runs_through_copy_and_swap_and_is_found_again_after_a_crash() {
    let db = database(
        "migrate_cas",
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL);
         INSERT INTO items SELECT g, g FROM generate_series(1, 5000) g;",
    );
    let dir = temp_dir("migrate_cas");
    std::fs::write(
        dir.join("0001_qty_bigint.sql"),
        "ALTER TABLE items ALTER COLUMN qty TYPE bigint USING qty + 1;\nALTER TABLE items ADD COLUMN note text;",
    )
    .expect("write");
    let options = migrate_options_with_cas(&db);

    // The process "died" after the swap of unit 1 but before its history record: the
    // run with the unit's label is done, the history says nothing of it.
    let statements =
        pgshift_sql::parse("ALTER TABLE items ALTER COLUMN qty TYPE bigint USING qty + 1")
            .expect("valid");
    let request = pgshift::cas::Request {
        statement: &statements[0],
        table: &pgshift_sql::QualifiedName::bare("items"),
        search_path: &[],
        label: Some("migrate:1:unit1"),
        standbys: &[],
    };
    let earlier = pgshift::cas::start_request(
        &common::cas::spec(&db),
        request,
        common::cas::options(pgshift::cas::Mode::Live),
        &mut pgshift::cas::Silent,
    )
    .await
    .expect("the earlier process's run");
    let swapped = common::cas::oid(&db, "items");

    let verdict = run_migrate(&db, &dir, &options).await.expect("runs");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    let file = verdict.files[0].verdict.as_ref().expect("ran");
    let cas = file.units[0]
        .copy_and_swap
        .as_ref()
        .expect("a copy-and-swap unit");
    assert!(cas.found_done, "{cas:?}");
    assert_eq!(cas.run, Some(earlier.run));
    assert_eq!(
        common::cas::oid(&db, "items"),
        swapped,
        "the table was not rewritten a second time"
    );
    assert_eq!(
        common::cas::value(&db, "SELECT qty FROM items WHERE id = 1"),
        "2",
        "the USING expression ran once"
    );
    assert_eq!(
        common::cas::value(&db, "SELECT count(*) FROM pgshift.runs"),
        "1"
    );
    let recorded = history(&db);
    assert!(recorded.contains("|2|2|done|"), "{recorded}");
    assert_eq!(
        common::cas::value(
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"
        ),
        "bigint"
    );
}

/// A file that failed after committed units is finished with `--allow-blocking` given
/// on the next run: the option reaches the units that did not run (the recorded
/// schedule was reused as it was, and the copy-and-swap unit failed again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_blocking_given_on_resume_reaches_the_units_not_run() {
    let db = database(
        "resume_allow",
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int); \
         INSERT INTO items SELECT g, g FROM generate_series(1, 1000) g; \
         CREATE FUNCTION items_all() RETURNS SETOF items LANGUAGE sql AS 'SELECT * FROM items';",
    );
    let dir = temp_dir("resume_allow");
    std::fs::write(
        dir.join("0001_amount.sql"),
        "ALTER TABLE items RENAME COLUMN qty TO amount;\nALTER TABLE items ALTER COLUMN amount TYPE bigint;\n",
    )
    .expect("write");
    let first = run_migrate(&db, &dir, &migrate_options_with_cas(&db))
        .await
        .expect("runs");
    assert_ne!(first.outcome, MigrateOutcome::Done, "{first:#?}");
    let verdict = first.files[0].verdict.as_ref().expect("ran");
    assert_eq!(
        verdict.committed_units, 1,
        "the rename committed: {first:#?}"
    );

    let mut options = migrate_options_with_cas(&db);
    options.apply.allow_blocking = vec![pgshift_sql::QualifiedName::bare("items")];
    let second = run_migrate(&db, &dir, &options).await.expect("runs");
    assert_eq!(
        second.outcome,
        MigrateOutcome::DoneWithBlocking,
        "{second:#?}"
    );
    assert!(second.files[0].resumed, "{second:#?}");
    assert_eq!(second.files[0].committed_before, 1);
    let kind = cluster()
        .psql(
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'amount'",
        )
        .expect("query");
    assert_eq!(kind.trim(), "bigint");
    assert!(history(&db).contains("|done|"), "{}", history(&db));
}

/// A file that failed after committed units, finished by hand, is handed over with
/// `--baseline VERSION`: its failed row is replaced by a baselined one that says what
/// it replaced (the baseline refused a failed row, and only a hand `DELETE` from
/// pgshift's table got past it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_file_finished_by_hand_is_baselined_over_its_failed_row() {
    let db = database(
        "baseline_failed",
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int); \
         INSERT INTO items SELECT g, g FROM generate_series(1, 100) g; \
         UPDATE items SET qty = -1 WHERE id = 50;",
    );
    let dir = temp_dir("baseline_failed");
    std::fs::write(
        dir.join("0001_qty.sql"),
        "ALTER TABLE items ADD COLUMN tag text;\nALTER TABLE items ADD CONSTRAINT items_qty_check CHECK (qty >= 0);\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("0002_later.sql"),
        "ALTER TABLE items ADD COLUMN later int;",
    )
    .expect("write");
    let first = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(first.outcome, MigrateOutcome::Failed, "{first:#?}");
    // Finished by hand: the data fixed and the constraint validated natively.
    cluster()
        .psql(
            &db,
            "UPDATE items SET qty = 0 WHERE qty < 0; ALTER TABLE items VALIDATE CONSTRAINT items_qty_check;",
        )
        .expect("finished by hand");
    let main = session(&db).await;
    let verdict = pgshift::migrate::baseline(
        &main,
        &dir,
        &pgshift::migrate::BaselineSource::UpTo("0001".to_owned()),
        false,
    )
    .await
    .expect("a failed row is baselined over");
    assert_eq!(
        verdict.files[0].status,
        pgshift::migrate::BaselineStatus::Baselined
    );
    let replaced = verdict.files[0]
        .replaced
        .as_deref()
        .expect("says what it replaced");
    assert!(
        replaced.contains("committed 2 of 3 units") && replaced.contains("23514"),
        "{replaced}"
    );
    let second = run_migrate(&db, &dir, &migrate_options())
        .await
        .expect("runs");
    assert_eq!(second.outcome, MigrateOutcome::Done, "{second:#?}");
    assert_eq!(second.files[0].status, FileStatus::AlreadyApplied);
    assert_eq!(second.files[1].status, FileStatus::Applied);
    let rows = cluster()
        .psql(
            &db,
            "SELECT version, outcome, baselined FROM pgshift.migrations ORDER BY id",
        )
        .expect("history");
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 2, "{rows}");
    assert!(
        lines[0].starts_with(
            "1|done|--baseline 0001, over a failed run that had committed 2 of 3 units"
        ),
        "{rows}"
    );
}
