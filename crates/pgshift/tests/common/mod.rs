//! Shared helpers of the execution tests: databases, sessions, a writer that measures
//! how long each write waited, and catalog comparisons.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgshift::catalog::{read_snapshot, CatalogSnapshot, RelationFacts};
use pgshift::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift::exec::{
    apply, ApplyOptions, ApplyVerdict, NoProgress, Sessions, StepBudgets, TokioSleeper,
};
use pgshift::plan::{plan, PlanInput};
use pgshift::script::TransactionMode;
use pgshift_embedded::{shared_cluster, Cluster};

pub mod cas;
pub mod exec_tables;
pub mod pooler;
use pgshift_sql::QualifiedName;
use tokio_postgres::{Client, NoTls};

/// The test binary's cluster.
pub fn cluster() -> &'static Cluster {
    shared_cluster().expect("a PostgreSQL cluster starts")
}

/// How many throwaway cluster directories this test process has in the harness's
/// cache now (a trace's clone is one while it lives).
pub fn cluster_dirs() -> usize {
    let prefix = format!("c-{}-", std::process::id());
    std::fs::read_dir(pgshift_embedded::cache_root())
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .count()
        })
        .unwrap_or(0)
}

/// A fresh database with `schema` loaded.
pub fn database(prefix: &str, schema: &str) -> String {
    let db = cluster().fresh_database(prefix).expect("database");
    if !schema.is_empty() {
        cluster().psql(&db, schema).expect("schema loads");
    }
    db
}

/// A plain client (no pgshift budgets).
pub async fn client(db: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(&cluster().connection_string(db), NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    client
}

/// A pgshift session.
pub async fn session(db: &str) -> Session {
    let spec = ConnectionSpec::parse(&cluster().connection_string(db)).expect("spec");
    let budgets = SessionBudgets {
        lock_timeout_ms: 1_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 60_000,
    };
    connect(&spec, &budgets).await.expect("session")
}

/// Budgets small enough for tests.
pub const TEST_BUDGETS: StepBudgets = StepBudgets {
    lock_timeout_ms: 300,
    weak_lock_timeout_ms: 30_000,
    statement_timeout_ms: 30_000,
    build_timeout_ms: 60_000,
    max_attempts: 5,
    backoff_initial_ms: 50,
    backoff_max_ms: 200,
};

/// Plans and applies `sql` with pgshift.
pub async fn apply_sql(
    db: &str,
    sql: &str,
    budgets: StepBudgets,
    allow_blocking: &[&str],
) -> ApplyVerdict {
    apply_sql_within(db, sql, budgets, allow_blocking, None).await
}

/// [`apply_sql`] with `--max-table-size`.
pub async fn apply_sql_within(
    db: &str,
    sql: &str,
    budgets: StepBudgets,
    allow_blocking: &[&str],
    max_table_size: Option<u64>,
) -> ApplyVerdict {
    let session = session(db).await;
    apply_on_within(&session, db, sql, budgets, allow_blocking, max_table_size).await
}

/// Plans and applies `sql` with pgshift on `session` (a session of `db`).
pub async fn apply_on(
    session: &Session,
    db: &str,
    sql: &str,
    budgets: StepBudgets,
    allow_blocking: &[&str],
) -> ApplyVerdict {
    apply_on_within(session, db, sql, budgets, allow_blocking, None).await
}

async fn apply_on_within(
    session: &Session,
    db: &str,
    sql: &str,
    budgets: StepBudgets,
    allow_blocking: &[&str],
    max_table_size: Option<u64>,
) -> ApplyVerdict {
    let monitor = session_for_monitor(db).await;
    let statements = pgshift_sql::parse(sql).expect("valid SQL");
    let planned = plan(
        session,
        vec![PlanInput {
            path: "<test>".to_owned(),
            statements,
        }],
        TransactionMode::Statement,
    )
    .await
    .expect("plans");
    let sessions = Sessions {
        main: session.client(),
        monitor: Some(monitor.client()),
        user_search_path: session.user_search_path(),
    };
    let options = ApplyOptions {
        max_table_size,
        budgets,
        allow_blocking: allow_blocking
            .iter()
            .map(|t| QualifiedName::bare(*t))
            .collect(),
        copy_and_swap: None,
    };
    apply(
        &sessions,
        &planned.files[0].script,
        &options,
        &TokioSleeper,
        &mut NoProgress,
    )
    .await
}

async fn session_for_monitor(db: &str) -> Session {
    let spec = ConnectionSpec::parse(&cluster().connection_string(db)).expect("spec");
    connect(&spec, &SessionBudgets::READ_ONLY_PLAN)
        .await
        .expect("monitor")
}

/// A writer inserting into a table in a loop, one transaction per row, recording
/// how long each insert took from the writer's side.
pub struct Writer {
    stop: Arc<AtomicBool>,
    committed: Arc<std::sync::atomic::AtomicU64>,
    handle: tokio::task::JoinHandle<WriterStats>,
}

/// What the writer saw.
#[derive(Debug, Clone, Default)]
pub struct WriterStats {
    /// Inserts that committed.
    pub committed: u64,
    /// Inserts that failed.
    pub failed: u64,
    /// The longest insert, from send to acknowledgement.
    pub max_latency: Duration,
    /// Errors seen (first few).
    pub errors: Vec<String>,
}

impl Writer {
    /// Starts writing `insert` (a statement with one `$1::bigint` parameter, a
    /// running number) on its own connection, at most every `pause`.
    pub async fn start(db: &str, insert: &'static str, pause: Duration) -> Writer {
        let client = client(db).await;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let committed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = committed.clone();
        let handle = tokio::spawn(async move {
            let mut stats = WriterStats::default();
            let mut n: i64 = 1_000_000;
            while !flag.load(Ordering::Relaxed) {
                n += 1;
                let started = Instant::now();
                match client.execute(insert, &[&n]).await {
                    Ok(_) => {
                        stats.committed += 1;
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(err) => {
                        stats.failed += 1;
                        if stats.errors.len() < 5 {
                            stats.errors.push(
                                err.as_db_error()
                                    .map_or_else(|| err.to_string(), |db| db.message().to_owned()),
                            );
                        }
                    }
                }
                stats.max_latency = stats.max_latency.max(started.elapsed());
                tokio::time::sleep(pause).await;
            }
            stats
        });
        Writer {
            stop,
            committed,
            handle,
        }
    }

    /// Inserts committed so far.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Relaxed)
    }

    /// Blocks the calling thread (not the writer's runtime) until `more` inserts
    /// have committed from now on; panics after `limit`. For a synchronous progress
    /// hook, so that a run's phase is sure to see writes however fast it goes.
    pub fn waiter(&self, more: u64, limit: Duration) -> impl FnOnce() + Send + 'static {
        let committed = self.committed.clone();
        move || {
            let from = committed.load(Ordering::Relaxed);
            let started = Instant::now();
            while committed.load(Ordering::Relaxed) < from + more {
                assert!(
                    started.elapsed() < limit,
                    "the writer committed {} of {more} writes in {limit:?}",
                    committed.load(Ordering::Relaxed) - from
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Stops and returns what it saw.
    pub async fn stop(self) -> WriterStats {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.await.expect("writer task")
    }
}

/// The facts of `tables` in `db`.
pub async fn facts(db: &str, tables: &[&str]) -> CatalogSnapshot {
    let session = session(db).await;
    let names: Vec<QualifiedName> = tables.iter().map(|t| QualifiedName::bare(*t)).collect();
    read_snapshot(session.client(), &names, session.user_search_path())
        .await
        .expect("catalog read")
}

/// The parts of a table's facts that a schema change decides: columns, indexes,
/// constraints, triggers, partitions — without OIDs, sizes or statistics.
pub fn shape(facts: &RelationFacts) -> String {
    let mut out = String::new();
    out.push_str(&format!("kind {:?}\n", facts.kind));
    for c in &facts.columns {
        out.push_str(&format!(
            "column {} {} not_null={} default={:?} generated={:?}\n",
            c.name, c.type_sql, c.not_null, c.default, c.generated
        ));
    }
    let mut indexes: Vec<String> = facts
        .indexes
        .iter()
        .map(|i| {
            format!(
                "index {} valid={} {}\n",
                i.name.name, i.is_valid, i.definition
            )
        })
        .collect();
    indexes.sort();
    out.extend(indexes);
    let mut constraints: Vec<String> = facts
        .constraints
        .iter()
        .map(|c| {
            format!(
                "constraint {} {} validated={} {}\n",
                c.name, c.kind, c.validated, c.definition
            )
        })
        .collect();
    constraints.sort();
    out.extend(constraints);
    let mut triggers: Vec<String> = facts
        .triggers
        .iter()
        .map(|t| format!("trigger {} {:?} {}\n", t.name, t.enabled, t.definition))
        .collect();
    triggers.sort();
    out.extend(triggers);
    for p in &facts.partitions {
        out.push_str(&format!("partition {} {}\n", p.name.name, p.bound));
    }
    out
}

/// The shape of one table.
pub async fn table_shape(db: &str, table: &str) -> String {
    let snapshot = facts(db, &[table]).await;
    let relation = snapshot
        .relations
        .iter()
        .find(|r| r.name.name == table)
        .expect("the table exists");
    shape(relation)
}

// ---------------------------------------------------------------------------------
// migrate helpers
// ---------------------------------------------------------------------------------

use std::path::{Path, PathBuf};

use pgshift::migrate::{migrate, MigrateError, MigrateOptions, MigrateVerdict};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn relay_database(prefix: &str) -> String {
    let db = cluster().fresh_database(prefix).expect("database");
    cluster()
        .psql_file(&db, workspace().join("workloads/relay/schema.sql"))
        .expect("relay schema");
    cluster()
        .psql_file(&db, workspace().join("workloads/relay/seed.sql"))
        .expect("relay seed");
    db
}

pub fn migrate_options() -> MigrateOptions {
    MigrateOptions {
        apply: ApplyOptions {
            max_table_size: None,
            budgets: TEST_BUDGETS,
            allow_blocking: Vec::new(),
            copy_and_swap: None,
        },
        allow_gaps: false,
        allow_out_of_order: false,
        dry_run: false,
        max_file_bytes: 1 << 20,
        procedural: None,
    }
}

/// [`migrate_options`] with copy-and-swap on `db` (live mode, the tests' budgets).
pub fn migrate_options_with_cas(db: &str) -> MigrateOptions {
    let mut options = migrate_options();
    options.apply.copy_and_swap = Some(pgshift::exec::CasSettings {
        spec: cas::spec(db),
        options: cas::options(pgshift::cas::Mode::Live),
        standbys: Vec::new(),
    });
    options
}

pub async fn run_migrate(
    db: &str,
    dir: &Path,
    options: &MigrateOptions,
) -> Result<MigrateVerdict, MigrateError> {
    let main = session(db).await;
    let monitor = session(db).await;
    migrate(
        &main,
        Some(&monitor),
        dir,
        options,
        &TokioSleeper,
        &mut NoProgress,
    )
    .await
}

pub fn history(db: &str) -> String {
    cluster()
        .psql(
            db,
            "SELECT version, name, checksum, units_total, units_committed, outcome, coalesce(error, '') FROM pgshift.migrations ORDER BY id",
        )
        .expect("history readable")
}

/// A directory of migration files for one test, removed when dropped.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(label: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("pgshift-migrate-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

/// Events a relay writer inserts: valid for every trigger, in a live partition.
pub const RELAY_WRITER: &str = "INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content) \
     SELECT c.id, sha256(('w' || $1::bigint)::bytea), sha256(('p' || $1::bigint)::bytea), \
            '2026-10-15'::timestamptz + ($1::bigint % 100000) * interval '1 second', 1, '[]', 'writer note ' || $1::bigint \
       FROM communities c ORDER BY c.id LIMIT 1";
