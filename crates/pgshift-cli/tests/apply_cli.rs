//! `pgshift apply` and `pgshift migrate` end to end: exit codes, JSON on stdout only,
//! progress on stderr.

mod common;

use common::pgshift;
use pgshift_embedded::{shared_cluster, Cluster};

fn database(schema: &str) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("apply_cli").expect("database");
    cluster.psql(&db, schema).expect("schema");
    (cluster, db)
}

const SCHEMA: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int, note text);
INSERT INTO items SELECT g, g, 'n' FROM generate_series(1, 1000) g;";

#[test]
fn apply_runs_online_and_exits_zero() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let run = pgshift(&[
        "apply",
        "--url",
        &url,
        "--sql",
        "CREATE INDEX items_qty_idx ON items (qty)",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("CREATE INDEX CONCURRENTLY items_qty_idx"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Done online: 1 of 1 steps committed."),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains("[1/1]"),
        "progress goes to stderr: {}",
        run.stderr
    );
}

#[test]
fn apply_json_is_alone_on_stdout() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.url(&db);
    let run = pgshift(&[
        "apply",
        "--url",
        &url,
        "--format",
        "json",
        "--sql",
        "ALTER TABLE items ADD CONSTRAINT items_qty_check CHECK (qty > 0)",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("only JSON on stdout");
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["command"], "apply");
    assert_eq!(json["outcome"], "done");
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["summary"]["units"], 2);
    assert_eq!(
        json["verdict"]["units"][0]["report"]["attempts"][0]["outcome"],
        "committed"
    );
}

#[test]
fn apply_exit_codes_follow_the_outcome() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let rewrite = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";
    let online = pgshift(&["apply", "--url", &url, "--sql", rewrite]);
    assert_eq!(online.code, 0, "{}\n{}", online.stdout, online.stderr);
    assert!(
        online.stdout.contains("ACCESS EXCLUSIVE held")
            && online
                .stdout
                .contains("Done online: 1 of 1 steps committed."),
        "a rewrite runs through copy-and-swap: {}",
        online.stdout
    );
    assert!(
        online.stderr.contains("copy-and-swap: copying"),
        "its phases are shown on stderr: {}",
        online.stderr
    );
    cluster
        .psql(
            &db,
            "CREATE TABLE keyless (v int); INSERT INTO keyless VALUES (1)",
        )
        .expect("a table without a key");
    let refused = pgshift(&[
        "apply",
        "--url",
        &url,
        "--sql",
        "ALTER TABLE keyless ALTER COLUMN v TYPE bigint",
    ]);
    assert_eq!(refused.code, 2, "{}\n{}", refused.stdout, refused.stderr);
    assert!(
        refused.stdout.contains("REFUSED: nothing ran.")
            && refused.stdout.contains("no-usable-key"),
        "{}",
        refused.stdout
    );
    let rewrite = "ALTER TABLE items ALTER COLUMN qty TYPE integer";
    // The size guard: accepted as blocking, but on a table over the limit.
    let too_large = pgshift(&[
        "apply",
        "--url",
        &url,
        "--allow-blocking",
        "items",
        "--max-table-size",
        "1B",
        "--sql",
        rewrite,
    ]);
    assert_eq!(
        too_large.code, 2,
        "{}\n{}",
        too_large.stdout, too_large.stderr
    );
    assert!(
        too_large.stdout.contains("table-too-large"),
        "{}",
        too_large.stdout
    );
    let blocking = pgshift(&[
        "apply",
        "--url",
        &url,
        "--allow-blocking",
        "items",
        "--sql",
        rewrite,
    ]);
    assert_eq!(blocking.code, 3, "{}", blocking.stdout);
    assert!(
        blocking.stdout.contains("BLOCKING form, accepted"),
        "{}",
        blocking.stdout
    );

    cluster
        .psql(&db, "UPDATE items SET note = NULL WHERE id = 3")
        .expect("a NULL");
    let failed = pgshift(&[
        "apply",
        "--url",
        &url,
        "--sql",
        "ALTER TABLE items ALTER COLUMN note SET NOT NULL",
    ]);
    assert_eq!(failed.code, 1, "{}", failed.stdout);
    assert!(
        failed
            .stdout
            .contains("FAILED at step 2 of 4; the 1 step before it committed and stays."),
        "{}",
        failed.stdout
    );

    let budget = pgshift(&[
        "apply",
        "--url",
        &url,
        "--lock-timeout-ms",
        "0",
        "--sql",
        "SELECT 1",
    ]);
    assert_eq!(budget.code, 1);
    assert!(
        budget.stderr.contains("lock_timeout_ms"),
        "{}",
        budget.stderr
    );
}

#[test]
fn migrate_applies_then_skips_and_refuses_a_changed_file() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let dir = std::env::temp_dir().join(format!("pgshift-cli-migrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("0001_index.sql"),
        "CREATE INDEX items_note_idx ON items (note);",
    )
    .expect("write");
    std::fs::write(
        dir.join("0002_column.sql"),
        "ALTER TABLE items ADD COLUMN tag text;",
    )
    .expect("write");
    let path = dir.to_str().expect("utf-8 path");

    let dry = pgshift(&["migrate", "--url", &url, "--dry-run", path]);
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains("would run 1 step"), "{}", dry.stdout);
    assert!(
        dry.stdout.contains("Dry run: nothing was written."),
        "{}",
        dry.stdout
    );

    let first = pgshift(&["migrate", "--url", &url, path]);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    assert!(
        first.stdout.contains("applied: 1 step committed"),
        "{}",
        first.stdout
    );
    let second = pgshift(&["migrate", "--url", &url, "--format", "json", path]);
    assert_eq!(second.code, 0);
    let json: serde_json::Value = serde_json::from_str(&second.stdout).expect("JSON");
    assert_eq!(json["verdict"]["files"][0]["status"], "already-applied");

    std::fs::write(
        dir.join("0001_index.sql"),
        "CREATE INDEX items_note_idx2 ON items (note);",
    )
    .expect("edit");
    let changed = pgshift(&["migrate", "--url", &url, path]);
    assert_eq!(changed.code, 2, "{}", changed.stderr);
    assert!(
        changed.stderr.contains("must not change"),
        "{}",
        changed.stderr
    );

    std::fs::write(dir.join("0004_gap.sql"), "SELECT 1;").expect("gap");
    let gap = pgshift(&["migrate", "--url", &url, path]);
    assert_eq!(gap.code, 1);
    assert!(
        gap.stderr.contains("no migration between versions 2 and 4"),
        "{}",
        gap.stderr
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn apply_refuses_a_standby_url_that_is_not_a_standby_before_any_unit() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    // The primary itself, given as a standby: nothing runs, not even the native unit
    // before the rewrite.
    let run = pgshift(&[
        "apply",
        "--url",
        &url,
        "--standby-url",
        &url,
        "--format",
        "json",
        "--sql",
        "CREATE INDEX items_qty_idx ON items (qty); ALTER TABLE items ALTER COLUMN note TYPE varchar(10)",
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("only JSON on stdout");
    assert_eq!(json["code"], "refused", "{json}");
    let message = json["message"].as_str().unwrap_or_default();
    assert!(message.contains("not-a-standby"), "{message}");
    assert!(message.contains("not in recovery"), "{message}");
    assert_eq!(
        cluster
            .psql(
                &db,
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'items_qty_idx'"
            )
            .expect("query")
            .trim(),
        "0"
    );
}
