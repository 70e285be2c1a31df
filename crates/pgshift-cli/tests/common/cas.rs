//! Copy-and-swap runs of the `pgshift` binary from tests: a seeded `items` table,
//! writers that remember what the server acknowledged, the lost-write check, a lock
//! holder, and waiting for a run's phase.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::workspace_root;
use pgshift_embedded::{shared_cluster, Cluster};

/// `items` with `rows` rows and three secondary indexes.
pub fn schema(rows: u32) -> String {
    format!(
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL, note text);
CREATE INDEX items_qty_idx ON items (qty);
CREATE INDEX items_note_idx ON items (note);
CREATE INDEX items_qty_note_idx ON items (qty, note);
INSERT INTO items SELECT g, g % 1000, md5(g::text) FROM generate_series(1, {rows}) g;
ANALYZE items;"
    )
}

/// The rewrite the tests run.
pub const REWRITE: &str = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";

/// A fresh database holding `items` with `rows` rows.
pub fn database(prefix: &str, rows: u32) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database(prefix).expect("database");
    cluster.psql(&db, &schema(rows)).expect("schema");
    (cluster, db)
}

pub fn value(cluster: &Cluster, db: &str, sql: &str) -> String {
    cluster.psql(db, sql).expect("query").trim().to_owned()
}

/// `pgshift` started in the background.
pub fn spawn(args: &[&str]) -> Child {
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
pub fn phase(cluster: &Cluster, db: &str) -> String {
    cluster
        .psql(
            db,
            "SELECT phase FROM pgshift.runs ORDER BY id DESC LIMIT 1",
        )
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

pub fn wait_for_phase(cluster: &Cluster, db: &str, wanted: &str, child: &mut Child) {
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
pub fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
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
pub fn debris(cluster: &Cluster, db: &str) -> String {
    value(
        cluster,
        db,
        "SELECT coalesce(string_agg(x, ','), '') FROM ( \
           SELECT relname::text AS x FROM pg_class WHERE relname LIKE '\\_pgshift%' \
           UNION ALL SELECT 'table:' || relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                      WHERE nspname = 'pgshift' AND c.relkind = 'r' AND relname NOT IN ('runs', 'throttle_probe') \
           UNION ALL SELECT 'function:' || proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE nspname = 'pgshift' \
           UNION ALL SELECT 'trigger:' || tgname FROM pg_trigger WHERE tgname LIKE 'pgshift\\_%' \
           UNION ALL SELECT 'run:' || id FROM pgshift.runs WHERE phase <> 'done' \
           UNION ALL SELECT 'advisory lock' FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) a",
    )
}

/// Writers inserting new rows and updating existing ones, one transaction each,
/// remembering what the server acknowledged.
pub struct Writers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    inserted: Arc<Mutex<Vec<i64>>>,
    updates: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Writers {
    pub fn start(cluster: &Cluster, db: &str, rows: u32) -> Writers {
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
                        let key = 1 + (n * 7919) % i64::from(rows);
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

    pub fn stop(self) -> (Vec<i64>, u64, Vec<String>) {
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
pub fn assert_no_lost_write(
    cluster: &Cluster,
    db: &str,
    rows: u32,
    inserted: &[i64],
    updates: u64,
) {
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
        &format!("SELECT sum(qty) - (SELECT sum(g % 1000) FROM generate_series(1, {rows}) g) FROM items WHERE id <= {rows}"),
    )
    .parse()
    .expect("sum");
    assert_eq!(moved, updates, "every acknowledged update");
}

/// A session holding a lock on a table in an open transaction.
pub struct Holder {
    child: Child,
}

impl Holder {
    pub fn release(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A session holding ACCESS SHARE on `items` in an open transaction.
pub fn hold_lock(cluster: &Cluster, db: &str) -> Holder {
    hold(
        cluster,
        db,
        "items",
        "SELECT count(*) FROM items WHERE id = 1",
    )
}

/// A session that ran `sql` in a transaction it keeps open, holding its locks on
/// `table`.
pub fn hold(cluster: &Cluster, db: &str, table: &str, sql: &str) -> Holder {
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
        .write_all(format!("BEGIN; {sql};\n").as_bytes())
        .expect("holder");
    // Wait until the lock is visibly held.
    for _ in 0..200 {
        if value(
            cluster,
            db,
            &format!("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.relation = '{table}'::regclass AND l.granted AND a.state = 'idle in transaction'"),
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

/// `status --format json`'s newest run.
pub fn newest_run(url: &str) -> serde_json::Value {
    let status = super::pgshift(&["status", "--url", url, "--format", "json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let json: serde_json::Value = serde_json::from_str(&status.stdout).expect("status JSON");
    json["runs"][0].clone()
}

/// The newest run once `status` shows no live process holds it (a killed process's
/// backend lets go of the run lock within about a second), with its next step:
/// resume or abort it.
pub fn dead_run(url: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let run = newest_run(url);
        if run["live"] == false {
            assert!(
                run["next"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("pgshift resume public.items")),
                "a dead run gets its next step: {run}"
            );
            return run;
        }
        assert!(Instant::now() < deadline, "still live: {run}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Resumes the run of `items` while the writers write, stops them, and checks that
/// every acknowledged write is there, the rewrite took, and nothing of the run is left.
pub fn resume_and_check(cluster: &Cluster, db: &str, url: &str, rows: u32, writers: Writers) {
    let resumed = super::pgshift(&["resume", "--url", url, "items"]);
    let (inserted, updates, failures) = writers.stop();
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert!(resumed.stdout.contains(": done."), "{}", resumed.stdout);
    assert!(failures.is_empty(), "no write failed: {failures:?}");
    assert!(inserted.len() > 20, "writers wrote: {}", inserted.len());
    assert_no_lost_write(cluster, db, rows, &inserted, updates);
    assert_eq!(
        value(
            cluster,
            db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"
        ),
        "bigint"
    );
    assert_eq!(debris(cluster, db), "");
}
