//! Copy-and-swap through the `pgshift` binary: a deferred cutover with `status` and
//! `cutover`, JSON progress lines, and the engine killed with SIGKILL in each phase,
//! then `resume` (no lost write) or `abort` (nothing left behind).

mod common;

use std::io::Read;

use std::time::Duration;

use common::cas::{
    assert_no_lost_write, database, dead_run, debris, hold_lock, lines_of, phase, resume_and_check,
    spawn, value, wait_for_phase, Writers, REWRITE,
};
use common::pgshift;

/// Rows of `items` in these tests.
const ROWS: u32 = 200_000;

/// Kills the engine with SIGKILL once the run reaches `at`, resumes it with
/// `pgshift resume` while the writers keep writing, and checks that nothing was lost.
fn kill_then_resume(at: &str) {
    let (cluster, db) = database(&format!("cas_kill_{at}"), ROWS);
    let url = cluster.connection_string(&db);
    let writers = Writers::start(cluster, &db, ROWS);
    let args = [
        "apply",
        "--url",
        &url,
        "--chunk-target-ms",
        "50",
        "--cutover-lock-timeout-ms",
        "200",
        "--cutover-attempts",
        "50",
        "--sql",
        REWRITE,
    ];
    let mut holder = None;
    let mut child = spawn(&args);
    if at == "cutover" {
        // A held lock makes the swap wait and retry long enough to be killed in it.
        wait_for_phase(cluster, &db, "verifying", &mut child);
        holder = Some(hold_lock(cluster, &db));
    }
    wait_for_phase(cluster, &db, at, &mut child);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    if let Some(holder) = holder {
        holder.release();
    }
    assert_ne!(phase(cluster, &db), "done", "killed before the end");
    dead_run(&url);
    resume_and_check(cluster, &db, &url, ROWS, writers);
}

#[test]
fn killed_while_copying_then_resumed_loses_nothing() {
    kill_then_resume("copying");
}

#[test]
fn killed_while_indexing_then_resumed_loses_nothing() {
    kill_then_resume("indexing");
}

#[test]
fn killed_while_verifying_then_resumed_loses_nothing() {
    kill_then_resume("verifying");
}

#[test]
fn killed_in_cutover_then_resumed_loses_nothing() {
    kill_then_resume("cutover");
}

#[test]
fn killed_then_aborted_leaves_nothing_behind() {
    let (cluster, db) = database("cas_kill_abort", ROWS);
    let url = cluster.connection_string(&db);
    let before = value(cluster, &db, "SELECT 'items'::regclass::oid");
    let mut child = spawn(&[
        "apply",
        "--url",
        &url,
        "--chunk-target-ms",
        "50",
        "--sql",
        REWRITE,
    ]);
    wait_for_phase(cluster, &db, "copying", &mut child);
    std::thread::sleep(Duration::from_millis(100));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let status = pgshift(&["status", "--url", &url]);
    assert_eq!(status.code, 0);
    assert!(
        status.stdout.contains("on public.items"),
        "{}",
        status.stdout
    );
    let aborted = pgshift(&["abort", "--url", &url, "items"]);
    assert_eq!(aborted.code, 0, "{}\n{}", aborted.stdout, aborted.stderr);
    assert!(aborted.stdout.contains("aborted"), "{}", aborted.stdout);
    assert_eq!(debris(cluster, &db), "");
    assert_eq!(value(cluster, &db, "SELECT 'items'::regclass::oid"), before);
    assert_eq!(value(cluster, &db, "SELECT count(*) FROM items"), "200000");
    let again = pgshift(&["abort", "--url", &url, "items"]);
    assert_eq!(again.code, 2, "nothing left to abort: {}", again.stderr);
}

#[test]
fn a_deferred_cutover_waits_for_the_operator_and_survives_a_kill() {
    let (cluster, db) = database("cas_deferred", ROWS);
    let url = cluster.connection_string(&db);
    let writers = Writers::start(cluster, &db, ROWS);
    let mut child = spawn(&[
        "apply",
        "--url",
        &url,
        "--defer-cutover",
        "--format",
        "json",
        "--sql",
        REWRITE,
    ]);
    wait_for_phase(cluster, &db, "ready", &mut child);
    let status = pgshift(&["status", "--url", &url, "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    assert_eq!(json["runs"][0]["phase"], "ready");
    assert_eq!(json["runs"][0]["next"], "pgshift cutover public.items");
    // Killed while waiting: resuming brings it back to `ready`, verified again.
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // Its JSON progress named each index build of the indexing phase, in turn.
    let mut first_stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut first_stderr)
        .expect("stderr is text");
    let builds: Vec<serde_json::Value> = first_stderr
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON progress line"))
        .filter(|e: &serde_json::Value| e["event"] == "index-build" && e["phase"].is_null())
        .collect();
    assert!(!builds.is_empty(), "{first_stderr}");
    assert_eq!(builds[0]["index"], "primary key", "{first_stderr}");
    for (i, build) in builds.iter().enumerate() {
        assert_eq!(build["number"], i + 1, "{first_stderr}");
        assert_eq!(build["count"], builds.len(), "{first_stderr}");
    }
    let mut resumed = spawn(&["resume", "--url", &url, "--format", "json", "items"]);
    let stderr_lines = lines_of(resumed.stderr.take().expect("stderr"));
    let mut stderr = String::new();
    loop {
        let line = stderr_lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the resumed run reports its phases");
        stderr.push_str(&line);
        stderr.push('\n');
        if line.contains("\"phase\":\"ready\"") && line.contains("\"event\":\"phase\"") {
            break;
        }
    }
    let cutover = pgshift(&["cutover", "--url", &url, "items"]);
    assert_eq!(cutover.code, 0, "{}\n{}", cutover.stdout, cutover.stderr);
    assert!(
        cutover
            .stdout
            .contains("swapped: items is the rewritten table now"),
        "cutover waits for the swap: {}",
        cutover.stdout
    );
    let output = resumed.wait_with_output().expect("resume ends");
    while let Ok(line) = stderr_lines.recv_timeout(Duration::from_secs(5)) {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let (inserted, updates, failures) = writers.stop();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("resume JSON");
    assert_eq!(report["result"]["phase"], "done");
    assert!(report["result"]["swap"]["lock_held_us"].as_u64().is_some());
    // Progress went to stderr as JSON lines, one event each.
    let events: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON progress line"))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "phase" && e["phase"] == "cutover"),
        "{stderr}"
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert_no_lost_write(cluster, &db, ROWS, &inserted, updates);
    assert_eq!(debris(cluster, &db), "");
}

/// A rewrite the data rejects fails (exit 1) saying so, with a next step that is not
/// `resume` (which could never succeed), and leaves nothing of its run on the table.
#[test]
fn a_rewrite_the_data_rejects_says_so_and_leaves_nothing_behind() {
    let (cluster, db) = database("cas_data_rejects", 5_000);
    cluster
        .psql(&db, "UPDATE items SET note = 'not a uuid' WHERE id = 4000")
        .expect("a row the new type refuses");
    let url = cluster.connection_string(&db);
    let run = pgshift(&[
        "apply",
        "--url",
        &url,
        "--format",
        "json",
        "--sql",
        "ALTER TABLE items ALTER COLUMN note TYPE uuid USING note::uuid",
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("the table's data rejects the change")
            && run.stdout.contains("not a uuid")
            && !run.stdout.contains("pgshift resume"),
        "{}",
        run.stdout
    );
    assert_eq!(
        value(
            cluster,
            &db,
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'pgshift\\_%'"
        ),
        "0"
    );
    assert_eq!(
        value(
            cluster,
            &db,
            "SELECT count(*) FROM pg_class WHERE relname LIKE '\\_pgshift%'"
        ),
        "0"
    );
    assert_eq!(
        value(
            cluster,
            &db,
            "SELECT string_agg(phase, ',') FROM pgshift.runs"
        ),
        "aborted"
    );
}
