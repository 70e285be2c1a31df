//! `pgshift capabilities`: one versioned JSON document whose `tool_version` is the
//! version `--version` prints, a text table with a row per form and group of majors,
//! exit 1 on a bad flag; and, against real PostgreSQL, each form's route on the
//! cluster's major is the route `pgshift plan` gives the same SQL on a database holding
//! every object the forms name, with rows, except for the forms listed below as not yet
//! reconciled.

mod common;

use std::collections::BTreeMap;

use common::{pgshift, workspace_root};
use pgshift_embedded::shared_cluster;
use serde_json::Value;

fn document() -> Value {
    let run = pgshift(&["capabilities", "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).expect("one JSON document")
}

fn forms_sql() -> Vec<String> {
    let path = workspace_root().join("crates/pgshift/tests/data/classify/forms.sql");
    let text = std::fs::read_to_string(path).expect("the form table");
    pgshift_sql::parse(&text)
        .expect("parses")
        .into_iter()
        .map(|statement| statement.text)
        .collect()
}

#[test]
fn json_is_versioned_and_its_tool_version_is_the_binarys() {
    let doc = document();
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["tool"], "pgshift");
    assert_eq!(doc["command"], "capabilities");
    assert_eq!(doc["majors"], serde_json::json!([14, 15, 16, 17, 18]));
    let version = pgshift(&["--version"]);
    assert_eq!(version.code, 0);
    let printed = version.stdout.split_whitespace().nth(1).expect("a version");
    assert_eq!(doc["tool_version"], printed, "{}", version.stdout);

    let forms = doc["forms"].as_array().expect("forms");
    let sql: Vec<&str> = forms.iter().filter_map(|f| f["sql"].as_str()).collect();
    assert_eq!(
        sql,
        forms_sql(),
        "one form per statement of the form table, in order"
    );
    for form in forms {
        assert!(form["statement"].is_string(), "{form}");
        assert!(
            !form["operations"]
                .as_array()
                .expect("operations")
                .is_empty()
                || form["statement"] == "unclassified",
            "{form}"
        );
        let mut majors = Vec::new();
        for outcome in form["outcomes"].as_array().expect("outcomes") {
            majors.extend(
                outcome["majors"]
                    .as_array()
                    .expect("majors")
                    .iter()
                    .cloned(),
            );
            let route = outcome["route"].as_str().expect("route");
            assert!(
                ["native", "native-sequence", "copy-and-swap", "refused"].contains(&route),
                "{form}"
            );
            assert_eq!(outcome["refusal"].is_string(), route == "refused", "{form}");
            assert_eq!(
                outcome["steps"].is_array(),
                route == "native-sequence",
                "{form}"
            );
            assert!(outcome["work"].is_string(), "{form}");
            assert!(
                outcome["lock"].is_string() || outcome["lock"].is_null(),
                "{form}"
            );
            assert!(outcome["transaction"].is_string(), "{form}");
        }
        assert_eq!(Value::from(majors), doc["majors"], "{form}");
    }
    for summary in doc["summary"].as_array().expect("summary") {
        let total: u64 = ["native", "native_sequence", "copy_and_swap", "refused"]
            .iter()
            .map(|key| summary[key].as_u64().expect("count"))
            .sum();
        assert_eq!(total as usize, forms.len(), "{summary}");
    }
}

#[test]
fn text_has_a_row_per_form_and_the_route_counts() {
    let run = pgshift(&["capabilities", "--color", "never"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("statement forms on PostgreSQL 14-18"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("ROUTE"), "{}", run.stdout);
    assert!(
        run.stdout.contains("refused: server-too-old"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("PostgreSQL 18: "), "{}", run.stdout);
    let rows = run
        .stdout
        .lines()
        .filter(|line| {
            line.starts_with("14")
                || line.starts_with("15")
                || line.starts_with("16")
                || line.starts_with("17")
                || line.starts_with("18")
        })
        .count();
    assert!(rows >= forms_sql().len(), "{rows} rows\n{}", run.stdout);
}

#[test]
fn a_bad_flag_exits_one() {
    let run = pgshift(&["capabilities", "--format", "yaml"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let run = pgshift(&["capabilities", "--format", "json", "--no-such-flag"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).expect("one JSON error document");
    assert_eq!(doc["kind"], "error", "{doc}");
}

/// Forms whose route from `plan` on PostgreSQL 15 and this test's fixture differs from
/// the matrix's, NOT YET RECONCILED one by one. Known kinds of cause: the fixture's
/// `events` has no primary key (copy-and-swap's preflight refuses it live: most
/// `copy-and-swap` / `refused` pairs), live facts (`varchar(200)` is binary-coercible
/// for the real `varchar(100)`), and procedural code, which `plan` traces on a clone
/// where the matrix can only refuse it. Exact: a listed form that agrees fails too, so
/// a new difference or a fixed one is seen. Other majors may differ more.
const NOT_YET_RECONCILED: &[&str] = &[
    "ALTER TABLE events ADD COLUMN b int, ALTER COLUMN kind TYPE bigint",
    "ALTER TABLE events ADD COLUMN body_len int GENERATED ALWAYS AS (length(content)) STORED",
    "ALTER TABLE events ADD COLUMN legacy_id bigserial",
    "ALTER TABLE events ADD COLUMN must int NOT NULL",
    "ALTER TABLE events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY",
    "ALTER TABLE events ADD COLUMN token uuid DEFAULT gen_random_uuid()",
    "ALTER TABLE events ADD COLUMN weird int DEFAULT my_func()",
    "ALTER TABLE events ADD CONSTRAINT kind_not_null NOT NULL kind",
    "ALTER TABLE events ADD CONSTRAINT no_overlap EXCLUDE USING gist (during WITH &&)",
    "ALTER TABLE events ALTER COLUMN kind TYPE bigint",
    "ALTER TABLE events ALTER COLUMN kind TYPE bigint USING kind::bigint",
    "ALTER TABLE events ALTER COLUMN name TYPE varchar(200)",
    "ALTER TABLE events ATTACH PARTITION events_2027_03 FOR VALUES FROM ('2027-03-01') TO ('2027-04-01')",
    "ALTER TABLE events SET ACCESS METHOD heap",
    "ALTER TABLE events SET TABLESPACE fast",
    "CALL refresh_all()",
    "CLUSTER events USING events_pkey",
    "DO $$ BEGIN PERFORM 1; END $$",
    "LISTEN relay",
    "SET session_replication_role = replica",
    "VACUUM FULL events",
];

#[test]
fn every_form_routes_as_plan_routes_it_on_the_clusters_major() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let major = cluster.version().major;
    let db = cluster
        .fresh_database("capabilities_cli")
        .expect("database");
    cluster
        .psql_file(
            &db,
            workspace_root().join("crates/pgshift-cli/tests/data/capabilities/schema.sql"),
        )
        .expect("the schema loads");
    let url = cluster.connection_string(&db);
    let doc = document();
    let mut differ = BTreeMap::new();
    for form in doc["forms"].as_array().expect("forms") {
        let sql = form["sql"].as_str().expect("sql");
        let outcome = form["outcomes"]
            .as_array()
            .expect("outcomes")
            .iter()
            .find(|o| {
                o["majors"]
                    .as_array()
                    .is_some_and(|m| m.contains(&Value::from(major)))
            })
            .expect("an outcome for the cluster's major");
        let run = pgshift(&["plan", "--url", &url, "--sql", sql, "--format", "json"]);
        let plan: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
            panic!(
                "{sql}: one JSON document ({e}):\n{}\n{}",
                run.stdout, run.stderr
            )
        });
        let planned = &plan["files"][0]["statements"][0];
        let live = planned["route"].as_str().unwrap_or("none").to_owned();
        if live != outcome["route"] {
            differ.insert(
                sql.to_owned(),
                format!("matrix {} / plan {live}", outcome["route"]),
            );
        }
    }
    let listed: BTreeMap<String, ()> = NOT_YET_RECONCILED
        .iter()
        .map(|sql| ((*sql).to_owned(), ()))
        .collect();
    let unexplained: Vec<String> = differ
        .iter()
        .filter(|(sql, _)| !listed.contains_key(*sql))
        .map(|(sql, how)| format!("{sql}: {how}"))
        .collect();
    let agreeing: Vec<&String> = listed
        .keys()
        .filter(|sql| !differ.contains_key(*sql))
        .collect();
    assert!(
        unexplained.is_empty() && agreeing.is_empty(),
        "PostgreSQL {major}: routes that differ without a reason listed:\n{}\nlisted but agreeing: {agreeing:?}",
        unexplained.join("\n")
    );
}
