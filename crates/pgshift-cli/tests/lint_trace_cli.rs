//! `pgshift lint --trace` end to end on the relay-style trace corpus
//! (`crates/pgshift/tests/data/trace/relay/`), replayed on a throwaway cluster: the
//! traced lines next to the static findings, in text and JSON. The server version and
//! the OID-named TOAST relations are normalized, and so are the weak index locks that
//! PostgreSQL minor releases disagree on (`without_weak_index_locks`); nested statement texts (which
//! PostgreSQL 16+ normalizes differently) are checked, not snapshotted.

mod common;

use common::normalize::{
    normalize, trace_heading, without_oids, without_weak_index_lock_count, without_weak_index_locks,
};
use common::pgshift;
use serde_json::Value;

const CORPUS: &str = "crates/pgshift/tests/data/trace/relay";

#[test]
fn lint_trace_text_output() {
    let run = pgshift(&["lint", "--trace", CORPUS]);
    assert_eq!(
        run.code, 2,
        "the server did more than lint stated; stderr: {}",
        run.stderr
    );
    let (_, version) = trace_heading(&run.stdout);
    let text = run.stdout.replace(version, "<version>");
    insta::assert_snapshot!(
        "trace_text",
        without_weak_index_lock_count(&without_oids(&text))
    );
}

#[test]
fn lint_trace_json_output() {
    let run = pgshift(&["lint", "--trace", "--format", "json", CORPUS]);
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    let mut json: Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    let statements = json["trace"]["statements"].as_array().expect("traced");
    assert!(statements.iter().all(|s| s["source"] == "traced"));
    let rebuild = &statements[9];
    assert_eq!(rebuild["path"], format!("{CORPUS}/0002_procedural.sql"));
    let nested = rebuild["trace"]["nested"]
        .as_array()
        .expect("nested recorded");
    assert!(
        nested.iter().any(|n| n["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("ALTER TABLE events ADD COLUMN tag text GENERATED"))),
        "{nested:?}"
    );
    normalize(&mut json);
    without_weak_index_locks(&mut json);
    insta::assert_json_snapshot!("trace_json", json);
}

#[test]
fn lint_trace_refuses_a_url_without_trace_and_reports_an_unreachable_target() {
    let run = pgshift(&["lint", "--url", "postgresql://localhost/x", CORPUS]);
    assert_ne!(run.code, 0, "a usage error: {}", run.stderr);
    assert!(run.stderr.contains("--trace"), "{}", run.stderr);

    let run = pgshift(&[
        "lint",
        "--trace",
        "--format",
        "json",
        "--url",
        "host=/nonexistent-pgshift-socket dbname=x connect_timeout=2",
        CORPUS,
    ]);
    assert_eq!(run.code, 1, "the trace could not be made: {}", run.stdout);
    let json: Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    let error = json["trace"]["error"].as_str().expect("the error");
    assert!(error.starts_with("cannot connect to the target"), "{error}");
}

/// With `--url`, each traced statement carries the live size of the pre-existing tables
/// it rewrote or locked ACCESS EXCLUSIVE on the clone, as the target measures them; a
/// table the files create has none.
#[test]
fn lint_trace_with_a_url_gives_the_live_size_of_what_the_blocking_form_holds() {
    let cluster = pgshift_embedded::shared_cluster().expect("a cluster");
    let db = cluster.fresh_database("trace_live").expect("database");
    cluster
        .psql(
            &db,
            "CREATE TABLE t (id int PRIMARY KEY, x int);
             INSERT INTO t SELECT g, g FROM generate_series(1, 5000) g;
             ANALYZE t;",
        )
        .expect("seeded");
    let heap: i64 = cluster
        .psql(&db, "SELECT pg_relation_size('t')")
        .expect("size")
        .trim()
        .parse()
        .expect("a number");
    let dir = std::env::temp_dir().join(format!("pgshift-trace-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let file = dir.join("0001_t.sql");
    std::fs::write(
        &file,
        "ALTER TABLE t ALTER COLUMN x TYPE bigint;\nCREATE TABLE n (a int);\nALTER TABLE n ADD COLUMN b int;\n",
    )
    .expect("written");
    let url = cluster.connection_string(&db);
    let run = pgshift(&[
        "lint",
        "--trace",
        "--url",
        &url,
        "--format",
        "json",
        file.to_str().expect("a path"),
    ]);
    let json: Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    assert_eq!(json["trace"]["live_sizes_error"], Value::Null, "{json:#}");
    let statements = json["trace"]["statements"].as_array().expect("traced");
    let live = &statements[0]["live"];
    assert_eq!(live[0]["relation"]["name"], "t", "{live:#}");
    assert_eq!(live[0]["heap_bytes"], heap, "{live:#}");
    assert_eq!(live[0]["row_estimate"], 5000, "{live:#}");
    for created in &statements[1..] {
        assert_eq!(created.get("live"), None, "a new table: {created:#}");
    }
    let text = pgshift(&[
        "lint",
        "--trace",
        "--url",
        &url,
        file.to_str().expect("a path"),
    ]);
    assert!(
        text.stdout.contains("live: \"public\".\"t\" ") && text.stdout.contains("heap, ~5000 rows"),
        "{}",
        text.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rewrite that runs inside procedural code gets `table-rewrite`, the code the written
/// form gets, once the trace shows it (it was only a difference in the trace section);
/// the written form keeps its one finding.
#[test]
fn a_rewrite_inside_procedural_code_gets_the_rewrites_code_when_traced() {
    let dir = std::env::temp_dir().join(format!("pgshift-trace-hidden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    std::fs::write(
        dir.join("0001_t.sql"),
        "CREATE TABLE t (id int PRIMARY KEY, x int, y int);\n",
    )
    .expect("written");
    std::fs::write(
        dir.join("0002_widen.sql"),
        "DO $$ BEGIN EXECUTE 'ALTER TABLE t ALTER COLUMN x TYPE bigint'; END $$;\nALTER TABLE t ALTER COLUMN y TYPE bigint;\n",
    )
    .expect("written");
    let run = pgshift(&[
        "lint",
        "--trace",
        "--format",
        "json",
        &dir.to_string_lossy(),
    ]);
    let json: Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    let rewrites: Vec<(u64, &str)> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["code"] == "table-rewrite")
        .map(|f| {
            (
                f["line"].as_u64().expect("line"),
                f["path"].as_str().expect("path"),
            )
        })
        .collect();
    assert_eq!(rewrites.len(), 2, "{rewrites:?}\n{json:#}");
    assert!(rewrites.iter().all(|(_, p)| p.ends_with("0002_widen.sql")));
    let mut lines: Vec<u64> = rewrites.iter().map(|(l, _)| *l).collect();
    lines.sort_unstable();
    assert_eq!(lines, vec![1, 2]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    std::fs::remove_dir_all(dir).expect("cleanup");
}
