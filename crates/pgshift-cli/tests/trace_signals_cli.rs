//! Signals while `pgshift apply` traces procedural code on its throwaway clone
//! (docs/EXECUTION.md, "Procedural code" and "SIGINT and SIGTERM"), against a real
//! child process and its real clone server:
//!
//! * a first SIGINT lets the trace finish, the clone is removed (its directory and
//!   its server), and apply stops before its first unit: nothing runs on the target,
//!   the verdict says `STOPPED by SIGINT`, exit 1;
//! * SIGKILL cannot be handled: the clone's server gets its parent-death signal and
//!   stops, and the next cluster start of any pgshift process sweeps the directory.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::cas::{spawn, value};
use common::pgshift;
use pgshift_embedded::{cache_root, shared_cluster};

/// A block the trace needs a few seconds for (its `pg_sleep` runs on the clone), so
/// that the signal lands while the clone lives.
const SLOW_BLOCK: &str = "DO $$ BEGIN PERFORM pg_catalog.pg_sleep(4); \
     CREATE TABLE made_by_the_block (id int); END $$;";

fn send(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) with the pid of a child this test started and still owns.
    let result = unsafe { libc::kill(pid, signal) };
    assert_eq!(result, 0, "the signal is sent");
}

/// The cluster directories of process `pid` in the harness's cache root.
fn clusters_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("c-{pid}-");
    std::fs::read_dir(cache_root())
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The pid the clone's postmaster recorded, once it has started.
fn postmaster_of(dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(dir.join("data").join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// Whether `pid` is a running process (a zombie counts as ended).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Waits until the child's clone has a running server: the trace is under way.
fn wait_for_clone(child: &mut Child) -> (PathBuf, i32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            child.try_wait().expect("pgshift pollable").is_none(),
            "pgshift ended before its clone started"
        );
        if let Some(found) = clusters_of(child.id()).into_iter().find_map(|dir| {
            postmaster_of(&dir)
                .filter(|pid| running(*pid))
                .map(|pid| (dir, pid))
        }) {
            return found;
        }
        assert!(Instant::now() < deadline, "no clone appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn target(name: &str) -> (String, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database(name).expect("a database");
    cluster
        .psql(&db, "CREATE TABLE items (id bigint PRIMARY KEY, note text)")
        .expect("schema");
    (cluster.connection_string(&db), db)
}

fn block_ran(db: &str) -> String {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    value(
        cluster,
        db,
        "SELECT pg_catalog.to_regclass('made_by_the_block') IS NOT NULL",
    )
}

#[test]
fn sigint_during_a_trace_removes_the_clone_and_runs_nothing() {
    let (url, db) = target("trace_sigint");
    let mut child = spawn(&["apply", "--url", &url, "--sql", SLOW_BLOCK]);
    let (dir, postmaster) = wait_for_clone(&mut child);
    send(&child, libc::SIGINT);
    let output = child.wait_with_output().expect("pgshift ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a stop after starting exits 1:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("SIGINT received: stopping at the next safe point"),
        "{stderr}"
    );
    assert!(stdout.contains("STOPPED by SIGINT"), "{stdout}");
    assert!(!dir.exists(), "the clone's directory is removed: {dir:?}");
    assert!(!running(postmaster), "the clone's server is stopped");
    assert_eq!(block_ran(&db), "f", "nothing ran on the target");
}

#[test]
fn sigkill_during_a_trace_stops_the_clone_and_the_next_start_sweeps_it() {
    let (url, db) = target("trace_sigkill");
    let mut child = spawn(&["apply", "--url", &url, "--sql", SLOW_BLOCK]);
    let (dir, postmaster) = wait_for_clone(&mut child);
    send(&child, libc::SIGKILL);
    let status = child.wait().expect("pgshift ends");
    assert_eq!(status.code(), None, "killed by the signal");
    wait_until("the clone's server gets its parent-death signal", || {
        !running(postmaster)
    });
    assert!(dir.exists(), "a killed process cannot remove its clone");
    // Any pgshift that starts a cluster sweeps what dead processes left.
    let file = std::env::temp_dir().join(format!("pgshift-sweep-{}.sql", std::process::id()));
    std::fs::write(&file, "CREATE TABLE swept_by_the_next_start (id int);\n").expect("file");
    let run = pgshift(&["lint", "--trace", file.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_file(&file);
    assert!(
        run.code == 0 || run.code == 2,
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!dir.exists(), "the next cluster start swept {dir:?}");
    assert_eq!(block_ran(&db), "f", "nothing ran on the target");
}
