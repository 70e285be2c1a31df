//! Helpers of the copy-and-swap tests: options small enough for tests, a progress
//! hook that acts at a phase (to tamper, to hold a lock, to change a shadow row), and
//! readers of what a run leaves behind.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgshift::cas::{self, CasProgress, CutoverBudgets, Mode, Phase, RunOptions};
use pgshift::connect::ConnectionSpec;
use pgshift_sql::QualifiedName;

use super::cluster;

/// Options for test runs: two workers, small chunks, short cutover budgets.
pub fn options(mode: Mode) -> RunOptions {
    RunOptions {
        mode,
        workers: 2,
        chunk_target_ms: 200,
        first_chunk_rows: 2_000,
        cutover: CutoverBudgets {
            lock_timeout_ms: 500,
            attempts: 10,
            backoff_initial_ms: 50,
            backoff_max_ms: 500,
            max_drain: 50_000,
        },
        keep_old: false,
        repair: false,
        defer_cutover: false,
    }
}

/// The connection spec of `db`.
pub fn spec(db: &str) -> ConnectionSpec {
    ConnectionSpec::parse(&cluster().connection_string(db)).expect("spec")
}

/// Starts a run of `sql` on `table` and carries it to its end.
pub async fn run(
    db: &str,
    table: &str,
    sql: &str,
    options: RunOptions,
    progress: &mut dyn CasProgress,
) -> Result<cas::RunReport, cas::CasError> {
    let statements = pgshift_sql::parse(sql).expect("valid");
    cas::start(
        &spec(db),
        &statements[0],
        &QualifiedName::bare(table),
        options,
        progress,
    )
    .await
}

/// Resumes the active run on `table`.
pub async fn resume(db: &str, table: &str) -> Result<cas::RunReport, cas::CasError> {
    cas::resume(&spec(db), &QualifiedName::bare(table), &mut cas::Silent).await
}

/// Aborts the active run on `table`.
pub async fn abort(db: &str, table: &str) -> Result<i64, cas::CasError> {
    cas::abort(&spec(db), &QualifiedName::bare(table)).await
}

/// One value read with psql.
pub fn value(db: &str, sql: &str) -> String {
    cluster().psql(db, sql).expect("query").trim().to_owned()
}

/// The OID of a relation, as text.
pub fn oid(db: &str, relation: &str) -> String {
    value(db, &format!("SELECT '{relation}'::regclass::oid"))
}

/// The newest run's number.
pub fn run_id(db: &str) -> i64 {
    value(db, "SELECT max(id) FROM pgshift.runs")
        .parse()
        .expect("a run was recorded")
}

/// The newest run's phase (and resume phase, when failed).
pub fn run_phase(db: &str) -> String {
    value(
        db,
        "SELECT phase || coalesce('/' || resume_phase, '') FROM pgshift.runs ORDER BY id DESC LIMIT 1",
    )
}

/// Waits (up to a minute) until the newest run is in `phase`.
pub async fn wait_for_phase(db: &str, phase: &str) {
    for _ in 0..600 {
        let current = cluster()
            .psql(
                db,
                "SELECT phase FROM pgshift.runs ORDER BY id DESC LIMIT 1",
            )
            .unwrap_or_default();
        if current.trim() == phase {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the run never reached {phase}: {}", run_phase(db));
}

/// Everything a run may leave behind: shadow and old relations, the engine's tables
/// (other than the run record) and functions, its triggers. Empty when clean.
pub fn artifacts(db: &str) -> String {
    value(
        db,
        "SELECT coalesce(string_agg(x, ','), '') FROM ( \
           SELECT relname::text AS x FROM pg_class WHERE relname LIKE '\\_pgshift%' \
           UNION ALL SELECT 'table:' || relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                      WHERE nspname = 'pgshift' AND relname NOT LIKE 'runs%' AND relname NOT LIKE 'migrations%' \
           UNION ALL SELECT 'function:' || proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE nspname = 'pgshift' \
           UNION ALL SELECT 'trigger:' || tgname FROM pg_trigger WHERE tgname LIKE 'pgshift\\_%') a",
    )
}

/// A progress that runs an action once, synchronously, when the run enters a phase
/// (before the phase's work starts), and records the phases seen.
pub struct Hook {
    at: Phase,
    action: Option<Box<dyn FnOnce() + Send>>,
    /// The phases entered, in order.
    pub phases: Arc<Mutex<Vec<Phase>>>,
}

impl Hook {
    /// Runs `action` when the run enters `at`.
    pub fn new(at: Phase, action: impl FnOnce() + Send + 'static) -> Self {
        Hook {
            at,
            action: Some(Box::new(action)),
            phases: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl CasProgress for Hook {
    fn phase(&mut self, phase: Phase) {
        self.phases.lock().expect("phases").push(phase);
        if phase == self.at {
            if let Some(action) = self.action.take() {
                action();
            }
        }
    }
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, _text: &str) {}
}

/// A session holding locks on a thread (and runtime) of its own, so that it can be
/// started from a synchronous [`Hook`] without blocking the run's runtime.
pub struct LockHolder {
    release: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LockHolder {
    /// Runs `sql` (typically `BEGIN; LOCK …`) on a new session and returns once it has
    /// completed; the transaction stays open until [`LockHolder::release`].
    pub fn hold(db: &str, sql: &str) -> LockHolder {
        let (ready, wait_ready) = std::sync::mpsc::channel::<Result<(), String>>();
        let (release, wait_release) = std::sync::mpsc::channel::<()>();
        let (conninfo, sql) = (cluster().connection_string(db), sql.to_owned());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let (client, connection) =
                    match tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await {
                        Ok(pair) => pair,
                        Err(e) => {
                            let _ = ready.send(Err(e.to_string()));
                            return;
                        }
                    };
                tokio::spawn(connection);
                let held = client.batch_execute(&sql).await.map_err(|e| e.to_string());
                let ok = held.is_ok();
                let _ = ready.send(held);
                if ok {
                    let _ = tokio::task::spawn_blocking(move || wait_release.recv()).await;
                    let _ = client.batch_execute("COMMIT").await;
                }
            });
        });
        wait_ready
            .recv()
            .expect("the holder answers")
            .expect("the lock is held");
        LockHolder {
            release,
            thread: Some(thread),
        }
    }

    /// Ends the holder's transaction.
    pub fn release(mut self) {
        let _ = self.release.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
