//! Reporters and the habits of the ecosystem, offline: `lint --format github|sarif`,
//! `explain`, message wording, `-q`/`-v`, colour, completions and the man page.

mod common;

use std::collections::BTreeSet;

use common::{pgshift, pgshift_with_stdin, workspace_root, Run};
use serde_json::Value;

const RELAY: &str = "crates/pgshift/tests/data/migrations/relay";
const SCHEMA: &str = "workloads/relay/schema.sql";

/// A small migration with one finding of each kind the wording rules cover.
const RISKY: &[u8] = b"SET lock_timeout = '2s';
ALTER TABLE t ADD COLUMN c int NOT NULL;
ALTER TABLE t ADD COLUMN d timestamptz DEFAULT clock_timestamp();
ALTER TABLE t ALTER COLUMN a TYPE bigint;
CREATE INDEX i ON t (a);
";

fn lint_stdin(args: &[&str], sql: &[u8]) -> Run {
    let mut all = vec!["lint"];
    all.extend_from_slice(args);
    all.push("-");
    pgshift_with_stdin(&all, Some(sql))
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|err| panic!("stdout is not JSON ({err}):\n{}", run.stdout))
}

#[test]
fn risky_migration_text_says_what_fails_and_what_to_do() {
    let run = lint_stdin(&["--transaction-mode", "statement"], RISKY);
    assert_eq!(run.code, 2, "{}", run.stderr);
    insta::assert_snapshot!("risky_text", run.stdout);
}

#[test]
fn not_in_transaction_names_the_statement_in_sql_words() {
    let run = lint_stdin(&[], b"CREATE INDEX CONCURRENTLY i ON t (a);\n");
    assert_eq!(run.code, 2);
    let first = run.stdout.lines().next().unwrap_or("");
    assert_eq!(
        first,
        "<stdin>:1:1: error[not-in-transaction]: CREATE INDEX CONCURRENTLY cannot run inside a transaction block, and this one runs inside one (the file's or an explicit BEGIN)"
    );
    assert!(!run.stdout.contains("create-index"), "{}", run.stdout);
}

#[test]
fn index_advice_mentions_the_no_transaction_marker_it_needs() {
    let run = lint_stdin(&[], b"SET lock_timeout = '2s';\nCREATE INDEX i ON t (a);\n");
    assert_eq!(run.code, 2);
    assert!(
        run.stdout.contains("  help: run these steps instead, each committed on its own (`pgshift apply` does this for you); CONCURRENTLY cannot run inside a transaction block, so with another runner put those steps in a file whose first line is `-- no-transaction` (or the runner's equivalent)\n        CREATE INDEX CONCURRENTLY i ON t USING btree (a);\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn the_advised_index_file_lints_clean() {
    // The help's own advice, followed: a `-- no-transaction` file with the build.
    let run = lint_stdin(
        &[],
        b"-- no-transaction\nSET lock_timeout = '2s';\nCREATE INDEX CONCURRENTLY i ON t USING btree (a);\n",
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn github_annotations_sit_on_each_findings_lines() {
    let run = pgshift(&["lint", "--schema", SCHEMA, "--format", "github", RELAY]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let findings = json(&pgshift(&[
        "lint", "--schema", SCHEMA, "--format", "json", RELAY,
    ]));
    let findings = findings["findings"].as_array().expect("findings");
    let annotations: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(annotations.len(), findings.len());
    for (line, finding) in annotations.iter().zip(findings) {
        let level = match finding["severity"].as_str() {
            Some("error") => "error",
            Some("warning") => "warning",
            _ => "notice",
        };
        let statement = finding["statement"].as_str().expect("statement");
        let start = finding["line"].as_u64().expect("line");
        let end = start + statement.trim_end().matches('\n').count() as u64;
        let expected = format!(
            "::{level} file={},line={start},col={},endLine={end},",
            finding["path"].as_str().expect("path"),
            finding["column"]
        );
        assert!(line.starts_with(&expected), "{line}\nexpected {expected}");
        let title = format!(
            "title=pgshift {}::",
            finding["code"].as_str().expect("code")
        );
        assert!(line.contains(&title), "{line}");
        assert!(!line[2..].contains('\n'));
    }
    let last = run.stdout.lines().last().unwrap_or("");
    assert!(
        last.starts_with("pgshift lint: ") && last.ends_with(" in 39 files"),
        "{last}"
    );
}

#[test]
fn github_escapes_properties_and_messages() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("github-escapes");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("a,b:c 100%.sql");
    std::fs::write(&path, "CREATE INDEX i ON t (a);\n").expect("file");
    let run = pgshift(&["lint", "--format", "github", path.to_str().expect("utf-8")]);
    assert_eq!(run.code, 2);
    let first = run.stdout.lines().next().expect("an annotation");
    assert!(
        first.contains("a%2Cb%3Ac 100%25.sql,line=1,col=1,endLine=1,endColumn=23,"),
        "{first}"
    );
    // The message is one line: its newlines are %0A, and its own `:` stay.
    assert!(
        first.contains("(reads continue)%0Ahelp: run these steps instead"),
        "{first}"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// The properties SARIF 2.1.0 requires of what pgshift writes, and the ones GitHub's
/// code scanning reads (no JSON-schema validator crate builds offline here, so the
/// schema's required properties and enums are checked one by one).
fn check_sarif(sarif: &Value) -> (Vec<String>, &Vec<Value>) {
    assert_eq!(sarif["version"], "2.1.0");
    assert!(sarif["$schema"]
        .as_str()
        .is_some_and(|s| s.contains("sarif-2.1.0")));
    let runs = sarif["runs"].as_array().expect("runs is an array");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "pgshift");
    let levels = ["none", "note", "warning", "error"];
    let rules = driver["rules"].as_array().expect("rules");
    let mut ids = Vec::new();
    for rule in rules {
        let id = rule["id"].as_str().expect("rule id").to_owned();
        assert!(!ids.contains(&id), "duplicate rule {id}");
        for text in [
            &rule["shortDescription"]["text"],
            &rule["fullDescription"]["text"],
        ] {
            assert!(text.as_str().is_some_and(|t| !t.is_empty()), "{id}");
        }
        let uri = rule["helpUri"].as_str().expect("helpUri");
        assert!(
            uri.contains("://") && uri.ends_with(&format!("LINTS.md#{id}")),
            "{uri}"
        );
        assert!(levels.contains(
            &rule["defaultConfiguration"]["level"]
                .as_str()
                .expect("level")
        ));
        ids.push(id);
    }
    let results = run["results"].as_array().expect("results");
    for result in results {
        let id = result["ruleId"].as_str().expect("ruleId");
        let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(ids[index], id, "ruleIndex points at the rule");
        assert!(levels.contains(&result["level"].as_str().expect("level")));
        assert!(result["message"]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()));
        let location = &result["locations"][0]["physicalLocation"];
        let uri = location["artifactLocation"]["uri"].as_str().expect("uri");
        assert!(
            !uri.contains("://") && !uri.starts_with('/'),
            "relative: {uri}"
        );
        let region = &location["region"];
        let number = |key: &str| region[key].as_u64().unwrap_or_else(|| panic!("{key}"));
        assert!(number("startLine") >= 1 && number("startColumn") >= 1);
        assert!(number("endLine") >= number("startLine"));
        if number("endLine") == number("startLine") {
            assert!(number("endColumn") >= number("startColumn"));
        }
    }
    assert!(run["invocations"][0]["executionSuccessful"].is_boolean());
    (ids, results)
}

#[test]
fn sarif_has_a_rule_per_code_and_a_result_per_finding() {
    let run = pgshift(&["lint", "--schema", SCHEMA, "--format", "sarif", RELAY]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let sarif = json(&run);
    let (ids, results) = check_sarif(&sarif);
    let explained = json(&pgshift(&["explain", "--list", "--format", "json"]));
    let lint_codes: Vec<String> = explained["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .filter(|p| p["kind"] == "lint")
        .map(|p| p["code"].as_str().expect("code").to_owned())
        .collect();
    assert_eq!(ids, lint_codes, "one rule per lint code, in order");
    let findings = json(&pgshift(&[
        "lint", "--schema", SCHEMA, "--format", "json", RELAY,
    ]));
    let findings = findings["findings"].as_array().expect("findings");
    assert_eq!(results.len(), findings.len());
    for (result, finding) in results.iter().zip(findings) {
        assert_eq!(result["ruleId"], finding["code"]);
        let region = &result["locations"][0]["physicalLocation"]["region"];
        assert_eq!(region["startLine"], finding["line"]);
        assert_eq!(region["startColumn"], finding["column"]);
        let statement = finding["statement"].as_str().expect("statement");
        let last = statement.trim_end().lines().last().unwrap_or("");
        let lines = statement.trim_end().matches('\n').count() as u64;
        assert_eq!(
            region["endLine"],
            finding["line"].as_u64().expect("line") + lines
        );
        if lines > 0 {
            assert_eq!(region["endColumn"], last.chars().count() as u64 + 1);
        }
        assert_eq!(
            result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            finding["path"]
        );
    }
    let rewrite = &sarif["runs"][0]["tool"]["driver"]["rules"][0];
    assert_eq!(rewrite["id"], "table-rewrite");
    assert_eq!(rewrite["defaultConfiguration"]["level"], "error");
    let default_docs = rewrite["helpUri"].as_str().expect("uri");
    assert!(
        default_docs.starts_with("file://")
            && default_docs.ends_with("/docs/LINTS.md#table-rewrite"),
        "{default_docs}"
    );
}

#[test]
fn sarif_docs_url_and_input_errors() {
    let run = pgshift(&[
        "lint",
        "--format",
        "sarif",
        "--docs-url",
        "https://example.org/pgshift/docs/",
        "crates/pgshift/tests/data/bad/syntax_error_line3.sql",
    ]);
    assert_eq!(run.code, 1);
    let sarif = json(&run);
    check_sarif(&sarif);
    let run0 = &sarif["runs"][0];
    assert_eq!(
        run0["tool"]["driver"]["rules"][0]["helpUri"],
        "https://example.org/pgshift/docs/LINTS.md#table-rewrite"
    );
    assert_eq!(run0["invocations"][0]["executionSuccessful"], false);
    let note = &run0["invocations"][0]["toolExecutionNotifications"][0];
    assert_eq!(note["level"], "error");
    assert_eq!(
        note["locations"][0]["physicalLocation"]["region"]["startLine"],
        3
    );
}

#[test]
fn explain_prints_the_page_of_a_code() {
    let run = pgshift(&["explain", "not-null-without-default"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    insta::assert_snapshot!("explain_not_null", run.stdout);
    // The same text as the docs: every sentence of the page is in docs/LINTS.md.
    let docs = std::fs::read_to_string(workspace_root().join("docs/LINTS.md")).expect("docs");
    let page = json(&pgshift(&[
        "explain",
        "not-null-without-default",
        "--format",
        "json",
    ]));
    let page = &page["pages"][0];
    for section in ["summary", "means", "matters", "do_this", "sql", "pgshift"] {
        let text = page[section].as_str().expect(section);
        assert!(
            docs.contains(text),
            "docs/LINTS.md lacks the {section}: {text}"
        );
    }
}

#[test]
fn explain_a_name_that_is_both_a_code_and_a_cause() {
    let run = pgshift(&["explain", "two-phase-commit", "--format", "json"]);
    assert_eq!(run.code, 0);
    let kinds: Vec<&str> = json(&run)["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .map(|p| {
            if p["kind"] == "lint" {
                "lint"
            } else {
                "refusal"
            }
        })
        .collect();
    assert_eq!(kinds, ["lint", "refusal"]);
    let text = pgshift(&["explain", "two-phase-commit"]);
    assert!(text
        .stdout
        .contains("two-phase-commit: lint code, severity error"));
    assert!(text
        .stdout
        .contains("two-phase-commit: refusal cause, class unsupported"));
}

#[test]
fn explain_an_unknown_code_exits_one_with_close_matches() {
    let run = pgshift(&["explain", "index-not-concurent"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        "pgshift explain: no lint code or refusal cause is named `index-not-concurent`\ndid you mean: index-not-concurrent\n"
    );
    let run = pgshift(&["explain", "index", "--format", "json"]);
    assert_eq!(run.code, 1);
    let doc = json(&run);
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["command"], "explain");
    assert!(doc["error"].as_str().is_some_and(|e| e.contains("`index`")));
    let matches: BTreeSet<&str> = doc["close_matches"]
        .as_array()
        .expect("close_matches")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(matches.contains("index-not-concurrent") && matches.contains("invalid-index-exists"));
    let run = pgshift(&["explain", "qqqqqqqqqqqqqqqqqqqqqqqq"]);
    assert_eq!(run.code, 1);
    assert!(run
        .stderr
        .contains("`pgshift explain --list` lists every code and cause"));
}

#[test]
fn quiet_says_only_errors_and_the_verdict_verbose_says_more() {
    let quiet = lint_stdin(&["-q", "--transaction-mode", "statement"], RISKY);
    assert_eq!(quiet.code, 2);
    assert_eq!(quiet.stdout.lines().count(), 5, "{}", quiet.stdout);
    assert!(quiet.stdout.lines().take(4).all(|l| l.contains(": error[")));
    assert!(!quiet.stdout.contains("help:"));
    let verbose = lint_stdin(&["--verbose"], RISKY);
    assert_eq!(verbose.code, 2);
    assert!(verbose
        .stdout
        .contains("  more: pgshift explain table-rewrite\n"));
    assert!(verbose.stdout.contains("  do this: Expand and contract"));
    // The usage error comes before stdin is read, so none is given.
    let both = pgshift(&["-q", "-v", "lint", "-"]);
    assert_eq!(both.code, 1, "-q and -v conflict");
    assert!(
        both.stderr.contains("cannot be used with"),
        "{}",
        both.stderr
    );
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let always = lint_stdin(&["--color", "always"], RISKY);
    assert!(
        always
            .stdout
            .contains("\x1b[1;31merror[table-rewrite]\x1b[0m"),
        "{}",
        always.stdout
    );
    let never = lint_stdin(&["--color", "never"], RISKY);
    assert!(!never.stdout.contains('\x1b'));
    // auto, not a terminal (a pipe): no colour.
    let auto = lint_stdin(&[], RISKY);
    assert!(!auto.stdout.contains('\x1b'));
    // Machine formats never carry colour, even when forced.
    for format in ["json", "github", "sarif"] {
        let run = lint_stdin(&["--color", "always", "--format", format], RISKY);
        assert!(!run.stdout.contains('\x1b'), "{format}");
    }
    let explain = pgshift(&["--color=always", "explain", "table-rewrite"]);
    assert!(explain.stdout.contains("\x1b[1mWhat it means\x1b[0m"));
}

#[test]
fn completions_for_every_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _pgshift"),
        ("zsh", "#compdef pgshift"),
        ("fish", "complete -c pgshift"),
        ("elvish", "pgshift"),
        ("powershell", "pgshift"),
    ] {
        let run = pgshift(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(marker), "{shell}");
        assert!(
            run.stdout.contains("explain"),
            "{shell} completes subcommands"
        );
    }
    assert_eq!(pgshift(&["completions", "tcsh"]).code, 1);
}

#[test]
fn the_man_page_renders_and_has_every_subcommand() {
    let run = pgshift(&["man"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with(".ie") || run.stdout.starts_with(".TH"));
    assert!(run.stdout.contains(".TH pgshift 1"));
    let help = pgshift(&["--help"]).stdout;
    let subcommands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(subcommands.len() >= 12, "{subcommands:?}");
    for name in subcommands {
        assert!(
            run.stdout
                .contains(&format!(".SH \"PGSHIFT {}\"", name.to_uppercase())),
            "the man page lacks {name}"
        );
    }
    if std::process::Command::new("groff")
        .arg("--version")
        .output()
        .is_ok()
    {
        use std::io::Write;
        let mut child = std::process::Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("groff");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(run.stdout.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("groff runs");
        assert!(
            out.stderr.is_empty(),
            "groff: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `pgshift explain --list | head -1`, `pgshift man | head`: a reader that goes away
/// ends the command quietly (SIGPIPE), never with a panic about a broken pipe.
#[test]
fn a_closed_stdout_ends_a_printing_command_without_a_panic() {
    for args in [
        &["explain", "--list"][..],
        &["man"],
        &["completions", "bash"],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pgshift"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("pgshift starts");
        // Close the read end before pgshift writes.
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("pgshift ends");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}
