//! Copy-and-swap on the relay workload's `events`: range-partitioned, a composite key,
//! a stored generated column, partial and GIN indexes, an outgoing foreign key and five
//! ORIGIN row triggers cloned to every partition — rewritten while writers insert
//! through those triggers.

mod common;

use std::time::Duration;

use common::cas::*;
use common::*;
use pgshift::cas::{Mode, Phase, Silent};

/// The statement of the relay's migration 0008: `kind` becomes bigint, which needs the
/// generated `search_tsv` (that reads `kind`) dropped and added again.
const KIND_BIGINT: &str = "ALTER TABLE events \
    DROP COLUMN search_tsv, \
    ALTER COLUMN kind TYPE bigint, \
    ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ( \
        CASE WHEN kind IN (1, 30023, 30024) THEN to_tsvector('english', content) END) STORED";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_8_a_partitioned_table_keeps_its_identity_across_the_swap() {
    let db = relay_database("cas_relay_identity");
    cluster()
        .psql(
            &db,
            "CREATE ROLE relay_reader; GRANT SELECT ON events TO relay_reader; \
             GRANT SELECT ON events_2026_10 TO relay_reader; \
             ALTER TABLE events DISABLE TRIGGER events_soft_delete_purge; \
             ALTER TABLE events_2026_11 ENABLE ALWAYS TRIGGER events_outbox_enqueue; \
             CREATE VIEW recent_events AS SELECT community_id, id, kind FROM events WHERE created_at > '2026-10-01'",
        )
        .expect("extras");
    let before = identity(&db, "events");
    let source = oid(&db, "events");
    let rows_before: u64 = value(&db, "SELECT count(*) FROM events")
        .parse()
        .expect("count");
    let outbox_before: u64 = value(&db, "SELECT count(*) FROM event_outbox")
        .parse()
        .expect("count");

    let writer = Writer::start(&db, RELAY_WRITER, Duration::from_millis(3)).await;
    let report = run(&db, "events", KIND_BIGINT, options(Mode::Live), &mut Silent)
        .await
        .expect("the run completes");
    let inserts = writer.stop().await;
    assert_eq!(report.phase, "done", "{report:?}");
    assert_eq!(inserts.failed, 0, "{inserts:?}");
    assert!(inserts.committed > 10, "{inserts:?}");
    assert_ne!(oid(&db, "events"), source);

    // Every row, old and new, is there; the writers' triggers fired once per insert
    // (kind 1 does not enqueue, so the outbox is unchanged) and the copy fired none.
    assert_eq!(
        value(&db, "SELECT count(*) FROM events"),
        (rows_before + inserts.committed).to_string()
    );
    assert_eq!(
        value(&db, "SELECT count(*) FROM event_outbox"),
        outbox_before.to_string()
    );
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM events WHERE search_tsv IS DISTINCT FROM \
               CASE WHEN kind IN (1, 30023, 30024) THEN to_tsvector('english', content) END"
        ),
        "0",
        "the generated column is computed by the new expression"
    );

    // Identity: the only differences are the ones the statement asked for.
    let after = identity(&db, "events");
    let expected = before
        .lines()
        .filter(|l| !l.contains("search_tsv"))
        .map(|l| {
            if l.starts_with("column ") && l.contains(".kind integer") {
                l.replace(".kind integer", ".kind bigint")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>();
    let actual = after
        .lines()
        .filter(|l| !l.contains("search_tsv"))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let missing: Vec<&String> = expected.iter().filter(|l| !actual.contains(l)).collect();
    let extra: Vec<&String> = actual.iter().filter(|l| !expected.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "identity changed\nmissing: {missing:#?}\nextra: {extra:#?}"
    );
    // The GIN index on the dropped column went with it, as PostgreSQL does.
    assert!(!after.contains("events_search_tsv_idx"), "{after}");
    assert_eq!(
        value(&db, "SELECT count(*) FROM recent_events"),
        value(
            &db,
            "SELECT count(*) FROM events WHERE created_at > '2026-10-01'"
        ),
        "the dependent view reads the new table"
    );
    assert_eq!(artifacts(&db), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_role_writes_are_captured_too() {
    // The capture is ENABLE ALWAYS: a session with session_replication_role = replica
    // (which skips every ORIGIN trigger of the relay) is still captured.
    let db = relay_database("cas_relay_replica");
    let hook_db = db.clone();
    let mut hook = Hook::new(Phase::Indexing, move || {
        cluster()
            .psql(
                &hook_db,
                "SET session_replication_role = replica; \
                 UPDATE events SET content = 'edited as replica' WHERE kind = 9 AND created_at < '2026-09-10'; \
                 DELETE FROM events WHERE kind = 7 AND created_at < '2026-09-20'; \
                 INSERT INTO events (community_id, id, pubkey, created_at, kind, content) \
                   SELECT id, '\\x01', '\\x02', '2026-12-24', 9, 'inserted as replica' FROM communities",
            )
            .expect("replica writes");
    });
    let expected = value(
        &db,
        "SELECT count(*) FILTER (WHERE NOT (kind = 7 AND created_at < '2026-09-20')) + 3 FROM events",
    );
    let edited = value(
        &db,
        "SELECT count(*) FROM events WHERE kind = 9 AND created_at < '2026-09-10'",
    );
    let report = run(&db, "events", KIND_BIGINT, options(Mode::Live), &mut hook)
        .await
        .expect("the run completes");
    assert_eq!(report.phase, "done");
    assert_eq!(value(&db, "SELECT count(*) FROM events"), expected);
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM events WHERE content = 'edited as replica'"
        ),
        edited
    );
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM events WHERE content = 'inserted as replica'"
        ),
        "3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiesced_runs_fence_every_write_even_from_replicas() {
    let db = relay_database("cas_relay_quiesced");
    let source = oid(&db, "events");
    let hook_db = db.clone();
    let refusals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = refusals.clone();
    // After the verification pass, right before the swap: every write is refused with
    // SQLSTATE 55006, a replica's insert included (the fence is ENABLE ALWAYS).
    let mut hook = Hook::new(Phase::Cutover, move || {
        for sql in [
            "INSERT INTO events (community_id, id, pubkey, created_at, kind, content) \
               SELECT id, '\\x03', '\\x04', '2026-12-24', 9, 'x' FROM communities LIMIT 1",
            "SET session_replication_role = replica; \
             INSERT INTO events (community_id, id, pubkey, created_at, kind, content) \
               SELECT id, '\\x05', '\\x06', '2026-12-24', 9, 'inserted as replica' FROM communities LIMIT 1",
            "SET session_replication_role = replica; UPDATE events_2026_10 SET content = 'y' WHERE kind = 9",
            "DELETE FROM events_future",
            "TRUNCATE events_past",
        ] {
            let outcome = cluster().psql(&hook_db, &format!("\\set VERBOSITY verbose\n{sql}"));
            seen.lock()
                .expect("refusals")
                .push(format!("{sql}: {outcome:?}"));
        }
    });
    let report = run(
        &db,
        "events",
        KIND_BIGINT,
        options(Mode::Quiesced),
        &mut hook,
    )
    .await
    .expect("the run completes");
    assert_eq!(report.phase, "done");
    assert_ne!(oid(&db, "events"), source);
    let refusals = refusals.lock().expect("refusals");
    assert_eq!(refusals.len(), 5);
    for refusal in refusals.iter() {
        assert!(
            refusal.contains("Err") && refusal.contains("ERROR:  55006:"),
            "every write is refused with SQLSTATE 55006: {refusal}"
        );
    }
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM events WHERE content IN ('x', 'y', 'inserted as replica')"
        ),
        "0"
    );
    // The fence went with the old table: writes work again.
    cluster()
        .psql(
            &db,
            "INSERT INTO events (community_id, id, pubkey, created_at, kind, content) \
               SELECT id, '\\x03', '\\x04', '2026-12-24', 9, 'after' FROM communities LIMIT 1",
        )
        .expect("writes work after the swap");
    assert_eq!(artifacts(&db), "");
}
