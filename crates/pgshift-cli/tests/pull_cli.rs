//! `pgshift pull` end to end against real PostgreSQL (the server `PGSHIFT_PG_BIN`
//! names): a schema with one of each kind it files and the relay's schema are pulled,
//! and the pulled manifest, run by `psql` on an empty database, dumps the same as the
//! live database; an object kind desired state does not cover is refused with exit 2
//! and nothing written. The published packages' directories are pulled the same way
//! in `real_directories.rs`.

mod common;

use std::fs;
use std::path::Path;

use common::schema::{cluster, dump, scratch};
use common::{pgshift, workspace_root};

/// Pulls `db` into `out`: the JSON report.
fn pull(db: &str, out: &Path) -> serde_json::Value {
    let url = cluster().connection_string(db);
    let run = pgshift(&[
        "pull",
        "--url",
        &url,
        "--out",
        out.to_str().expect("UTF-8 path"),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    serde_json::from_str(&run.stdout).expect("one JSON document")
}

/// The manifest run by `psql` on an empty database dumps as `live` does.
fn assert_rebuilds(live: &str, out: &Path) {
    let rebuilt = cluster().fresh_database("pull_rebuilt").expect("database");
    cluster()
        .psql_file(&rebuilt, out.join("manifest.sql"))
        .expect("the pulled manifest runs");
    let (want, got) = (dump(live), dump(&rebuilt));
    if want != got {
        let a = out.with_extension("live.sql");
        let b = out.with_extension("rebuilt.sql");
        fs::write(&a, &want).expect("written");
        fs::write(&b, &got).expect("written");
        panic!(
            "the pulled files rebuild another schema: diff {} {}",
            a.display(),
            b.display()
        );
    }
}

#[test]
fn inv_ds_1_every_kind_pulled_rebuilds_the_schema_exactly() {
    let db = cluster().fresh_database("pull_rich").expect("database");
    cluster()
        .psql_file(
            &db,
            workspace_root().join("crates/pgshift-cli/tests/data/desired/rich.sql"),
        )
        .expect("the schema loads");
    let nulls_not_distinct = cluster().version().major >= 15;
    if nulls_not_distinct {
        cluster()
            .psql(
                &db,
                "CREATE UNIQUE INDEX a_b_unique ON app.a (b_id) NULLS NOT DISTINCT;",
            )
            .expect("index made");
    }
    let work = scratch("pull-rich");
    let out = work.join("schema");
    let report = pull(&db, &out);
    assert_eq!(report["fidelity"]["kind"], "exact", "{report}");
    assert_eq!(report["moved_foreign_keys"], 2, "a↔b reference each other");
    for path in [
        "prelude.sql",
        "schemas/app.sql",
        "extensions.sql",
        "app/types/mood.sql",
        "app/types/pos.sql",
        "app/types/pair.sql",
        "app/tables/a.sql",
        "app/tables/c.sql",
        "app/sequences/free_seq.sql",
        "app/views/v.sql",
        "app/materialized_views/mv.sql",
        "app/functions/touch.sql",
        "app/functions/atomic_count.sql",
        "public/tables/%4Dixed%20%43ase.sql",
        "foreign_keys.sql",
    ] {
        assert!(out.join(path).is_file(), "{path} missing: {report}");
    }
    let a = fs::read_to_string(out.join("app/tables/a.sql")).expect("a.sql");
    for part in [
        "CREATE TABLE app.a",
        "ADD GENERATED ALWAYS AS IDENTITY",
        "PRIMARY KEY",
        "NULLS FIRST, id DESC NULLS LAST",
        "CREATE STATISTICS app.st",
        "FORCE ROW LEVEL SECURITY",
        "CREATE POLICY p_read",
        "GRANT SELECT ON TABLE app.a TO pull_reader",
        "COMMENT ON INDEX app.a_note",
        "vacuum_truncate",
    ] {
        assert!(a.contains(part), "app/tables/a.sql lacks {part}:\n{a}");
    }
    assert!(!a.contains("FOREIGN KEY"), "the cyclic key moved:\n{a}");
    assert_eq!(a.contains("NULLS NOT DISTINCT"), nulls_not_distinct, "{a}");
    let c = fs::read_to_string(out.join("app/tables/c.sql")).expect("c.sql");
    assert!(
        c.contains("CREATE TABLE app.c_2024")
            && c.contains("ATTACH PARTITION app.c_2024")
            && c.contains("DISABLE TRIGGER t_touch"),
        "{c}"
    );
    assert_rebuilds(&db, &out);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn the_relay_schema_pulls_and_rebuilds() {
    let db = cluster().fresh_database("pull_relay").expect("database");
    cluster()
        .psql_file(&db, workspace_root().join("workloads/relay/schema.sql"))
        .expect("relay schema loads");
    let work = scratch("pull-relay");
    let out = work.join("schema");
    let report = pull(&db, &out);
    assert_eq!(report["reproduced"], true, "{report}");
    assert_rebuilds(&db, &out);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn an_uncovered_object_kind_is_refused_and_nothing_is_written() {
    let db = cluster()
        .fresh_database("pull_uncovered")
        .expect("database");
    cluster()
        .psql(
            &db,
            "CREATE TABLE t (id int PRIMARY KEY); CREATE OPERATOR public.=== (leftarg = int, rightarg = int, function = int4eq);",
        )
        .expect("schema loads");
    let work = scratch("pull-uncovered");
    let out = work.join("schema");
    let url = cluster().connection_string(&db);
    let run = pgshift(&[
        "pull",
        "--url",
        &url,
        "--out",
        out.to_str().expect("UTF-8"),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(report["code"], "not-covered", "{report}");
    assert!(
        report["message"]
            .as_str()
            .unwrap_or("")
            .contains("OPERATOR"),
        "{report}"
    );
    let left: Vec<_> = fs::read_dir(&work).expect("scratch").collect();
    assert!(left.is_empty(), "nothing is written: {left:?}");
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn fmt_writes_the_layout_pull_writes_and_is_a_fixed_point() {
    let work = scratch("fmt");
    let rich = workspace_root().join("crates/pgshift-cli/tests/data/desired/rich.sql");
    let first = work.join("first");
    let run = pgshift(&[
        "fmt",
        rich.to_str().expect("UTF-8"),
        "--out",
        first.to_str().expect("UTF-8"),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("one document");
    assert_eq!(report["command"], "fmt");
    assert!(first.join("app/tables/a.sql").is_file(), "{report}");
    let db = cluster().fresh_database("fmt_live").expect("database");
    cluster().psql_file(&db, &rich).expect("the schema loads");
    let url = cluster().connection_string(&db);
    // The formatted folder formats to the same bytes (its grants name a role the
    // files do not create: `--like` borrows the live database's).
    let second = work.join("second");
    let run = pgshift(&[
        "fmt",
        first.to_str().expect("UTF-8"),
        "--out",
        second.to_str().expect("UTF-8"),
        "--like",
        &url,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for file in [
        "manifest.sql",
        "app/tables/a.sql",
        "app/tables/c.sql",
        "foreign_keys.sql",
    ] {
        assert_eq!(
            fs::read(first.join(file)).expect("first"),
            fs::read(second.join(file)).expect("second"),
            "{file}"
        );
    }
    // And it is the schema the file makes: diff of a database loaded with it is empty.
    let diff = pgshift(&[
        "diff",
        "--url",
        &url,
        first.to_str().expect("UTF-8"),
        "--format",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&diff.stdout).expect("one document");
    assert_eq!(json["changes"].as_array().map(Vec::len), Some(0), "{json}");
    let _ = fs::remove_dir_all(&work);
}
