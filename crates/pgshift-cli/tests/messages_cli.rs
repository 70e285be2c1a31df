//! Messages against a live server: a refusal says what fails and ends with its "do
//! this" line; `plan --sql` judges a statement on its own, as `apply --sql` runs it.

mod common;

use std::sync::OnceLock;

use common::pgshift;
use pgshift_embedded::{shared_cluster, Cluster};

/// A database with a table that has rows (`filled`, never analysed, so only its heap
/// says so), one that is analysed, and an empty one.
fn database() -> (&'static Cluster, &'static str) {
    static DB: OnceLock<String> = OnceLock::new();
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = DB.get_or_init(|| {
        let db = cluster.fresh_database("messages_cli").expect("database");
        cluster
            .psql(
                &db,
                "CREATE TABLE filled (id bigint PRIMARY KEY, a int);
                 INSERT INTO filled SELECT g, g FROM generate_series(1, 100) g;
                 CREATE TABLE analysed (id bigint PRIMARY KEY);
                 INSERT INTO analysed SELECT generate_series(1, 100);
                 ANALYZE analysed;
                 CREATE TABLE empty (id bigint PRIMARY KEY);",
            )
            .expect("setup");
        db
    });
    (cluster, db.as_str())
}

/// `pgshift COMMAND --url … [EXTRA…] --sql SQL` against the test database.
fn run_sql(command: &str, extra: &[&str], sql: &str) -> common::Run {
    let (cluster, db) = database();
    let url = cluster.connection_string(db);
    let mut args = vec![command, "--url", url.as_str()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--sql", sql]);
    pgshift(&args)
}

#[test]
fn plan_sql_create_index_concurrently_is_a_statement_on_its_own() {
    let run = run_sql(
        "plan",
        &[],
        "CREATE INDEX CONCURRENTLY filled_a_idx ON filled (a)",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains("transaction block"), "{}", run.stdout);
    assert!(
        run.stdout.contains("      route: native, as written"),
        "{}",
        run.stdout
    );
}

#[test]
fn add_column_not_null_without_default_on_a_table_with_rows_is_refused() {
    let run = run_sql("plan", &[], "ALTER TABLE filled ADD COLUMN b int NOT NULL");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let refused = lines
        .iter()
        .position(|l| l.starts_with("      refused: "))
        .expect("a refused line");
    assert!(lines.contains(&"      route: REFUSED (null-in-existing-rows, invalid)"));
    assert_eq!(
        lines[refused],
        "      refused: ADD COLUMN \"b\" NOT NULL has no default, and \"filled\" has rows (never analysed, 8192 bytes of heap): every existing row would hold NULL, so PostgreSQL will fail the statement (column contains null values, SQLSTATE 23502)"
    );
    assert_eq!(
        lines[refused + 1],
        "      do this: Add the column nullable, backfill it in batches, then add `CHECK (c IS NOT NULL) NOT VALID`, `VALIDATE` it and `SET NOT NULL` (`pgshift explain not-null-without-default`); or give it a constant default."
    );
    let analysed = run_sql(
        "plan",
        &["--format", "json"],
        "ALTER TABLE analysed ADD COLUMN b int NOT NULL",
    );
    assert_eq!(analysed.code, 2, "{}", analysed.stdout);
    let doc: serde_json::Value = serde_json::from_str(&analysed.stdout).expect("JSON");
    let refusal = &doc["files"][0]["statements"][0]["refusal"];
    assert_eq!(refusal["cause"], "null-in-existing-rows", "{doc}");
    assert!(refusal["message"]
        .as_str()
        .is_some_and(|m| m.contains("(about 100 by its statistics)")));
    assert!(refusal["next_step"]
        .as_str()
        .is_some_and(|s| s.starts_with("Add the column nullable")));
}

#[test]
fn add_column_not_null_on_an_empty_table_runs() {
    let run = run_sql("plan", &[], "ALTER TABLE empty ADD COLUMN b int NOT NULL");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn apply_refuses_what_postgresql_would_fail_and_says_what_to_do() {
    let run = run_sql("apply", &[], "ALTER TABLE filled ADD COLUMN b int NOT NULL");
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "REFUSED: nothing ran.");
    assert!(
        lines[1].starts_with(
            "  <sql>:1: null-in-existing-rows (invalid): ADD COLUMN \"b\" NOT NULL has no default"
        ),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("    do this: Add the column nullable, backfill it in batches"),
        "{}",
        lines[2]
    );
    // PostgreSQL agrees: the statement as written fails on this table.
    let (cluster, db) = database();
    let native = cluster.psql(db, "ALTER TABLE filled ADD COLUMN b int NOT NULL");
    assert!(native.is_err(), "PostgreSQL accepted it: {native:?}");
}

#[test]
fn quiet_plan_shows_only_the_refused_statement_and_verbose_apply_every_attempt() {
    let run = run_sql(
        "plan",
        &["-q"],
        "ALTER TABLE empty ADD COLUMN q int; ALTER TABLE filled ADD COLUMN b int NOT NULL",
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(!run.stdout.contains("ADD COLUMN q"), "{}", run.stdout);
    assert!(run
        .stdout
        .contains("REFUSED (null-in-existing-rows, invalid)"));
    assert!(run
        .stdout
        .ends_with("\n2 statements: 1 native, 0 native sequence, 0 copy-and-swap, 1 refused\n"));
    let run = run_sql("apply", &["-v"], "ALTER TABLE empty ADD COLUMN v int");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("      attempt 1: committed after "),
        "{}",
        run.stdout
    );
    let run = run_sql("apply", &["-q"], "ALTER TABLE empty ADD COLUMN w int");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "Done online: 1 of 1 steps committed.\n");
    assert_eq!(run.stderr, "", "no progress with -q");
}
