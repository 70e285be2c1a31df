//! Procedural code through `plan` and `apply` from the command line: the trace in the
//! output (text and JSON), a data-dependent block guarded on a table with rows (PC-5:
//! a no-op there exits 0, a would-be rewrite is refused at run time), the escape
//! hatch's exit 3, and a value of it that names nothing.

mod common;

use common::pgshift;
use pgshift_embedded::{shared_cluster, Cluster};

fn database(schema: &str) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("procedural_cli").expect("database");
    cluster.psql(&db, schema).expect("schema");
    (cluster, db)
}

const SCHEMA: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int);
INSERT INTO items SELECT g, g FROM generate_series(1, 1000) g;";

const DATA_DEPENDENT: &str = "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM items LIMIT 1) THEN ALTER TABLE items ALTER COLUMN qty TYPE bigint; END IF; END $$";

/// Checks the exit code and that stdout holds every one of `needles`.
fn expect(run: &common::Run, code: i32, needles: &[&str]) {
    assert_eq!(run.code, code, "{}\n{}", run.stdout, run.stderr);
    for needle in needles {
        assert!(run.stdout.contains(needle), "{needle:?} in\n{}", run.stdout);
    }
}

/// `pgshift apply --url URL --format json ARGS…`.
fn apply_json(url: &str, args: &[&str]) -> common::Run {
    let mut all = vec!["apply", "--url", url, "--format", "json"];
    all.extend_from_slice(args);
    pgshift(&all)
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("one JSON document: {e}\n{stdout}"))
}

/// Whose path on a table with rows is the rewrite: the empty clone does nothing.
const REWRITES_WHEN_FULL: &str = "DO $$ BEGIN IF EXISTS (SELECT 1 FROM items) THEN ALTER TABLE items ALTER COLUMN qty TYPE bigint; END IF; END $$";

#[test]
fn inv_pc_5_a_data_dependent_block_is_guarded_a_no_op_exits_0_and_a_would_be_rewrite_is_refused() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let filenode = || {
        cluster
            .psql(&db, "SELECT pg_relation_filenode('items')")
            .expect("readable")
    };
    let before = filenode();
    let run = pgshift(&["plan", "--url", &url, "--sql", DATA_DEPENDENT]);
    expect(
        &run,
        0,
        &[
            "READ ONLY",
            "ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        ],
    );
    let run = pgshift(&["apply", "--url", &url, "--sql", DATA_DEPENDENT]);
    expect(
        &run,
        0,
        &[
            "traced: line 1: guarded",
            "guarded procedural code (PC-5): ran read-only on live, a no-op here",
        ],
    );
    let run = apply_json(&url, &["--sql", DATA_DEPENDENT]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run.stdout);
    let block = &report["procedural"][0];
    assert_eq!(block["decision"], "guarded", "{report:#}");
    assert_eq!(block["rewrites"][0]["table"]["name"], "items", "{block:#}");
    assert!(
        run.stdout.contains("ran read-only on live: a no-op here"),
        "{report:#}"
    );
    assert_eq!(filenode(), before, "items was not rewritten");

    let run = pgshift(&["apply", "--url", &url, "--sql", REWRITES_WHEN_FULL]);
    expect(
        &run,
        2,
        &[
            "procedural-blocking",
            "it would have executed: ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        ],
    );
    let run = apply_json(&url, &["--sql", REWRITES_WHEN_FULL]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let report = json(&run.stdout);
    assert_eq!(report["procedural"][0]["decision"], "guarded", "{report:#}");
    assert_eq!(report["exit_code"], 2);
    assert!(run.stdout.contains("procedural-blocking"), "{report:#}");
    assert_eq!(filenode(), before, "nothing of the block was done");
}

#[test]
fn the_escape_hatch_exits_3_and_says_so() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let run = apply_json(
        &url,
        &["--allow-procedural", "<sql>:1", "--sql", DATA_DEPENDENT],
    );
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    let report = json(&run.stdout);
    assert_eq!(
        report["procedural"][0]["decision"], "accepted",
        "{report:#}"
    );
    assert_eq!(report["exit_code"], 3);
    // The block took its live path (the table has rows): it can run again, in text.
    let run = pgshift(&[
        "apply",
        "--url",
        &url,
        "--allow-procedural",
        "<sql>",
        "--sql",
        DATA_DEPENDENT,
    ]);
    expect(
        &run,
        3,
        &[
            "traced: line 1: accepted",
            "procedural code run as written, accepted with --allow-procedural",
        ],
    );
}

#[test]
fn an_escape_hatch_naming_nothing_is_a_command_line_error() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let run = apply_json(
        &url,
        &["--allow-procedural", "<sql>:7", "--sql", DATA_DEPENDENT],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let report = json(&run.stdout);
    assert_eq!(report["code"], "allow-procedural-unused", "{report:#}");
    assert_eq!(
        shared_cluster()
            .expect("cluster")
            .psql(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'")
            .expect("reads")
            .trim(),
        "integer"
    );
}

#[test]
fn plan_shows_what_the_trace_saw() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let sql = "DO $$ BEGIN EXECUTE format('COMMENT ON TABLE %I IS %L', 'items', 'stock'); END $$";
    let run = pgshift(&["plan", "--url", &url, "--sql", sql]);
    expect(&run, 0, &["traced: locks"]);
    let run = pgshift(&["plan", "--url", &url, "--format", "json", "--sql", sql]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run.stdout);
    let block = &report["files"][0]["procedural"][0];
    assert_eq!(block["decision"], "native", "{report:#}");
    assert_eq!(
        block["executed"][0], "COMMENT ON TABLE items IS 'stock'",
        "{block:#}"
    );
}

/// A function that runs `ALTER TABLE … ADD COLUMN` (catalog-only, ACCESS EXCLUSIVE):
/// the static classifier sees a read, the trace sees the lock.
const ADD_NOTE: &str = "CREATE FUNCTION add_note() RETURNS void LANGUAGE plpgsql AS $$
BEGIN EXECUTE 'ALTER TABLE items ADD COLUMN note text'; END $$;";

/// Procedural code run as written waits for the lock its trace took (ACCESS EXCLUSIVE
/// on `items`, held up by a reader) at most `--lock-timeout-ms`, as any statement whose
/// lock blocks writes, not the weak budget of a statement whose locks are unknown.
#[test]
fn inv_pc_1_procedural_code_run_as_written_waits_at_most_the_lock_budget() {
    let (cluster, db) = database(&format!("{SCHEMA}\n{ADD_NOTE}"));
    let url = cluster.connection_string(&db);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let (holder, connection) = runtime
        .block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls))
        .expect("connects");
    runtime.spawn(connection);
    runtime
        .block_on(holder.batch_execute("BEGIN; LOCK TABLE items IN ACCESS SHARE MODE"))
        .expect("the reader holds its lock");
    // The reader lets go after a while: with the weak budget (a minute here) the
    // first attempt would wait for it and commit.
    let release = runtime.spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(8)).await;
        holder.batch_execute("ROLLBACK").await.expect("releases");
    });
    let run = apply_json(
        &url,
        &[
            "--lock-timeout-ms",
            "200",
            "--weak-lock-timeout-ms",
            "60000",
            "--allow-procedural",
            "<sql>",
            "--sql",
            "SELECT add_note()",
        ],
    );
    runtime.block_on(release).expect("released");
    let report = json(&run.stdout);
    assert_eq!(
        report["procedural"][0]["decision"], "accepted",
        "{report:#}"
    );
    let unit = &report["verdict"]["units"][0];
    assert_eq!(
        unit["unit"]["steps"][0]["lock"]["mode"], "access-exclusive",
        "{report:#}"
    );
    assert_eq!(
        unit["report"]["attempts"][0]["outcome"], "lock-timeout",
        "the first attempt gave up at the lock budget: {report:#}"
    );
}

/// A block after one that fails on the clone is refused naming the statement that
/// failed, its line and the server's error (it said only "an earlier statement
/// failed", once per later block: 40 times on a directory sqlx had migrated).
#[test]
fn a_block_not_traced_names_the_statement_that_failed_before_it() {
    let (cluster, db) = database(SCHEMA);
    let url = cluster.connection_string(&db);
    let dir = std::env::temp_dir().join(format!("pgshift-proc-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let first = dir.join("0001_first.sql");
    std::fs::write(
        &first,
        "-- a comment\nDO $$ BEGIN PERFORM 1 / (SELECT count(*) FROM items)::int; END $$;\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("0002_second.sql"),
        "DO $$ BEGIN ALTER TABLE items ADD COLUMN note text; END $$;\n",
    )
    .expect("write");
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--format",
        "json",
        &dir.to_string_lossy(),
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let report = json(&run.stdout);
    let second = &report["files"][1];
    let message = second.to_string();
    assert!(
        message.contains("procedural-failed-on-clone")
            && message.contains(&format!("{}:2: division by zero (22012)", first.display())),
        "{second:#}"
    );
    std::fs::remove_dir_all(dir).expect("cleanup");
}
