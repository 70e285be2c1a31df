//! Files judged in the state their own statements leave, and files on new and empty
//! tables run as written — each case migrated through pgshift on one database and run
//! natively with psql (one transaction per file, as sqlx runs it) on a twin, and the
//! two schemas compared by `pg_dump --schema-only`.
//!
//! The cases are issue 32's minimal ones: each was refused before, with advice that
//! could not help, although PostgreSQL runs it.

mod common;

use std::process::Command;

use common::*;
use pgshift::migrate::MigrateOutcome;

/// `pg_dump --schema-only` of `db`, pgshift's own schema left out.
fn schema_dump(db: &str) -> String {
    let output = Command::new(cluster().bin("pg_dump"))
        .args(["--schema-only", "--exclude-schema=pgshift", "--dbname"])
        .arg(cluster().url(db))
        .output()
        .expect("pg_dump runs");
    assert!(
        output.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| {
            !line.starts_with("-- Dumped")
                && !line.starts_with("\\restrict")
                && !line.starts_with("\\unrestrict")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `files` through `pgshift migrate` on one database with `schema`, and natively
/// (each file in one transaction) on a twin; both must apply every file, and the
/// schemas must be equal. Returns the pgshift database.
async fn migrate_like_native(
    label: &str,
    schema: &str,
    files: &[&str],
    copy_and_swap: bool,
) -> String {
    let db = database(&format!("{label}_pgshift"), schema);
    let native = database(&format!("{label}_native"), schema);
    let dir = temp_dir(label);
    for (i, sql) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("{:04}_step.sql", i + 1)), sql).expect("write");
        cluster()
            .psql(&native, &format!("BEGIN;\n{sql}\nCOMMIT;"))
            .unwrap_or_else(|e| panic!("{label}: file {} natively: {e}", i + 1));
    }
    let options = if copy_and_swap {
        migrate_options_with_cas(&db)
    } else {
        migrate_options()
    };
    let mut dry = options.clone();
    dry.dry_run = true;
    let planned = run_migrate(&db, &dir, &dry).await.expect("plans");
    assert_eq!(
        planned.outcome,
        MigrateOutcome::Planned,
        "{label}: {planned:#?}"
    );
    let verdict = run_migrate(&db, &dir, &options).await.expect("runs");
    assert_eq!(
        verdict.outcome,
        MigrateOutcome::Done,
        "{label}: {verdict:#?}"
    );
    assert_eq!(
        schema_dump(&db),
        schema_dump(&native),
        "{label}: schemas differ"
    );
    db
}

const POPULATED: &str = "CREATE TABLE t (id int PRIMARY KEY, c int NOT NULL);
INSERT INTO t SELECT g, g FROM generate_series(1, 3000) g;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_12_each_statement_is_judged_in_the_state_the_file_leaves() {
    // A renamed column is the column a later statement changes (it was "column d does
    // not exist"); on a table with rows the change runs through copy-and-swap.
    migrate_like_native(
        "rename_retype",
        POPULATED,
        &["ALTER TABLE t RENAME COLUMN c TO d;\nALTER TABLE t ALTER COLUMN d TYPE bigint;"],
        true,
    )
    .await;
    // A renamed table answers to its new name.
    migrate_like_native(
        "rename_table",
        POPULATED,
        &["ALTER TABLE t RENAME TO t2;\nALTER TABLE t2 ADD COLUMN z int;"],
        false,
    )
    .await;
    // A dropped view's name is a new table's (it was "\"v\" is not a table").
    migrate_like_native(
        "view_to_table",
        &format!("{POPULATED}\nCREATE VIEW v AS SELECT id, c FROM t;"),
        &["DROP VIEW v;\nCREATE TABLE v (x int);\nCREATE INDEX v_x ON v (x);"],
        false,
    )
    .await;
    // Views dropped with CASCADE are not carried by a later rewrite (it was
    // nested-dependent-views); the view left is.
    migrate_like_native(
        "drop_nested",
        &format!(
            "{POPULATED}\nCREATE VIEW inner_v AS SELECT id, c FROM t;\nCREATE VIEW outer_v AS SELECT id FROM inner_v;"
        ),
        &["DROP VIEW IF EXISTS outer_v CASCADE;\nALTER TABLE t ADD COLUMN ts timestamptz NOT NULL DEFAULT clock_timestamp();"],
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_tx_2_new_and_empty_tables_run_as_written_as_their_runner_runs_them() {
    // The relay's file 7 in miniature: a LOCK TABLE in a file its runner wraps, on
    // tables an earlier file created (it was not-splittable); a rewrite of an empty
    // table with no key (it was no-usable-key); a build and a constraint that would
    // otherwise be split into concurrent and NOT VALID steps.
    let db = migrate_like_native(
        "empty_tables",
        "",
        &[
            "CREATE TABLE a (x int, y text);\nCREATE TABLE b (id int PRIMARY KEY, v int);",
            "LOCK TABLE a IN ACCESS EXCLUSIVE MODE;\nALTER TABLE a ALTER COLUMN x TYPE bigint;\nCREATE INDEX a_y ON a (y);\nALTER TABLE b ADD CONSTRAINT b_v_check CHECK (v > 0);\nALTER TABLE b ALTER COLUMN v SET NOT NULL;",
        ],
        false,
    )
    .await;
    // Each file ran as its runner runs it: one transaction.
    let units = cluster()
        .psql(
            &db,
            "SELECT string_agg(units_total::text, ',' ORDER BY version) FROM pgshift.migrations",
        )
        .expect("history");
    assert_eq!(units.trim(), "1,1", "one unit per file");

    // Once a table holds rows, the same rewrite is judged by its size again.
    cluster()
        .psql(&db, "INSERT INTO a VALUES (1, 'one');")
        .expect("a row");
    let dir = temp_dir("empty_tables_later");
    std::fs::write(
        dir.join("0003_step.sql"),
        "ALTER TABLE a ALTER COLUMN x TYPE int;",
    )
    .expect("write");
    let mut options = migrate_options();
    options.dry_run = true;
    let planned = run_migrate(&db, &dir, &options).await.expect("plans");
    assert_eq!(planned.outcome, MigrateOutcome::Refused, "{planned:#?}");
    let refused = &planned.files[0]
        .schedule
        .as_ref()
        .expect("planned")
        .refusals[0];
    assert_eq!(
        refused.refusal.cause,
        pgshift::refusal::RefusalCause::NoUsableKey,
        "{refused:?}"
    );
}
