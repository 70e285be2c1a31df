//! `pgshift lint --trace` end to end on the relay-style trace corpus
//! (`crates/pgshift/tests/data/trace/relay/`), replayed on a throwaway cluster: the
//! traced lines next to the static findings, in text and JSON. The server version and
//! the OID-named TOAST relations are normalized; nested statement texts (which
//! PostgreSQL 16+ normalizes differently) are checked, not snapshotted.

mod common;

use common::pgshift;
use serde_json::Value;

const CORPUS: &str = "crates/pgshift/tests/data/trace/relay";

/// `pg_toast_16438_index` → `pg_toast_<oid>_index`.
fn without_oids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("pg_toast_") {
        let (head, tail) = rest.split_at(at + "pg_toast_".len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("<oid>");
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

fn normalize(value: &mut Value) {
    match value {
        Value::String(text) => *text = without_oids(text),
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match key.as_str() {
                    "server_version" => *item = Value::String("<version>".to_owned()),
                    "nested" if item.is_array() => *item = Value::String("<recorded>".to_owned()),
                    _ => normalize(item),
                }
            }
        }
        _ => {}
    }
}

#[test]
fn lint_trace_text_output() {
    let run = pgshift(&["lint", "--trace", CORPUS]);
    assert_eq!(
        run.code, 2,
        "the server did more than lint stated; stderr: {}",
        run.stderr
    );
    let heading = run
        .stdout
        .lines()
        .find(|line| line.starts_with("trace: PostgreSQL "))
        .expect("the trace heading");
    let version = heading
        .trim_start_matches("trace: PostgreSQL ")
        .split(',')
        .next()
        .expect("version");
    let text = run.stdout.replace(version, "<version>");
    insta::assert_snapshot!("trace_text", without_oids(&text));
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
