//! The clean-up after a swap of the relay's `events` (partitioned, foreign keys to
//! `communities` and `channels`) while writers insert into the new table: it takes
//! one partner's lock at a time under the cutover's budget, never forms a lock cycle
//! with the writers, and a clean-up that cannot get its lock leaves the old table
//! behind (with the statements that drop it) without turning the done swap into a
//! failure.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cas::*;
use common::*;
use pgshift::cas::{Mode, Phase, RunOptions};

/// A rewrite of `events` (`received_at` loses its time zone).
const CHANGE: &str = "ALTER TABLE events ALTER COLUMN received_at TYPE timestamp";

/// The relay's migration 0005: `events` gets its second partner.
const CHANNEL_FK: &str = "ALTER TABLE events ADD CONSTRAINT events_channel_fkey \
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id)";

/// A table of the application referencing `communities` (its writers' foreign-key
/// checks take ROW SHARE on `communities`, as those of `events` do).
const SIDE_TABLE: &str =
    "CREATE TABLE community_notes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
    community_id uuid NOT NULL REFERENCES communities (id), note text NOT NULL)";

/// An insert checked against `communities` only, by the first writer: ROW SHARE on
/// `communities` for as long as its transaction stays open.
const COMMUNITY_ONLY: &str = "INSERT INTO community_notes (community_id, note) \
    SELECT id, 'first writer' FROM communities ORDER BY id LIMIT 1";

/// An insert into `events` checked against both partners (a permanent channel).
const WITH_CHANNEL: &str = "INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, channel_id) \
    SELECT community_id, sha256(('second writer ' || $1::bigint)::bytea), sha256('p'::bytea), \
           '2026-10-16'::timestamptz + $1::bigint * interval '1 second', 1, '[]', 'second writer', id \
      FROM channels WHERE ttl_seconds IS NULL ORDER BY community_id, id LIMIT 1";

/// The cutover's (and so the clean-up's) lock budget in these tests.
const BUDGET_MS: u64 = 200;

fn cleanup_options(attempts: u32) -> RunOptions {
    let mut options = options(Mode::Live);
    options.cutover.lock_timeout_ms = BUDGET_MS;
    options.cutover.attempts = attempts;
    options.cutover.backoff_initial_ms = 50;
    options.cutover.backoff_max_ms = 200;
    options
}

/// What a run left behind, but for the throttle's probe table (the engine's own,
/// kept across runs).
fn left_over(db: &str) -> String {
    artifacts(db)
        .split(',')
        .filter(|a| !a.is_empty() && !a.starts_with("table:throttle_probe"))
        .collect::<Vec<_>>()
        .join(",")
}

fn relay_with_two_partners(prefix: &str) -> String {
    let db = relay_database(prefix);
    cluster().psql(&db, CHANNEL_FK).expect("second partner");
    cluster().psql(&db, SIDE_TABLE).expect("side table");
    db
}

/// What a sampler of `pg_locks` saw of the runner's locks on the two partners.
#[derive(Default)]
struct Seen {
    /// Samples where the runner held ACCESS EXCLUSIVE on one partner and held or
    /// requested a lock on the other.
    two_partners: Vec<String>,
    /// Whether the runner was seen waiting for ACCESS EXCLUSIVE on `communities`.
    waited_on_communities: bool,
}

/// Samples the runner's (`application_name = 'pgshift'`) locks on the partners every
/// few milliseconds while `on` is set, until `stop`.
async fn sample(
    db: String,
    on: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    waited: Arc<AtomicBool>,
) -> Seen {
    let client = client(&db).await;
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) {
        if on.load(Ordering::Relaxed) {
            let rows = client
                .query(
                    "SELECT l.relation::regclass::text, l.mode, l.granted FROM pg_locks l \
                       JOIN pg_stat_activity a ON a.pid = l.pid \
                      WHERE a.datname = current_database() AND a.application_name = 'pgshift' \
                        AND l.relation IN ('communities'::regclass, 'channels'::regclass)",
                    &[],
                )
                .await
                .expect("pg_locks");
            let locks: Vec<(String, String, bool)> = rows
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            for (relation, mode, granted) in &locks {
                if mode == "AccessExclusiveLock"
                    && *granted
                    && locks.iter().any(|(r, _, _)| r != relation)
                {
                    seen.two_partners.push(format!("{locks:?}"));
                }
                if relation == "communities" && mode == "AccessExclusiveLock" && !*granted {
                    seen.waited_on_communities = true;
                    waited.store(true, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    seen
}

/// The deterministic reproduction: a writer holds ROW SHARE on `communities` (its
/// insert into the new `events`, left open) while the clean-up runs, and a second
/// writer inserts rows checked against both partners. The second writer never waits
/// past the budget (its own `lock_timeout` is ten times it), the runner never holds
/// ACCESS EXCLUSIVE on one partner while it holds or waits for the other, and the
/// clean-up finishes once the first writer commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_8_cleanup_takes_partner_locks_one_at_a_time_under_the_lock_budget() {
    let db = relay_with_two_partners("cas_cleanup_cycle");
    let cleaning = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let waited = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(
        db.clone(),
        cleaning.clone(),
        stop.clone(),
        waited.clone(),
    ));

    // The second writer: rows checked against both partners, each insert allowed to
    // wait for its locks ten times the clean-up's budget.
    let second_done = Arc::new(AtomicBool::new(false));
    let second = {
        let (db, cleaning, done) = (db.clone(), cleaning.clone(), second_done.clone());
        tokio::spawn(async move {
            let client = client(&db).await;
            client
                .batch_execute(&format!("SET lock_timeout = {}", BUDGET_MS * 10))
                .await
                .expect("setting");
            while !cleaning.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let mut errors = Vec::new();
            for n in 0..15i64 {
                if let Err(e) = client.execute(WITH_CHANNEL, &[&n]).await {
                    errors.push(
                        e.as_db_error()
                            .map_or_else(|| e.to_string(), |d| d.message().to_owned()),
                    );
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            done.store(true, Ordering::Relaxed);
            errors
        })
    };

    // The first writer starts when the clean-up does, and commits once the second
    // writer is through and the clean-up was seen waiting for it.
    let first: Arc<Mutex<Option<LockHolder>>> = Arc::new(Mutex::new(None));
    let hook = {
        let (db, first, cleaning) = (db.clone(), first.clone(), cleaning.clone());
        Hook::new(Phase::Cutover, move || {
            let holder = LockHolder::hold(&db, &format!("BEGIN; {COMMUNITY_ONLY}"));
            *first.lock().expect("holder") = Some(holder);
            cleaning.store(true, Ordering::Relaxed);
        })
    };
    let releaser = {
        let (first, done, waited) = (first.clone(), second_done.clone(), waited.clone());
        tokio::spawn(async move {
            for _ in 0..1200 {
                if done.load(Ordering::Relaxed) && waited.load(Ordering::Relaxed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let holder = first.lock().expect("holder").take();
            if let Some(holder) = holder {
                tokio::task::spawn_blocking(move || holder.release())
                    .await
                    .expect("released");
            }
        })
    };

    let mut hook = hook;
    let result = run(&db, "events", CHANGE, cleanup_options(60), &mut hook).await;
    releaser.await.expect("releaser");
    let second_errors = second.await.expect("second writer");
    stop.store(true, Ordering::Relaxed);
    let seen = sampler.await.expect("sampler");

    let report = result.expect("the run is done");
    assert_eq!(report.phase, "done", "{report:?}");
    assert!(report.left_behind.is_empty(), "{:?}", report.left_behind);
    assert!(
        second_errors.is_empty(),
        "the second writer waited past its budget: {second_errors:?}"
    );
    assert!(
        seen.waited_on_communities,
        "the clean-up was never seen waiting for the first writer"
    );
    assert!(
        seen.two_partners.is_empty(),
        "the runner held ACCESS EXCLUSIVE on one partner with a lock on the other: {:?}",
        seen.two_partners
    );
    let communities_step = report
        .cleanup
        .iter()
        .find(|s| s.statement.contains("events_community_id_fkey"))
        .expect("the foreign key to communities was dropped by its own step");
    assert!(
        communities_step.committed && communities_step.attempts >= 2,
        "{communities_step:?}"
    );
    assert_eq!(
        left_over(&db),
        "",
        "the old tree and the engine's objects are gone"
    );
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM events WHERE content = 'second writer'"
        ),
        "15"
    );
    assert_eq!(value(&db, "SELECT count(*) FROM community_notes"), "1");
    assert_eq!(run_phase(&db), "done");
}

/// A clean-up that cannot get a partner's lock within its attempts leaves the old
/// table and that foreign key behind, with the statements that drop them: the run is
/// done, and the statements drop them once the writer has gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_out_of_attempts_leaves_the_old_table_and_the_run_done() {
    let db = relay_with_two_partners("cas_cleanup_left");
    let first: Arc<Mutex<Option<LockHolder>>> = Arc::new(Mutex::new(None));
    let mut hook = {
        let (db, first) = (db.clone(), first.clone());
        Hook::new(Phase::Cutover, move || {
            let holder = LockHolder::hold(&db, &format!("BEGIN; {COMMUNITY_ONLY}"));
            *first.lock().expect("holder") = Some(holder);
        })
    };
    let result = run(&db, "events", CHANGE, cleanup_options(3), &mut hook).await;
    let holder = first.lock().expect("holder").take();
    let report = result.expect("the swap is done, whatever the clean-up left");
    assert_eq!(report.phase, "done", "{report:?}");
    assert_eq!(run_phase(&db), "done");
    let objects: Vec<&str> = report
        .left_behind
        .iter()
        .map(|l| l.object.as_str())
        .collect();
    assert_eq!(objects.len(), 2, "{:?}", report.left_behind);
    assert!(
        objects[0].starts_with("foreign key \"events_community_id_fkey\""),
        "{objects:?}"
    );
    assert!(objects[1].starts_with("table "), "{objects:?}");
    assert!(
        report.left_behind[0].reason.contains("lock"),
        "{:?}",
        report.left_behind
    );
    let old = report.left_behind[1]
        .statement
        .trim_start_matches("DROP TABLE ")
        .to_owned();
    assert_eq!(
        value(&db, &format!("SELECT to_regclass('{old}') IS NOT NULL")),
        "t"
    );
    assert_eq!(
        value(&db, "SELECT count(*) FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid WHERE c.conname = 'events_channel_fkey' AND r.relname LIKE '\\_pgshift\\_old%'"),
        "0",
        "the foreign key the clean-up could drop is gone"
    );
    // Only the old tree stays: the change log, functions and triggers are gone.
    let left = left_over(&db);
    assert!(
        left.split(',').all(|a| a.starts_with("_pgshift_old_")),
        "{left}"
    );

    holder.expect("the first writer held its lock").release();
    for left in &report.left_behind {
        cluster()
            .psql(&db, &left.statement)
            .expect("the reported statement drops it");
    }
    assert_eq!(left_over(&db), "");
}
