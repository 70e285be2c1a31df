//! Copy-and-swap through the `pgshift` binary: a deferred cutover with `status` and
//! `cutover`, JSON progress lines, and the engine killed with SIGKILL in each phase,
//! then `resume` (no lost write) or `abort` (nothing left behind).

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{pgshift, workspace_root};
use pgshift_embedded::{shared_cluster, Cluster};

const SCHEMA: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL, note text);
CREATE INDEX items_qty_idx ON items (qty);
CREATE INDEX items_note_idx ON items (note);
CREATE INDEX items_qty_note_idx ON items (qty, note);
INSERT INTO items SELECT g, g % 1000, md5(g::text) FROM generate_series(1, 200000) g;
ANALYZE items;";

const REWRITE: &str = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";

fn database(prefix: &str) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database(prefix).expect("database");
    cluster.psql(&db, SCHEMA).expect("schema");
    (cluster, db)
}

fn value(cluster: &Cluster, db: &str, sql: &str) -> String {
    cluster.psql(db, sql).expect("query").trim().to_owned()
}

/// `pgshift` started in the background.
fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_pgshift"))
        .args(args)
        .current_dir(workspace_root())
        .env_remove("PGSHIFT_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pgshift starts")
}

/// The newest run's phase, or "" when there is none yet.
fn phase(cluster: &Cluster, db: &str) -> String {
    cluster
        .psql(
            db,
            "SELECT phase FROM pgshift.runs ORDER BY id DESC LIMIT 1",
        )
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn wait_for_phase(cluster: &Cluster, db: &str, wanted: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = phase(cluster, db);
        if now == wanted {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("pgshift ended ({status}) before phase {wanted}; last phase {now:?}");
        }
        assert!(Instant::now() < deadline, "never reached {wanted}: {now:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The lines a child writes to a pipe, as they come.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Everything a run may leave behind; empty when clean.
fn debris(cluster: &Cluster, db: &str) -> String {
    value(
        cluster,
        db,
        "SELECT coalesce(string_agg(x, ','), '') FROM ( \
           SELECT relname::text AS x FROM pg_class WHERE relname LIKE '\\_pgshift%' \
           UNION ALL SELECT 'table:' || relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                      WHERE nspname = 'pgshift' AND c.relkind = 'r' AND relname <> 'runs' \
           UNION ALL SELECT 'function:' || proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE nspname = 'pgshift' \
           UNION ALL SELECT 'trigger:' || tgname FROM pg_trigger WHERE tgname LIKE 'pgshift\\_%' \
           UNION ALL SELECT 'run:' || id FROM pgshift.runs WHERE phase <> 'done' \
           UNION ALL SELECT 'advisory lock' FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) a",
    )
}

/// Writers inserting new rows and updating existing ones, one transaction each,
/// remembering what the server acknowledged.
struct Writers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    inserted: Arc<Mutex<Vec<i64>>>,
    updates: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Writers {
    fn start(cluster: &Cluster, db: &str) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let inserted = Arc::new(Mutex::new(Vec::new()));
        let updates = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for writer in 0..2_i64 {
            let conninfo = cluster.connection_string(db);
            let (stop, inserted, updates, failures) = (
                stop.clone(),
                inserted.clone(),
                updates.clone(),
                failures.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let (client, connection) =
                        tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
                            .await
                            .expect("writer connects");
                    tokio::spawn(connection);
                    let mut n: i64 = 10_000_000 + writer * 1_000_000;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let insert = client
                            .execute(
                                "INSERT INTO items (id, qty, note) VALUES ($1, 1, 'w')",
                                &[&n],
                            )
                            .await;
                        match insert {
                            Ok(_) => inserted.lock().expect("ledger").push(n),
                            Err(e) => failures.lock().expect("ledger").push(e.to_string()),
                        }
                        let key = 1 + (n * 7919) % 200_000;
                        let update = client
                            .execute("UPDATE items SET qty = qty + 1 WHERE id = $1", &[&key])
                            .await;
                        match update {
                            Ok(1) => {
                                updates.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(other) => failures
                                .lock()
                                .expect("ledger")
                                .push(format!("update touched {other} rows")),
                            Err(e) => failures.lock().expect("ledger").push(e.to_string()),
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                });
            }));
        }
        Writers {
            stop,
            threads,
            inserted,
            updates,
            failures,
        }
    }

    fn stop(self) -> (Vec<i64>, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().expect("writer");
        }
        let inserted = self.inserted.lock().expect("ledger").clone();
        let failures = self.failures.lock().expect("ledger").clone();
        (inserted, self.updates.load(Ordering::Relaxed), failures)
    }
}

/// Every acknowledged write is in the table: each inserted row, and each update
/// (the sum of `qty` moved by exactly the acknowledged updates).
fn assert_no_lost_write(cluster: &Cluster, db: &str, inserted: &[i64], updates: u64) {
    let present: u64 = value(
        cluster,
        db,
        "SELECT count(*) FROM items WHERE id >= 10000000",
    )
    .parse()
    .expect("count");
    assert_eq!(present, inserted.len() as u64, "every acknowledged insert");
    let moved: u64 = value(
        cluster,
        db,
        "SELECT sum(qty) - (SELECT sum(g % 1000) FROM generate_series(1, 200000) g) FROM items WHERE id <= 200000",
    )
    .parse()
    .expect("sum");
    assert_eq!(moved, updates, "every acknowledged update");
}

/// Kills the engine with SIGKILL once the run reaches `at`, resumes it with
/// `pgshift resume` while the writers keep writing, and checks that nothing was lost.
fn kill_then_resume(at: &str) {
    let (cluster, db) = database(&format!("cas_kill_{at}"));
    let url = cluster.connection_string(&db);
    let writers = Writers::start(cluster, &db);
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

    let resumed = pgshift(&["resume", "--url", &url, "items"]);
    let (inserted, updates, failures) = writers.stop();
    assert_eq!(
        resumed.code, 0,
        "resume after a kill in {at}:\n{}\n{}",
        resumed.stdout, resumed.stderr
    );
    assert!(resumed.stdout.contains(": done."), "{}", resumed.stdout);
    assert!(failures.is_empty(), "no write failed: {failures:?}");
    assert!(inserted.len() > 20, "writers wrote: {}", inserted.len());
    assert_no_lost_write(cluster, &db, &inserted, updates);
    assert_eq!(
        value(
            cluster,
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"
        ),
        "bigint"
    );
    assert_eq!(debris(cluster, &db), "", "after a kill in {at} and resume");
}

/// A session holding ACCESS SHARE on `items` in an open transaction.
struct Holder {
    child: Child,
}

impl Holder {
    fn release(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hold_lock(cluster: &Cluster, db: &str) -> Holder {
    use std::io::Write;
    let mut child = cluster
        .command("psql")
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            &cluster.connection_string(db),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql starts");
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"BEGIN; SELECT count(*) FROM items WHERE id = 1;\n")
        .expect("holder");
    // Wait until the lock is visibly held.
    for _ in 0..200 {
        if value(
            cluster,
            db,
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.relation = 'items'::regclass AND a.state = 'idle in transaction'",
        ) != "0"
        {
            return Holder { child };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the holder never held its lock");
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
    let (cluster, db) = database("cas_kill_abort");
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
    let (cluster, db) = database("cas_deferred");
    let url = cluster.connection_string(&db);
    let writers = Writers::start(cluster, &db);
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
    assert!(cutover.stdout.contains("swaps now"), "{}", cutover.stdout);
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
    assert_no_lost_write(cluster, &db, &inserted, updates);
    assert_eq!(debris(cluster, &db), "");
}
