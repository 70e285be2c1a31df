//! `pgshift diff` end to end against real PostgreSQL (the server `PGSHIFT_PG_BIN`
//! names): a schema is pulled, the pulled files are edited as a team would, and the
//! plan `diff` writes is applied with `pgshift apply`; then the database dumps as the
//! edited files do when `psql` runs them on an empty database, and a second `diff`
//! finds nothing. A plan that cannot run where the live schema is is refused before
//! anything touches it (DS-2), and a difference diff does not cover is named.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::schema::{cluster, dump, pgshift_json, scratch};
use common::{pgshift, workspace_root};

/// A database holding the rich schema, pulled into `work/live`, copied to
/// `work/desired`.
fn pulled(label: &str) -> (String, PathBuf, PathBuf) {
    let db = cluster().fresh_database(label).expect("database");
    cluster()
        .psql_file(
            &db,
            workspace_root().join("crates/pgshift-cli/tests/data/desired/rich.sql"),
        )
        .expect("the schema loads");
    let work = scratch(label);
    let live = work.join("live");
    let url = cluster().connection_string(&db);
    let run = pgshift(&[
        "pull",
        "--url",
        &url,
        "--out",
        live.to_str().expect("UTF-8"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let desired = work.join("desired");
    copy(&live, &desired);
    (db, work, desired)
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("folder");
    for item in fs::read_dir(from).expect("folder") {
        let path = item.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy(&path, &target);
        } else {
            fs::copy(&path, &target).expect("copied");
        }
    }
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = fs::read_to_string(path).expect("file");
    assert!(
        text.contains(from),
        "{} lacks {from}:\n{text}",
        path.display()
    );
    fs::write(path, text.replacen(from, to, 1)).expect("written");
}

fn diff_json(db: &str, desired: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["diff", desired.to_str().expect("UTF-8")];
    args.extend_from_slice(extra);
    pgshift_json(db, &args)
}

/// `diff` of `desired` against `db` finds nothing.
fn assert_no_difference(db: &str, desired: &Path) {
    let (code, again) = diff_json(db, desired, &[]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        again["changes"].as_array().map(Vec::len),
        Some(0),
        "{again}"
    );
}

/// `pgshift apply --desired` of `desired` on `db`.
fn apply_desired(db: &str, desired: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["apply", "--desired", desired.to_str().expect("UTF-8")];
    args.extend_from_slice(extra);
    pgshift_json(db, &args)
}

#[test]
fn inv_ds_2_edited_files_converge_through_apply_and_diff_again_finds_nothing() {
    let (db, work, desired) = pulled("diff_edit");
    let (code, same) = diff_json(&db, &desired, &[]);
    assert_eq!(code, 0, "{same}");
    assert_eq!(same["changes"].as_array().map(Vec::len), Some(0), "{same}");

    // A new column with a default, a wider key column, a new index, a view dropped.
    let a = desired.join("app/tables/a.sql");
    edit(&a, "    b_id integer,", "    b_id bigint,");
    // PostgreSQL only appends columns: a new one goes last (elsewhere, diff refuses it).
    edit(
        &a,
        "gen_random_bytes(8)\n)",
        "gen_random_bytes(8),\n    extra integer DEFAULT 7 NOT NULL\n)",
    );
    fs::write(
        &a,
        fs::read_to_string(&a).expect("a.sql")
            + "\nCREATE INDEX a_extra ON app.a USING btree (extra);\n",
    )
    .expect("written");
    edit(&desired.join("manifest.sql"), "\\ir app/views/v.sql\n", "");
    let plan_file = work.join("plan.sql");
    let (code, report) = diff_json(
        &db,
        &desired,
        &["--out", plan_file.to_str().expect("UTF-8")],
    );
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["command"], "diff");
    assert_eq!(report["converged"], true);
    let changes = report["changes"].as_array().expect("changes");
    let objects: Vec<&str> = changes
        .iter()
        .filter_map(|c| c["object"].as_str())
        .collect();
    assert!(objects.contains(&"view app.v"), "{objects:?}");
    assert!(objects.contains(&"index app.a_extra"), "{objects:?}");
    assert_eq!(
        changes.iter().filter(|c| c["destructive"] == true).count(),
        2,
        "the view's drop and the key's type change: {report}"
    );
    assert_eq!(report["plan"]["summary"]["refused"], 0, "{report}");
    assert_eq!(report["live_fingerprint"].as_str().map(str::len), Some(64));

    let url = cluster().connection_string(&db);
    let run = pgshift(&["apply", "--url", &url, plan_file.to_str().expect("UTF-8")]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_no_difference(&db, &desired);
    // Converged: apply --desired has nothing to run, and says so in the one JSON
    // document --format json promises (it once printed nothing).
    let (code, nothing) = apply_desired(&db, &desired, &[]);
    assert_eq!(code, 0, "{nothing}");
    assert_eq!(nothing["command"], "diff", "{nothing}");
    assert_eq!(
        nothing["changes"].as_array().map(Vec::len),
        Some(0),
        "{nothing}"
    );

    // Not diff's own check: the edited files run by psql on an empty database.
    let rebuilt = cluster().fresh_database("diff_rebuilt").expect("database");
    cluster()
        .psql_file(&rebuilt, desired.join("manifest.sql"))
        .expect("the desired files run");
    assert_eq!(
        dump(&db),
        dump(&rebuilt),
        "the database is not the desired schema"
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn a_plan_that_cannot_run_on_the_live_schema_is_refused_before_anything() {
    let (db, work, desired) = pulled("diff_stuck");
    let before = dump(&db);
    // The view app.v reads a.b_id: PostgreSQL refuses the type change while it exists.
    edit(
        &desired.join("app/tables/a.sql"),
        "    b_id integer,",
        "    b_id bigint,",
    );
    let (code, report) = diff_json(&db, &desired, &[]);
    assert_eq!(code, 2, "{report}");
    assert_eq!(report["code"], "not-converged", "{report}");
    assert!(
        report["message"]
            .as_str()
            .unwrap_or("")
            .contains("used by a view"),
        "{report}"
    );
    assert_eq!(dump(&db), before, "the live database was touched");
    let _ = fs::remove_dir_all(&work);
}

/// A changed generation expression: `SET EXPRESSION` from PostgreSQL 17, named as
/// not covered before (PostgreSQL has no statement for it there).
#[test]
fn a_difference_diff_does_not_cover_is_named() {
    let (db, work, desired) = pulled("diff_uncovered");
    edit(
        &desired.join("app/tables/a.sql"),
        "((id * 2))",
        "((id * 3))",
    );
    let (code, report) = diff_json(&db, &desired, &[]);
    let major: u32 = cluster()
        .psql(&db, "SHOW server_version_num;")
        .expect("version")
        .trim()
        .parse::<u32>()
        .expect("a number")
        / 10_000;
    if major >= 17 {
        assert_eq!(code, 0, "{report}");
        let sql: Vec<&str> = report["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .filter_map(|c| c["sql"].as_str())
            .collect();
        assert_eq!(
            sql,
            ["ALTER TABLE app.a ALTER COLUMN g SET EXPRESSION AS (id * 3)"]
        );
        let _ = fs::remove_dir_all(&work);
        return;
    }
    assert_eq!(code, 2, "{report}");
    assert_eq!(report["code"], "not-covered", "{report}");
    assert!(
        report["message"]
            .as_str()
            .unwrap_or("")
            .contains("column app.a.g"),
        "{report}"
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn inv_ds_3_apply_desired_refuses_a_stale_review_and_unacknowledged_drops() {
    let (db, work, desired) = pulled("diff_apply");
    let before = dump(&db);
    edit(&desired.join("manifest.sql"), "\\ir app/views/v.sql\n", "");
    let a = desired.join("app/tables/a.sql");
    fs::write(
        &a,
        fs::read_to_string(&a).expect("a.sql") + "\nCREATE INDEX a_g ON app.a USING btree (g);\n",
    )
    .expect("written");
    let (code, report) = diff_json(&db, &desired, &[]);
    assert_eq!(code, 0, "{report}");
    let fingerprint = report["fingerprint"]
        .as_str()
        .expect("fingerprint")
        .to_owned();
    let apply = |extra: &[&str]| apply_desired(&db, &desired, extra);
    let refused = |(exit, json): (i32, serde_json::Value), code: &str| {
        assert_eq!(exit, 2, "{json}");
        assert_eq!(json["code"], code, "{json}");
        assert_eq!(dump(&db), before, "a refused plan ran something");
        json
    };
    let json = refused(apply(&[]), "destructive-not-allowed");
    assert!(
        json["message"]
            .as_str()
            .unwrap_or("")
            .contains("view app.v"),
        "{json}"
    );
    refused(
        apply(&["--allow-destructive", "table app.other"]),
        "destructive-not-allowed",
    );
    refused(
        apply(&[
            "--allow-destructive",
            "--expect-fingerprint",
            &"0".repeat(64),
        ]),
        "fingerprint-mismatch",
    );
    let (code, applied) = apply(&[
        "--allow-destructive",
        "view app.v",
        "--expect-fingerprint",
        &fingerprint,
    ]);
    assert_eq!(code, 0, "{applied}");
    assert_no_difference(&db, &desired);
    let url = cluster().connection_string(&db);
    let target = desired.to_str().expect("UTF-8");
    let run = pgshift(&["apply", "--url", &url, "--desired", target]);
    assert_eq!(run.code, 0, "nothing to do: {}", run.stderr);
    assert!(run.stderr.contains("nothing to do"), "{}", run.stderr);
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn inv_ds_4_access_changes_run_only_with_a_matching_review() {
    let (db, work, desired) = pulled("diff_access");
    let before = dump(&db);
    let a = desired.join("app/tables/a.sql");
    edit(
        &a,
        "CREATE POLICY p_read ON app.a FOR SELECT TO pull_reader USING ((note IS NOT NULL));",
        "",
    );
    fs::write(
        &a,
        fs::read_to_string(&a).expect("a.sql") + "\nGRANT INSERT ON TABLE app.a TO pull_reader;\n",
    )
    .expect("written");
    let (code, report) = diff_json(&db, &desired, &[]);
    assert_eq!(code, 0, "{report}");
    let impacts: Vec<(String, String)> = report["access"]
        .as_array()
        .expect("access changes")
        .iter()
        .map(|a| (a["object"].to_string(), a["impact"].to_string()))
        .collect();
    assert!(
        impacts.contains(&("\"policy app.a.p_read\"".into(), "\"may-narrow\"".into()))
            && impacts
                .iter()
                .any(|(o, i)| o.contains("SELECT,INSERT") && i == "\"may-widen\""),
        "{impacts:?}"
    );
    let review = report["access_review"]
        .as_str()
        .expect("a review")
        .to_owned();
    let apply = |extra: &[&str]| apply_desired(&db, &desired, extra);
    for (extra, code) in [
        (vec![], "access-review-required"),
        (
            vec!["--expect-rls-review", "feed"],
            "access-review-mismatch",
        ),
    ] {
        let (exit, json) = apply(&extra);
        assert_eq!(exit, 2, "{json}");
        assert_eq!(json["code"], code, "{json}");
        assert_eq!(dump(&db), before, "a refused plan ran something");
    }
    let (code, applied) = apply(&["--expect-rls-review", &review]);
    assert_eq!(code, 0, "{applied}");
    let (_, again) = diff_json(&db, &desired, &[]);
    assert_eq!(
        again["changes"].as_array().map(Vec::len),
        Some(0),
        "{again}"
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn schema_limits_what_diff_manages() {
    let (db, work, desired) = pulled("diff_schema");
    edit(
        &desired.join("manifest.sql"),
        "\\ir public/tables/%4Dixed%20%43ase.sql\n",
        "",
    );
    let a = desired.join("app/tables/a.sql");
    fs::write(
        &a,
        fs::read_to_string(&a).expect("a.sql") + "\nCREATE INDEX a_g ON app.a USING btree (g);\n",
    )
    .expect("written");
    let objects = |report: &serde_json::Value| -> Vec<String> {
        report["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| c["object"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let (code, all) = diff_json(&db, &desired, &[]);
    assert_eq!(code, 0, "{all}");
    assert_eq!(
        objects(&all),
        ["index app.a_g"],
        "public is not named: unmanaged"
    );
    let (code, both) = diff_json(&db, &desired, &["--schema", "app", "--schema", "public"]);
    assert_eq!(code, 0, "{both}");
    assert_eq!(
        objects(&both),
        ["table public.Mixed Case", "index app.a_g"],
        "public managed: its table is dropped"
    );
    let (_, app) = diff_json(&db, &desired, &["--schema", "public"]);
    assert_eq!(objects(&app), ["table public.Mixed Case"], "{app}");
    let _ = fs::remove_dir_all(&work);
}

/// A dump writes every materialized view `WITH NO DATA`: one the plan creates again
/// must still hold rows afterwards, as the desired files' own `CREATE` fills it (it
/// was once left empty, and reading it failed with "has not been populated").
#[test]
fn a_materialized_view_created_again_holds_rows_as_the_desired_files_say() {
    let db = cluster().fresh_database("diff_matview").expect("database");
    cluster()
        .psql(
            &db,
            "CREATE SCHEMA m; CREATE TABLE m.t (id integer);
             INSERT INTO m.t SELECT generate_series(1, 10);
             CREATE MATERIALIZED VIEW m.kept AS SELECT id FROM m.t;
             CREATE MATERIALIZED VIEW m.changed AS SELECT id FROM m.t;",
        )
        .expect("the schema loads");
    let work = scratch("diff_matview");
    let desired = work.join("desired.sql");
    fs::write(
        &desired,
        "CREATE SCHEMA m; CREATE TABLE m.t (id integer);
         CREATE MATERIALIZED VIEW m.kept AS SELECT id FROM m.t;
         CREATE MATERIALIZED VIEW m.changed AS SELECT id + 1 AS id2 FROM m.t;",
    )
    .expect("written");
    let (code, report) = apply_desired(&db, &desired, &["--allow-destructive"]);
    assert_eq!(code, 0, "{report}");
    for view in ["kept", "changed"] {
        assert_eq!(
            cluster()
                .psql(&db, &format!("SELECT count(*) FROM m.{view};"))
                .expect("the view holds rows")
                .trim(),
            "10",
            "m.{view}"
        );
    }
    assert_no_difference(&db, &desired);
    let _ = fs::remove_dir_all(&work);
}
