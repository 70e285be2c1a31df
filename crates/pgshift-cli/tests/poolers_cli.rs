//! The `pgshift` binary through a real PgBouncer (docs/POOLERS.md): behind a
//! transaction pooler every command that connects is refused, exit 2, with the cause
//! and the next step, and nothing is set, taken or created; through a session pooler
//! `apply` runs.

mod common;
#[path = "../../pgshift/tests/common/pooler.rs"]
mod pooler;

use common::cas::REWRITE;
use common::pgshift;
use pgshift_embedded::{shared_cluster, Cluster};
use pooler::{PoolMode, Pooler};

const SCHEMA: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int);
INSERT INTO items SELECT g, g FROM generate_series(1, 100) g;";

fn database(prefix: &str) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database(prefix).expect("database");
    cluster.psql(&db, SCHEMA).expect("schema");
    (cluster, db)
}

/// A fresh database behind a new pooler, and the connection string through it.
fn pooled(prefix: &str, mode: PoolMode, size: u32) -> (&'static Cluster, String, Pooler, String) {
    let (cluster, db) = database(prefix);
    let pooler = Pooler::start(cluster, mode, size);
    let url = pooler.connection_string(cluster, &db);
    (cluster, db, pooler, url)
}

/// `pgshift apply --format json --sql SQL` through `url`.
fn apply_json(url: &str, sql: &str) -> common::Run {
    pgshift(&["apply", "--url", url, "--format", "json", "--sql", sql])
}

/// Asserts that a run exited 0, with its output and the pooler's log otherwise.
fn assert_done(run: &common::Run, pooler: &Pooler) {
    assert_eq!(
        run.code,
        0,
        "{}\n{}\n{}",
        run.stdout,
        run.stderr,
        pooler.log()
    );
}

/// Asserts a refusal's JSON error document: one document, `refused`, exit 2, the
/// cause in the message and the next step in the hint.
fn assert_refused_json(run: &common::Run) {
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON document on stdout ({e}): {}", run.stdout));
    assert_eq!(doc["kind"], "error", "{doc}");
    assert_eq!(doc["code"], "refused", "{doc}");
    assert_eq!(doc["exit_code"], 2, "{doc}");
    assert!(doc["format_version"].is_number(), "{doc}");
    let message = doc["message"].as_str().unwrap_or_default();
    assert!(message.contains("pooled-without-session"), "{doc}");
    let hint = doc["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains("directly") && hint.contains("session mode"),
        "{doc}"
    );
}

/// What the database and the pool show after a refused command: no column added,
/// no `pgshift` schema, no advisory lock, no capture trigger, `qty` still an
/// `integer`, and clients of the pool see the default
/// `search_path`.
fn assert_untouched(cluster: &Cluster, pooler: &Pooler, db: &str) {
    let direct = cluster
        .psql(
            db,
            "SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = 'items'::regclass \
             AND attname = 'note') || '|' || \
             (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgshift') || '|' || \
             (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = \
              (SELECT oid FROM pg_database WHERE datname = current_database())) || '|' || \
             (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'items'::regclass) || '|' || \
             (SELECT format_type(atttypid, NULL) FROM pg_attribute \
              WHERE attrelid = 'items'::regclass AND attname = 'qty')",
        )
        .expect("reads");
    assert!(
        direct.contains("0|0|0|0|integer"),
        "column | schema | advisory locks | triggers | qty's type: {direct}"
    );
    for _ in 0..4 {
        let path = pooler.psql(cluster, db, "SHOW search_path");
        assert_eq!(path.trim(), "\"$user\", public", "{}", pooler.log());
    }
}

#[test]
fn inv_se_4_apply_and_migrate_refuse_behind_a_transaction_pooler() {
    let (cluster, db, pooler, url) = pooled("pooled_apply", PoolMode::Transaction, 2);
    let sql = "ALTER TABLE items ADD COLUMN note text";

    let json = apply_json(&url, sql);
    assert_refused_json(&json);
    let text = pgshift(&["apply", "--url", &url, "--sql", sql]);
    assert_eq!(text.code, 2, "{}\n{}", text.stdout, text.stderr);
    assert!(
        text.stderr.contains("pooled-without-session") && text.stderr.contains("session mode"),
        "{}",
        text.stderr
    );

    let dir = std::env::temp_dir().join(format!("pooled-migrations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("directory");
    std::fs::write(dir.join("0001_note.sql"), format!("{sql};")).expect("write");
    let path = dir.to_str().expect("utf-8 path");
    let migrated = pgshift(&["migrate", "--url", &url, "--format", "json", path]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_refused_json(&migrated);

    // The copy-and-swap: refused before its lock, capture or shadow.
    let rewrite = apply_json(&url, REWRITE);
    assert_refused_json(&rewrite);

    assert_untouched(cluster, &pooler, &db);
}

#[test]
fn run_commands_plan_and_audit_refuse_behind_a_transaction_pooler() {
    let (cluster, db, pooler, url) = pooled("pooled_run_cmds", PoolMode::Transaction, 2);
    for args in [
        vec!["resume", "--url", &url, "--format", "json", "items"],
        vec!["abort", "--url", &url, "--format", "json", "items"],
        vec!["status", "--url", &url, "--format", "json"],
        vec!["cutover", "--url", &url, "--format", "json", "items"],
        vec!["audit", "--url", &url, "--format", "json"],
        vec!["plan", "--url", &url, "--format", "json", "--sql", REWRITE],
    ] {
        let run = pgshift(&args);
        assert_refused_json(&run);
    }
    assert_untouched(cluster, &pooler, &db);
}

#[test]
fn apply_runs_through_a_session_pooler() {
    let (cluster, db, pooler, url) = pooled("pooled_session_apply", PoolMode::Session, 6);
    let run = pgshift(&[
        "apply",
        "--url",
        &url,
        "--sql",
        "ALTER TABLE items ADD COLUMN note text; CREATE INDEX items_qty_idx ON items (qty)",
    ]);
    assert_done(&run, &pooler);
    let added = cluster
        .psql(
            &db,
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'note'",
        )
        .expect("reads");
    assert_eq!(added.trim(), "1");
    let path = pooler.psql(cluster, &db, "SHOW search_path");
    assert_eq!(
        path.trim(),
        "\"$user\", public",
        "session mode resets what pgshift set"
    );
}

#[test]
fn a_copy_and_swap_runs_through_a_session_pooler() {
    // Every session of the run (runner, copiers, applier, verifiers, the swap, the
    // throttle's probe) and each check's second connection through one session pool.
    let (cluster, db) = common::cas::database("pooled_session_cas", 2_000);
    let pooler = Pooler::start(cluster, PoolMode::Session, 30);
    let url = pooler.connection_string(cluster, &db);
    let run = pgshift(&["apply", "--url", &url, "--sql", REWRITE]);
    assert_done(&run, &pooler);
    let qty = common::cas::value(
        cluster,
        &db,
        "SELECT format_type(atttypid, NULL) FROM pg_attribute \
         WHERE attrelid = 'items'::regclass AND attname = 'qty'",
    );
    assert_eq!(qty, "bigint");
    assert_eq!(common::cas::debris(cluster, &db), "");
    assert_eq!(
        common::cas::value(cluster, &db, "SELECT count(*) FROM items"),
        "2000"
    );
}
