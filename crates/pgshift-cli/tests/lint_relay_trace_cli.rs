//! `pgshift lint --trace --url` on the relay directory's procedural files (0034–0039),
//! against a live database at version 0033: what the server really did for each
//! statement (locks, rewrites, DDL, the dynamic statements of each `DO` block), in
//! text and JSON snapshots, and every hazard the directory's README marks
//! `(traced)` checked against the trace.
//!
//! Deterministic across runs: the server version, the `pg_dump` path, TOAST relation
//! OIDs and nested statement texts (which PostgreSQL 16+ records differently) are
//! normalized; the nested texts are checked, not snapshotted. One snapshot per
//! behaviour of the server: PostgreSQL 14 and 15 share one, 16 and later (which
//! also hold ACCESS SHARE on the partitioned indexes of `events` in 0035's and 0036's
//! blocks, as `pg_locks` shows) share the `@pg16` one.

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::normalize::{normalize, trace_heading, without_oids};
use common::relay::{apply_natively, files, schema_database, DIR};
use common::{pgshift, workspace_root};
use pgshift_embedded::shared_cluster;
use serde_json::Value;

/// The first and last procedural file of the corpus.
const FIRST: u32 = 34;
const LAST: u32 = 39;

/// A database holding the relay schema with 0001–0033 applied natively, shared by the
/// tests of this binary (the trace only reads its schema).
fn target() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
        let db = schema_database(cluster, "relay_trace");
        apply_natively(cluster, &db, 1..=FIRST - 1);
        cluster.connection_string(&db)
    })
}

/// Runs `assert` with the snapshot suffix of the traced server's `version`
/// (`server_version`, e.g. `15.18` or `18.1`).
fn per_major(version: &str, assert: impl FnOnce()) {
    let major: u32 = version
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("a server version: {version}"));
    let mut settings = insta::Settings::clone_current();
    if major >= 16 {
        settings.set_snapshot_suffix("pg16");
    }
    settings.bind(assert);
}

fn lint_trace(format: &str) -> common::Run {
    let mut args = vec!["lint", "--trace", "--url", target(), "--format", format];
    let paths = files(FIRST..=LAST);
    args.extend(paths.iter().map(String::as_str));
    pgshift(&args)
}

#[test]
fn relay_procedural_files_traced_text() {
    let run = lint_trace("text");
    assert_eq!(
        run.code, 2,
        "static errors, and the server did more than lint stated; stderr: {}",
        run.stderr
    );
    let (heading, version) = trace_heading(&run.stdout);
    assert!(heading.ends_with(", schema dumped from --url"), "{heading}");
    let text = run.stdout.replace(version, "<version>");
    per_major(version, || {
        insta::assert_snapshot!("relay_procedural_trace_text", without_oids(&text));
    });
}

#[test]
fn relay_procedural_files_traced_json() {
    let run = lint_trace("json");
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    let mut json: Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    assert_eq!(json["trace"]["error"], Value::Null, "{}", run.stdout);
    assert_eq!(json["trace"]["schema"]["kind"], "dump");
    assert_eq!(json["trace"]["nested_statements"]["kind"], "recorded");
    let statements = json["trace"]["statements"].as_array().expect("traced");
    assert!(
        statements
            .iter()
            .all(|s| s["source"] == "traced" && s["outcome"]["kind"] == "ran"),
        "every statement ran on the clone: {statements:#?}"
    );
    check_nested(statements);
    let version = json["trace"]["server_version"]
        .as_str()
        .expect("server_version")
        .to_owned();
    normalize(&mut json);
    per_major(&version, || {
        insta::assert_json_snapshot!("relay_procedural_trace_json", json);
    });
}

/// The dynamic statements the blocks and functions ran, as `pg_stat_statements`
/// recorded them on the clone.
fn check_nested(statements: &[Value]) {
    let nested_of = |file: u32, line: u64| -> Vec<String> {
        let path = common::relay::file(file);
        statements
            .iter()
            .find(|s| s["path"] == path.as_str() && s["line"] == line)
            .unwrap_or_else(|| panic!("{path}:{line} traced"))["trace"]["nested"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}:{line}: nested recorded"))
            .iter()
            .map(|n| n["text"].as_str().expect("text").to_owned())
            .collect()
    };
    // 0034: the EXECUTE built from pg_attrdef's expression, with the subject in it.
    let rebuild = nested_of(34, 18);
    assert!(
        rebuild.iter().any(|t| t
            .starts_with("ALTER TABLE events DROP COLUMN search_tsv, ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (")
            && t.contains("COALESCE(subject")),
        "{rebuild:#?}"
    );
    // 0037: the function's ALTER TABLE behind a plain SELECT.
    let added = nested_of(37, 12);
    assert!(
        added
            .iter()
            .any(|t| t.starts_with("ALTER TABLE channels ADD COLUMN IF NOT EXISTS updated_at")),
        "{added:#?}"
    );
    // 0038: one CREATE TRIGGER per table with updated_at.
    let loop_ddl = nested_of(38, 14);
    let creates = loop_ddl
        .iter()
        .filter(|t| t.starts_with("CREATE TRIGGER relay_touch_updated_at BEFORE UPDATE ON "))
        .count();
    assert_eq!(creates, 23, "{loop_ddl:#?}");
}

/// Every hazard the README marks `(traced)` (hidden from static lint) is what the
/// server did at that line.
#[test]
fn every_traced_hazard_of_the_readme_is_what_the_server_did() {
    let readme = std::fs::read_to_string(workspace_root().join(DIR).join("README.md"))
        .expect("README readable");
    let run = lint_trace("json");
    let json: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let mut by_line: BTreeMap<(String, u64), &Value> = BTreeMap::new();
    for statement in json["trace"]["statements"].as_array().expect("traced") {
        let path = statement["path"].as_str().expect("path");
        let file = path.rsplit('/').next().expect("file").to_owned();
        by_line.insert(
            (file, statement["line"].as_u64().expect("line")),
            &statement["trace"],
        );
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for row in readme.lines().filter(|l| l.starts_with("| `0")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let file = cells[1].trim_matches('`');
        for hazard in cells[3].split(';').map(str::trim) {
            let Some(hazard) = hazard.strip_suffix(" (traced)") else {
                continue;
            };
            let (line, kind) = hazard.split_once(' ').expect("`L<n> kind`");
            let line: u64 = line.trim_start_matches('L').parse().expect("line number");
            checked += 1;
            let Some(trace) = by_line.get(&(file.to_owned(), line)) else {
                wrong.push(format!("{file}:{line}: no traced statement there"));
                continue;
            };
            if let Err(why) = shows(trace, kind) {
                wrong.push(format!("{file}:{line} {kind}: {why}"));
            }
        }
    }
    assert_eq!(checked, 6, "the README marks the hidden hazards");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Whether `trace` shows the hazard `kind`.
fn shows(trace: &Value, kind: &str) -> Result<(), String> {
    let ddl: Vec<&str> = trace["ddl"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["command_tag"].as_str())
        .collect();
    let locked = |name: &str, mode: &str| {
        trace["locks"].as_array().into_iter().flatten().any(|l| {
            l["relation"]["name"] == name
                && l["modes"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|x| x == mode))
        })
    };
    let ok = match kind {
        "table-rewrite" => {
            let rewritten = trace["rewrites"].as_array().map_or(0, Vec::len);
            rewritten > 0 && locked("events", "access-exclusive")
        }
        "function-ddl" => ddl.contains(&"ALTER TABLE"),
        "trigger-create-lock" => {
            ddl.iter().filter(|t| **t == "CREATE TRIGGER").count() > 20
                && locked("event_watermarks", "share-row-exclusive")
        }
        "index-on-partitioned-parent" => ddl.contains(&"CREATE INDEX") && locked("events", "share"),
        other => return Err(format!("this test does not know the hazard {other}")),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("the trace does not show it: {trace}"))
    }
}
