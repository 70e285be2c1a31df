//! Target R1's "backends terminated": every session of the engine is ended by
//! `pg_terminate_backend` in the middle of a phase, while writers keep writing; the
//! run stops with an error, and `resume` completes it with no lost write.

mod common;

use std::time::Duration;

use common::cas::{artifacts, options, resume, run, run_id, run_phase, value, Hook, LockHolder};
use common::*;
use pgshift::cas::{Mode, Phase};

const SCHEMA: &str = "
CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL, note text);
CREATE INDEX items_qty_idx ON items (qty);
INSERT INTO items SELECT g, g % 100, 'note ' || g FROM generate_series(1, 50000) g;
ANALYZE items;
";

/// Every session of the engine (the runner, copy, apply, index and verify sessions all
/// have application names starting with `pgshift`).
const EVERY_SESSION: &str = "pgshift%";

/// Ends the sessions of the engine in the current database whose application name is
/// like `pattern`, and says how many.
fn terminate(pattern: &str) -> String {
    format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
          WHERE datname = current_database() AND application_name LIKE '{pattern}' AND pid <> pg_backend_pid()"
    )
}

async fn terminated_then_resumed(at: Phase, pattern: &'static str) {
    let db = database("cas_faults", SCHEMA);
    let inserter = Writer::start(
        &db,
        "INSERT INTO items (id, qty, note) VALUES ($1::bigint + 1000000, ($1::bigint % 50)::int, 'w' || $1::bigint)",
        Duration::from_millis(2),
    )
    .await;
    let updater = Writer::start(
        &db,
        "UPDATE items SET qty = qty + 1 WHERE id = ($1::bigint % 50000) + 1",
        Duration::from_millis(3),
    )
    .await;
    let hook_db = db.clone();
    let mut hook = Hook::new(at, move || {
        let ended = cluster()
            .psql(&hook_db, &terminate(pattern))
            .expect("terminating");
        assert_ne!(ended.trim(), "0", "the engine's sessions were there to end");
    });
    let change = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";
    let stopped = run(&db, "items", change, options(Mode::Live), &mut hook).await;
    assert!(
        stopped.is_err(),
        "the run stops when its sessions are ended: {stopped:?}"
    );
    // With its own session gone the run may not have recorded that it stopped: the
    // record then holds the phase it was in, as after a killed process.
    let phase = run_phase(&db);
    assert!(
        !phase.starts_with("done"),
        "the run is not recorded as done: {phase}"
    );
    // The writers keep going while the run is stopped, and while it resumes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = resume(&db, "items")
        .await
        .expect("resume completes the run");
    let inserts = inserter.stop().await;
    let updates = updater.stop().await;
    assert_eq!(report.phase, "done");
    assert_eq!(inserts.failed, 0, "{inserts:?}");
    assert_eq!(updates.failed, 0, "{updates:?}");
    assert!(inserts.committed > 10 && updates.committed > 10);

    let inserted: u64 = value(&db, "SELECT count(*) FROM items WHERE id > 1000000")
        .parse()
        .expect("count");
    assert_eq!(
        inserted, inserts.committed,
        "every acknowledged insert is there"
    );
    let delta: u64 = value(
        &db,
        "SELECT (SELECT sum(qty) FROM items WHERE id <= 50000) - (SELECT sum(g % 100) FROM generate_series(1, 50000) g)",
    )
    .parse()
    .expect("delta");
    assert_eq!(
        delta, updates.committed,
        "every acknowledged update is there"
    );
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "bigint"
    );
    assert_eq!(artifacts(&db), "", "nothing of the run is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_terminated_while_copying_then_resumed_lose_nothing() {
    terminated_then_resumed(Phase::Copying, EVERY_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_terminated_while_indexing_then_resumed_lose_nothing() {
    terminated_then_resumed(Phase::Indexing, EVERY_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_terminated_while_verifying_then_resumed_lose_nothing() {
    terminated_then_resumed(Phase::Verifying, EVERY_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_terminated_at_the_cutover_then_resumed_lose_nothing() {
    terminated_then_resumed(Phase::Cutover, EVERY_SESSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_appliers_session_terminated_stops_the_run_and_resume_loses_nothing() {
    terminated_then_resumed(Phase::Indexing, "pgshift-apply-%").await;
}

/// Holds SHARE UPDATE EXCLUSIVE on the shadow (as an autovacuum worker does on a
/// freshly copied heap), returning once it is granted, and lets it go after `hold`.
fn hold_shadow_like_autovacuum(db: &str, hold: Duration) -> std::thread::JoinHandle<()> {
    let shadow = format!("_pgshift_{}_items", run_id(db));
    let held = LockHolder::hold(
        db,
        &format!("BEGIN; LOCK TABLE {shadow} IN SHARE UPDATE EXCLUSIVE MODE"),
    );
    std::thread::spawn(move || {
        std::thread::sleep(hold);
        held.release();
    })
}

/// The shadow held (as by autovacuum) longer than the session's 1 s lock budget when
/// its key and indexes are built: the build waits for it rather than fail — nobody but
/// the engine queues behind a lock on the shadow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_held_at_indexing_is_waited_for_not_failed() {
    let db = database("cas_faults_held", SCHEMA);
    let hook_db = db.clone();
    let holder = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = holder.clone();
    let mut hook = Hook::new(Phase::Indexing, move || {
        *slot.lock().expect("slot") = Some(hold_shadow_like_autovacuum(
            &hook_db,
            Duration::from_secs(3),
        ));
    });
    let report = run(
        &db,
        "items",
        "ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        options(Mode::Live),
        &mut hook,
    )
    .await
    .expect("the run waits out the holder and completes");
    if let Some(handle) = holder.lock().expect("slot").take() {
        handle.join().expect("the holder ends");
    }
    assert_eq!(report.phase, "done");
    assert_eq!(artifacts(&db), "");
}
