//! The load generator on the relay schema: a full mix with replica-role
//! writers loses nothing, fills a histogram every second, and recovers from
//! terminated connections.

use std::time::Duration;

use pgshift_workload::ledger::{Outcome, RowState, WriteOp};
use pgshift_workload::load::{self, OpMix};
use pgshift_workload::timeline::OpKind;
use pgshift_workload::TableRef;

use crate::common::{bounded, check, config, relay_db, wait_for_progress};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_mix_with_replica_writers_is_acknowledged_and_nothing_is_lost() {
    let mut db = relay_db("bench_mix", 50).await;
    let mut config = config(&db.conninfo, Duration::from_secs(3), 120.0);
    config.writers = 3;
    config.replica_writers = 1;
    config.mix = OpMix {
        insert: 70,
        stale_insert: 4,
        soft_delete: 12,
        hard_delete: 8,
        replay: 6,
    };
    let handle = load::start(config).await.expect("load starts");
    let report = bounded("the run", Duration::from_secs(20), handle.wait()).await;

    let counts = report.ledger.counts();
    let acknowledged = |op| counts.acknowledged.get(&op).copied().unwrap_or(0);
    assert!(acknowledged(WriteOp::Insert) > 150, "{counts:?}");
    for op in [WriteOp::SoftDelete, WriteOp::HardDelete, WriteOp::Replay] {
        assert!(acknowledged(op) > 0, "no {op:?} acknowledged: {counts:?}");
    }
    // Stale inserts: refused at COMMIT by the floor guard (23514) from origin
    // writers, acknowledged from the replica writer, which the guard does not see.
    let stale: Vec<_> = report
        .ledger
        .entries()
        .iter()
        .filter(|e| e.op == WriteOp::StaleInsert)
        .collect();
    assert!(stale.iter().any(|e| e.replica_role), "{counts:?}");
    for entry in &stale {
        match (&entry.outcome, entry.replica_role) {
            (Outcome::Acknowledged, true) => {}
            (Outcome::Refused(error), false) => assert_eq!(error.code(), "23514", "{error:?}"),
            other => panic!("stale insert {other:?}"),
        }
    }
    assert_eq!(
        counts.refused_by_sqlstate.keys().collect::<Vec<_>>(),
        vec!["23514"],
        "{:?}",
        report.errors
    );
    assert_eq!((counts.skipped, counts.unknown), (0, 0), "{counts:?}");
    // Soft deletes of deletion events and empty notes by origin writers are purged.
    assert!(report
        .ledger
        .entries()
        .iter()
        .any(|e| e.op == WriteOp::SoftDelete
            && !e.replica_role
            && e.outcome == Outcome::Acknowledged
            && e.after == Some(RowState::Absent)));

    let verdict = check(&mut db.client, &report.ledger, &TableRef::events()).await;
    assert!(verdict.is_clean(), "{verdict:#?}");
    assert_eq!(
        verdict.ledger.acknowledged_total(),
        counts.acknowledged_total()
    );
    assert_eq!(verdict.relation, "events");

    // A histogram with data for every second of the run, for inserts and reads.
    let seconds = report.timeline.seconds();
    // Every full second of the run (a last, partial one may follow).
    assert!(seconds.len() >= 3, "{:?}", report.elapsed);
    for (i, second) in seconds.iter().take(3).enumerate() {
        for kind in [OpKind::Insert, OpKind::Read] {
            let stats = second.ops.get(&kind);
            assert!(
                stats.is_some_and(|s| s.acknowledged > 0 && !s.latency_us.is_empty()),
                "second {i} has no {kind:?}"
            );
        }
    }
    let inserts = report.timeline.totals()[&OpKind::Insert].summary();
    assert!(inserts.latency.p50_us > 0 && inserts.latency.p99_us >= inserts.latency.p50_us);
    assert_eq!(report.keyset_anomalies, 0);
    assert_eq!(report.stranded_workers, 0);
    assert!(report.timeline.totals()[&OpKind::Read].acknowledged > 20);
    let summary = serde_json::to_value(report.summary()).expect("summary serialises");
    assert_eq!(
        summary["timeline"]["seconds"].as_array().map(Vec::len),
        Some(seconds.len())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_reconnect_after_their_backends_are_terminated() {
    let mut db = relay_db("bench_reconnect", 20).await;
    let config = config(&db.conninfo, Duration::from_secs(30), 100.0);
    let handle = load::start(config).await.expect("load starts");
    wait_for_progress(&handle, Duration::from_secs(10), |p| p.acknowledged >= 30).await;
    let terminated: i64 = db
        .client
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name LIKE 'pgshift-bench writer%'",
            &[],
        )
        .await
        .expect("terminate")
        .get(0);
    assert_eq!(terminated, 2);
    let before = handle.progress().acknowledged;
    wait_for_progress(&handle, Duration::from_secs(10), |p| {
        p.acknowledged >= before + 30
    })
    .await;
    let report = bounded("stop", Duration::from_secs(20), handle.stop()).await;
    assert!(report.reconnects >= 2, "{:?}", report.errors);
    assert!(report.elapsed < Duration::from_secs(25));
    let verdict = check(&mut db.client, &report.ledger, &TableRef::events()).await;
    assert!(verdict.is_clean(), "{verdict:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_refuses_a_missing_table_an_unseeded_schema_and_replica_writers_without_superuser() {
    let cluster = pgshift_embedded::shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database("bench_refusals").expect("database");
    let conninfo = cluster.connection_string(&db);
    let client = crate::common::connect(&conninfo).await;
    let psql = pgshift_workload::schema::Psql::of_cluster(cluster, &db);
    pgshift_workload::schema::load_schema(&psql, Duration::from_secs(60))
        .await
        .expect("schema loads");
    let short = Duration::from_secs(1);

    let mut missing = config(&conninfo, short, 10.0);
    missing.table = TableRef::new("no such table");
    let err = load::start(missing).await.expect_err("refused");
    assert!(
        matches!(&err, pgshift_workload::Error::NoSuchRelation { table } if table == "\"no such table\""),
        "{err}"
    );

    let err = load::start(config(&conninfo, short, 10.0))
        .await
        .expect_err("refused");
    assert!(matches!(err, pgshift_workload::Error::NoChannels), "{err}");

    client
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE bench_plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        )
        .await
        .expect("role");
    let mut replica = config(&format!("{conninfo} user=bench_plain"), short, 10.0);
    replica.replica_writers = 1;
    let err = load::start(replica).await.expect_err("refused");
    assert!(
        matches!(&err, pgshift_workload::Error::Sql { sqlstate, .. } if sqlstate == "42501"),
        "{err}"
    );
}
