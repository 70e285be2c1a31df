//! `pgshift throttle TABLE --pause|--resume`: only a request (exit 0 when a live
//! process runs the run, which follows; 1 when none does; 2 when there is no run), one
//! JSON document with `--format json`, and `status` showing the pause.

mod common;

use common::cas::{database, phase, spawn, wait_for_phase, REWRITE};
use common::pgshift;

/// `apply` of the rewrite with a deferred cutover (its probe limits off: the machine's
/// load must not hold it), started in the background.
fn deferred_rewrite(url: &str) -> std::process::Child {
    spawn(&[
        "apply",
        "--url",
        url,
        "--defer-cutover",
        "--max-writer-p99",
        "off",
        "--max-writer-slowdown",
        "off",
        "--sql",
        REWRITE,
    ])
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("one JSON document ({e}):\n{stdout}"))
}

#[test]
fn throttle_requests_a_pause_and_a_resume_of_a_running_run() {
    let (cluster, db) = database("throttle_cli", 2_000);
    let url = cluster.url(&db);
    let none = pgshift(&[
        "throttle", "--url", &url, "items", "--pause", "--format", "json",
    ]);
    assert_eq!(none.code, 2, "{}\n{}", none.stdout, none.stderr);
    assert_eq!(json(&none.stdout)["code"], "no-such-run", "{}", none.stdout);

    // A run waiting in `ready` (a live process holds it) takes requests.
    let mut run = deferred_rewrite(&url);
    wait_for_phase(cluster, &db, "ready", &mut run);
    let paused = pgshift(&[
        "throttle", "--url", &url, "items", "--pause", "--format", "json",
    ]);
    assert_eq!(paused.code, 0, "{}\n{}", paused.stdout, paused.stderr);
    let doc = json(&paused.stdout);
    assert_eq!(doc["command"], "throttle");
    assert_eq!(doc["result"]["paused"], true);
    assert_eq!(doc["result"]["running"], true);
    let status = pgshift(&["status", "--url", &url, "--format", "json"]);
    assert_eq!(
        json(&status.stdout)["runs"][0]["throttle_paused"],
        true,
        "{}",
        status.stdout
    );
    let text = pgshift(&["status", "--url", &url]);
    assert!(
        text.stdout.contains("paused by an operator"),
        "{}",
        text.stdout
    );
    let resumed = pgshift(&["throttle", "--url", &url, "items", "--resume"]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert!(
        resumed.stdout.starts_with("Resume requested"),
        "{}",
        resumed.stdout
    );
    assert!(
        !resumed.stdout.contains("done"),
        "a request never says done: {}",
        resumed.stdout
    );
    let swapped = pgshift(&["cutover", "--url", &url, "items"]);
    assert_eq!(swapped.code, 0, "{}\n{}", swapped.stdout, swapped.stderr);
    let output = run.wait_with_output().expect("apply ends");
    assert_eq!(output.status.code(), Some(0));

    // Neither of --pause and --resume: a usage error (nothing ran).
    let neither = pgshift(&["throttle", "--url", &url, "items"]);
    assert_eq!(neither.code, 1, "{}", neither.stderr);
}

/// `status` only reads: on a runs table an earlier version of pgshift made (before the
/// `label` and throttle columns), it shows the runs instead of failing on a missing
/// column, and adds nothing to the table.
#[test]
fn status_reads_a_runs_table_an_earlier_version_made() {
    let (cluster, db) = database("status_old_runs", 200);
    let url = cluster.url(&db);
    let done = pgshift(&["apply", "--url", &url, "--sql", REWRITE]);
    assert_eq!(done.code, 0, "{}\n{}", done.stdout, done.stderr);
    cluster
        .psql(
            &db,
            "ALTER TABLE pgshift.runs DROP COLUMN label, DROP COLUMN throttle_paused, DROP COLUMN throttle",
        )
        .expect("the older table's shape");
    let status = pgshift(&["status", "--url", &url, "--format", "json"]);
    assert_eq!(status.code, 0, "{}\n{}", status.stdout, status.stderr);
    let doc = json(&status.stdout);
    assert_eq!(doc["runs"][0]["phase"], "done", "{}", status.stdout);
    assert_eq!(
        doc["runs"][0]["throttle_paused"], false,
        "{}",
        status.stdout
    );
    let columns = cluster
        .psql(
            &db,
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'pgshift.runs'::regclass \
              AND attname IN ('label', 'throttle_paused', 'throttle') AND NOT attisdropped",
        )
        .expect("catalog");
    assert_eq!(columns.trim(), "0", "status added no column");
}

/// An operator's pause holds the swap too: a run in `ready` that is paused and then
/// asked for its cutover keeps the source in place (the phase stays `ready`, the
/// table's storage unchanged) until `--resume`, then swaps and ends done.
#[test]
fn inv_oc_5_an_operators_pause_holds_the_swap() {
    let (cluster, db) = database("throttle_hold", 2_000);
    let url = cluster.url(&db);
    let storage = || {
        cluster
            .psql(
                &db,
                "SELECT relfilenode FROM pg_class WHERE oid = 'items'::regclass",
            )
            .expect("catalog")
            .trim()
            .to_owned()
    };
    let mut run = deferred_rewrite(&url);
    wait_for_phase(cluster, &db, "ready", &mut run);
    let before = storage();
    let paused = pgshift(&["throttle", "--url", &url, "items", "--pause"]);
    assert_eq!(paused.code, 0, "{}\n{}", paused.stdout, paused.stderr);
    let requested = pgshift(&["cutover", "--url", &url, "items", "--no-wait"]);
    assert_eq!(
        requested.code, 0,
        "{}\n{}",
        requested.stdout, requested.stderr
    );
    // The process reads the request within half a second; held, it does not swap.
    for _ in 0..6 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(
            run.try_wait().expect("pollable").is_none(),
            "apply went on while paused"
        );
        assert_eq!(storage(), before, "the source is not swapped while paused");
        assert_eq!(phase(cluster, &db), "ready", "held before the swap");
    }
    let resumed = pgshift(&["throttle", "--url", &url, "items", "--resume"]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    let output = run.wait_with_output().expect("apply ends");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_ne!(storage(), before, "swapped once resumed");
}
