//! A keyset reader on a real streaming standby, through a whole copy-and-swap run on
//! the primary under writes and through its swap: every fenced row is read exactly
//! once by every pass, no query is cancelled, and the run reports the standby's
//! replay lag at the swap. And the oracle is not blind: with
//! `max_standby_streaming_delay = 0` on the standby and a reader whose queries hold
//! their lock, the swap's replayed lock cancels a query and the check says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use pgshift::cas::{self, CasError, CutoverBudgets, Mode, RunOptions, ThrottleLimits};
use pgshift::connect::ConnectionSpec;
use pgshift_bench::standby_reader::{self, ReaderConfig, ReaderLog, StandbyReader};
use pgshift_embedded::{shared_cluster, Cluster};
use pgshift_sql::QualifiedName;
use pgshift_workload::TableRef;

const ROWS: i64 = 20_000;
/// Seed rows are stamped from here on, a millisecond per three rows (ties on
/// `created_at` exercise the cursor's `id` part).
const BASE: &str = "2026-01-01 00:00:00+00";
/// Every seed row is at or before the fence; every row the writers insert is after it.
const FENCE: &str = "2026-06-01 00:00:00+00";

fn primary() -> &'static Cluster {
    shared_cluster().expect("the shared cluster starts")
}

fn standby() -> &'static Cluster {
    static STANDBY: OnceLock<Cluster> = OnceLock::new();
    STANDBY.get_or_init(|| primary().add_replica().expect("a streaming replica starts"))
}

/// The tests take turns: one changes the standby's settings.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn value(db: &str, sql: &str) -> String {
    primary().psql(db, sql).expect("query").trim().to_owned()
}

fn fence() -> SystemTime {
    // 2026-06-01 00:00:00 UTC.
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_272_000)
}

fn feed_db(prefix: &str) -> String {
    let db = primary().fresh_database(prefix).expect("database");
    primary()
        .psql(
            &db,
            &format!(
                "CREATE TABLE feed (id bytea PRIMARY KEY, created_at timestamptz NOT NULL, v text NOT NULL); \
                 CREATE INDEX feed_window ON feed (created_at, id); \
                 INSERT INTO feed SELECT sha256(g::text::bytea), '{BASE}'::timestamptz + (g / 3) * interval '1 ms', 'row ' || g \
                   FROM generate_series(1, {ROWS}) g; \
                 ANALYZE feed;"
            ),
        )
        .expect("seed");
    assert_eq!(
        value(
            &db,
            &format!("SELECT '{FENCE}'::timestamptz = to_timestamp(1780272000)")
        ),
        "t",
        "the fence constant"
    );
    primary()
        .wait_for_replay(standby(), Duration::from_secs(60))
        .expect("the standby has the table");
    db
}

fn spec(db: &str) -> ConnectionSpec {
    ConnectionSpec::parse(&primary().connection_string(db)).expect("spec")
}

fn run_options() -> RunOptions {
    RunOptions {
        disk_room: None,
        mode: Mode::Live,
        workers: 2,
        chunk_target_ms: 100,
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
        defer_cutover: true,
        throttle: ThrottleLimits {
            max_replica_lag_ms: Some(10_000),
            max_writer_p99_ms: None,
            max_writer_slowdown: None,
            max_wal_bytes_per_s: None,
            ..ThrottleLimits::default()
        },
        verify: Default::default(),
    }
}

fn spawn_run(db: &str) -> tokio::task::JoinHandle<Result<cas::RunReport, CasError>> {
    let spec = spec(db);
    tokio::spawn(async move {
        let statements =
            pgshift_sql::parse("ALTER TABLE feed ALTER COLUMN v TYPE varchar(200)").expect("sql");
        cas::start(
            &spec,
            &statements[0],
            &QualifiedName::bare("feed"),
            run_options(),
            &mut cas::Silent,
        )
        .await
    })
}

async fn wait_for_ready(db: &str) {
    for _ in 0..1_200 {
        let phase = primary()
            .psql(
                db,
                "SELECT phase FROM pgshift.runs ORDER BY id DESC LIMIT 1",
            )
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        if phase == "ready" {
            return;
        }
        assert!(!phase.starts_with("failed"), "the run failed: {phase}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the run never became ready");
}

/// Writers on the primary for as long as the flag is up: new rows after the fence,
/// and updates of fenced rows' other column (neither changes the fenced key set).
fn spawn_writers(db: &str, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    let conninfo = primary().connection_string(db);
    tokio::spawn(async move {
        let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
            .await
            .expect("writer connects");
        tokio::spawn(connection);
        let mut n: i64 = 0;
        let mut acknowledged = 0;
        while !stop.load(Ordering::Acquire) {
            n += 1;
            let insert = client
                .execute(
                    "INSERT INTO feed VALUES (sha256(('new ' || $1::int8)::bytea), now(), 'new')",
                    &[&n],
                )
                .await;
            let update = client
                .execute(
                    "UPDATE feed SET v = 'updated ' || $1::int8 WHERE id = sha256(((($1::int8 * 7919) % 20000) + 1)::text::bytea)",
                    &[&n],
                )
                .await;
            // Writes may wait on the swap's lock; none may fail.
            assert_eq!(insert.expect("insert"), 1);
            assert_eq!(update.expect("update"), 1);
            acknowledged += 2;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        acknowledged
    })
}

fn reader(db: &str) -> ReaderConfig {
    ReaderConfig {
        page_size: 50,
        ..ReaderConfig::new(
            standby().connection_string(db),
            TableRef::new("feed"),
            fence(),
        )
    }
}

async fn expected_keys(db: &str) -> Vec<standby_reader::RowKey> {
    let (client, connection) =
        tokio_postgres::connect(&primary().connection_string(db), tokio_postgres::NoTls)
            .await
            .expect("connects");
    tokio::spawn(connection);
    let keys = standby_reader::fenced_keys(&client, &TableRef::new("feed"), fence())
        .await
        .expect("fenced keys");
    assert_eq!(keys.len() as i64, ROWS, "the fenced set is the seed");
    keys
}

/// Requests the cutover early in one of the reader's passes, so that the pass reads
/// through the swap.
async fn cut_over_mid_pass(db: &str, reader: &StandbyReader) {
    let start = reader.passes();
    for _ in 0..600 {
        if reader.passes() > start && (2..=20).contains(&reader.pages_in_pass()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cas::request_cutover(&spec(db), &QualifiedName::bare("feed"))
        .await
        .expect("cutover requested");
}

fn relations_read(log: &ReaderLog) -> Vec<Vec<u32>> {
    log.passes.iter().map(|p| p.relations.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_reader_reads_every_fenced_row_once_through_the_run_and_its_swap() {
    let _turn = TURN.lock().await;
    let db = feed_db("replica_reader");
    let old: u32 = value(&db, "SELECT 'feed'::regclass::oid")
        .parse()
        .expect("oid");
    let reader = StandbyReader::start(reader(&db));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_writers(&db, Arc::clone(&stop));
    let run = spawn_run(&db);
    wait_for_ready(&db).await;
    cut_over_mid_pass(&db, &reader).await;
    let report = run.await.expect("task").expect("the run swaps");
    assert_eq!(report.phase, "done");
    // Two more passes on the new table, under writes.
    let after = reader.passes();
    while reader.passes() < after + 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Release);
    let written = writers.await.expect("writers");
    assert!(written > 0);
    let log = reader.stop(Duration::from_secs(60)).await;
    let new: u32 = value(&db, "SELECT 'feed'::regclass::oid")
        .parse()
        .expect("oid");
    assert_ne!(old, new, "the table was swapped");

    let verdict = standby_reader::check(&expected_keys(&db).await, &log);
    assert!(verdict.is_clean(), "{verdict:?}; errors {:?}", log.errors);
    assert_eq!(verdict.cancelled, 0);
    // A pass read the old table and then the new one: it read through the swap.
    assert!(
        relations_read(&log).iter().any(|r| r == &vec![old, new]),
        "no pass spanned the swap (old {old}, new {new}): {:?}",
        relations_read(&log)
    );
    // The run reports the standby's replay lag at the swap.
    let standbys = report.standbys.expect("standbys reported");
    assert_eq!(standbys.standbys.len(), 1, "{standbys:?}");
    let at_swap = &standbys.standbys[0];
    assert!(at_swap.lag_before_ms.is_some(), "{at_swap:?}");
    assert!(at_swap.behind_at_swap_bytes.is_some(), "{at_swap:?}");
    assert!(at_swap.replayed_swap_after_ms.is_some(), "{at_swap:?}");
}

/// Puts the standby's `max_standby_streaming_delay` back when dropped.
struct StandbyDelay;

impl StandbyDelay {
    fn set(value: &str) -> Self {
        standby()
            .psql(
                "postgres",
                &format!("ALTER SYSTEM SET max_standby_streaming_delay = '{value}'"),
            )
            .expect("set on the standby");
        standby()
            .psql("postgres", "SELECT pg_reload_conf()")
            .expect("reload");
        StandbyDelay
    }
}

impl Drop for StandbyDelay {
    fn drop(&mut self) {
        let _ = standby().psql("postgres", "ALTER SYSTEM RESET max_standby_streaming_delay");
        let _ = standby().psql("postgres", "SELECT pg_reload_conf()");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reader_check_sees_a_query_the_swaps_replayed_lock_cancels() {
    let _turn = TURN.lock().await;
    let db = feed_db("replica_reader_cancel");
    let _delay = StandbyDelay::set("0");
    for _ in 0..100 {
        if standby()
            .psql("postgres", "SHOW max_standby_streaming_delay")
            .expect("show")
            .trim()
            == "0"
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each page holds its lock on the table for a second: a query is always running.
    let reader = StandbyReader::start(ReaderConfig {
        page_size: 5_000,
        pause: Duration::ZERO,
        hold: Some(Duration::from_secs(1)),
        ..reader(&db)
    });
    let run = spawn_run(&db);
    wait_for_ready(&db).await;
    cas::request_cutover(&spec(&db), &QualifiedName::bare("feed"))
        .await
        .expect("cutover requested");
    let report = run.await.expect("task").expect("the run swaps");
    assert_eq!(report.phase, "done");
    let after = reader.passes();
    while reader.passes() < after + 1 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = reader.stop(Duration::from_secs(60)).await;
    let verdict = standby_reader::check(&expected_keys(&db).await, &log);
    assert!(
        verdict.cancelled >= 1,
        "{verdict:?}; errors {:?}",
        log.errors
    );
    assert!(!verdict.is_clean(), "{verdict:?}");
    let cancelled = log
        .errors
        .iter()
        .find(|e| e.recovery_conflict)
        .expect("a cancellation");
    assert_eq!(
        cancelled.sqlstate.as_deref(),
        Some("40001"),
        "{cancelled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_windowed_reader_reads_only_the_rows_after_its_lower_bound() {
    let _turn = TURN.lock().await;
    let db = feed_db("replica_reader_window");
    // 2026-01-01 00:00:05 UTC: the seed's row g is at BASE + (g / 3) ms, so the rows
    // strictly after it are g >= 15003 (g = 15000..15002 are at it and left out).
    let since = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_605);
    assert_eq!(
        value(
            &db,
            &format!("SELECT '{BASE}'::timestamptz + interval '5 s' = to_timestamp(1767225605)")
        ),
        "t",
        "the window constant"
    );
    let reader = StandbyReader::start(ReaderConfig {
        since: Some(since),
        ..reader(&db)
    });
    while reader.passes() < 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = reader.stop(Duration::from_secs(60)).await;
    let (client, connection) =
        tokio_postgres::connect(&primary().connection_string(&db), tokio_postgres::NoTls)
            .await
            .expect("connects");
    tokio::spawn(connection);
    let expected =
        standby_reader::fenced_keys_since(&client, &TableRef::new("feed"), Some(since), fence())
            .await
            .expect("fenced keys");
    assert_eq!(
        expected.len(),
        20_000 - 15_003 + 1,
        "the window on the primary"
    );
    let verdict = standby_reader::check(&expected, &log);
    assert!(verdict.is_clean(), "{verdict:?}; errors {:?}", log.errors);
    assert!(log.passes.iter().all(|p| p.keys.len() == expected.len()));
}
