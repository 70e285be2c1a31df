//! A process that owns a cluster and is killed with SIGKILL leaves no running
//! postmaster behind (parent-death signal), and its directory is swept.
//!
//! The test binary plays both roles: run normally, `killed_owner_leaves_no_postmaster`
//! starts this same binary again with `PGSHIFT_EMBEDDED_TEST_CHILD=1`, filtered
//! to `child_holds_a_cluster`, which starts a cluster, reports it, and waits to
//! be killed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pgshift_embedded::{pid_alive, sweep_stale_clusters, Cluster, ClusterOptions};

const CHILD_ENV: &str = "PGSHIFT_EMBEDDED_TEST_CHILD";

/// In the child role: start a cluster, print `READY <postmaster pid> <dir>`,
/// then wait (bounded) to be killed. Does nothing in a normal test run.
#[test]
fn child_holds_a_cluster() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let cluster = Cluster::start(&ClusterOptions::default()).expect("child: start cluster");
    // libtest may have printed "test … ... " on the current line already.
    println!("\nREADY {} {}", cluster.pid(), cluster.dir().display());
    // Bounded: if the parent never kills us, we end and clean up normally.
    std::thread::sleep(Duration::from_secs(60));
    drop(cluster);
}

#[test]
fn killed_owner_leaves_no_postmaster() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let exe = std::env::current_exe().expect("own test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_holds_a_cluster",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child test process");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line.split_once("READY ") {
                let _ = tx.send(rest.to_owned());
            }
        }
    });
    let ready = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child never reported its cluster: {e}");
        }
    };
    let (pid, dir) = ready.split_once(' ').expect("READY <pid> <dir>");
    let postmaster: u32 = pid.parse().expect("pid");
    let dir = std::path::PathBuf::from(dir);
    assert!(pid_alive(postmaster), "postmaster {postmaster} not running");
    assert!(dir.is_dir());

    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");

    let deadline = Instant::now() + Duration::from_secs(20);
    while pid_alive(postmaster) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !pid_alive(postmaster),
        "postmaster {postmaster} outlived its killed owner"
    );
    assert!(
        dir.is_dir(),
        "a killed owner cannot have removed its directory"
    );
    sweep_stale_clusters().expect("sweep");
    assert!(!dir.exists(), "the sweep left {}", dir.display());
}
