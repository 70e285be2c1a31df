//! The throttle and the standbys, on a real primary with a real streaming replica (one
//! per test binary, made from the shared cluster): a standby that stops replaying
//! pauses the copy, and the run completes, verified, once it replays again; a signal
//! that cannot be read pauses the work (fail closed); commits made slower than their
//! baseline (a synchronous standby that applies late) pause the copy until they are
//! fast again; an operator's pause and resume through the run record; the cutover
//! refusing a lagging standby with the source intact.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::cas::{options, spec, value, wait_for_phase};
use common::{cluster, database};
use pgshift::cas::{self, throttle, CasError, Mode, Pace, RunOptions, ThrottleLimits};
use pgshift::refusal::RefusalCause;
use pgshift_embedded::Cluster;
use pgshift_sql::QualifiedName;

const ROWS: i64 = 20_000;

/// The binary's standby of the shared cluster.
fn replica() -> &'static Cluster {
    static REPLICA: OnceLock<Cluster> = OnceLock::new();
    REPLICA.get_or_init(|| cluster().add_replica().expect("a streaming replica starts"))
}

/// Tests that pause the standby's replay take turns (the primary's every run sees it).
static STANDBY_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn table_db(prefix: &str) -> String {
    database(
        prefix,
        &format!(
            "CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL); \
             INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, {ROWS}) g; ANALYZE t; \
             CREATE TABLE side (id bigserial PRIMARY KEY, pad text);"
        ),
    )
}

/// Small chunks, and only the signals a test names consulted.
fn throttled(limits: ThrottleLimits) -> RunOptions {
    RunOptions {
        disk_room: None,
        chunk_target_ms: 50,
        first_chunk_rows: 1_000,
        throttle: ThrottleLimits {
            interval_ms: 100,
            ..limits
        },
        ..options(Mode::Live)
    }
}

const OFF: ThrottleLimits = ThrottleLimits {
    max_replica_lag_ms: None,
    max_writer_p99_ms: None,
    max_writer_slowdown: None,
    max_wal_bytes_per_s: None,
    interval_ms: 100,
};

const STATEMENT: &str = "ALTER TABLE t ALTER COLUMN v TYPE varchar(100)";

/// Starts the run in a task of its own.
fn spawn_run(
    db: &str,
    options: RunOptions,
) -> tokio::task::JoinHandle<Result<cas::RunReport, CasError>> {
    spawn_run_with(spec(db), options)
}

/// Starts the run in a task of its own, connected with `spec`.
fn spawn_run_with(
    spec: pgshift::connect::ConnectionSpec,
    options: RunOptions,
) -> tokio::task::JoinHandle<Result<cas::RunReport, CasError>> {
    tokio::spawn(async move {
        let statements = pgshift_sql::parse(STATEMENT).expect("valid");
        cas::start(
            &spec,
            &statements[0],
            &QualifiedName::bare("t"),
            options,
            &mut cas::Silent,
        )
        .await
    })
}

/// The throttle's state as the run record shows it ("" before the first).
fn throttle_state(db: &str) -> String {
    cluster()
        .psql(
            db,
            "SELECT coalesce(throttle, '') FROM pgshift.runs ORDER BY id DESC LIMIT 1",
        )
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Waits until the run record's throttle state contains `text`.
async fn wait_for_throttle(db: &str, text: &str) {
    for _ in 0..600 {
        if throttle_state(db).contains(text) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the throttle never said {text:?}; it says {:?}",
        throttle_state(db)
    );
}

/// Waits until the run record's throttle state shows a writer slowdown of at least
/// `ratio` (`… (now 35.2×)`).
async fn wait_for_slowdown(db: &str, ratio: f64) {
    let now = |state: &str| -> Option<f64> {
        let (_, after) = state.rsplit_once("(now ")?;
        after.split('×').next()?.parse().ok()
    };
    for _ in 0..600 {
        if now(&throttle_state(db)).is_some_and(|r| r >= ratio) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the throttle never showed a slowdown of {ratio}×; it says {:?}",
        throttle_state(db)
    );
}

fn rows_copied(db: &str) -> i64 {
    value(
        db,
        "SELECT rows_copied FROM pgshift.runs ORDER BY id DESC LIMIT 1",
    )
    .parse()
    .expect("a count")
}

/// The copy stays where it is for a while (nothing lands while paused).
async fn assert_copy_stays_paused(db: &str) {
    let before = rows_copied(db);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(rows_copied(db), before, "rows landed while paused");
    assert_eq!(
        value(
            db,
            "SELECT phase FROM pgshift.runs ORDER BY id DESC LIMIT 1"
        ),
        "copying"
    );
}

/// Makes the probe's table unwritable (every write raises `message`), starts a run
/// that consults the probe, and waits until its throttle says so.
async fn run_with_unwritable_probe(
    db: &str,
    message: &str,
) -> tokio::task::JoinHandle<Result<cas::RunReport, CasError>> {
    cluster()
        .psql(
            db,
            &format!(
                "CREATE SCHEMA pgshift; \
                 CREATE TABLE pgshift.throttle_probe (run bigint PRIMARY KEY, at timestamptz NOT NULL); \
                 CREATE FUNCTION refuse_probe() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '{message}'; END $$; \
                 CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON pgshift.throttle_probe FOR EACH ROW EXECUTE FUNCTION refuse_probe();"
            ),
        )
        .expect("probe made unwritable");
    let run = spawn_run(
        db,
        throttled(ThrottleLimits {
            max_writer_p99_ms: Some(5_000),
            ..OFF
        }),
    );
    wait_for_phase(db, "copying").await;
    wait_for_throttle(db, message).await;
    run
}

fn pause_standby() {
    replica().pause_replay().expect("replay pauses");
}

/// Pauses the standby's replay, then writes WAL it will not replay while paused.
fn lag_the_standby(db: &str) {
    pause_standby();
    cluster()
        .psql(
            db,
            "INSERT INTO side (pad) SELECT repeat('x', 100) FROM generate_series(1, 1000)",
        )
        .expect("write");
}

fn resume_standby() {
    replica().resume_replay().expect("replay resumes");
    cluster()
        .wait_for_replay(replica(), Duration::from_secs(60))
        .expect("the standby catches up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_oc_5_a_standby_that_stops_replaying_pauses_the_copy_until_it_replays() {
    let _turn = STANDBY_TURN.lock().await;
    let db = table_db("throttle_replay");
    cluster()
        .wait_for_replay(replica(), Duration::from_secs(60))
        .expect("the standby is caught up");
    lag_the_standby(&db);
    let run = spawn_run(
        &db,
        throttled(ThrottleLimits {
            max_replica_lag_ms: Some(1_000),
            ..OFF
        }),
    );
    wait_for_phase(&db, "copying").await;
    wait_for_throttle(&db, "paused").await;
    let state = throttle_state(&db);
    assert!(state.contains("standby"), "{state}");
    assert_copy_stays_paused(&db).await;
    assert_eq!(
        rows_copied(&db),
        0,
        "the copy started before the standby replayed"
    );
    resume_standby();
    let report = run.await.expect("task").expect("the run completes");
    assert_eq!(report.phase, "done");
    assert_eq!(report.rows_verified, ROWS);
    let paused: Vec<_> = report
        .throttle
        .iter()
        .filter(|e| e.pace == Pace::Paused && e.reason.contains("standby"))
        .collect();
    assert!(
        !paused.is_empty(),
        "no recorded pause: {:?}",
        report.throttle
    );
    assert!(
        report.throttle.iter().any(|e| e.pace == Pace::Open),
        "never opened again: {:?}",
        report.throttle
    );
    assert!(report.throttled_ms > 0);
    let standbys = report.standbys.expect("standbys reported");
    assert_eq!(standbys.standbys.len(), 1, "{standbys:?}");
    assert!(standbys.standbys[0].lag_before_ms.is_some(), "{standbys:?}");
    common::cas::assert_varchar_rewrite(&db, ROWS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_oc_5_an_unwritable_probe_pauses_the_work_until_it_commits_again() {
    let db = table_db("throttle_probe");
    let run = run_with_unwritable_probe(&db, "probe refused by the test").await;
    assert_copy_stays_paused(&db).await;
    assert_eq!(rows_copied(&db), 0);
    cluster()
        .psql(&db, "DROP TRIGGER refuse ON pgshift.throttle_probe")
        .expect("probe writable again");
    let report = run.await.expect("task").expect("the run completes");
    assert_eq!(report.rows_verified, ROWS);
    assert!(
        report
            .throttle
            .iter()
            .any(|e| e.pace == Pace::Paused && e.reason.contains("cannot read the writer p99")),
        "{:?}",
        report.throttle
    );
    assert!(report.throttle.iter().any(|e| e.writer_p99_ms.is_some()));
    common::cas::assert_varchar_rewrite(&db, ROWS);
    assert_eq!(
        value(&db, "SELECT count(*) FROM pgshift.throttle_probe"),
        "0",
        "the run's probe row is removed with its other engine objects"
    );
}

/// Makes every commit of database `db` wait until the standby has applied it, and the
/// standby apply each commit `delay` late once [`SyncStandby::delay`] is called: a
/// commit path slowed on the server, as a slow synchronous standby slows every writer.
/// Undone when dropped (other databases of the cluster commit as before throughout:
/// they are `synchronous_commit = local` while this is in force).
struct SyncStandby;

impl SyncStandby {
    fn start(db: &str) -> Self {
        cluster()
            .psql(
                "postgres",
                "ALTER SYSTEM SET synchronous_commit = local; \
                 ALTER SYSTEM SET synchronous_standby_names = '*'; \
                 SELECT pg_reload_conf();",
            )
            .expect("synchronous standby configured");
        cluster()
            .psql(
                "postgres",
                &format!("ALTER DATABASE \"{db}\" SET synchronous_commit = remote_apply"),
            )
            .expect("the database waits for the standby's apply");
        SyncStandby
    }

    fn delay(&self, delay: &str) {
        replica()
            .psql(
                "postgres",
                &format!(
                    "ALTER SYSTEM SET recovery_min_apply_delay = '{delay}'; SELECT pg_reload_conf();"
                ),
            )
            .expect("the standby's apply delay set");
    }
}

impl Drop for SyncStandby {
    fn drop(&mut self) {
        let _ = replica().psql(
            "postgres",
            "ALTER SYSTEM RESET recovery_min_apply_delay; SELECT pg_reload_conf();",
        );
        let _ = cluster().psql(
            "postgres",
            "ALTER SYSTEM RESET synchronous_standby_names; \
             ALTER SYSTEM RESET synchronous_commit; SELECT pg_reload_conf();",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_oc_5_commits_slower_than_their_baseline_pause_the_copy_until_they_are_fast_again() {
    let _turn = STANDBY_TURN.lock().await;
    let db = table_db("throttle_slowdown");
    cluster()
        .wait_for_replay(replica(), Duration::from_secs(60))
        .expect("the standby is caught up");
    let standby = SyncStandby::start(&db);
    // The application at work: without a session of its own at work, a slowdown of
    // the probe decides nothing.
    let writer = common::Writer::start(
        &db,
        "INSERT INTO side (pad) VALUES ($1::bigint::text)",
        Duration::from_millis(100),
    )
    .await;
    // Held at its start by an unwritable probe: no baseline, so paused (fail closed).
    cluster()
        .psql(
            &db,
            "CREATE SCHEMA pgshift; \
             CREATE TABLE pgshift.throttle_probe (run bigint PRIMARY KEY, at timestamptz NOT NULL); \
             CREATE FUNCTION refuse_probe() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'held'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON pgshift.throttle_probe FOR EACH ROW EXECUTE FUNCTION refuse_probe();",
        )
        .expect("probe made unwritable");
    let run = spawn_run(
        &db,
        throttled(ThrottleLimits {
            max_writer_slowdown: Some(3.0),
            ..OFF
        }),
    );
    wait_for_phase(&db, "copying").await;
    wait_for_throttle(&db, "cannot read the writer slowdown: held").await;
    // An operator's pause keeps the work from starting while the baseline is measured,
    // with commits as fast as they are without the delay.
    let table = QualifiedName::bare("t");
    cas::request_throttle(&spec(&db), &table, true)
        .await
        .expect("pause requested");
    cluster()
        .psql(&db, "DROP TRIGGER refuse ON pgshift.throttle_probe")
        .expect("probe writable again");
    wait_for_throttle(&db, "writer baseline p95").await;
    assert_eq!(rows_copied(&db), 0, "the copy started before the baseline");
    standby.delay("300ms");
    // Still held by the operator until the state shows the probe that slow.
    wait_for_slowdown(&db, 3.0).await;
    cas::request_throttle(&spec(&db), &table, false)
        .await
        .expect("resume requested");
    wait_for_throttle(&db, "paused: writer slowdown").await;
    let state = throttle_state(&db);
    assert!(state.contains("over the baseline"), "{state}");
    assert_copy_stays_paused(&db).await;
    assert_eq!(
        rows_copied(&db),
        0,
        "a chunk ran while the commits were slow"
    );
    standby.delay("0");
    let report = run.await.expect("task").expect("the run completes");
    let written = writer.stop().await;
    drop(standby);
    assert_eq!(report.phase, "done");
    assert_eq!(report.rows_verified, ROWS);
    assert!(written.committed > 0 && written.failed == 0, "{written:?}");
    let paused = report
        .throttle
        .iter()
        .position(|e| e.pace == Pace::Paused && e.reason.starts_with("writer slowdown"))
        .unwrap_or_else(|| panic!("no pause for the slowdown: {:?}", report.throttle));
    let slow = &report.throttle[paused];
    assert!(
        slow.writer_slowdown.is_some_and(|r| r >= 3.0)
            && slow.writer_baseline_ms.is_some()
            && slow.application_sessions.is_some_and(|n| n > 0),
        "{slow:?}"
    );
    // Fast again means under the limit: the pace eases back through `Slow` and may
    // still be easing when the copy finishes on a loaded machine, so any pace that lets
    // chunks run again counts (a run that stayed paused would never have reached done).
    assert!(
        report.throttle[paused..]
            .iter()
            .any(|e| e.pace != Pace::Paused && e.writer_slowdown.is_some_and(|r| r < 3.0)),
        "never resumed after the slowdown: {:?}",
        report.throttle
    );
    common::cas::assert_varchar_rewrite(&db, ROWS);
}

/// A session's backend pid.
async fn backend_pid(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_application_sessions_are_the_client_sessions_at_work_but_the_engines() {
    let db = table_db("throttle_sessions");
    let reader = common::client(&db).await;
    let idle = common::client(&db).await;
    let in_transaction = common::client(&db).await;
    let engine = common::client(&db).await;
    let named_alike = common::client(&db).await;
    let other_run = common::client(&db).await;
    let (idle_pid, open_pid, engine_pid) = (
        backend_pid(&idle).await,
        backend_pid(&in_transaction).await,
        backend_pid(&engine).await,
    );
    let (alike_pid, other_run_pid) = (
        backend_pid(&named_alike).await,
        backend_pid(&other_run).await,
    );
    // An application named like the engine (the benchmark's writers), and another
    // run's task session: both at work, neither this run's.
    named_alike
        .batch_execute("SET application_name = 'pgshift-bench writer 1'; BEGIN; SELECT 1")
        .await
        .expect("a writer named like the engine, in a transaction");
    other_run
        .batch_execute("SET application_name = 'pgshift-apply-8'; BEGIN; SELECT 1")
        .await
        .expect("another run's session left in a transaction");
    in_transaction
        .batch_execute("BEGIN; SELECT 1")
        .await
        .expect("a transaction left open");
    engine
        .batch_execute("SET application_name = 'pgshift-apply-7'; BEGIN; SELECT 1")
        .await
        .expect("an engine's session left in a transaction");
    // Longer than a session counts as at work after its last statement.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let at_work = throttle::signals::application_sessions(&reader, 7)
        .await
        .expect("pg_stat_activity read");
    assert!(at_work.contains(&open_pid), "{at_work:?}");
    assert!(
        at_work.contains(&alike_pid),
        "named like the engine: {at_work:?}"
    );
    assert!(
        at_work.contains(&other_run_pid),
        "another run's: {at_work:?}"
    );
    assert!(!at_work.contains(&idle_pid), "long idle: {at_work:?}");
    assert!(!at_work.contains(&engine_pid), "the engine's: {at_work:?}");
    assert!(
        !at_work.contains(&backend_pid(&reader).await),
        "the reader's own: {at_work:?}"
    );
    idle.simple_query("SELECT 1").await.expect("a statement");
    let at_work = throttle::signals::application_sessions(&reader, 7)
        .await
        .expect("pg_stat_activity read");
    assert!(at_work.contains(&idle_pid), "just ran one: {at_work:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_pauses_and_resumes_a_running_run() {
    let db = table_db("throttle_operator");
    // Held at its start by an unwritable probe, so that the pause lands before any
    // chunk does.
    let run = run_with_unwritable_probe(&db, "held").await;
    let table = QualifiedName::bare("t");
    let request = cas::request_throttle(&spec(&db), &table, true)
        .await
        .expect("pause requested");
    assert!(request.paused && request.running, "{request:?}");
    cluster()
        .psql(&db, "DROP TRIGGER refuse ON pgshift.throttle_probe")
        .expect("probe writable again");
    wait_for_throttle(&db, "paused by an operator").await;
    assert_copy_stays_paused(&db).await;
    let status = cas::liveness::status(&spec(&db)).await.expect("status");
    assert!(status[0].record.throttle_paused);
    let request = cas::request_throttle(&spec(&db), &table, false)
        .await
        .expect("resume requested");
    assert!(!request.paused && request.running, "{request:?}");
    let report = run.await.expect("task").expect("the run completes");
    assert_eq!(report.rows_verified, ROWS);
    assert!(report
        .throttle
        .iter()
        .any(|e| e.reason.contains("paused by an operator")));
    common::cas::assert_varchar_rewrite(&db, ROWS);
    // No run: the request is refused as such.
    let none = cas::request_throttle(&spec(&db), &table, true).await;
    assert!(matches!(none, Err(CasError::NoSuchRun(_))), "{none:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_lk_7_the_cutover_refuses_a_lagging_standby_and_leaves_the_source() {
    let _turn = STANDBY_TURN.lock().await;
    let db = table_db("throttle_cutover");
    cluster()
        .wait_for_replay(replica(), Duration::from_secs(60))
        .expect("the standby is caught up");
    let options = RunOptions {
        disk_room: None,
        defer_cutover: true,
        ..throttled(ThrottleLimits {
            max_replica_lag_ms: Some(1_500),
            ..OFF
        })
    };
    let run = spawn_run(&db, options);
    wait_for_phase(&db, "ready").await;
    let before = value(&db, "SELECT 't'::regclass::oid");
    lag_the_standby(&db);
    cas::request_cutover(&spec(&db), &QualifiedName::bare("t"))
        .await
        .expect("cutover requested");
    let refused = run.await.expect("task");
    let Err(CasError::CutoverRefused(refusal)) = &refused else {
        resume_standby();
        panic!("not refused: {refused:?}");
    };
    assert_eq!(refusal.cause, RefusalCause::StandbyLagging, "{refusal:?}");
    assert!(refusal.message.contains("1500 ms"), "{}", refusal.message);
    // The source is intact: the same table, its old type, every row.
    assert_eq!(value(&db, "SELECT 't'::regclass::oid"), before);
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'v'"),
        "text"
    );
    assert_eq!(value(&db, "SELECT count(*) FROM t"), ROWS.to_string());
    assert_eq!(common::cas::run_phase(&db), "failed/verifying");
    resume_standby();
    // Caught up, the run resumes, verifies again and swaps.
    let report = common::cas::resume(&db, "t")
        .await
        .expect("resumes and swaps");
    assert_eq!(report.phase, "done");
    let standbys = report.standbys.expect("standbys reported");
    assert!(
        standbys.standbys.iter().all(|s| s.lag_before_ms.is_some()),
        "{standbys:?}"
    );
    common::cas::assert_varchar_rewrite(&db, ROWS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_oc_5_a_standby_position_the_role_cannot_read_pauses_the_work() {
    let _turn = STANDBY_TURN.lock().await;
    replica();
    let db = table_db("throttle_hidden");
    // A role that owns the table and may run copy-and-swap, but not read the
    // standbys' positions (pg_stat_replication shows it NULL without
    // pg_read_all_stats).
    cluster()
        .psql(
            "postgres",
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'throttle_owner') THEN CREATE ROLE throttle_owner LOGIN; END IF; END $$; \
             REVOKE pg_read_all_stats FROM throttle_owner;",
        )
        .expect("role");
    common::cas::give_table(&db, "t", "throttle_owner");
    assert_eq!(
        common::cas::value(
            &db,
            "SET ROLE throttle_owner; SELECT count(*) FILTER (WHERE state IS NULL) || '/' || count(*) FROM pg_stat_replication",
        ),
        "1/1",
        "the role sees the standby, but not its state"
    );
    let run = spawn_run_with(
        common::cas::spec_as(&db, "throttle_owner"),
        // The owner may not read data_directory: the room is the operator's to give.
        RunOptions {
            disk_room: Some(1 << 30),
            ..throttled(ThrottleLimits {
                max_replica_lag_ms: Some(10_000),
                ..OFF
            })
        },
    );
    wait_for_phase(&db, "copying").await;
    wait_for_throttle(&db, "pg_read_all_stats").await;
    assert_copy_stays_paused(&db).await;
    assert_eq!(rows_copied(&db), 0);
    cluster()
        .psql("postgres", "GRANT pg_read_all_stats TO throttle_owner")
        .expect("grant");
    let report = run.await.expect("task");
    cluster()
        .psql("postgres", "REVOKE pg_read_all_stats FROM throttle_owner")
        .expect("revoke");
    let report = report.expect("the run completes once the role may read");
    assert!(
        report
            .throttle
            .iter()
            .any(|e| e.pace == Pace::Paused && e.reason.contains("pg_read_all_stats")),
        "{:?}",
        report.throttle
    );
    common::cas::assert_varchar_rewrite(&db, ROWS);
}
