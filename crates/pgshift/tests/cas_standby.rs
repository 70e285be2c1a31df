//! `--standby-url`: the cutover reads each standby's own queries and settings, on a
//! real primary with a real streaming replica (one per test binary, made from the
//! shared cluster, with `max_standby_streaming_delay = 1s` and `hot_standby_feedback`): a standby reader of the
//! table holds the swap back and the cutover refuses with the source intact, a resume
//! without the recorded standby is refused, and once the reader ends the resumed run
//! swaps with nothing cancelled; a URL that is not a standby of this primary (the
//! primary itself, a standby of another cluster) is refused before any work; a standby
//! query that starts after the check is cancelled by the swap's replay, and the report
//! counts it from `pg_stat_database_conflicts`.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::cas::{options, run_phase, spec, value};
use common::{cluster, database};
use pgshift::cas::{self, CasError, CasProgress, Mode, Phase, Request, RunOptions, RunReport};
use pgshift::connect::ConnectionSpec;
use pgshift::refusal::RefusalCause;
use pgshift_embedded::{Cluster, ClusterOptions};
use pgshift_sql::QualifiedName;

const ROWS: i64 = 5_000;
const STATEMENT: &str = "ALTER TABLE t ALTER COLUMN v TYPE varchar(100)";

/// One test at a time replays on the standbys: replay is serial on a standby, so one
/// test's swap held up by its own standby reader (up to a second, then cancelled) or a
/// second standby's base backup holds up the replay another test's report waits for,
/// and on PostgreSQL 14 that wait ran out (about one run in three).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The binary's standby of the shared cluster: replay waits at most a second for a
/// conflicting query before it cancels it; with `hot_standby_feedback`, so that the
/// only conflicts its queries meet are lock conflicts (the catalog churn of a run in
/// the same database would otherwise cancel an open snapshot there).
fn replica() -> &'static Cluster {
    static REPLICA: OnceLock<Cluster> = OnceLock::new();
    REPLICA.get_or_init(|| {
        let replica = cluster().add_replica().expect("a streaming replica starts");
        replica
            .psql(
                "postgres",
                "ALTER SYSTEM SET max_standby_streaming_delay = '1s'; ALTER SYSTEM SET hot_standby_feedback = on; \
                 ALTER SYSTEM SET log_recovery_conflict_waits = on; SELECT pg_reload_conf();",
            )
            .expect("the standby's setting");
        replica
    })
}

/// A database with the table, replayed on the standby.
fn table_db(prefix: &str) -> String {
    let db = database(
        prefix,
        &format!(
            "CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL); \
             INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, {ROWS}) g; ANALYZE t;"
        ),
    );
    cluster()
        .wait_for_replay(replica(), Duration::from_secs(60))
        .expect("the standby replays the new database");
    db
}

fn standby_spec(standby: &Cluster, db: &str) -> ConnectionSpec {
    ConnectionSpec::parse(&standby.connection_string(db)).expect("spec")
}

/// What the standby's statistics say of lock conflicts in `db`.
fn standby_confl_lock(db: &str) -> i64 {
    replica()
        .psql(
            db,
            "SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = current_database()",
        )
        .expect("query")
        .trim()
        .parse()
        .expect("a count")
}

async fn start(
    db: &str,
    standbys: &[ConnectionSpec],
    options: RunOptions,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let statements = pgshift_sql::parse(STATEMENT).expect("valid");
    let request = Request {
        statement: &statements[0],
        table: &QualifiedName::bare("t"),
        search_path: &[],
        label: None,
        standbys,
    };
    cas::start_request(&spec(db), request, options, progress).await
}

fn assert_source_intact(db: &str, oid: &str) {
    assert_eq!(value(db, "SELECT 't'::regclass::oid"), oid);
    assert_eq!(
        value(db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'v'"),
        "text"
    );
    assert_eq!(value(db, "SELECT count(*) FROM t"), ROWS.to_string());
}

/// Nothing recorded and nothing made: no run, no shadow, no trigger on the table.
fn assert_nothing_done(db: &str, oid: &str) {
    if value(db, "SELECT to_regclass('pgshift.runs') IS NOT NULL") == "t" {
        assert_eq!(value(db, "SELECT count(*) FROM pgshift.runs"), "0");
    }
    assert_eq!(
        value(db, "SELECT count(*) FROM pg_class WHERE relname LIKE '%pgshift%' AND relnamespace = 'public'::regnamespace"),
        "0"
    );
    assert_eq!(
        value(
            db,
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 't'::regclass"
        ),
        "0"
    );
    assert_source_intact(db, oid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_lk_9_a_standby_reader_holds_the_cutover_back_and_it_refuses_with_the_source_intact() {
    let _turn = TURN.lock().await;
    let db = table_db("standby_reader");
    let standby = standby_spec(replica(), &db);
    // A standby session reading the table, its transaction left open.
    let reader = pgshift::connect::connect(&standby, &cas::session::RUN_SESSION)
        .await
        .expect("connects to the standby");
    reader
        .client()
        .batch_execute("BEGIN; SELECT count(*) FROM public.t")
        .await
        .expect("reads on the standby");
    let reader_pid: i32 = reader
        .client()
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let before = value(&db, "SELECT 't'::regclass::oid");
    let conflicts_before = standby_confl_lock(&db);
    let options = options(Mode::Live);
    let budget = options.cutover.total();
    let refused = start(
        &db,
        std::slice::from_ref(&standby),
        options,
        &mut cas::Silent,
    )
    .await;
    let Err(CasError::CutoverRefused(refusal)) = &refused else {
        panic!("not refused: {refused:?}");
    };
    assert_eq!(refusal.cause, RefusalCause::StandbyQueries, "{refusal:?}");
    assert_eq!(refusal.class, RefusalCause::StandbyQueries.class());
    for part in [
        format!("standby {}", cas::standby::StandbyEndpoint::of(&standby)),
        format!("pids {reader_pid}"),
        "max_standby_streaming_delay 1000 ms, hot_standby_feedback on".to_owned(),
        format!("({} ms)", budget.as_millis()),
    ] {
        assert!(
            refusal.message.contains(&part),
            "{part:?} in {}",
            refusal.message
        );
    }
    assert_source_intact(&db, &before);
    assert_eq!(run_phase(&db), "failed/verifying");
    // The reader was waited for, not cancelled: its transaction goes on.
    reader
        .client()
        .batch_execute("SELECT count(*) FROM public.t")
        .await
        .expect("the standby reader was not cancelled");
    reader
        .client()
        .batch_execute("COMMIT")
        .await
        .expect("commit");
    // Fail closed: the run was started with the standby; a resume that does not name
    // it is refused before any work.
    let updated = value(&db, "SELECT updated_at FROM pgshift.runs");
    let missing = cas::resume(&spec(&db), &QualifiedName::bare("t"), &mut cas::Silent).await;
    let Err(CasError::Refused(refusal)) = &missing else {
        panic!("a resume without the standby was not refused: {missing:?}");
    };
    assert_eq!(
        refusal.cause,
        RefusalCause::StandbyUrlMissing,
        "{refusal:?}"
    );
    assert_eq!(value(&db, "SELECT updated_at FROM pgshift.runs"), updated);
    assert_eq!(run_phase(&db), "failed/verifying");
    assert_source_intact(&db, &before);
    // The record keeps where the standby is, never who connects.
    assert_eq!(
        value(
            &db,
            "SELECT plan->'standbys'->0->>'dbname' FROM pgshift.runs"
        ),
        db
    );
    assert_eq!(
        value(&db, "SELECT string_agg(k, ',' ORDER BY k) FROM pgshift.runs, jsonb_object_keys(plan->'standbys'->0) k"),
        "dbname,servers"
    );
    // The reader gone, the resumed run swaps; nothing was cancelled there.
    let report = cas::resume_with(
        &spec(&db),
        &QualifiedName::bare("t"),
        std::slice::from_ref(&standby),
        &mut cas::Silent,
    )
    .await
    .expect("resumes and swaps");
    assert_eq!(report.phase, "done");
    common::cas::assert_varchar_rewrite(&db, ROWS);
    let standbys = report.standbys.expect("standbys reported");
    let [queried] = standbys.queried.as_slice() else {
        panic!("one standby read: {standbys:?}");
    };
    assert!(queried.holders_seen.is_empty(), "{queried:?}");
    assert_eq!(queried.max_standby_streaming_delay_ms, 1_000);
    assert!(queried.hot_standby_feedback, "{queried:?}");
    assert_eq!(queried.cancelled_by_swap, Some(0), "{queried:?}");
    assert_eq!(queried.confl_lock_before, conflicts_before);
    assert_eq!(standby_confl_lock(&db), conflicts_before);
}

/// Starts a run on `db` naming `standby`, which must be refused before any work as
/// not a standby of this primary, with a message saying `why`.
async fn assert_refused_as_not_a_standby(db: &str, standby: ConnectionSpec, why: &str) {
    let before = value(db, "SELECT 't'::regclass::oid");
    let refused = start(db, &[standby], options(Mode::Live), &mut cas::Silent).await;
    let Err(CasError::Refused(refusal)) = &refused else {
        panic!("not refused: {refused:?}");
    };
    assert_eq!(refusal.cause, RefusalCause::NotAStandby, "{refusal:?}");
    assert!(
        refusal.message.contains(why),
        "{why:?} in {}",
        refusal.message
    );
    assert_nothing_done(db, &before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_url_to_the_primary_itself_is_refused_before_any_work() {
    let db = table_db("standby_primary");
    assert_refused_as_not_a_standby(&db, spec(&db), "not in recovery").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_of_another_cluster_is_refused_before_any_work() {
    let _turn = TURN.lock().await;
    let db = table_db("standby_other");
    // A cluster of its own (its own initdb, so its own system identifier) and its
    // standby: in recovery, but not of this primary.
    let other = Cluster::start(&ClusterOptions::new().own_system(true)).expect("another cluster");
    let other_standby = other.add_replica().expect("its standby");
    let standby = standby_spec(&other_standby, "postgres");
    assert_refused_as_not_a_standby(&db, standby, "system identifier is").await;
    // The standby of this primary is accepted (the same check, passing).
    cas::standby::prove_all(&common::client(&db).await, &[standby_spec(replica(), &db)])
        .await
        .expect("this primary's standby is its standby");
}

/// Progress that, when the check has found the standby clear, starts a standby query
/// reading the table (it starts after the check: the race the check cannot close) and
/// waits until it holds its lock.
struct LateReader {
    db: String,
    oid: String,
    started: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<Result<String, String>>>,
}

impl CasProgress for LateReader {
    fn phase(&mut self, _phase: Phase) {}
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, text: &str) {
        if !text.contains("no query holds or waits for a lock on") || self.reader.is_some() {
            return;
        }
        let db = self.db.clone();
        self.reader = Some(std::thread::spawn(move || {
            replica()
                .psql(
                    &db,
                    "BEGIN; SELECT count(*) FROM t; SELECT pg_sleep(60); COMMIT;",
                )
                .map_err(|e| e.to_string())
        }));
        let sql = format!(
            "SELECT count(*) FROM pg_locks WHERE relation = {} AND granted AND pid <> pg_backend_pid()",
            self.oid
        );
        tokio::task::block_in_place(|| {
            for _ in 0..300 {
                if replica()
                    .psql(&self.db, &sql)
                    .is_ok_and(|s| s.trim() == "1")
                {
                    self.started.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_query_started_after_the_check_is_reported_cancelled_by_the_swap() {
    let _turn = TURN.lock().await;
    let db = table_db("standby_race");
    let standby = standby_spec(replica(), &db);
    let conflicts_before = standby_confl_lock(&db);
    let mut progress = LateReader {
        db: db.clone(),
        oid: value(&db, "SELECT 't'::regclass::oid"),
        started: Arc::new(AtomicBool::new(false)),
        reader: None,
    };
    let report = start(
        &db,
        std::slice::from_ref(&standby),
        options(Mode::Live),
        &mut progress,
    )
    .await
    .expect("swaps");
    assert!(
        progress.started.load(Ordering::SeqCst),
        "the late reader held its lock"
    );
    common::cas::assert_varchar_rewrite(&db, ROWS);
    let reader = progress
        .reader
        .take()
        .expect("a reader")
        .join()
        .expect("thread");
    let error = reader.expect_err("the late reader was cancelled");
    assert!(error.contains("conflict with recovery"), "{error}");
    let standbys = report.standbys.expect("standbys reported");
    let [queried] = standbys.queried.as_slice() else {
        panic!("one standby read: {standbys:?}");
    };
    assert!(queried.replayed_swap_after_ms.is_some(), "{queried:?}");
    assert_eq!(queried.confl_lock_before, conflicts_before, "{queried:?}");
    // One reader counts once for its cancelled statement, and a second time when the
    // startup process's next signal lands before its error is raised and ends its
    // connection too (an ERROR and a FATAL in the standby's log).
    assert!(
        matches!(queried.cancelled_by_swap, Some(1 | 2)),
        "{queried:?}; the standby's log:\n{}",
        replica().log_tail(80)
    );
    assert_eq!(queried.confl_lock_after, Some(standby_confl_lock(&db)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inv_lk_9_a_standby_that_cannot_be_read_at_the_cutover_refuses_the_swap() {
    let _turn = TURN.lock().await;
    let db = table_db("standby_gone");
    // A standby of its own, stopped while the run waits for its cutover.
    let gone = cluster().add_replica().expect("a second standby");
    cluster()
        .wait_for_replay(&gone, Duration::from_secs(60))
        .expect("it replays the database");
    let standby = standby_spec(&gone, &db);
    let before = value(&db, "SELECT 't'::regclass::oid");
    let options = RunOptions {
        disk_room: None,
        defer_cutover: true,
        ..options(Mode::Live)
    };
    let run = {
        let db = db.clone();
        let standby = standby.clone();
        tokio::spawn(async move {
            start(
                &db,
                std::slice::from_ref(&standby),
                options,
                &mut cas::Silent,
            )
            .await
        })
    };
    common::cas::wait_for_phase(&db, "ready").await;
    gone.stop().expect("the standby stops");
    cas::request_cutover(&spec(&db), &QualifiedName::bare("t"))
        .await
        .expect("cutover requested");
    let refused = run.await.expect("task");
    let Err(CasError::CutoverRefused(refusal)) = &refused else {
        panic!("not refused: {refused:?}");
    };
    assert_eq!(refusal.cause, RefusalCause::StandbyQueries, "{refusal:?}");
    assert!(
        refusal.message.contains("cannot be read"),
        "{}",
        refusal.message
    );
    assert!(
        refusal
            .message
            .contains(&cas::standby::StandbyEndpoint::of(&standby).to_string()),
        "{}",
        refusal.message
    );
    assert_source_intact(&db, &before);
    assert_eq!(run_phase(&db), "failed/verifying");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_swap_committed_finishes_without_its_standby_urls() {
    let _turn = TURN.lock().await;
    // The run stops after its swap committed (its clean-up cannot take a lock held
    // here): no swap lies ahead, so its finish does not need the standbys again.
    let db = table_db("standby_settled");
    let standby = standby_spec(replica(), &db);
    let holder = Arc::new(std::sync::Mutex::new(None));
    let (hook_db, slot) = (db.clone(), holder.clone());
    let mut hook = common::cas::Hook::new(Phase::Cutover, move || {
        let id = common::cas::run_id(&hook_db);
        let held = common::cas::LockHolder::hold(
            &hook_db,
            &format!("BEGIN; LOCK TABLE pgshift.log_{id} IN ACCESS SHARE MODE"),
        );
        *slot.lock().expect("slot") = Some(held);
    });
    let stopped = start(
        &db,
        std::slice::from_ref(&standby),
        options(Mode::Live),
        &mut hook,
    )
    .await;
    assert!(stopped.is_err(), "the clean-up cannot finish: {stopped:?}");
    assert_eq!(run_phase(&db), "failed/cutover");
    holder.lock().expect("slot").take().expect("held").release();
    let report = cas::resume(&spec(&db), &QualifiedName::bare("t"), &mut cas::Silent)
        .await
        .expect("finishes without the standby");
    assert!(report.settled_from_catalog, "{report:?}");
    assert_eq!(report.phase, "done");
    common::cas::assert_varchar_rewrite(&db, ROWS);
}
