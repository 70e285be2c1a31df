//! `pgshift plan` and `pgshift demo` end to end against real PostgreSQL.

mod common;

use std::sync::OnceLock;

use common::{pgshift, workspace_root};
use pgshift_embedded::{shared_cluster, Cluster};

/// A database holding the relay schema, shared by the tests of this binary (plan is
/// read-only, so they cannot disturb each other).
fn relay() -> (&'static Cluster, &'static str) {
    static DB: OnceLock<String> = OnceLock::new();
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = DB.get_or_init(|| {
        let db = cluster.fresh_database("plan_cli").expect("database");
        cluster
            .psql_file(&db, workspace_root().join("workloads/relay/schema.sql"))
            .expect("relay schema loads");
        // Rows: on empty tables every blocking form runs as written (TX-2), and these
        // tests are about the routes a table in use gets.
        cluster
            .psql_file(&db, workspace_root().join("workloads/relay/seed.sql"))
            .expect("relay seed loads");
        cluster
            .psql(&db, "ANALYZE; CREATE ROLE planner LOGIN PASSWORD 's3cret-Pa55'; GRANT pg_read_all_data TO planner;")
            .expect("setup");
        db
    });
    (cluster, db.as_str())
}

#[test]
fn plan_shows_routes_with_live_facts() {
    let (cluster, db) = relay();
    let url = cluster.connection_string(db);
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--sql",
        "CREATE INDEX events_kind_idx2 ON events (kind); ALTER TABLE events ALTER COLUMN d_tag TYPE varchar(100)",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("Plan against PostgreSQL"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("native sequence of 17 steps"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("ON ONLY public.events"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("copy-and-swap"), "{}", run.stdout);
    assert!(
        run.stdout.contains("partitioned (8 partitions)"),
        "{}",
        run.stdout
    );
    // The headline is what pgshift runs; the statement as written is said apart.
    assert!(
        run.stdout
            .contains("work:  a copy into a shadow table while reads and writes go on")
            && !run.stdout.contains("work:  full rewrite under the lock"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("locks: each step's own, below")
            && run.stdout.contains("as written (not what runs): "),
        "{}",
        run.stdout
    );
}

#[test]
fn plan_json_is_versioned_and_complete() {
    let (cluster, db) = relay();
    let url = cluster.url(db);
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--format",
        "json",
        "crates/pgshift/tests/data/migrations/relay/0006_channels_name_not_null.sql",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["command"], "plan");
    assert!(json["server"]["version_num"].as_i64().expect("version") >= 140000);
    let statement = &json["files"][0]["statements"][0];
    assert_eq!(statement["route"], "native-sequence");
    assert_eq!(statement["work"], "scan-under-lock");
    assert_eq!(statement["locks"][0]["mode"], "access-exclusive");
    assert_eq!(statement["steps"].as_array().expect("steps").len(), 4);
    let channels = json["relations"]
        .as_array()
        .expect("relations")
        .iter()
        .find(|r| r["name"]["name"] == "channels")
        .expect("facts of channels");
    assert_eq!(channels["kind"], "table");
    assert_eq!(json["summary"]["native_sequence"], 1);
}

#[test]
fn a_refused_statement_exits_two() {
    let (cluster, db) = relay();
    let url = cluster.connection_string(db);
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--sql",
        "ALTER TABLE no_such_table ADD COLUMN x int",
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("REFUSED (table-missing, invalid)"),
        "{}",
        run.stdout
    );
}

#[test]
fn connection_and_input_errors_exit_one() {
    let run = pgshift(&[
        "plan",
        "--url",
        "host=/nonexistent/socket/dir port=5432 user=x dbname=y connect_timeout=2",
        "--sql",
        "SELECT 1",
    ]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("cannot connect"), "{}", run.stderr);
    let run = pgshift(&[
        "plan",
        "--url",
        "postgresql://x@localhost/db",
        "--sql",
        "SELEC 1",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("<sql>:1:1: error: syntax error"),
        "{}",
        run.stderr
    );
    let run = pgshift(&["plan", "--url", "postgresql://x@localhost/db"]);
    assert_eq!(run.code, 1);
}

// INV: SE-2 — the password is in the URL given; it appears in no output, on success or failure.
#[test]
fn inv_se_2_passwords_never_appear_in_output() {
    let (cluster, db) = relay();
    let tcp = cluster.tcp_connection_string(db);
    let base = tcp.unwrap_or_else(|| cluster.connection_string(db));
    for password in ["s3cret-Pa55", "wrong-Pa55word"] {
        let url = format!("{base} user=planner password={password}");
        for format in ["text", "json"] {
            let run = pgshift(&[
                "plan",
                "--url",
                &url,
                "--format",
                format,
                "--sql",
                "ALTER TABLE events ADD COLUMN x int",
            ]);
            assert!(
                run.code == 0 || run.code == 1,
                "{}\n{}",
                run.stdout,
                run.stderr
            );
            assert!(!run.stdout.contains(password), "stdout leaks the password");
            assert!(
                !run.stderr.contains(password),
                "stderr leaks the password: {}",
                run.stderr
            );
        }
    }
}

/// The demo's figures agree with one another: the seed's progress, each index build,
/// one cutover (the text, the report and the chart's bands), one backlog figure.
fn demo_tells_one_story(stdout: &str, stderr: &str, report: &serde_json::Value) {
    for n in 1..=8 {
        assert!(
            stdout.contains(&format!(
                "partition {n} of 8 seeded · {} of 16000 events",
                n * 2000
            )),
            "{stdout}"
        );
    }
    // The primary key and the 5 indexes the rewrite keeps (dropping search_tsv drops
    // its index), each announced in turn (", 2 at once" after the count when a build
    // starts beside another).
    for n in 1..=6 {
        assert!(stderr.contains(&format!(" ({n} of 6")), "{stderr}");
    }
    assert!(
        stderr.contains("building index primary key (1 of 6)"),
        "{stderr}"
    );
    let run = &report["run"];
    let cutover_ms = run["phases_ms"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p[0] == "cutover"))
        .and_then(|p| p[1].as_u64())
        .expect("a cutover phase");
    let held_us = run["swap"]["lock_held_us"].as_u64().expect("a lock hold");
    assert!(held_us <= cutover_ms * 1_000 + 1_000, "{run:#}");
    let phase_text = if cutover_ms < 1_000 {
        format!("{cutover_ms} ms")
    } else {
        format!("{:.1} s", cutover_ms as f64 / 1_000.0)
    };
    assert!(
        stdout.contains(&format!("cutover phase {phase_text} (taking the lock, catching up); of it, ACCESS EXCLUSIVE held")),
        "{stdout}"
    );
    let marks = report["phases"].as_array().expect("phases");
    let mark = |prefix: &str| {
        marks
            .iter()
            .find(|m| m["label"].as_str().is_some_and(|l| l.starts_with(prefix)))
            .map(|m| {
                (
                    m["start_s"].as_f64().unwrap_or(-1.0),
                    m["end_s"].as_f64().unwrap_or(-1.0),
                )
            })
            .unwrap_or_else(|| panic!("no {prefix} band in {marks:?}"))
    };
    let (cut_start, cut_end) = mark("cutover");
    assert!(
        ((cut_end - cut_start) - cutover_ms as f64 / 1_000.0).abs() < 1e-6,
        "the cutover band is the report's cutover phase: {marks:?}"
    );
    let (lock_start, lock_end) = mark("ACCESS EXCLUSIVE held");
    assert!((lock_end - cut_end).abs() < 1e-6, "{marks:?}");
    assert!(
        ((lock_end - lock_start) - held_us as f64 / 1_000_000.0).abs() < 1e-6,
        "{marks:?}"
    );
    let backlog = run["backlog_max"].as_i64().expect("a backlog");
    assert!(
        stdout.contains(&format!(
            "change-log backlog at most {backlog} over the run"
        )),
        "{stdout}"
    );
    for so_far in stderr.split("change-log backlog at most ").skip(1) {
        let n: i64 = so_far
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a figure");
        assert!(
            n <= backlog,
            "progress said {n}, more than the run's {backlog}"
        );
    }
}

#[test]
fn demo_runs_and_cleans_up() {
    let out = std::env::temp_dir().join(format!("pgshift-demo-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let out_arg = out.to_str().expect("a UTF-8 temp dir");
    let run = pgshift(&["demo", "--rows-per-partition", "2000", "--out", out_arg]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    for expected in [
        "== pgshift plan",
        "native sequence of 17 steps",
        "copy-and-swap",
        "partitioned (8 partitions)",
        "REFUSED (table-missing, invalid)",
        "error[index-on-partitioned-parent]",
        "warning[origin-invariant-trigger]",
        "== pgshift: the rewrite, online",
        "ACCESS EXCLUSIVE held",
        "oracle: 0 lost, 0 wrong content, 0 resurrected, 0 phantom, 0 duplicated",
        "every acknowledged write is in the new table",
        "removed",
    ] {
        assert!(
            run.stdout.contains(expected),
            "missing {expected:?} in:\n{}",
            run.stdout
        );
    }
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("the demo wrote report.json"),
    )
    .expect("report.json is JSON");
    assert_eq!(report["command"], "demo");
    assert_eq!(report["run"]["phase"], "done", "{report:#}");
    assert_eq!(report["oracle"]["lost"]["count"], 0, "{report:#}");
    assert!(
        report["writes_acknowledged"].as_u64().unwrap_or(0) > 0,
        "the load acknowledged no write: {report:#}"
    );
    demo_tells_one_story(&run.stdout, &run.stderr, &report);
    let chart = std::fs::read_to_string(out.join("writers.svg")).expect("the demo drew a chart");
    assert!(
        chart.starts_with("<svg"),
        "{}",
        &chart[..chart.len().min(200)]
    );
    std::fs::remove_dir_all(&out).expect("the demo's output is ours to remove");
}

/// A type change PostgreSQL refuses (the column is used by a generated column) is
/// refused by `plan` with the server's reason (it planned it, exit 0); once an earlier
/// statement of the file, or a subcommand of the same statement (the demo's), drops the
/// generated column, it is planned.
#[test]
fn a_type_change_of_a_column_a_generated_column_uses_is_refused() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("plan_generated").expect("database");
    cluster
        .psql(
            &db,
            "CREATE TABLE t (id bigint PRIMARY KEY, a varchar(10), g text GENERATED ALWAYS AS (a || '!') STORED);",
        )
        .expect("schema");
    let url = cluster.connection_string(&db);
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--format",
        "json",
        "--sql",
        "ALTER TABLE t ALTER COLUMN a TYPE varchar(20)",
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let text = run.stdout.as_str();
    assert!(
        text.contains("column-used-by-generated") && text.contains("generated column \\\"g\\\""),
        "{text}"
    );
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--sql",
        "ALTER TABLE t DROP COLUMN g; ALTER TABLE t ALTER COLUMN a TYPE varchar(20)",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let run = pgshift(&[
        "plan",
        "--url",
        &url,
        "--sql",
        "ALTER TABLE t ALTER COLUMN a TYPE varchar(20), DROP COLUMN g",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}
