//! The oracle is able to fail: writes lost, reverted, resurrected or made
//! invisible behind the load's back are reported, and only those.

use std::time::Duration;

use pgshift_workload::key::{system_time_from_unix_us, EventKey};
use pgshift_workload::ledger::{Outcome, RowState, WriteOp};
use pgshift_workload::load::{self, LoadHandle, LoadReport, OpMix};
use pgshift_workload::oracle::Actual;
use pgshift_workload::TableRef;

use crate::common::{
    bounded, check, config, key_of, relay_db, wait_for_progress, RelayDb, LOAD_ROWS,
};

/// Changes one load row with `sql` (returning its key) while the load runs, lets 20
/// more writes be acknowledged, then stops the load: the changed key and the report.
async fn behind_the_loads_back(
    db: &RelayDb,
    handle: LoadHandle,
    sql: &str,
) -> (EventKey, LoadReport) {
    let row = db
        .client
        .query_one(sql, &[])
        .await
        .expect("one load row changed behind the load's back");
    let before = handle.progress().acknowledged;
    wait_for_progress(&handle, Duration::from_secs(10), |p| {
        p.acknowledged >= before + 20
    })
    .await;
    let report = bounded("stop", Duration::from_secs(20), handle.stop()).await;
    (key_of(&row), report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_deleted_behind_the_loads_back_is_reported_lost() {
    let mut db = relay_db("bench_lost", 20).await;
    let mut config = config(&db.conninfo, Duration::from_secs(30), 100.0);
    config.mix = OpMix::INSERTS_ONLY;
    let handle = load::start(config).await.expect("load starts");
    wait_for_progress(&handle, Duration::from_secs(10), |p| p.acknowledged >= 30).await;
    let (deleted, report) = behind_the_loads_back(
        &db,
        handle,
        &format!(
            "DELETE FROM events WHERE (community_id, created_at, id) = \
             (SELECT community_id, created_at, id FROM events WHERE {LOAD_ROWS} \
              ORDER BY received_at LIMIT 1) RETURNING community_id, created_at, id"
        ),
    )
    .await;

    let verdict = check(&mut db.client, &report.ledger, &TableRef::events()).await;
    assert_eq!(verdict.lost.count, 1, "{verdict:#?}");
    assert_eq!(verdict.lost.examples[0].key, deleted);
    assert_eq!(verdict.lost.examples[0].actual, Actual::Absent);
    assert_eq!(
        verdict.lost.examples[0].last_acknowledged,
        Some(WriteOp::Insert)
    );
    let others = [
        &verdict.resurrected,
        &verdict.wrong_content,
        &verdict.phantom,
        &verdict.duplicated,
    ];
    assert!(others.iter().all(|c| c.count == 0), "{verdict:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_delete_reverted_behind_the_loads_back_is_reported_wrong_content() {
    let mut db = relay_db("bench_revert", 20).await;
    let mut config = config(&db.conninfo, Duration::from_secs(30), 100.0);
    config.mix = OpMix {
        insert: 1,
        soft_delete: 1,
        ..OpMix::INSERTS_ONLY
    };
    let handle = load::start(config).await.expect("load starts");
    wait_for_progress(&handle, Duration::from_secs(10), |p| p.acknowledged >= 40).await;
    // Kinds other than 5 with content keep a tombstone when soft-deleted.
    let (reverted, report) = behind_the_loads_back(
        &db,
        handle,
        &format!(
            "UPDATE events SET deleted_at = NULL WHERE (community_id, created_at, id) = \
             (SELECT community_id, created_at, id FROM events WHERE {LOAD_ROWS} \
              AND deleted_at IS NOT NULL ORDER BY received_at LIMIT 1) \
             RETURNING community_id, created_at, id"
        ),
    )
    .await;

    let verdict = check(&mut db.client, &report.ledger, &TableRef::events()).await;
    assert_eq!(verdict.wrong_content.count, 1, "{verdict:#?}");
    let finding = &verdict.wrong_content.examples[0];
    assert_eq!(finding.key, reverted);
    assert_eq!(finding.last_acknowledged, Some(WriteOp::SoftDelete));
    assert!(matches!(finding.actual, Actual::Present(_)));
    assert_eq!(
        verdict.lost.count + verdict.resurrected.count + verdict.phantom.count,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_row_reinserted_behind_the_loads_back_is_reported_resurrected() {
    let mut db = relay_db("bench_resurrect", 20).await;
    let mut config = config(&db.conninfo, Duration::from_secs(30), 100.0);
    config.mix = OpMix {
        insert: 1,
        hard_delete: 1,
        ..OpMix::INSERTS_ONLY
    };
    let handle = load::start(config).await.expect("load starts");
    wait_for_progress(&handle, Duration::from_secs(10), |p| p.acknowledged >= 40).await;
    let report = bounded("stop", Duration::from_secs(20), handle.stop()).await;
    let deleted = report
        .ledger
        .entries()
        .iter()
        .find(|e| e.op == WriteOp::HardDelete && e.outcome == Outcome::Acknowledged)
        .map(|e| e.key)
        .expect("an acknowledged hard delete");
    let id: &[u8] = &deleted.id;
    let inserted = db
        .client
        .execute(
            "INSERT INTO events (community_id, id, pubkey, created_at, kind, content) \
             VALUES ($1, $2, $2, $3, 1, 'back from the dead')",
            &[
                &deleted.community_id,
                &id,
                &system_time_from_unix_us(deleted.created_at_us),
            ],
        )
        .await
        .expect("re-insert");
    assert_eq!(inserted, 1);

    let verdict = check(&mut db.client, &report.ledger, &TableRef::events()).await;
    assert_eq!(verdict.resurrected.count, 1, "{verdict:#?}");
    assert_eq!(verdict.resurrected.examples[0].key, deleted);
    assert_eq!(
        verdict.resurrected.examples[0].expected,
        vec![RowState::Absent]
    );
    assert_eq!(
        verdict.lost.count + verdict.wrong_content.count + verdict.phantom.count,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_role_writes_bypass_an_origin_copy_trigger_and_are_reported_lost_there() {
    let mut db = relay_db("bench_copy", 20).await;
    db.client
        .batch_execute(
            "CREATE TABLE events_copy (LIKE events INCLUDING DEFAULTS, \
                 PRIMARY KEY (community_id, created_at, id));
             CREATE FUNCTION events_copy_sync() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF TG_OP IN ('UPDATE', 'DELETE') THEN
                     DELETE FROM events_copy c WHERE c.community_id = OLD.community_id
                        AND c.created_at = OLD.created_at AND c.id = OLD.id;
                 END IF;
                 IF TG_OP IN ('INSERT', 'UPDATE') THEN
                     INSERT INTO events_copy (community_id, id, pubkey, created_at, kind, tags,
                                              content, channel_id, received_at, deleted_at, d_tag)
                     VALUES (NEW.community_id, NEW.id, NEW.pubkey, NEW.created_at, NEW.kind,
                             NEW.tags, NEW.content, NEW.channel_id, NEW.received_at,
                             NEW.deleted_at, NEW.d_tag);
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER events_copy_sync AFTER INSERT OR UPDATE OR DELETE ON events
                 FOR EACH ROW EXECUTE FUNCTION events_copy_sync();",
        )
        .await
        .expect("copy table and trigger");
    let mut config = config(&db.conninfo, Duration::from_secs(2), 120.0);
    config.writers = 3;
    config.replica_writers = 1;
    config.mix = OpMix::RELAY;
    let handle = load::start(config).await.expect("load starts");
    let report = bounded("the run", Duration::from_secs(20), handle.wait()).await;

    let on_events = check(&mut db.client, &report.ledger, &TableRef::events()).await;
    assert!(on_events.is_clean(), "{on_events:#?}");

    // Every replica-role key the ledger expects present is missing from the
    // copy; nothing else is.
    let replica_present = report
        .ledger
        .expectations()
        .into_iter()
        .filter(|e| e.replica_role && e.hashes().next().is_some())
        .count() as u64;
    assert!(replica_present > 20, "{replica_present}");
    let copy = TableRef::qualified("public", "events_copy");
    let on_copy = check(&mut db.client, &report.ledger, &copy).await;
    assert_eq!(on_copy.relation, "events_copy");
    assert_eq!(
        on_copy.lost.count, replica_present,
        "{:#?}",
        on_copy.lost.count
    );
    assert!(on_copy.lost.examples.iter().all(|f| f.replica_role));
    assert_eq!(
        on_copy.wrong_content.count + on_copy.resurrected.count + on_copy.phantom.count,
        0,
        "{on_copy:#?}"
    );
}
