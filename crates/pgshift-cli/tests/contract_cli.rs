//! The exit-code and output contract of every command, through the real binary:
//! refusal 2, failure after starting 1, done 0, done through an accepted blocking form
//! 3; a command that only requested something never says "done"; and with
//! `--format json` stdout holds one versioned JSON document, errors included.

mod common;

use std::path::PathBuf;

use common::cas::{hold, value};
use common::{pgshift, Run};
use pgshift_embedded::{shared_cluster, Cluster};

fn database(prefix: &str, schema: &str) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database(prefix).expect("database");
    if !schema.is_empty() {
        cluster.psql(&db, schema).expect("schema");
    }
    (cluster, db)
}

/// A migrations directory of its own, with `files` (name, SQL).
fn migrations(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pgshift-contract-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    for (file, sql) in files {
        std::fs::write(dir.join(file), sql).expect("write");
    }
    dir
}

/// The one JSON document on stdout.
fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}):\n{}\n{}",
            run.stdout, run.stderr
        )
    })
}

/// A versioned error document whose exit code is the process's.
fn assert_error_document(run: &Run, command: &str, code: &str) {
    let doc = json(run);
    assert_eq!(doc["format_version"], 1, "{doc}");
    assert_eq!(doc["kind"], "error", "{doc}");
    assert_eq!(doc["command"], command, "{doc}");
    assert_eq!(doc["code"], code, "{doc}");
    assert!(
        doc["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{doc}"
    );
    assert!(
        doc.get("hint").is_some(),
        "the hint is always there (or null): {doc}"
    );
    assert_eq!(doc["exit_code"], run.code, "{doc}");
    assert!(
        !run.stderr.trim().is_empty(),
        "people still get the text on stderr"
    );
}

#[test]
fn every_command_prints_one_error_document_under_json() {
    // Nothing listens on port 1: the connection is refused at once.
    let refused = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2";
    let bad_url = "postgresql://host:notaport/db";
    let path = migrations("json-errors", &[("0001_a.sql", "SELECT 1;")]);
    let dir = path.to_str().expect("utf-8");
    let pulled = path.join("pulled").to_str().expect("utf-8").to_owned();
    let cases: Vec<(&str, Vec<&str>, &str, i32)> = vec![
        (
            "lint",
            vec![
                "lint",
                "--format",
                "json",
                "--transaction-mode",
                "bogus",
                "x.sql",
            ],
            "usage",
            1,
        ),
        (
            "plan",
            vec![
                "plan", "--format", "json", "--url", bad_url, "--sql", "SELECT 1",
            ],
            "invalid-url",
            1,
        ),
        (
            "plan",
            vec![
                "plan",
                "--format",
                "json",
                "no/such/file.sql",
                "--url",
                refused,
            ],
            "input-unreadable",
            1,
        ),
        (
            "apply",
            vec![
                "apply", "--format", "json", "--url", refused, "--sql", "SELECT 1",
            ],
            "connect-failed",
            1,
        ),
        (
            "apply",
            vec![
                "apply", "--format", "json", "--url", refused, "--sql", "SELEC 1",
            ],
            "input-unparsable",
            1,
        ),
        (
            "apply",
            vec![
                "apply",
                "--format",
                "json",
                "--url",
                refused,
                "--allow-blocking",
                "a.b.c",
                "--sql",
                "SELECT 1",
            ],
            "usage",
            1,
        ),
        (
            "apply",
            vec!["apply", "--format", "json", "--url", refused, dir],
            "directory-not-accepted",
            1,
        ),
        (
            "apply",
            vec![
                "apply",
                "--format",
                "json",
                "--lock-timeout-ms",
                "0",
                "--sql",
                "SELECT 1",
            ],
            "invalid-budget",
            1,
        ),
        (
            "migrate",
            vec!["migrate", "--format", "json", "--url", refused, dir],
            "connect-failed",
            1,
        ),
        (
            "migrate",
            vec!["migrate", "--format=json", "--bogus-flag", dir],
            "usage",
            1,
        ),
        (
            "status",
            vec!["status", "--format", "json", "--url", bad_url],
            "invalid-url",
            1,
        ),
        (
            "status",
            vec!["status", "--format", "json", "--url", refused],
            "connect-failed",
            1,
        ),
        (
            "resume",
            vec!["resume", "--format", "json", "--url", refused, "items"],
            "connect-failed",
            1,
        ),
        (
            "abort",
            vec!["abort", "--format", "json", "--url", refused, "\"items"],
            "usage",
            1,
        ),
        (
            "abort",
            vec!["abort", "--format", "json", "--url", refused, "items"],
            "connect-failed",
            1,
        ),
        (
            "cutover",
            vec!["cutover", "--format", "json", "--url", refused, "items"],
            "connect-failed",
            1,
        ),
        (
            "cutover",
            vec![
                "cutover",
                "--format",
                "json",
                "--no-wait",
                "--url",
                bad_url,
                "items",
            ],
            "invalid-url",
            1,
        ),
        (
            "pull",
            vec![
                "pull", "--format", "json", "--url", refused, "--out", &pulled,
            ],
            "connect-failed",
            1,
        ),
        (
            "pull",
            vec![
                "pull", "--format", "json", "--url", bad_url, "--out", &pulled,
            ],
            "invalid-url",
            1,
        ),
        (
            "diff",
            vec!["diff", "--format", "json", "--url", refused, dir],
            "connect-failed",
            1,
        ),
        (
            "diff",
            vec!["diff", "--format", "json", "--url", bad_url, dir],
            "invalid-url",
            1,
        ),
    ];
    for (command, args, code, exit) in cases {
        let run = pgshift(&args);
        assert_eq!(run.code, exit, "{args:?}:\n{}\n{}", run.stdout, run.stderr);
        assert_error_document(&run, command, code);
    }
    std::fs::remove_dir_all(&path).expect("cleanup");
}

#[test]
fn lint_reports_an_unreadable_schema_file_in_its_json() {
    let run = pgshift(&[
        "lint",
        "--format",
        "json",
        "--schema",
        "no/such/schema.sql",
        "crates/pgshift/tests/data/migrations/relay/0006_channels_name_not_null.sql",
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc = json(&run);
    assert_eq!(doc["summary"]["input_errors"], 1, "{doc}");
    let files = doc["files"].as_array().expect("files");
    assert!(
        files
            .iter()
            .any(|f| f["path"] == "no/such/schema.sql" && f["error"]["kind"] == "read"),
        "the JSON says which input could not be read: {doc}"
    );
}

#[test]
fn migrate_dry_run_exits_by_the_verdict_as_plan_does() {
    let (cluster, db) = database(
        "contract_dry_refused",
        "CREATE TABLE keyless (v int); INSERT INTO keyless VALUES (1);",
    );
    let url = cluster.connection_string(&db);
    let refused_sql = "ALTER TABLE keyless ALTER COLUMN v TYPE bigint;";
    let dir = migrations(
        "dry-refused",
        &[
            ("0001_index.sql", "CREATE INDEX keyless_v ON keyless (v);"),
            ("0002_rewrite.sql", refused_sql),
        ],
    );
    let path = dir.to_str().expect("utf-8");
    let plan = pgshift(&["plan", "--url", &url, "--sql", refused_sql]);
    assert_eq!(plan.code, 2, "plan refuses it: {}", plan.stdout);
    let dry = pgshift(&["migrate", "--url", &url, "--dry-run", path]);
    assert_eq!(dry.code, 2, "{}\n{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout.contains("would be REFUSED (1 statement)"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains("a pending file would be REFUSED; nothing was written"),
        "{}",
        dry.stdout
    );
    let dry_json = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--dry-run",
        "--format",
        "json",
        path,
    ]);
    assert_eq!(dry_json.code, 2);
    let doc = json(&dry_json);
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["verdict"]["outcome"], "refused");
    assert_eq!(doc["verdict"]["dry_run"], true);
    assert_eq!(
        doc["verdict"]["files"][1]["schedule"]["refusals"][0]["refusal"]["cause"],
        "no-usable-key"
    );
    assert_eq!(
        value(
            cluster,
            &db,
            "SELECT to_regclass('pgshift.migrations') IS NULL AND to_regclass('keyless_v') IS NULL"
        ),
        "t",
        "a dry run writes nothing"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn migrate_dry_run_plans_each_file_against_what_the_earlier_ones_leave() {
    let (cluster, db) = database("contract_dry_sequence", "");
    let url = cluster.connection_string(&db);
    let dir = migrations(
        "dry-sequence",
        &[
            ("0001_create.sql", "CREATE TABLE accounts (id bigint PRIMARY KEY, name text);"),
            ("0002_column.sql", "ALTER TABLE accounts ADD COLUMN email text; CREATE INDEX accounts_name ON accounts (name);"),
            ("0003_more.sql", "CREATE TABLE notes (id bigint PRIMARY KEY, account bigint REFERENCES accounts);\nALTER TABLE accounts ALTER COLUMN name SET NOT NULL;"),
        ],
    );
    let path = dir.to_str().expect("utf-8");
    let dry = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--dry-run",
        "--format",
        "json",
        path,
    ]);
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    let doc = json(&dry);
    assert_eq!(doc["verdict"]["outcome"], "planned");
    for file in doc["verdict"]["files"].as_array().expect("files") {
        assert_eq!(file["status"], "planned", "{file}");
        assert_eq!(
            file["schedule"]["refusals"].as_array().map(Vec::len),
            Some(0),
            "{file}"
        );
    }
    let plan = pgshift(&["plan", "--url", &url, path]);
    assert_eq!(plan.code, 0, "plan DIR agrees: {}", plan.stdout);
    let real = pgshift(&["migrate", "--url", &url, path]);
    assert_eq!(
        real.code, 0,
        "and the real run does it: {}\n{}",
        real.stdout, real.stderr
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn apply_refuses_a_directory_and_points_at_migrate() {
    let (cluster, db) = database("contract_apply_dir", "CREATE TABLE t (id int PRIMARY KEY);");
    let url = cluster.connection_string(&db);
    let dir = migrations(
        "apply-dir",
        &[
            ("0001_a.sql", "ALTER TABLE t ADD COLUMN a int;"),
            ("0002_b.sql", "ALTER TABLE t ADD COLUMN b int;"),
        ],
    );
    let path = dir.to_str().expect("utf-8");
    let run = pgshift(&["apply", "--url", &url, path]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is a directory") && run.stderr.contains("pgshift migrate"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("Done"), "{}", run.stdout);
    assert_eq!(
        value(cluster, &db, "SELECT count(*) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname IN ('a', 'b')"),
        "0",
        "no file of the directory ran"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn allow_blocking_names_are_checked_before_anything_runs() {
    let (cluster, db) = database(
        "contract_allow_blocking",
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int); INSERT INTO items SELECT g, g FROM generate_series(1, 100) g;",
    );
    let url = cluster.connection_string(&db);
    let rewrite = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";
    for bad in [
        "a.b.c", "", "\"items", "it\"ems", "\"\"", "items.", "1items",
    ] {
        let run = pgshift(&[
            "apply",
            "--url",
            &url,
            "--allow-blocking",
            bad,
            "--sql",
            rewrite,
        ]);
        assert_eq!(run.code, 1, "{bad:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("invalid value") && run.stderr.contains("--allow-blocking"),
            "{bad:?}: {}",
            run.stderr
        );
    }
    let unused = pgshift(&[
        "apply",
        "--url",
        &url,
        "--allow-blocking",
        "other",
        "--sql",
        rewrite,
    ]);
    assert_eq!(unused.code, 1, "{}", unused.stderr);
    assert!(
        unused
            .stderr
            .contains("--allow-blocking other: no statement touches this table"),
        "{}",
        unused.stderr
    );
    let dir = migrations(
        "allow-blocking",
        &[(
            "0001_rewrite.sql",
            "ALTER TABLE items ALTER COLUMN qty TYPE bigint;",
        )],
    );
    let path = dir.to_str().expect("utf-8");
    for dry in [true, false] {
        let mut args = vec![
            "migrate",
            "--url",
            &url,
            "--allow-blocking",
            "public.other",
            "--format",
            "json",
            path,
        ];
        if dry {
            args.push("--dry-run");
        }
        let run = pgshift(&args);
        assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
        assert_error_document(&run, "migrate", "allow-blocking-unused");
    }
    assert_eq!(
        value(cluster, &db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "integer",
        "nothing ran"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn allow_blocking_runs_the_blocking_form_where_copy_and_swap_cannot() {
    let (cluster, db) = database(
        "contract_blocking_keyless",
        "CREATE TABLE keyless (v int); INSERT INTO keyless SELECT g FROM generate_series(1, 100) g;",
    );
    let url = cluster.connection_string(&db);
    let rewrite = "ALTER TABLE keyless ALTER COLUMN v TYPE bigint";
    let refused = pgshift(&["apply", "--url", &url, "--sql", rewrite]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused.stdout.contains("no-usable-key")
            && refused.stdout.contains("pass --allow-blocking keyless"),
        "the refusal says how to accept the blocking form: {}",
        refused.stdout
    );
    // Under its lock budget: a reader holding the table makes it give up, unchanged.
    let reader = hold(cluster, &db, "keyless", "SELECT count(*) FROM keyless");
    let budget = pgshift(&[
        "apply",
        "--url",
        &url,
        "--allow-blocking",
        "keyless",
        "--lock-timeout-ms",
        "50",
        "--max-attempts",
        "2",
        "--backoff-initial-ms",
        "10",
        "--sql",
        rewrite,
    ]);
    reader.release();
    assert_eq!(budget.code, 2, "{}\n{}", budget.stdout, budget.stderr);
    assert!(
        budget.stdout.contains("lock-budget-exhausted"),
        "{}",
        budget.stdout
    );
    let blocking = pgshift(&[
        "apply",
        "--url",
        &url,
        "--allow-blocking",
        "keyless",
        "--format",
        "json",
        "--sql",
        rewrite,
    ]);
    assert_eq!(blocking.code, 3, "{}\n{}", blocking.stdout, blocking.stderr);
    let doc = json(&blocking);
    assert_eq!(doc["outcome"], "done-with-blocking");
    assert_eq!(
        doc["verdict"]["units"][0]["unit"]["accepted_blocking"],
        true
    );
    assert_eq!(
        value(cluster, &db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'keyless'::regclass AND attname = 'v'"),
        "bigint"
    );
}

#[test]
fn a_table_busy_with_another_run_is_a_refusal() {
    let (cluster, db) = database(
        "contract_busy",
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int); INSERT INTO items SELECT g, g FROM generate_series(1, 100) g;",
    );
    let url = cluster.connection_string(&db);
    // What a live run holds: the table's run lock, in a session of its own.
    let runner = hold(
        cluster,
        &db,
        "items",
        "SELECT pg_advisory_lock(hashtextextended('pgshift.cas:' || 'items'::regclass::oid, 0)), count(*) FROM items",
    );
    let rewrite = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";
    let apply = pgshift(&["apply", "--url", &url, "--format", "json", "--sql", rewrite]);
    let dir = migrations(
        "busy",
        &[(
            "0001_rewrite.sql",
            "ALTER TABLE items ALTER COLUMN qty TYPE bigint;",
        )],
    );
    let migrate = pgshift(&["migrate", "--url", &url, dir.to_str().expect("utf-8")]);
    runner.release();
    assert_eq!(apply.code, 2, "{}\n{}", apply.stdout, apply.stderr);
    let doc = json(&apply);
    assert_eq!(doc["outcome"], "refused");
    assert_eq!(
        doc["verdict"]["runtime_refusal"]["cause"],
        "run-in-progress"
    );
    assert_eq!(migrate.code, 2, "{}\n{}", migrate.stdout, migrate.stderr);
    assert!(
        migrate.stdout.contains("run-in-progress"),
        "{}",
        migrate.stdout
    );
    assert_eq!(
        value(cluster, &db, "SELECT count(*) FROM pgshift.migrations"),
        "0",
        "a file refused while running, with nothing committed, is not recorded"
    );
    let again = pgshift(&["migrate", "--url", &url, dir.to_str().expect("utf-8")]);
    assert_eq!(
        again.code, 0,
        "once the table is free: {}\n{}",
        again.stdout, again.stderr
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
