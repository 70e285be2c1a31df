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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_using_expression_resolves_with_the_users_search_path_in_the_copy() {
    // The function's body names the enum without a schema: PostgreSQL resolves it
    // with the session's search_path when the copy calls it (it was "type \"mood\"
    // does not exist" under pgshift's pinned one).
    let db = migrate_like_native(
        "using_path",
        &format!(
            "{POPULATED}
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE FUNCTION to_mood(n int) RETURNS mood LANGUAGE sql IMMUTABLE
  AS $$ SELECT CASE WHEN n % 2 = 0 THEN 'happy'::mood ELSE 'sad'::mood END $$;"
        ),
        &["ALTER TABLE t ALTER COLUMN c TYPE mood USING to_mood(c);"],
        true,
    )
    .await;
    let rows = cluster()
        .psql(
            &db,
            "SELECT count(*) FILTER (WHERE c = 'happy') || '/' || count(*) FROM t",
        )
        .expect("rows");
    assert_eq!(rows.trim(), "1500/3000");
    let runs = cluster()
        .psql(&db, "SELECT count(*) FROM pgshift.runs")
        .expect("runs");
    assert_eq!(runs.trim(), "1", "it ran through copy-and-swap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_and_swap_keeps_the_owners_own_acl_entry() {
    // The owner gave up TRUNCATE and REFERENCES on its own table: the ACL's owner
    // entry is not the default, and the swapped-in table must keep it (it was reset
    // to the default, with every privilege back).
    let db = migrate_like_native(
        "owner_acl",
        &format!(
            "{POPULATED}
DO $$ BEGIN CREATE ROLE pgshift_acl_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
GRANT SELECT ON t TO pgshift_acl_reader WITH GRANT OPTION;
REVOKE TRUNCATE, REFERENCES ON t FROM CURRENT_USER;"
        ),
        &["ALTER TABLE t ALTER COLUMN c TYPE bigint USING c + 1;"],
        true,
    )
    .await;
    let acl = cluster()
        .psql(
            &db,
            "SELECT a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
              WHERE c.oid = 't'::regclass AND a.grantee = c.relowner ORDER BY 1",
        )
        .expect("acl");
    assert!(!acl.contains("TRUNCATE") && acl.contains("SELECT"), "{acl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_and_swap_refuses_a_table_whose_row_type_is_used_elsewhere() {
    // A row type follows its table's OID: after a swap the function would return the
    // old table's rows and the old table could not be dropped (it was exit 0, with the
    // old table left behind). Natively the type is changed in place.
    let db = database(
        "row_type",
        &format!("{POPULATED}\nCREATE FUNCTION all_t() RETURNS SETOF t LANGUAGE sql AS 'SELECT * FROM t';"),
    );
    let dir = temp_dir("row_type");
    std::fs::write(
        dir.join("0001_step.sql"),
        "ALTER TABLE t ALTER COLUMN c TYPE bigint;",
    )
    .expect("write");
    let options = migrate_options_with_cas(&db);
    let verdict = run_migrate(&db, &dir, &options).await.expect("runs");
    assert_eq!(verdict.outcome, MigrateOutcome::Refused, "{verdict:#?}");
    let refusal = &verdict.files[0]
        .schedule
        .as_ref()
        .expect("planned")
        .refusals[0]
        .refusal;
    assert_eq!(
        refusal.cause,
        pgshift::refusal::RefusalCause::RewriteUnsupported,
        "{refusal:?}"
    );
    assert!(
        refusal.message.contains("row type") && refusal.message.contains("all_t()"),
        "{refusal:?}"
    );
    let result = cluster()
        .psql(&db, "SELECT pg_get_function_result('all_t'::regproc) || ' ' || format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'c'")
        .expect("read");
    assert_eq!(result.trim(), "SETOF t integer", "nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unnamed_check_split_in_two_steps_gets_the_name_postgres_would_give() {
    // An earlier file's unnamed multi-column CHECK holds t_check: PostgreSQL names the
    // next ones t_check1 and t_check2; pgshift named them t_check, and the run failed
    // at its NOT VALID step every time.
    migrate_like_native(
        "check_names",
        "CREATE TABLE t (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL, CHECK (a >= 0 AND b >= 0));
INSERT INTO t SELECT g, g, g FROM generate_series(1, 3000) g;",
        &["ALTER TABLE t ADD CHECK (a <= b);\nALTER TABLE t ADD CHECK (a + b >= 0);\nALTER TABLE t DROP CONSTRAINT t_check1;\nALTER TABLE t ADD CHECK (b > -1);\nALTER TABLE t ADD CHECK (a < b + 1);"],
        false,
    )
    .await;
}

/// A statement planned as written because its table held no rows finds rows there when
/// its unit starts: the unit locks the table, reads it again and runs nothing (it ran
/// the rewrite as planned, under ACCESS EXCLUSIVE, on however many rows had come).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_tx_2_emptiness_is_read_again_under_the_units_lock() {
    let db = database("empty_then_rows", "CREATE TABLE t (c int);");
    let main = session(&db).await;
    let monitor = session(&db).await;
    let statements =
        pgshift_sql::parse("ALTER TABLE t ALTER COLUMN c TYPE bigint").expect("valid SQL");
    let planned = pgshift::plan::plan(
        &main,
        vec![pgshift::plan::PlanInput {
            path: "<test>".to_owned(),
            statements,
        }],
        pgshift::script::TransactionMode::Statement,
    )
    .await
    .expect("plans");
    // Rows arrive between the plan and the run.
    cluster()
        .psql(
            &db,
            "INSERT INTO t SELECT g FROM generate_series(1, 1000) g",
        )
        .expect("rows");
    let sessions = pgshift::exec::Sessions {
        main: main.client(),
        monitor: Some(monitor.client()),
        user_search_path: main.user_search_path(),
    };
    let options = pgshift::exec::ApplyOptions {
        max_table_size: None,
        budgets: TEST_BUDGETS,
        allow_blocking: Vec::new(),
        copy_and_swap: None,
    };
    let verdict = pgshift::exec::apply(
        &sessions,
        &planned.files[0].script,
        &options,
        &pgshift::exec::TokioSleeper,
        &mut pgshift::exec::NoProgress,
    )
    .await;
    let refusal = verdict
        .runtime_refusal
        .as_ref()
        .unwrap_or_else(|| panic!("refused at run time: {verdict:#?}"));
    assert_eq!(
        refusal.cause,
        pgshift::refusal::RefusalCause::TableNoLongerEmpty,
        "{verdict:#?}"
    );
    assert!(refusal.message.contains("\"t\""), "{}", refusal.message);
    assert_eq!(verdict.committed_units, 0);
    let kind = cluster()
        .psql(
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'c'",
        )
        .expect("type");
    assert_eq!(kind.trim(), "integer", "nothing of the unit ran");
}

/// The check at the start of a whole unit skips the names only the unit's own
/// statements give: graphile-worker's `000011.sql` renames an empty table and works
/// on it under its new name, and the check's `LOCK TABLE` of that name failed (42P01)
/// before any of the file ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_unit_on_a_table_it_renames_checks_the_table_under_its_name_now() {
    migrate_like_native(
        "renamed_in_unit",
        "CREATE TABLE jobs (id int, payload text);",
        &["LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;\nALTER TABLE jobs RENAME TO jobs_old;\nCREATE TABLE jobs (id bigint PRIMARY KEY, payload jsonb);\nALTER TABLE jobs_old ALTER COLUMN id TYPE bigint;\nDROP TABLE jobs_old;"],
        false,
    )
    .await;
}
