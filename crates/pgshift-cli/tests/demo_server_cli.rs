//! `pgshift demo` where no server can be had says how to get one, with exit code 1.
//! (Where none is installed it downloads one: `pgshift-embedded`'s `fetch` tests.)

mod common;

use common::pgshift_in_env;

fn demo(env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::env::temp_dir().join(format!("pgshift-demo-noserver-{}", std::process::id()));
    let out_text = out.to_string_lossy().into_owned();
    let run = pgshift_in_env(&["demo", "--out", &out_text], env);
    let _ = std::fs::remove_dir_all(&out);
    (run.code, run.stdout, run.stderr)
}

#[test]
fn an_unusable_pg_bin_says_what_to_point_it_at() {
    let dir = "/nonexistent/pgshift-bin";
    let (code, stdout, stderr) = demo(&[("PGSHIFT_PG_BIN", dir)]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "* starting a throwaway PostgreSQL …\n");
    assert_eq!(
        stderr,
        format!(
            "pgshift demo: PGSHIFT_PG_BIN={dir}: not a directory; set it to the bin directory \
             of a PostgreSQL 14+ server (holding `postgres` and `initdb`), or unset it to use an \
             installed server or, if there is none, a downloaded one\n"
        )
    );
}

#[test]
fn an_unreadable_fetch_setting_says_what_it_takes() {
    let (code, _, stderr) = demo(&[("PGSHIFT_PG_FETCH", "sometimes")]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "pgshift demo: PGSHIFT_PG_FETCH=\"sometimes\": expected 0 (do not download), 1 \
         (download 18) or a major version such as 17\n"
    );
}

/// `pgshift demo --defer-cutover` used to wait forever for a `pgshift cutover` that
/// nobody could send (the demo never says how to reach its cluster): it is refused at
/// once, before any cluster starts.
#[test]
fn defer_cutover_is_refused_before_anything_starts() {
    let run = pgshift_in_env(&["demo", "--defer-cutover"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "", "no cluster was started");
    assert!(
        run.stderr
            .starts_with("pgshift demo: --defer-cutover would wait"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("do this:"), "{}", run.stderr);
}

/// A running demo, interrupted by `signal` once its load runs: it stops, removes its
/// cluster (the postmaster is gone, and so is the directory) and exits 128 + the
/// signal. It used to die of the signal, leaving both for the next start's sweep.
fn interrupt_a_running_demo(signal: i32, name: &str) {
    use std::time::{Duration, Instant};

    let out = std::env::temp_dir().join(format!("pgshift-demo-{name}-{}", std::process::id()));
    let out_text = out.to_string_lossy().into_owned();
    let mut child =
        common::cas::spawn(&["demo", "--rows-per-partition", "2000", "--out", &out_text]);
    let stdout = common::cas::lines_of(child.stdout.take().expect("stdout"));
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut cluster_dir = None;
    loop {
        let line = stdout
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the demo reaches its load");
        // `  PostgreSQL 15.18 in DIR (socket …)`
        if let Some(rest) = line.trim_start().strip_prefix("PostgreSQL ") {
            let dir = rest
                .split_once(" in ")
                .and_then(|(_, dir)| dir.split_once(" (socket"))
                .map(|(dir, _)| std::path::PathBuf::from(dir));
            cluster_dir = dir;
        }
        if line.starts_with("* starting the load") {
            break;
        }
    }
    let dir = cluster_dir.expect("the demo says where its cluster is");
    let postmaster: i32 = std::fs::read_to_string(dir.join("data/postmaster.pid"))
        .expect("the server runs")
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("a postmaster pid");
    std::thread::sleep(Duration::from_millis(500));
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) with the pid of a child this test started and still owns.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "the signal is sent");
    let output = child.wait_with_output().expect("the demo ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(128 + signal), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "pgshift demo: {name} received: stopping the load and removing the throwaway PostgreSQL"
        )),
        "{stderr}"
    );
    assert!(!dir.exists(), "{} is left behind", dir.display());
    // SAFETY: signal 0 only asks whether the process exists.
    let alive = unsafe { libc::kill(postmaster, 0) } == 0;
    assert!(!alive, "the postmaster (pid {postmaster}) still runs");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn an_interrupted_demo_removes_its_cluster_and_exits_by_its_signal() {
    interrupt_a_running_demo(libc::SIGINT, "SIGINT");
    interrupt_a_running_demo(libc::SIGTERM, "SIGTERM");
}
