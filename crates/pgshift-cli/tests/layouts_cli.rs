//! Migration directory layouts through the CLI: the detected layout said in `lint`,
//! `plan` and `migrate` (text and JSON), down files never read, mixed layouts refused,
//! `CREATE TABLE IF NOT EXISTS` not assumed new, split files reported,
//! `migrate --baseline` adopting a database another runner migrated, and `migrate`
//! applying a small directory in each runner's own layout (integer versions of any
//! width, golang-migrate, pop, diesel, dbmate, goose, Flyway with repeatables), with
//! each runner's transaction rule kept, on real PostgreSQL.

mod common;

use common::pgshift;
use pgshift_embedded::shared_cluster;

const SQLX: &str = "crates/pgshift/tests/data/layouts/sqlx_reversible";
const MIXED: &str = "crates/pgshift/tests/data/layouts/mixed";
const IF_NOT_EXISTS: &str = "crates/pgshift/tests/data/layouts/if_not_exists.sql";

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).expect("stdout is one JSON document")
}

#[test]
fn lint_says_the_layout_and_never_reads_a_down_file() {
    let run = pgshift(&["lint", SQLX]);
    assert!(
        run.stdout.contains(&format!(
            "{SQLX}: layout: sqlx (timestamp versions, reversible pairs, 3 down files not read)"
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(".down.sql"), "{}", run.stdout);
    let run = pgshift(&["lint", "--format", "json", SQLX]);
    let report = json(&run.stdout);
    assert_eq!(report["layouts"][0]["kind"], "timestamp");
    assert_eq!(report["layouts"][0]["reversible"], true);
    assert_eq!(report["layouts"][0]["skipped"][0]["reason"], "down");
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    assert_eq!(files.len(), 3);
    assert!(files.iter().all(|f| f.ends_with(".up.sql")), "{files:?}");
    // The down file of the last migration truncates: read as forward, lint would
    // report a destructive change.
    assert!(!run.stdout.contains("TRUNCATE"), "{}", run.stdout);
}

#[test]
fn lint_refuses_a_mixed_layout_saying_what_it_found() {
    let run = pgshift(&["lint", MIXED]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("mixed migration layouts")
            && run.stdout.contains("V1__create_ledgers.sql")
            && run
                .stdout
                .contains("20240215083000_ledgers_add_currency.sql"),
        "{}",
        run.stdout
    );
}

/// A table `CREATE TABLE IF NOT EXISTS` makes is new to the statements after it when
/// no earlier file (nor `--schema`) declares it: lint flagged the index of a table the
/// same file had just created (real directories write `IF NOT EXISTS` everywhere). Where
/// the schema says it exists, the index is on the existing table and is flagged.
#[test]
fn lint_judges_a_table_created_if_not_exists_new_unless_declared_before() {
    let codes_at_line_4 = |run: &common::Run| -> Vec<String> {
        json(&run.stdout)["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["line"] == 4)
            .map(|f| f["code"].as_str().expect("code").to_owned())
            .collect()
    };
    let run = pgshift(&["lint", "--format", "json", IF_NOT_EXISTS]);
    let codes = codes_at_line_4(&run);
    assert!(
        !codes.iter().any(|c| c == "index-not-concurrent"),
        "{}",
        run.stdout
    );
    let schema =
        std::env::temp_dir().join(format!("pgshift-ine-schema-{}.sql", std::process::id()));
    std::fs::write(
        &schema,
        "CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL);\n",
    )
    .expect("schema written");
    let run = pgshift(&[
        "lint",
        "--format",
        "json",
        "--schema",
        &schema.to_string_lossy(),
        IF_NOT_EXISTS,
    ]);
    let codes = codes_at_line_4(&run);
    assert!(
        codes.iter().any(|c| c == "index-not-concurrent"),
        "{}",
        run.stdout
    );
    std::fs::remove_file(schema).expect("cleanup");
}

#[test]
fn plan_and_migrate_say_the_layout_the_split_and_the_baseline() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("layouts_cli").expect("database");
    cluster
        .psql_file(
            &db,
            common::workspace_root()
                .join(SQLX)
                .join("20240101120000_create_ledgers.up.sql"),
        )
        .expect("the first file, applied by another runner");
    // A ledger in use: on an empty table the last file would run whole, as sqlx runs
    // it (TX-2), and nothing would be split.
    cluster
        .psql(&db, "INSERT INTO ledgers (workspace) VALUES ('acme');")
        .expect("a row");
    let url = cluster.connection_string(&db);

    let plan = pgshift(&["plan", "--url", &url, "--format", "json", SQLX]);
    let report = json(&plan.stdout);
    assert_eq!(report["layouts"][0]["kind"], "timestamp", "{}", plan.stdout);
    // The whole directory plans file 1 too, which creates the ledgers: in that plan
    // they are new, and the last file runs whole, as sqlx runs it (TX-2).
    assert!(report["files"][2]["split"].is_null(), "{}", plan.stdout);
    // The pending files alone meet the ledger in use: the last one is split.
    let pending = [
        format!("{SQLX}/20240215083000_ledgers_add_currency.up.sql"),
        format!("{SQLX}/20240302171500_ledgers_currency_required.up.sql"),
    ];
    let plan = pgshift(&[
        "plan",
        "--url",
        &url,
        "--format",
        "json",
        &pending[0],
        &pending[1],
    ]);
    let report = json(&plan.stdout);
    let split = &report["files"][1]["split"];
    assert_eq!(split["runner_transactions"], 1, "{}", plan.stdout);
    assert!(split["units"].as_u64().expect("units") >= 2);
    let plan = pgshift(&["plan", "--url", &url, &pending[0], &pending[1]]);
    assert!(
        plan.stdout
            .contains("; under its runner it was 1 transaction"),
        "{}",
        plan.stdout
    );

    let dry = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--dry-run",
        "--baseline",
        "20240101120000",
        SQLX,
    ]);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains("would be baselined"), "{}", dry.stdout);
    let bad = pgshift(&["migrate", "--url", &url, "--baseline", "latest", SQLX]);
    assert_eq!(bad.code, 1, "a bad value is a usage error: {}", bad.stderr);
    let done = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--format",
        "json",
        "--baseline",
        "20240101120000",
        SQLX,
    ]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let report = json(&done.stdout);
    assert_eq!(report["baseline"]["files"][0]["status"], "baselined");
    assert_eq!(report["baseline"]["files"][1]["status"], "pending");

    let sqlx = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--format",
        "json",
        "--baseline",
        "sqlx",
        SQLX,
    ]);
    assert_eq!(sqlx.code, 1, "{}", sqlx.stdout);
    assert_eq!(json(&sqlx.stdout)["kind"], "error", "{}", sqlx.stdout);
    assert!(
        json(&sqlx.stdout)["message"]
            .as_str()
            .expect("message")
            .contains("no _sqlx_migrations table"),
        "{}",
        sqlx.stdout
    );

    // The second file, applied by the other runner too, then baselined: the dry run
    // plans the third against the schema it will meet.
    cluster
        .psql_file(
            &db,
            common::workspace_root()
                .join(SQLX)
                .join("20240215083000_ledgers_add_currency.up.sql"),
        )
        .expect("the second file");
    let second = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--baseline",
        "20240215083000",
        SQLX,
    ]);
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    let dry = pgshift(&[
        "migrate",
        "--url",
        &url,
        "--dry-run",
        "--format",
        "json",
        SQLX,
    ]);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let report = json(&dry.stdout);
    assert_eq!(report["verdict"]["layout"]["kind"], "timestamp");
    assert_eq!(
        report["verdict"]["files"][0]["baselined"],
        "--baseline 20240101120000"
    );
    assert_eq!(
        report["verdict"]["files"][2]["split"]["runner_transactions"], 1,
        "{}",
        dry.stdout
    );
    let run = pgshift(&["migrate", "--url", &url, SQLX]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("layout: sqlx (timestamp versions"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("already applied (baselined: --baseline 20240101120000; not run by pgshift)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("; under its runner it was 1 transaction"),
        "{}",
        run.stdout
    );
}

const LAYOUTS: &str = "crates/pgshift/tests/data/layouts";

/// `migrate --format json` of the fixture `name` on a fresh database: the exit code,
/// the report and the database.
fn migrate_fixture(name: &str) -> (i32, serde_json::Value, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster
        .fresh_database(&format!("layouts_{name}"))
        .expect("database");
    let url = cluster.connection_string(&db);
    let dir = format!("{LAYOUTS}/{name}");
    let run = pgshift(&["migrate", "--url", &url, "--format", "json", &dir]);
    (run.code, json(&run.stdout), db)
}

/// `(version, name, status, runner_transaction)` of every file of a migrate report.
fn files_of(report: &serde_json::Value) -> Vec<(String, String, String, String)> {
    report["verdict"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| {
            (
                f["version"].as_str().unwrap_or("R").to_owned(),
                f["name"].as_str().expect("name").to_owned(),
                f["status"].as_str().expect("status").to_owned(),
                f["runner_transaction"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

fn value(db: &str, sql: &str) -> String {
    let cluster = shared_cluster().expect("cluster");
    cluster.psql(db, sql).expect("query").trim().to_owned()
}

fn row(version: &str, name: &str, mode: &str) -> (String, String, String, String) {
    (
        version.to_owned(),
        name.to_owned(),
        "applied".to_owned(),
        mode.to_owned(),
    )
}

/// The objects every fixture builds: `ledgers` with its columns, and its index.
fn ledgers_columns(url: &str) -> String {
    value(
        url,
        "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'ledgers'::regclass AND attnum > 0 AND NOT attisdropped",
    )
}

fn valid_index(url: &str, index: &str) -> String {
    value(
        url,
        &format!("SELECT indisvalid FROM pg_index WHERE indexrelid = '{index}'::regclass"),
    )
}

#[test]
fn integer_versions_of_any_width_apply_in_numeric_order() {
    let (code, report, url) = migrate_fixture("integers");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("0", "init", "file"),
            row("20240215083000", "add_currency", "file"),
            row("99999999999999", "add_note", "file"),
            row("202403011200000000", "workspace_index", "file"),
        ]
    );
    assert_eq!(ledgers_columns(&url), "id,workspace,currency,note");
    assert_eq!(valid_index(&url, "ledgers_workspace"), "t");
    assert_eq!(
        value(
            &url,
            "SELECT string_agg(version, ',' ORDER BY id) FROM pgshift.migrations"
        ),
        "0,20240215083000,99999999999999,202403011200000000"
    );
}

#[test]
fn golang_migrate_and_pop_directories_apply_their_up_files() {
    let (code, report, url) = migrate_fixture("golang_migrate");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("1", "create_ledgers", "file"),
            row("2", "add_currency", "file"),
        ]
    );
    assert_eq!(ledgers_columns(&url), "id,workspace,currency");

    let (code, report, url) = migrate_fixture("pop");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("20240101120000", "create_ledgers", "file"),
            row("20240102120000", "add_currency", "file"),
        ]
    );
    assert!(report["verdict"]["layout"]["description"]
        .as_str()
        .expect("description")
        .starts_with("pop ("));
    // The PostgreSQL file ran, not the MySQL one (ENGINE=InnoDB does not parse).
    assert_eq!(ledgers_columns(&url), "id,workspace,currency");
}

#[test]
fn pop_fizz_files_and_directories_no_layout_reads_are_errors_that_say_what_is_there() {
    let (code, report, _) = migrate_fixture("pop_fizz");
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["kind"], "error");
    let message = report["message"].as_str().expect("message");
    assert!(
        message.contains("20240101120000_create_ledgers.up.fizz") && message.contains("fizz"),
        "{message}"
    );
    let (code, report, url) = migrate_fixture("nothing");
    assert_eq!(code, 1, "{report:#}");
    let message = report["message"].as_str().expect("message");
    assert!(
        message.contains("README.md") && message.contains("seeds/"),
        "{message}"
    );
    assert_eq!(
        value(&url, "SELECT to_regclass('pgshift.migrations') IS NULL"),
        "t",
        "nothing was written"
    );
}

#[test]
fn a_diesel_directory_applies_every_up_sql_with_its_transaction_rule() {
    let (code, report, url) = migrate_fixture("diesel");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("00000000000000", "diesel_initial_setup", "file"),
            row("20230101000000", "create_ledgers", "file"),
            row("20230102000000", "ledgers_workspace_index", "statement"),
        ]
    );
    assert_eq!(ledgers_columns(&url), "id,workspace,updated_at");
    assert_eq!(valid_index(&url, "ledgers_workspace"), "t");
    assert_eq!(
        value(&url, "SELECT count(*) FROM pg_proc WHERE proname IN ('diesel_manage_updated_at', 'diesel_set_updated_at')"),
        "2"
    );
    let skipped = report["verdict"]["layout"]["skipped"]
        .as_array()
        .expect("skipped");
    assert_eq!(skipped.len(), 3, "the down.sql files are never read");
}

#[test]
fn dbmate_and_goose_files_run_their_up_sections_only() {
    let (code, report, url) = migrate_fixture("dbmate");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("20240101120000", "create_ledgers", "file"),
            row("20240102120000", "ledgers_workspace_index", "statement"),
        ]
    );
    assert_eq!(ledgers_columns(&url), "id,workspace");
    assert_eq!(valid_index(&url, "ledgers_workspace"), "t");
    // The marker inside the function body was not a marker: the body is whole.
    assert_eq!(
        value(&url, "SELECT ledger_label(ROW(7, 'w')::ledgers)"),
        "w#7"
    );

    let (code, report, url) = migrate_fixture("goose");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("1", "create_ledgers", "file"),
            row("2", "ledgers_workspace_index", "statement"),
        ]
    );
    assert_eq!(ledgers_columns(&url), "id,workspace,updated_at");
    assert_eq!(valid_index(&url, "ledgers_workspace"), "t");
    assert_eq!(
        value(
            &url,
            "SELECT count(*) FROM pg_proc WHERE proname = 'ledgers_touch'"
        ),
        "1"
    );
}

#[test]
fn flyway_dotted_versions_and_repeatables_apply_through_the_cli() {
    let (code, report, url) = migrate_fixture("flyway_repeatable");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        files_of(&report),
        vec![
            row("1", "create_ledgers", "file"),
            row("1.1", "ledgers_add_currency", "file"),
            row("2", "ledgers_workspace_index", "statement"),
            row("R", "ledger_totals_view", "file"),
        ]
    );
    assert_eq!(
        value(
            &url,
            "SELECT count(*) FROM pg_views WHERE viewname = 'ledger_counts'"
        ),
        "1"
    );
    let lint = pgshift(&["lint", &format!("{LAYOUTS}/flyway_repeatable")]);
    assert!(
        lint.stdout.contains("R__ledger_totals_view.sql")
            && !lint.stdout.contains("repeatable migration (R__)"),
        "lint reads the repeatable instead of stopping at it: {}",
        lint.stdout
    );
}

#[test]
fn a_database_goose_migrated_is_refused_once_by_plan_and_migrate_then_adopted() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster
        .fresh_database("layouts_goose_adopt")
        .expect("database");
    // As goose leaves it after its first file: its table, its version-0 row, the file's
    // objects.
    cluster
        .psql(
            &db,
            "CREATE TABLE goose_db_version (id serial NOT NULL, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp NULL DEFAULT now(), PRIMARY KEY (id));
             INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true);
             CREATE TABLE ledgers (id bigint PRIMARY KEY, workspace text NOT NULL, updated_at timestamptz);
             CREATE FUNCTION ledgers_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;",
        )
        .expect("goose's state");
    let url = cluster.connection_string(&db);
    let dir = format!("{LAYOUTS}/goose");
    for args in [
        vec!["plan", "--url", &url, "--format", "json", &dir],
        vec!["migrate", "--url", &url, "--format", "json", &dir],
        vec![
            "migrate",
            "--url",
            &url,
            "--dry-run",
            "--format",
            "json",
            &dir,
        ],
    ] {
        let run = pgshift(&args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        let report = json(&run.stdout);
        assert_eq!(report["kind"], "error", "{}", run.stdout);
        let message = report["message"].as_str().expect("message");
        assert!(
            message.contains("migrated by goose")
                && message.contains("1 applied version, the newest 1")
                && message.contains(&format!("--baseline goose {dir}")),
            "{message}"
        );
    }
    assert_eq!(
        value(&db, "SELECT to_regclass('pgshift.migrations') IS NULL"),
        "t",
        "nothing was written"
    );
    let adopt = pgshift(&["migrate", "--url", &url, "--baseline", "goose", &dir]);
    assert_eq!(adopt.code, 0, "{}{}", adopt.stdout, adopt.stderr);
    let run = pgshift(&["migrate", "--url", &url, "--format", "json", &dir]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let files = files_of(&json(&run.stdout));
    assert_eq!(files[0].2, "already-applied");
    assert_eq!(files[1], row("2", "ledgers_workspace_index", "statement"));
    assert_eq!(valid_index(&db, "ledgers_workspace"), "t");
}

#[test]
fn lint_reads_only_the_up_section_of_dbmate_and_goose_files() {
    for dir in ["dbmate", "goose"] {
        let run = pgshift(&["lint", "--format", "json", &format!("{LAYOUTS}/{dir}")]);
        let report = json(&run.stdout);
        let findings = report["findings"].as_array().expect("findings");
        // The down sections drop the table; read as forward SQL, lint reports it.
        assert!(
            findings
                .iter()
                .all(|f| !f["statement"].as_str().unwrap_or("").contains("DROP")),
            "{dir}: {}",
            run.stdout
        );
        let modes: Vec<&str> = report["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["transaction_mode"].as_str().expect("mode"))
            .collect();
        assert_eq!(modes, vec!["file", "statement"], "{dir}: {}", run.stdout);
    }
}

/// `plan DIR` plans what `migrate` would run: the files pgshift's history records as
/// applied are listed, not planned again (it planned every file before).
#[test]
fn plan_of_a_directory_pgshift_migrated_plans_the_pending_files_only() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("layouts_plan_pending").expect("db");
    let url = cluster.connection_string(&db);
    let dir = std::env::temp_dir().join(format!("pgshift-plan-pending-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(LAYOUTS)
        .join("integers");
    let mut names: Vec<String> = std::fs::read_dir(&source)
        .expect("fixture")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| {
        let digits: String = n.chars().take_while(char::is_ascii_digit).collect();
        (digits.len(), digits)
    });
    let copy = |name: &str| std::fs::copy(source.join(name), dir.join(name)).expect("copied");
    for name in &names[..2] {
        copy(name);
    }
    let dir_text = dir.to_string_lossy().into_owned();
    let run = pgshift(&["migrate", "--url", &url, &dir_text]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    for name in &names[2..] {
        copy(name);
    }
    let run = pgshift(&["plan", "--url", &url, "--format", "json", &dir_text]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let report = json(&run.stdout);
    let planned: Vec<String> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path").to_owned())
        .collect();
    let applied: Vec<String> = report["applied"]
        .as_array()
        .expect("applied listed")
        .iter()
        .map(|f| f.as_str().expect("path").to_owned())
        .collect();
    let path_of = |name: &String| dir.join(name).to_string_lossy().into_owned();
    assert_eq!(planned, names[2..].iter().map(path_of).collect::<Vec<_>>());
    assert_eq!(applied, names[..2].iter().map(path_of).collect::<Vec<_>>());
    let run = pgshift(&["plan", "--url", &url, &dir_text]);
    assert!(
        run.stdout
            .contains("2 files already applied (pgshift.migrations), not planned"),
        "{}",
        run.stdout
    );
    std::fs::remove_dir_all(dir).expect("cleanup");
}

/// Files named one by one (a shell glob gives `10_…` before `2_…`) are judged in their
/// directory's migration order, as `migrate` would run them; they were judged in the
/// order given.
#[test]
fn lint_judges_files_given_one_by_one_in_migration_order() {
    let dir = std::env::temp_dir().join(format!("pgshift-lint-order-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let write = |name: &str, sql: &str| {
        std::fs::write(dir.join(name), sql).expect("written");
        dir.join(name).to_string_lossy().into_owned()
    };
    let second = write("2_table.sql", "CREATE TABLE t (a int);\n");
    let tenth = write("10_column.sql", "ALTER TABLE t ADD COLUMN b int;\n");
    let first = write("1_schema.sql", "CREATE SCHEMA s;\n");
    let other = std::env::temp_dir().join(format!(
        "pgshift-lint-order-other-{}.sql",
        std::process::id()
    ));
    std::fs::write(&other, "SELECT 1;\n").expect("written");
    let other = other.to_string_lossy().into_owned();
    let run = pgshift(&["lint", "--format", "json", &tenth, &other, &second, &first]);
    let report = json(&run.stdout);
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["path"].as_str().expect("path"))
        .collect();
    // The directory's three places (first, third, fourth) hold its files in version
    // order; the file of another directory keeps its place.
    assert_eq!(
        files,
        vec![
            first.as_str(),
            other.as_str(),
            second.as_str(),
            tenth.as_str()
        ]
    );
    std::fs::remove_dir_all(dir).expect("cleanup");
    std::fs::remove_file(other).expect("cleanup");
}
