//! `pgshift lint` end to end: the relay migrations directory in both output formats,
//! the hazards its README lists found at the right lines, and bad inputs.

mod common;

use std::collections::BTreeSet;

use common::{pgshift, pgshift_with_stdin, workspace_root};

const RELAY: &str = "crates/pgshift/tests/data/migrations/relay";
const SCHEMA: &str = "workloads/relay/schema.sql";

#[test]
fn relay_migrations_text_output() {
    let run = pgshift(&["lint", "--schema", SCHEMA, RELAY]);
    assert_eq!(
        run.code, 2,
        "error findings exit with 2; stderr: {}",
        run.stderr
    );
    insta::assert_snapshot!("relay_text", run.stdout);
}

#[test]
fn relay_migrations_json_output() {
    let run = pgshift(&["lint", "--schema", SCHEMA, "--format", "json", RELAY]);
    assert_eq!(run.code, 2);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["command"], "lint");
    assert_eq!(json["summary"]["files"], 39);
    insta::assert_json_snapshot!("relay_json", json);
}

/// The README of the relay migrations lists, per file, the line and kind of each
/// hazard (written independently of pgshift). Every one must be reported, at that
/// line, with the matching code — except the hazards marked `(traced)`, hidden in
/// procedural code, which static lint cannot see (`lint_relay_trace_cli.rs` checks
/// them against the server).
#[test]
fn every_documented_hazard_is_found_at_its_line() {
    let readme = std::fs::read_to_string(workspace_root().join(RELAY).join("README.md"))
        .expect("README readable");
    let run = pgshift(&["lint", "--schema", SCHEMA, "--format", "json", RELAY]);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    let found: BTreeSet<(String, u64, String)> = json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            let path = f["path"].as_str().expect("path");
            let file = path.rsplit('/').next().expect("file name").to_owned();
            (
                file,
                f["line"].as_u64().expect("line"),
                f["code"].as_str().expect("code").to_owned(),
            )
        })
        .collect();
    // Deviations from the README, each with its reason.
    let known: &[(&str, u64, &str, &str)] = &[(
        "0020_events_split_future_2027_03.sql",
        29,
        "attach-partition-validating-scan",
        "the attached table is created earlier in the same file: the scan holds ACCESS EXCLUSIVE only on a table nobody else can use (the held parent lock is reported as locks-accumulated)",
    )];
    let mut missing = Vec::new();
    let mut checked = 0;
    for row in readme.lines().filter(|l| l.starts_with("| `0")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let file = cells[1].trim_matches('`');
        for hazard in cells[3]
            .split(';')
            .map(str::trim)
            .filter(|h| *h != "none" && !h.ends_with(" (traced)"))
        {
            let (line, kind) = hazard.split_once(' ').expect("`L<n> kind`");
            let line: u64 = line.trim_start_matches('L').parse().expect("line number");
            if known
                .iter()
                .any(|k| k.0 == file && k.1 == line && k.2 == kind)
            {
                continue;
            }
            let code = code_for(kind);
            checked += 1;
            if !found.contains(&(file.to_owned(), line, code.to_owned())) {
                missing.push(format!("{file}:{line} {kind} (expected code {code})"));
            }
        }
    }
    assert!(
        checked > 30,
        "the README lists the hazards ({checked} checked)"
    );
    assert!(
        missing.is_empty(),
        "hazards not reported:\n{}",
        missing.join("\n")
    );
}

/// The README's hazard names and pgshift's codes.
fn code_for(hazard: &str) -> &'static str {
    match hazard {
        "index-on-partitioned-parent" => "index-on-partitioned-parent",
        "index-not-concurrent" => "index-not-concurrent",
        "non-transactional" => "not-in-transaction",
        "check-validating-scan" | "fk-validating-scan" => "constraint-without-not-valid",
        "set-not-null-scan" => "set-not-null",
        "table-rewrite" | "vacuum-full" => "table-rewrite",
        "volatile-default-rewrite" => "volatile-default",
        "trigger-create-lock" | "trigger-drop-lock" => "trigger-change",
        "trigger-origin-bypassable" => "origin-invariant-trigger",
        "trigger-function-replaced" => "trigger-function-replaced",
        "ddl-dml-transaction" => "dml-with-ddl",
        "column-rename" => "breaking-rename",
        "column-drop" | "truncate" => "destructive",
        "detach-partition-not-concurrent" | "explicit-lock" => "blocking-lock",
        "attach-partition-validating-scan" | "reindex-not-concurrent" => "scan-under-lock",
        "fk-target-lock" => "blocking-lock",
        "partition-range-removed" => "partition-range-removed",
        "dynamic-sql" => "opaque-code",
        other => panic!("the README uses a hazard this test does not map: {other}"),
    }
}

#[test]
fn a_clean_file_exits_zero() {
    let run = pgshift_with_stdin(
        &["lint", "-"],
        Some(b"SET lock_timeout = '2s';\nCREATE TABLE t (id bigint PRIMARY KEY);\nCREATE INDEX ON t (id);\n"),
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.contains("0 errors, 0 warnings"),
        "{}",
        run.stdout
    );
}

#[test]
fn allow_comment_suppresses_a_code() {
    let sql = b"SET lock_timeout = '2s';\n-- pgshift:allow index-not-concurrent\nCREATE INDEX i ON t (a);\n";
    let run = pgshift_with_stdin(&["lint", "-"], Some(sql));
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(!run.stdout.contains("index-not-concurrent"));
}

#[test]
fn empty_and_comment_only_files_warn_and_exit_zero() {
    for file in ["empty.sql", "only_comments.sql"] {
        let path = format!("crates/pgshift/tests/data/bad/{file}");
        let run = pgshift(&["lint", &path]);
        assert_eq!(run.code, 0, "{file}: {}", run.stdout);
        assert!(
            run.stdout.contains("warning[no-statements]"),
            "{file}: {}",
            run.stdout
        );
    }
}

#[test]
fn binary_and_non_utf8_files_are_input_errors() {
    let run = pgshift(&["lint", "crates/pgshift/tests/data/bad/binary.sql"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("binary.sql:")
            && (run.stdout.contains("not UTF-8") || run.stdout.contains("NUL")),
        "{}",
        run.stdout
    );
    let run = pgshift(&["lint", "crates/pgshift/tests/data/bad/latin1.sql"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("latin1.sql:") && run.stdout.contains("not UTF-8"),
        "{}",
        run.stdout
    );
}

#[test]
fn syntax_errors_name_their_position() {
    let run = pgshift(&[
        "lint",
        "crates/pgshift/tests/data/bad/syntax_error_line3.sql",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("syntax_error_line3.sql:3:8: error: syntax error"),
        "{}",
        run.stdout
    );
    let run = pgshift(&[
        "lint",
        "crates/pgshift/tests/data/bad/unterminated_dollar.sql",
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("unterminated_dollar.sql:"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("error:"), "{}", run.stdout);
}

#[test]
fn hostile_identifiers_parse_and_lint() {
    let run = pgshift(&[
        "lint",
        "crates/pgshift/tests/data/bad/hostile_identifiers.sql",
    ]);
    assert!(
        run.code == 0 || run.code == 2,
        "{} {}",
        run.stdout,
        run.stderr
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn a_huge_file_is_refused_clearly() {
    let dir = std::env::temp_dir().join(format!("pgshift-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("huge.sql");
    let line = "INSERT INTO t VALUES (1, 'some text to make the line longer');\n";
    let count = 50 * 1024 * 1024 / line.len() + 1;
    std::fs::write(&path, line.repeat(count)).expect("50 MB written");
    let run = pgshift(&["lint", path.to_str().expect("utf-8 path")]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("larger than"), "{}", run.stdout);
}

#[test]
fn unknown_options_and_missing_paths_exit_one() {
    let run = pgshift(&["lint", "--no-such-flag", "x.sql"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--no-such-flag"), "{}", run.stderr);
    let run = pgshift(&["lint", "does/not/exist.sql"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .contains("does/not/exist.sql: error: no such file"),
        "{}",
        run.stdout
    );
    let run = pgshift(&["lint"]);
    assert_eq!(run.code, 1);
}

#[test]
fn random_bytes_never_crash_the_linter() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20 {
        let bytes: Vec<u8> = (0..512)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed & 0xff) as u8
            })
            .collect();
        let run = pgshift_with_stdin(&["lint", "-"], Some(&bytes));
        assert!(
            run.code == 0 || run.code == 1 || run.code == 2,
            "exit {}: {}",
            run.code,
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}

/// A column renamed earlier in the same file keeps the type the schema declares: a
/// widening of `varchar(10)` under its new name is a catalog change, not a rewrite (the
/// renamed column was unknown to lint, so the worst case, a rewrite, was reported).
#[test]
fn a_rename_earlier_in_the_file_keeps_the_columns_known_type() {
    let dir = std::env::temp_dir().join(format!("pgshift-lint-rename-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("1_t.sql"),
        "CREATE TABLE t (id bigint PRIMARY KEY, a varchar(10));\n",
    )
    .expect("written");
    std::fs::write(
        dir.join("2_widen.sql"),
        "ALTER TABLE t RENAME COLUMN a TO b;\nALTER TABLE t ALTER COLUMN b TYPE varchar(20);\n",
    )
    .expect("written");
    let run = pgshift(&["lint", "--format", "json", &dir.to_string_lossy()]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    let at_line_2: Vec<&str> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| {
            f["line"] == 2
                && f["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("2_widen.sql"))
        })
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert!(
        !at_line_2.contains(&"table-rewrite") && at_line_2.contains(&"blocking-lock"),
        "{at_line_2:?}\n{}",
        run.stdout
    );
    std::fs::remove_dir_all(dir).expect("cleanup");
}
