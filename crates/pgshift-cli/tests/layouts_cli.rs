//! Migration directory layouts through the CLI: the detected layout said in `lint`,
//! `plan` and `migrate` (text and JSON), down files never read, mixed layouts refused,
//! `CREATE TABLE IF NOT EXISTS` not assumed new, split files reported, and
//! `migrate --baseline` adopting a database another runner migrated.

mod common;

use common::pgshift;
use pgshift_embedded::shared_cluster;

const SQLX: &str = "crates/pgshift/tests/data/layouts/sqlx_reversible";
const MIXED: &str = "crates/pgshift/tests/data/layouts/mixed";
const IF_NOT_EXISTS: &str = "crates/pgshift/tests/data/layouts/if_not_exists.sql";

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).expect("stdout is one JSON document")
}

#[test]
fn lint_says_the_layout_and_never_reads_a_down_file() {
    let run = pgshift(&["lint", SQLX]);
    assert!(
        run.stdout.contains(&format!(
            "{SQLX}: layout: sqlx (timestamp versions, reversible pairs, 3 down files not read)"
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(".down.sql"), "{}", run.stdout);
    let run = pgshift(&["lint", "--format", "json", SQLX]);
    let report = json(&run.stdout);
    assert_eq!(report["layouts"][0]["kind"], "timestamp");
    assert_eq!(report["layouts"][0]["reversible"], true);
    assert_eq!(report["layouts"][0]["skipped"][0]["reason"], "down");
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    assert_eq!(files.len(), 3);
    assert!(files.iter().all(|f| f.ends_with(".up.sql")), "{files:?}");
    // The down file of the last migration truncates: read as forward, lint would
    // report a destructive change.
    assert!(!run.stdout.contains("TRUNCATE"), "{}", run.stdout);
}

#[test]
fn lint_refuses_a_mixed_layout_saying_what_it_found() {
    let run = pgshift(&["lint", MIXED]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("mixed migration layouts")
            && run.stdout.contains("0001_create_ledgers.sql")
            && run
                .stdout
                .contains("20240215083000_ledgers_add_currency.sql"),
        "{}",
        run.stdout
    );
}

#[test]
fn lint_judges_a_table_created_if_not_exists_as_possibly_existing() {
    let run = pgshift(&["lint", "--format", "json", IF_NOT_EXISTS]);
    let report = json(&run.stdout);
    let codes: Vec<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["line"] == 4)
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert!(codes.contains(&"index-not-concurrent"), "{}", run.stdout);
}

#[test]
fn plan_and_migrate_say_the_layout_the_split_and_the_baseline() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("layouts_cli").expect("database");
    cluster
        .psql_file(
            &db,
            common::workspace_root()
                .join(SQLX)
                .join("20240101120000_create_ledgers.up.sql"),
        )
        .expect("the first file, applied by another runner");
    // A ledger in use: on an empty table the last file would run whole, as sqlx runs
    // it (TX-2), and nothing would be split.
    cluster
        .psql(&db, "INSERT INTO ledgers (workspace) VALUES ('acme');")
        .expect("a row");
    let url = cluster.connection_string(&db);

    let plan = pgshift(&["plan", "--url", &url, "--format", "json", SQLX]);
    let report = json(&plan.stdout);
    assert_eq!(report["layouts"][0]["kind"], "timestamp", "{}", plan.stdout);
    let split = &report["files"][2]["split"];
    assert_eq!(split["runner_transactions"], 1, "{}", plan.stdout);
    assert!(split["units"].as_u64().expect("units") >= 2);
    let plan = pgshift(&["plan", "--url", &url, SQLX]);
    assert!(
        plan.stdout
            .contains("; under its runner it was 1 transaction"),
        "{}",
        plan.stdout
    );

    let dry = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--dry-run",
        "--baseline",
        "20240101120000",
        SQLX,
    ]);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains("would be baselined"), "{}", dry.stdout);
    let bad = pgshift(&["migrate", "--url", &url, "--baseline", "latest", SQLX]);
    assert_eq!(bad.code, 1, "a bad value is a usage error: {}", bad.stderr);
    let done = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--format",
        "json",
        "--baseline",
        "20240101120000",
        SQLX,
    ]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let report = json(&done.stdout);
    assert_eq!(report["baseline"]["files"][0]["status"], "baselined");
    assert_eq!(report["baseline"]["files"][1]["status"], "pending");

    let sqlx = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--format",
        "json",
        "--baseline",
        "sqlx",
        SQLX,
    ]);
    assert_eq!(sqlx.code, 1, "{}", sqlx.stdout);
    assert_eq!(json(&sqlx.stdout)["kind"], "error", "{}", sqlx.stdout);
    assert!(
        json(&sqlx.stdout)["message"]
            .as_str()
            .expect("message")
            .contains("no _sqlx_migrations table"),
        "{}",
        sqlx.stdout
    );

    // The second file, applied by the other runner too, then baselined: the dry run
    // plans the third against the schema it will meet.
    cluster
        .psql_file(
            &db,
            common::workspace_root()
                .join(SQLX)
                .join("20240215083000_ledgers_add_currency.up.sql"),
        )
        .expect("the second file");
    let second = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--baseline",
        "20240215083000",
        SQLX,
    ]);
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    let dry = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--dry-run",
        "--format",
        "json",
        SQLX,
    ]);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let report = json(&dry.stdout);
    assert_eq!(report["verdict"]["layout"]["kind"], "timestamp");
    assert_eq!(
        report["verdict"]["files"][0]["baselined"],
        "--baseline 20240101120000"
    );
    assert_eq!(
        report["verdict"]["files"][2]["split"]["runner_transactions"], 1,
        "{}",
        dry.stdout
    );
    let run = pgshift(&["migrate", "--url", &url, SQLX]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("layout: sqlx (timestamp versions"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("already applied (baselined: --baseline 20240101120000; not run by pgshift)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("; under its runner it was 1 transaction"),
        "{}",
        run.stdout
    );
}
