//! SIGINT and SIGTERM sent to a real `pgshift apply` child during a copy-and-swap run
//! under live writers: the run stops at a safe point, checkpointed (its capture stays,
//! so no write is missed), the verdict prints the resume and abort commands and exits
//! 1, `status` shows the run stopped with no live process, and `resume` finishes it
//! with no acknowledged write lost. A second signal ends the process at once (exit
//! 128 + the signal), leaving a run that `status` shows as dead and `resume` finishes.

mod common;

use std::io::Read;
use std::process::Child;
use std::time::{Duration, Instant};

use common::cas::{
    database, dead_run, hold_lock, lines_of, newest_run, phase, resume_and_check, spawn, value,
    wait_for_phase, Writers, REWRITE,
};
use common::pgshift;
use pgshift_embedded::Cluster;

/// Rows of `items`: enough for each phase to last long enough to be signalled in.
const ROWS: u32 = 100_000;

fn send(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) with the pid of a child this test started and still owns.
    let result = unsafe { libc::kill(pid, signal) };
    assert_eq!(result, 0, "the signal is sent");
}

/// Stdout, stderr and the exit code of a child that ended.
fn finish(child: Child) -> (i32, String, String) {
    let output = child.wait_with_output().expect("pgshift ends");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn capture_triggers(cluster: &Cluster, db: &str) -> u32 {
    value(
        cluster,
        db,
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'items'::regclass AND tgname LIKE 'pgshift\\_%'",
    )
    .parse()
    .expect("count")
}

/// Signals the run once it reaches `at` (with `lock` held from `verifying` on, so that
/// the swap waits and retries), and checks the stop and the resume.
fn signal_once_then_resume(at: &str, signal: i32, name: &str, resumes_at: &[&str]) {
    let (cluster, db) = database(&format!("signal_{at}"), ROWS);
    let url = cluster.connection_string(&db);
    let writers = Writers::start(cluster, &db, ROWS);
    let mut child = spawn(&[
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
    ]);
    let holder = (at == "cutover").then(|| {
        wait_for_phase(cluster, &db, "verifying", &mut child);
        hold_lock(cluster, &db)
    });
    wait_for_phase(cluster, &db, at, &mut child);
    send(&child, signal);
    let (code, stdout, stderr) = finish(child);
    if let Some(holder) = holder {
        holder.release();
    }
    assert_eq!(
        code, 1,
        "a stop after starting exits 1:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("{name} received: stopping at the next safe point")),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!("STOPPED by {name} at step 1 of 1")),
        "{stdout}"
    );
    assert!(
        stdout.contains("pgshift resume --url … items")
            && stdout.contains("pgshift abort --url … items"),
        "the commands to continue or remove it: {stdout}"
    );
    let run = newest_run(&url);
    assert_eq!(run["phase"], "failed", "{run}");
    assert!(
        resumes_at.iter().any(|p| run["resume_phase"] == *p),
        "checkpointed where it stopped ({resumes_at:?}): {run}"
    );
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("stopped by {name}"))),
        "{run}"
    );
    assert_eq!(run["live"], false, "{run}");
    assert!(
        run["next"]
            .as_str()
            .is_some_and(|n| n.starts_with("pgshift resume public.items")),
        "{run}"
    );
    assert!(
        capture_triggers(cluster, &db) > 0,
        "the capture stays installed while the run waits"
    );
    assert_eq!(
        value(cluster, &db, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'pgshift-%' AND datname = current_database()"),
        "0",
        "no statement of the run is left running on the server"
    );
    resume_and_check(cluster, &db, &url, ROWS, writers);
}

#[test]
fn inv_oc_3_sigint_while_copying_stops_checkpointed_and_resume_loses_nothing() {
    signal_once_then_resume("copying", libc::SIGINT, "SIGINT", &["copying"]);
}

#[test]
fn sigterm_while_indexing_stops_checkpointed_and_resume_loses_nothing() {
    signal_once_then_resume(
        "indexing",
        libc::SIGTERM,
        "SIGTERM",
        &["indexing", "verifying"],
    );
}

#[test]
fn sigterm_in_the_swap_stops_between_attempts_and_resume_loses_nothing() {
    signal_once_then_resume("cutover", libc::SIGTERM, "SIGTERM", &["cutover"]);
}

#[test]
fn inv_oc_4_a_second_signal_exits_at_once_and_status_shows_the_run_dead() {
    let (cluster, db) = database("signal_twice", ROWS);
    let url = cluster.connection_string(&db);
    let writers = Writers::start(cluster, &db, ROWS);
    // The swap waits up to 3 s per attempt for a reader's lock: the first signal is
    // honoured only after that attempt, so the second one arrives while it waits.
    let mut child = spawn(&[
        "apply",
        "--url",
        &url,
        "--chunk-target-ms",
        "50",
        "--cutover-lock-timeout-ms",
        "3000",
        "--cutover-attempts",
        "20",
        "--sql",
        REWRITE,
    ]);
    let stderr_lines = lines_of(child.stderr.take().expect("stderr"));
    wait_for_phase(cluster, &db, "verifying", &mut child);
    let holder = hold_lock(cluster, &db);
    wait_for_phase(cluster, &db, "cutover", &mut child);
    let live = newest_run(&url);
    assert_eq!(live["live"], true, "a running run is live: {live}");
    assert_eq!(
        live["next"],
        serde_json::Value::Null,
        "nothing to do while it runs: {live}"
    );
    send(&child, libc::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = stderr_lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the first signal is acknowledged");
        if line.contains("SIGINT received: stopping") {
            break;
        }
    }
    send(&child, libc::SIGINT);
    let status = child.wait().expect("pgshift ends");
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("stdout");
    holder.release();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{stdout}");
    assert!(
        stdout.is_empty(),
        "no verdict after an immediate exit: {stdout}"
    );
    // Dead, mid-swap, nothing recorded: status tells it from a live run.
    let dead = dead_run(&url);
    assert_eq!(dead["phase"], "cutover", "{dead}");
    let text = pgshift(&["status", "--url", &url]);
    assert!(
        text.stdout.contains("process: none is running it"),
        "{}",
        text.stdout
    );
    assert_ne!(phase(cluster, &db), "done");
    resume_and_check(cluster, &db, &url, ROWS, writers);
}
