//! Copy-and-swap refuses to swap whenever it could not prove the swap safe: a capture
//! that was tampered with, a shadow that differs from the source, a lock that is not
//! granted in time. Every refusal leaves the source in place and the run resumable or
//! abortable; a second run on the same table is refused at once; a swap that committed
//! before the process stopped is settled from the catalog.

mod common;

use std::time::Duration;

use common::cas::*;
use common::*;
use pgshift::cas::{CasError, Mode, Phase, Silent};
use pgshift::refusal::RefusalCause;

const SCHEMA: &str = "
CREATE TABLE items (
    id bigint PRIMARY KEY,
    qty int NOT NULL,
    note text
);
CREATE INDEX items_qty_idx ON items (qty);
INSERT INTO items SELECT g, g % 100, 'note ' || g FROM generate_series(1, 5000) g;
ANALYZE items;
";

const CHANGE: &str = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";

fn cause(err: &CasError) -> Option<RefusalCause> {
    match err {
        CasError::Refused(r) | CasError::CutoverRefused(r) => Some(r.cause),
        _ => None,
    }
}

/// The same rows as `items`, range-partitioned.
const PARTITIONED: &str = "
CREATE TABLE parted (id bigint PRIMARY KEY, qty int NOT NULL, note text) PARTITION BY RANGE (id);
CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (MINVALUE) TO (2500);
CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (2500) TO (MAXVALUE);
INSERT INTO parted SELECT g, g % 100, 'note ' || g FROM generate_series(1, 5000) g;
ANALYZE parted;
";

/// One way of tampering with the capture (or fence), applied just before the swap
/// (`{run}` stands for the run's number), and a write the tampered trigger lets
/// through (`write`), read back from `written`.
struct Tampering {
    mode: Mode,
    schema: &'static str,
    table: &'static str,
    tamper: &'static str,
    write: &'static str,
    written: &'static str,
}

const UPDATE_17: &str = "UPDATE items SET qty = qty + 1 WHERE id = 17";
const READ_17: &str = "SELECT qty FROM items WHERE id = 17";

/// Tampers as `t` says right before the swap: the swap is refused (`cutover-unfenced`)
/// with the source in place and the write on it; resuming refuses too, a new run is
/// refused while this one is recorded, and abort removes every artifact.
async fn tampered(t: Tampering) {
    let db = database("cas_tamper", t.schema);
    let source = oid(&db, t.table);
    let change = format!("ALTER TABLE {} ALTER COLUMN qty TYPE bigint", t.table);
    let hook_db = db.clone();
    let mut hook = Hook::new(Phase::Cutover, move || {
        let sql = t.tamper.replace("{run}", &run_id(&hook_db).to_string());
        cluster().psql(&hook_db, &sql).expect("tampering works");
        // A write the tampered trigger does not see (or does not refuse).
        cluster()
            .psql(&hook_db, t.write)
            .expect("the write goes through");
    });
    let err = run(&db, t.table, &change, options(t.mode), &mut hook)
        .await
        .expect_err("the swap is refused");
    assert_eq!(cause(&err), Some(RefusalCause::CutoverUnfenced), "{err}");
    assert_eq!(oid(&db, t.table), source, "the source stays");
    assert_eq!(value(&db, t.written), "18", "the write is on the source");
    assert_eq!(run_phase(&db), "failed/verifying");

    // Resuming cannot repair a capture that may have missed writes.
    let again = resume(&db, t.table).await.expect_err("resume refuses");
    assert_eq!(
        cause(&again),
        Some(RefusalCause::CutoverUnfenced),
        "{again}"
    );
    // Nor can a new run start while this one is recorded.
    let second = run(&db, t.table, &change, options(t.mode), &mut Silent)
        .await
        .expect_err("a second run is refused");
    assert_eq!(
        cause(&second),
        Some(RefusalCause::RunInProgress),
        "{second}"
    );

    abort(&db, t.table).await.expect("abort");
    assert_eq!(artifacts(&db), "", "abort leaves nothing");
    assert_eq!(oid(&db, t.table), source);
    assert_eq!(
        value(
            &db,
            &format!(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = '{}'::regclass AND attname = 'qty'",
                t.table
            )
        ),
        "integer"
    );
}

/// One test per way of tampering (each name starts with `inv_co_4_`).
macro_rules! tampering {
    ($( $(#[$doc:meta])* fn $name:ident { $($field:ident: $value:expr),* $(,)? } )*) => {
        $(
            $(#[$doc])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                tampered(Tampering { $($field: $value),* }).await;
            }
        )*
    };
}

tampering! {
    /// The capture disabled: no write is logged.
    fn inv_co_4_capture_disabled {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "ALTER TABLE items DISABLE TRIGGER pgshift_capture_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture made ORIGIN-only: replicas' writes (and restores) are not logged.
    fn inv_co_4_capture_made_origin_only {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "ALTER TABLE items ENABLE TRIGGER pgshift_capture_{run}",
        write: "SET session_replication_role = replica; UPDATE items SET qty = qty + 1 WHERE id = 17",
        written: READ_17,
    }
    /// The capture made REPLICA-only: ordinary writes are not logged.
    fn inv_co_4_capture_made_replica_only {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "ALTER TABLE items ENABLE REPLICA TRIGGER pgshift_capture_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture dropped.
    fn inv_co_4_capture_dropped {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "DROP TRIGGER pgshift_capture_{run} ON items",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture replaced by one with a WHEN that never holds.
    fn inv_co_4_capture_replaced_with_a_when_condition {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "DROP TRIGGER pgshift_capture_{run} ON items; \
                 CREATE TRIGGER pgshift_capture_{run} AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW \
                   WHEN (pg_trigger_depth() < 0) EXECUTE FUNCTION pgshift.capture_{run}(); \
                 ALTER TABLE items ENABLE ALWAYS TRIGGER pgshift_capture_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture replaced by one with a column list that misses `qty`.
    fn inv_co_4_capture_replaced_with_a_column_list {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "DROP TRIGGER pgshift_capture_{run} ON items; \
                 CREATE TRIGGER pgshift_capture_{run} AFTER INSERT OR UPDATE OF note OR DELETE ON items FOR EACH ROW \
                   EXECUTE FUNCTION pgshift.capture_{run}(); \
                 ALTER TABLE items ENABLE ALWAYS TRIGGER pgshift_capture_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture replaced by one passing arguments to the function.
    fn inv_co_4_capture_replaced_with_arguments {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "DROP TRIGGER pgshift_capture_{run} ON items; \
                 CREATE TRIGGER pgshift_capture_{run} AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW \
                   EXECUTE FUNCTION pgshift.capture_{run}('skip'); \
                 ALTER TABLE items ENABLE ALWAYS TRIGGER pgshift_capture_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture replaced by a deferred constraint trigger (it would log at commit,
    /// after a swap that drained the log).
    fn inv_co_4_capture_replaced_by_a_deferred_constraint_trigger {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "DROP TRIGGER pgshift_capture_{run} ON items; \
                 CREATE CONSTRAINT TRIGGER pgshift_capture_{run} AFTER INSERT OR UPDATE OR DELETE ON items \
                   DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pgshift.capture_{run}(); \
                 ALTER TABLE items ENABLE ALWAYS TRIGGER pgshift_capture_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture's function replaced by one that logs nothing.
    fn inv_co_4_capture_function_replaced {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "CREATE OR REPLACE FUNCTION pgshift.capture_{run}() RETURNS trigger LANGUAGE plpgsql \
                   SECURITY DEFINER AS $$ BEGIN RETURN NULL; END $$",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture's function given a setting of its own (`ALTER FUNCTION … SET`):
    /// its body is unchanged, but it no longer runs as installed.
    fn inv_co_4_capture_function_given_a_setting {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "ALTER FUNCTION pgshift.capture_{run}() SET search_path = public",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture's function made SECURITY INVOKER: a writer without rights on the
    /// change log would fail (or, with them, write where its own privileges allow).
    fn inv_co_4_capture_function_made_security_invoker {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "ALTER FUNCTION pgshift.capture_{run}() SECURITY INVOKER",
        write: UPDATE_17, written: READ_17,
    }
    /// The TRUNCATE guard dropped.
    fn inv_co_4_truncate_guard_dropped {
        mode: Mode::Live, schema: SCHEMA, table: "items",
        tamper: "DROP TRIGGER pgshift_truncate_{run} ON items",
        write: UPDATE_17, written: READ_17,
    }
    /// The capture gone from one partition: detaching it drops the clone there, and
    /// writes to it are no longer logged.
    fn inv_co_4_capture_dropped_on_one_partition_only {
        mode: Mode::Live, schema: PARTITIONED, table: "parted",
        tamper: "ALTER TABLE parted DETACH PARTITION parted_low",
        write: "UPDATE parted_low SET qty = qty + 1 WHERE id = 17",
        written: "SELECT qty FROM parted_low WHERE id = 17",
    }
    /// Quiesced: the fence disabled, so writes are no longer refused.
    fn inv_co_4_fence_disabled {
        mode: Mode::Quiesced, schema: SCHEMA, table: "items",
        tamper: "ALTER TABLE items DISABLE TRIGGER pgshift_fence_{run}",
        write: UPDATE_17, written: READ_17,
    }
    /// Quiesced: the fence made ORIGIN-only, so a replica's write is not refused.
    fn inv_co_4_fence_made_origin_only {
        mode: Mode::Quiesced, schema: SCHEMA, table: "items",
        tamper: "ALTER TABLE items ENABLE TRIGGER pgshift_fence_{run}",
        write: "SET session_replication_role = replica; UPDATE items SET qty = qty + 1 WHERE id = 17",
        written: READ_17,
    }
    /// Quiesced: the fence dropped on one partition (statement triggers are per
    /// relation), so writes to that partition are not refused.
    fn inv_co_4_fence_dropped_on_one_partition {
        mode: Mode::Quiesced, schema: PARTITIONED, table: "parted",
        tamper: "DROP TRIGGER pgshift_fence_{run} ON parted_low",
        write: "UPDATE parted_low SET qty = qty + 1 WHERE id = 17",
        written: "SELECT qty FROM parted WHERE id = 17",
    }
}

/// A hook that runs `damage` (with `{shadow}` standing for the shadow table) when
/// verification starts.
fn damage_shadow(db: &str, damage: &'static str) -> Hook {
    let db = db.to_owned();
    Hook::new(Phase::Verifying, move || {
        let shadow = format!("_pgshift_{}_items", run_id(&db));
        cluster()
            .psql(&db, &damage.replace("{shadow}", &shadow))
            .expect("damaging the shadow");
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_6_a_shadow_that_differs_from_the_source_fails_verification() {
    for (label, damage) in [
        (
            "changed",
            "UPDATE {shadow} SET note = 'damaged' WHERE id = 4321",
        ),
        ("missing", "DELETE FROM {shadow} WHERE id = 77"),
        (
            "extra",
            "INSERT INTO {shadow} (id, qty, note) VALUES (999999, 1, 'ghost')",
        ),
    ] {
        let db = database("cas_diverge", SCHEMA);
        let source = oid(&db, "items");
        let mut hook = damage_shadow(&db, damage);
        let err = run(&db, "items", CHANGE, options(Mode::Live), &mut hook)
            .await
            .expect_err(label);
        assert!(
            matches!(err, CasError::Divergence(_)),
            "{label}: verification fails: {err}"
        );
        assert_eq!(oid(&db, "items"), source, "{label}: no swap");
        assert_eq!(run_phase(&db), "failed/verifying");
        abort(&db, "items").await.expect("abort");
        assert_eq!(artifacts(&db), "");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_7_no_swap_without_a_clean_complete_pass() {
    // A damaged shadow fails verification; resuming verifies again from scratch and
    // fails again — the run never swaps on an earlier, partial or repaired pass.
    let db = database("cas_clean_pass", SCHEMA);
    let source = oid(&db, "items");
    let mut hook = damage_shadow(&db, "UPDATE {shadow} SET qty = -1 WHERE id = 4999");
    let err = run(&db, "items", CHANGE, options(Mode::Live), &mut hook)
        .await
        .expect_err("diverged");
    assert!(matches!(err, CasError::Divergence(_)), "{err}");
    assert_eq!(value(&db, "SELECT verified FROM pgshift.runs"), "f");
    let err = resume(&db, "items").await.expect_err("still diverged");
    assert!(matches!(err, CasError::Divergence(_)), "{err}");
    assert_eq!(oid(&db, "items"), source);

    // With repair, the diverged chunk is copied again, and a second, clean pass is
    // what lets the run swap.
    abort(&db, "items").await.expect("abort");
    let mut hook = damage_shadow(&db, "UPDATE {shadow} SET qty = -1 WHERE id = 4999");
    let mut repairing = options(Mode::Live);
    repairing.repair = true;
    let report = run(&db, "items", CHANGE, repairing, &mut hook)
        .await
        .expect("repaired");
    assert_eq!(report.verification_passes, 2, "{report:?}");
    assert_eq!(value(&db, "SELECT qty FROM items WHERE id = 4999"), "99");
    assert_ne!(oid(&db, "items"), source, "swapped after the clean pass");
    assert_eq!(artifacts(&db), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_oc_2_a_second_run_on_the_same_table_is_refused_at_once() {
    let db = database("cas_one_run", SCHEMA);
    let mut deferred = options(Mode::Live);
    deferred.defer_cutover = true;
    let first_db = db.clone();
    let first =
        tokio::spawn(async move { run(&first_db, "items", CHANGE, deferred, &mut Silent).await });
    wait_for_phase(&db, "ready").await;

    let started = std::time::Instant::now();
    let second = run(&db, "items", CHANGE, options(Mode::Live), &mut Silent)
        .await
        .expect_err("busy");
    assert!(
        matches!(second, CasError::Busy { pid: Some(_), .. }),
        "the holder is named: {second}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused without waiting for the first run"
    );
    // `abort` waits for the backend of a process killed a moment ago to let the table
    // go (15 s at most); a holder that goes on sending statements is alive, and is
    // refused without that wait.
    let started = std::time::Instant::now();
    let busy_abort = abort(&db, "items").await.expect_err("busy");
    assert!(matches!(busy_abort, CasError::Busy { .. }), "{busy_abort}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a live holder is refused without waiting out a killed process's backend ({:?})",
        started.elapsed()
    );

    // The deferred run waits in `ready`, kept in step, until asked to swap.
    cluster()
        .psql(&db, "INSERT INTO items VALUES (5001, 1, 'while ready')")
        .expect("write while ready");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(run_phase(&db), "ready");
    pgshift::cas::request_cutover(&spec(&db), &pgshift_sql::QualifiedName::bare("items"))
        .await
        .expect("cutover requested");
    let report = first.await.expect("task").expect("the run completes");
    assert_eq!(report.phase, "done");
    assert_eq!(
        value(&db, "SELECT note FROM items WHERE id = 5001"),
        "while ready"
    );
    assert_eq!(artifacts(&db), "");
}

/// Writes that commit while the swap waits for its lock are in the change log, not
/// yet applied (the background applier is paused for the swap): the swap drains them
/// under its lock, more than one of its reads of the log (5,000 entries each) when
/// there are many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_5_writes_committed_while_the_swap_waits_are_drained_under_its_lock() {
    let db = database("cas_drain_at_swap", SCHEMA);
    let sum_before: i64 = value(&db, "SELECT sum(qty) FROM items")
        .parse()
        .expect("sum");
    // Two updates of every row and 3,000 inserts: 13,000 entries, three reads.
    drained_under_the_lock(
        &db,
        "UPDATE items SET qty = qty + 1; UPDATE items SET qty = qty + 1; \
         INSERT INTO items SELECT g, 7, 'late ' || g FROM generate_series(100001, 103000) g",
        13_000,
    )
    .await;
    assert_eq!(value(&db, "SELECT count(*) FROM items"), "8000");
    let sum_after: i64 = value(&db, "SELECT sum(qty) FROM items")
        .parse()
        .expect("sum");
    assert_eq!(sum_after, sum_before + 2 * 5_000 + 7 * 3_000);
}

/// The same with a foreign key of the table to itself, `ON DELETE CASCADE`: its
/// shadow is written with `session_replication_role = replica` (set and restored
/// around each batch), or re-applying the chain's first row would delete the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_5_a_self_referencing_table_is_drained_under_the_lock_too() {
    let schema = format!(
        "{SCHEMA} ALTER TABLE items ADD COLUMN parent_id bigint REFERENCES items (id) ON DELETE CASCADE; \
         UPDATE items SET parent_id = id - 1 WHERE id > 1;"
    );
    let db = database("cas_drain_self_ref", &schema);
    // 6,000 inserts, then the chain's first row: it is in the second read.
    drained_under_the_lock(
        &db,
        "INSERT INTO items SELECT g, 7, 'late', NULL FROM generate_series(100001, 106000) g; \
         UPDATE items SET note = 'moved' WHERE id = 1",
        6_001,
    )
    .await;
    assert_eq!(value(&db, "SELECT count(*) FROM items"), "11000");
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM items c JOIN items p ON p.id = c.parent_id"
        ),
        "4999"
    );
    assert_eq!(value(&db, "SELECT note FROM items WHERE id = 1"), "moved");
    assert_eq!(
        value(&db, "SELECT confrelid = 'items'::regclass FROM pg_constraint WHERE conname = 'items_parent_id_fkey'"),
        "t"
    );
}

/// Runs [`CHANGE`] with a deferred cutover; once the run is ready, makes `writes` in
/// a transaction held open until the swap waits for its lock behind it, then commits
/// them. The swap must drain exactly `entries` under its lock.
async fn drained_under_the_lock(db: &str, writes: &str, entries: i64) {
    let mut deferred = options(Mode::Live);
    deferred.defer_cutover = true;
    let run_db = db.to_owned();
    let running =
        tokio::spawn(async move { run(&run_db, "items", CHANGE, deferred, &mut Silent).await });
    wait_for_phase(db, "ready").await;
    let writer = client(db).await;
    writer
        .batch_execute(&format!("BEGIN; {writes}"))
        .await
        .expect("writes");
    pgshift::cas::request_cutover(&spec(db), &pgshift_sql::QualifiedName::bare("items"))
        .await
        .expect("cutover requested");
    let watcher = client(db).await;
    let waiting = "SELECT count(*) FROM pg_catalog.pg_locks WHERE relation = 'items'::regclass \
                   AND mode = 'AccessExclusiveLock' AND NOT granted";
    let mut seen = false;
    for _ in 0..600 {
        let row = watcher.query_one(waiting, &[]).await.expect("pg_locks");
        if row.get::<_, i64>(0) > 0 {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(seen, "the swap waited for its lock behind the open writer");
    writer.batch_execute("COMMIT").await.expect("commit");

    let report = running.await.expect("task").expect("the run completes");
    assert_eq!(report.phase, "done");
    let swap = report.swap.expect("swapped");
    assert_eq!(swap.drained, entries, "{swap:?}");
    assert_eq!(
        value(db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "bigint"
    );
    assert_eq!(artifacts(db), "");
}

/// A session holding ACCESS SHARE on `items` in an open transaction, a writer
/// inserting into it every 5 ms, and run options whose swap waits 200 ms per attempt
/// for at most `attempts` attempts.
async fn held_items(
    db: &str,
    attempts: u32,
) -> (tokio_postgres::Client, Writer, pgshift::cas::RunOptions) {
    let holder = client(db).await;
    holder
        .batch_execute("BEGIN; SELECT count(*) FROM items")
        .await
        .expect("holder");
    let writer = Writer::start(
        db,
        "INSERT INTO items (id, qty, note) VALUES ($1::bigint, 1, 'w')",
        Duration::from_millis(5),
    )
    .await;
    let mut budget = options(Mode::Live);
    budget.cutover.lock_timeout_ms = 200;
    budget.cutover.attempts = attempts;
    (holder, writer, budget)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_5_a_held_lock_makes_the_swap_give_up_within_its_budget() {
    let db = database("cas_lock_budget", SCHEMA);
    let source = oid(&db, "items");
    let (holder, writer, budget) = held_items(&db, 3).await;
    let err = run(&db, "items", CHANGE, budget, &mut Silent)
        .await
        .expect_err("the lock is held");
    let inserts = writer.stop().await;
    assert_eq!(
        cause(&err),
        Some(RefusalCause::LockBudgetExhausted),
        "{err}"
    );
    assert_eq!(oid(&db, "items"), source, "the source is untouched");
    assert_eq!(inserts.failed, 0, "writers were never refused: {inserts:?}");
    assert_eq!(run_phase(&db), "failed/verifying");

    // Once the holder lets go, the run resumes, verifies again and swaps.
    holder.batch_execute("COMMIT").await.expect("release");
    let report = resume(&db, "items").await.expect("resumes");
    assert_eq!(report.phase, "done");
    let swap = report.swap.expect("swapped");
    assert_eq!(swap.attempts, 1);
    assert_eq!(
        value(&db, "SELECT count(*) FROM items"),
        (5000 + inserts.committed).to_string()
    );
    assert_eq!(artifacts(&db), "");
}

/// Returns once a swap attempt waits for ACCESS EXCLUSIVE on `items` (and, with
/// `given_up`, once that wait has ended); fails after two minutes without one.
async fn wait_for_an_attempt(db: &str, given_up: bool) {
    let watcher = client(db).await;
    let waiting = "SELECT count(*) FROM pg_catalog.pg_locks WHERE relation = 'items'::regclass \
                   AND mode = 'AccessExclusiveLock' AND NOT granted";
    let mut seen = false;
    for _ in 0..24_000 {
        let n: i64 = watcher
            .query_one(waiting, &[])
            .await
            .expect("pg_locks")
            .get(0);
        if n > 0 {
            seen = true;
            if !given_up {
                return;
            }
        } else if seen {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no attempt waited for the lock behind the holder (seen: {seen})");
}

/// The swap's reads go out behind its `LOCK TABLE`, in one round trip. An attempt whose
/// lock is not granted has them fail unread in its aborted transaction; the next
/// attempt, on the same session, must then read and swap as if they had never been
/// sent, with every write of the meantime carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_5_an_attempt_that_timed_out_leaves_the_next_one_whole() {
    let db = database("cas_lock_retry", SCHEMA);
    let source = oid(&db, "items");
    let (holder, writer, budget) = held_items(&db, 20).await;
    let run_db = db.clone();
    let running =
        tokio::spawn(async move { run(&run_db, "items", CHANGE, budget, &mut Silent).await });

    // The first attempt waits for its lock behind the holder, then gives up: only then
    // does the holder let go.
    wait_for_an_attempt(&db, true).await;
    holder.batch_execute("COMMIT").await.expect("release");

    let report = running.await.expect("task").expect("the run swaps");
    let inserts = writer.stop().await;
    assert_eq!(report.phase, "done");
    let swap = report.swap.expect("swapped");
    assert!(swap.attempts >= 2, "{swap:?}");
    assert_ne!(oid(&db, "items"), source, "swapped");
    assert_eq!(inserts.failed, 0, "{inserts:?}");
    assert_eq!(
        value(&db, "SELECT count(*) FROM items"),
        (5000 + inserts.committed).to_string()
    );
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "bigint"
    );
    assert_eq!(artifacts(&db), "");
}

/// The swap's reads are planned before its first attempt, outside the lock. A capture
/// disabled after that planning, while an attempt waits, is still seen by the reads
/// made under the lock: the swap is refused and the source stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_4_a_capture_disabled_after_the_swaps_reads_were_planned() {
    let db = database("cas_planned_tamper", SCHEMA);
    let source = oid(&db, "items");
    let (holder, writer, budget) = held_items(&db, 20).await;
    let run_db = db.clone();
    let running =
        tokio::spawn(async move { run(&run_db, "items", CHANGE, budget, &mut Silent).await });
    wait_for_an_attempt(&db, false).await;
    // The swap has planned its reads. The holder disables the capture, writes past it
    // and lets go: no attempt can take the lock before that commits.
    holder
        .batch_execute(&format!(
            "ALTER TABLE items DISABLE TRIGGER pgshift_capture_{}; {UPDATE_17}; COMMIT",
            run_id(&db)
        ))
        .await
        .expect("tampering");
    let err = running
        .await
        .expect("task")
        .expect_err("the swap is refused");
    writer.stop().await;
    assert_eq!(cause(&err), Some(RefusalCause::CutoverUnfenced), "{err}");
    assert_eq!(oid(&db, "items"), source, "the source stays");
    assert_eq!(value(&db, READ_17), "18", "the write is on the source");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_st_3_a_swap_that_committed_is_settled_from_the_catalog() {
    // The run stops after the swap committed (its clean-up cannot take a lock held
    // here); resuming reads from the catalog that the swap happened and only finishes.
    let db = database("cas_settled", SCHEMA);
    let source = oid(&db, "items");
    let holder = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (hook_db, slot) = (db.clone(), holder.clone());
    let mut hook = Hook::new(Phase::Cutover, move || {
        // The swap starts only once the change log is held.
        let id = run_id(&hook_db);
        let held = LockHolder::hold(
            &hook_db,
            &format!("BEGIN; LOCK TABLE pgshift.log_{id} IN ACCESS SHARE MODE"),
        );
        *slot.lock().expect("slot") = Some(held);
    });
    let err = run(&db, "items", CHANGE, options(Mode::Live), &mut hook)
        .await
        .expect_err("clean-up cannot finish");
    assert!(
        matches!(err, CasError::Database { .. }),
        "the clean-up failed: {err}"
    );
    assert_ne!(oid(&db, "items"), source, "the swap committed");
    assert_eq!(run_phase(&db), "failed/cutover");
    let held = holder
        .lock()
        .expect("slot")
        .take()
        .expect("the log was held");
    held.release();

    let report = resume(&db, "items").await.expect("finishes");
    assert!(report.settled_from_catalog, "{report:?}");
    assert!(report.swap.is_none(), "no second swap");
    assert_eq!(report.phase, "done");
    assert_eq!(value(&db, "SELECT count(*) FROM items"), "5000");
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "bigint"
    );
    assert_eq!(artifacts(&db), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_carried_through_a_swap_is_refused_before_anything_is_created() {
    let db = database(
        "cas_preflight",
        "CREATE TABLE nokey (a int);
         CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY, v int);
         CREATE TABLE parted (id int PRIMARY KEY, v int) PARTITION BY RANGE (id);
         CREATE TABLE parted_a PARTITION OF parted FOR VALUES FROM (0) TO (10);
         CREATE TABLE ruled (id int PRIMARY KEY, v int);
         CREATE RULE ruled_notify AS ON INSERT TO ruled DO ALSO NOTIFY ruled;
         CREATE TABLE parent (id int PRIMARY KEY, v int);
         CREATE TABLE child (extra int) INHERITS (parent);
         CREATE TABLE summarized (id int PRIMARY KEY, v int);
         CREATE MATERIALIZED VIEW summary AS SELECT count(*) FROM summarized;
         CREATE VIEW plain AS SELECT 1 AS one;",
    );
    for (table, expected) in [
        ("nokey", RefusalCause::NoUsableKey),
        ("scratch", RefusalCause::NonPermanentTable),
        ("parted_a", RefusalCause::RewriteUnsupported),
        ("ruled", RefusalCause::RewriteUnsupported),
        ("parent", RefusalCause::RewriteUnsupported),
        ("child", RefusalCause::RewriteUnsupported),
        ("summarized", RefusalCause::DependentMaterializedView),
        ("plain", RefusalCause::WrongRelationKind),
        ("missing", RefusalCause::TableMissing),
    ] {
        let sql = format!("ALTER TABLE {table} ALTER COLUMN v TYPE bigint");
        let err = run(&db, table, &sql, options(Mode::Live), &mut Silent)
            .await
            .expect_err(table);
        assert_eq!(cause(&err), Some(expected), "{table}: {err}");
    }
    // Not even the engine's schema: the preflight only reads.
    assert_eq!(value(&db, "SELECT to_regnamespace('pgshift') IS NULL"), "t");
    assert_eq!(artifacts(&db), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_11_verification_reads_beside_an_index_build_that_takes_only_share() {
    // `items` has its key and one plain index: once the key is built, verification
    // starts and the other index is built beside it. A session holding ROW EXCLUSIVE
    // on the shadow from then on makes that build wait for its lock; pg_locks shows
    // the mode it waits for, and verification must finish while it waits.
    let db = database("cas_beside", SCHEMA);
    let source = oid(&db, "items");
    let seen = std::sync::Arc::new(std::sync::Mutex::new((String::new(), false)));
    let (hook_db, hook_seen) = (db.clone(), seen.clone());
    let mut hook = Hook::new(Phase::Verifying, move || {
        let shadow = format!("_pgshift_{}_items", run_id(&hook_db));
        let holder = LockHolder::hold(
            &hook_db,
            &format!("BEGIN; LOCK TABLE {shadow} IN ROW EXCLUSIVE MODE"),
        );
        std::thread::spawn(move || {
            let waiting = format!(
                "SELECT coalesce(string_agg(l.mode, ','), '') FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
                  WHERE NOT l.granted AND l.relation = '{shadow}'::regclass AND a.application_name LIKE 'pgshift-index-%'"
            );
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            let mut mode = String::new();
            while mode.is_empty() && std::time::Instant::now() < deadline {
                mode = value(&hook_db, &waiting);
                std::thread::sleep(Duration::from_millis(20));
            }
            let mut verified = false;
            while !verified && std::time::Instant::now() < deadline {
                verified = value(&hook_db, "SELECT verified FROM pgshift.runs") == "t";
                std::thread::sleep(Duration::from_millis(20));
            }
            // Still waiting: verification finished beside a build held up by its lock.
            let still = value(&hook_db, &waiting);
            *hook_seen.lock().expect("seen") = (mode, verified && !still.is_empty());
            holder.release();
        });
    });
    let report = run(&db, "items", CHANGE, options(Mode::Live), &mut hook)
        .await
        .expect("swapped");
    let (mode, verified_while_waiting) = seen.lock().expect("seen").clone();
    assert_eq!(
        mode, "ShareLock",
        "the build beside verification asks for SHARE"
    );
    assert!(
        verified_while_waiting,
        "verification finished while the build waited for its lock"
    );
    assert!(report.verified_beside_builds, "{report:?}");
    assert_ne!(oid(&db, "items"), source, "swapped");
    assert_eq!(
        value(&db, "SELECT count(*) FROM items WHERE note = 'note ' || id"),
        "5000"
    );
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'items' AND indexname = 'items_qty_idx'"
        ),
        "1"
    );
}

/// A run the data rejects (a value the new type refuses) cannot succeed by resuming:
/// it removes its capture triggers, shadow and change log at once (writers stopped
/// paying for a run that could not finish only at `abort`), keeps its record with why,
/// and says what can work instead of `resume`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_oc_6_a_run_the_data_rejects_removes_itself_and_records_why() {
    let db = database(
        "cas_data_rejects",
        "CREATE TABLE items (id bigint PRIMARY KEY, code text NOT NULL); \
         INSERT INTO items SELECT g, g::text FROM generate_series(1, 5000) g; \
         UPDATE items SET code = 'x17' WHERE id = 4000;",
    );
    let err = run(
        &db,
        "items",
        "ALTER TABLE items ALTER COLUMN code TYPE int USING code::int",
        options(Mode::Live),
        &mut Silent,
    )
    .await
    .expect_err("the data rejects it");
    match &err {
        CasError::DataRejected {
            sqlstate, message, ..
        } => {
            assert_eq!(sqlstate, "22P02", "{err}");
            assert!(message.contains("x17"), "{err}");
        }
        other => panic!("not DataRejected: {other:?}"),
    }
    assert_eq!(artifacts(&db), "", "nothing of the run is left");
    assert_eq!(
        value(
            &db,
            "SELECT phase || ':' || (error LIKE '%x17%')::text FROM pgshift.runs"
        ),
        "aborted:true"
    );
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'code'"),
        "text"
    );
    // The table is free for the next run.
    cluster()
        .psql(&db, "UPDATE items SET code = '17' WHERE id = 4000")
        .expect("fixed");
    run(
        &db,
        "items",
        "ALTER TABLE items ALTER COLUMN code TYPE int USING code::int",
        options(Mode::Live),
        &mut Silent,
    )
    .await
    .expect("the fixed data goes through");
}

/// A shadow index that is not valid at the swap is never swapped in: the swap reads
/// every shadow index under its lock (it swapped one in as it was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_14_a_shadow_index_not_valid_under_the_lock_is_never_swapped_in() {
    let db = database("cas_invalid_index", SCHEMA);
    let source = oid(&db, "items");
    let hook_db = db.clone();
    let mut hook = Hook::new(Phase::Cutover, move || {
        cluster()
            .psql(
                &hook_db,
                "UPDATE pg_index SET indisvalid = false WHERE indrelid = (SELECT oid FROM pg_class WHERE relname LIKE '\\_pgshift\\_%\\_items' AND relkind = 'r') AND NOT indisprimary",
            )
            .expect("invalidating a shadow index");
    });
    let err = run(&db, "items", CHANGE, options(Mode::Live), &mut hook)
        .await
        .expect_err("the swap is refused");
    assert_eq!(cause(&err), Some(RefusalCause::ShadowIndexInvalid), "{err}");
    assert!(err.to_string().contains("items_qty_idx"), "{err}");
    assert_eq!(oid(&db, "items"), source, "the source stays");
}

/// A name the swap gives the old table that another relation holds is a typed refusal
/// that names it, the swap rolled back; once the name is free, `resume` swaps (it was
/// an untyped failure, 42P07).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_temporary_name_is_a_refusal_and_resume_swaps_once_it_is_free() {
    let db = database("cas_name_taken", SCHEMA);
    let source = oid(&db, "items");
    let hook_db = db.clone();
    let mut hook = Hook::new(Phase::Cutover, move || {
        let run = run_id(&hook_db);
        cluster()
            .psql(
                &hook_db,
                &format!("CREATE TABLE _pgshift_old_{run}_items (x int)"),
            )
            .expect("taking the name");
    });
    let err = run(&db, "items", CHANGE, options(Mode::Live), &mut hook)
        .await
        .expect_err("the swap is refused");
    assert_eq!(cause(&err), Some(RefusalCause::SwapNameTaken), "{err}");
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(oid(&db, "items"), source, "the source stays");
    let run = run_id(&db);
    cluster()
        .psql(&db, &format!("DROP TABLE _pgshift_old_{run}_items"))
        .expect("the name freed");
    resume(&db, "items").await.expect("resume swaps");
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "bigint"
    );
}
