//! Desired state under the relay's write load, with PostgreSQL and the lost-write
//! oracle as judges: the seeded relay is pulled, the pulled files are edited to widen
//! a column of the partitioned `events` table (`d_tag text` to `character
//! varying(300)`, a rewrite of every partition), and `pgshift apply --desired` runs the
//! plan while 4 writers (one as `session_replication_role = replica`) and a reader
//! work. The rewrite must go through copy-and-swap, no acknowledged write may be lost
//! or refused, `diff` must find nothing afterwards, and the public schema (triggers and
//! their enable states on every partition included) must dump exactly as the edited
//! files run natively on an empty database.

mod common;

use std::fs;
use std::time::Duration;

use common::pgshift;
use common::relay::schema_database;
use common::schema::{cluster, dump_with, pgshift_json, scratch};
use pgshift_workload::load::{self, LoadConfig};
use pgshift_workload::oracle::{self, OracleOptions};
use pgshift_workload::pacing::Pace;
use pgshift_workload::{schema, TableRef};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_desired_rewrite_of_partitioned_events_converges_online_with_no_write_lost() {
    let live = schema_database(cluster(), "desired_relay");
    let conninfo = cluster().connection_string(&live);
    schema::seed(
        &schema::Psql::of_cluster(cluster(), &live),
        300,
        Duration::from_secs(300),
    )
    .await
    .expect("seed");
    let work = scratch("desired-relay");
    let desired = work.join("schema");
    let run = pgshift(&[
        "pull",
        "--url",
        &conninfo,
        "--out",
        desired.to_str().expect("UTF-8"),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = desired.join("public/tables/events.sql");
    let text = fs::read_to_string(&events).expect("events.sql");
    let partitions = text.matches("    d_tag text,").count();
    assert!(
        partitions >= 9,
        "the parent and its partitions: {partitions}"
    );
    fs::write(
        &events,
        text.replace("    d_tag text,", "    d_tag character varying(300),"),
    )
    .expect("written");

    let target = desired.to_str().expect("UTF-8");
    let (code, plan) = pgshift_json(&live, &["diff", target]);
    assert_eq!(code, 0, "{plan}");
    let statements = plan["plan"]["files"][0]["statements"]
        .as_array()
        .expect("planned");
    assert_eq!(statements.len(), 1, "the parent's change recurses: {plan}");
    assert_eq!(statements[0]["route"], "copy-and-swap", "{plan}");

    let mut config = LoadConfig::new(conninfo.clone(), Duration::from_secs(900));
    config.writers = 4;
    config.replica_writers = 1;
    config.write_pace = Pace::PerSecond(200.0);
    config.readers = 1;
    let load = load::start(config).await.expect("the load starts");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (db, owned) = (live.clone(), target.to_owned());
    let (code, verdict) = tokio::task::spawn_blocking(move || {
        pgshift_json(&db, &["apply", "--desired", &owned, "--allow-destructive"])
    })
    .await
    .expect("apply ran");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = load.stop().await;
    assert_eq!(code, 0, "{verdict}");
    let swapped = verdict["verdict"]["units"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| !u["copy_and_swap"].is_null())
        .count();
    assert_eq!(
        swapped, 1,
        "the rewrite went through copy-and-swap: {verdict}"
    );

    let counts = report.ledger.counts();
    assert!(
        counts.acknowledged_total() > 200,
        "the load wrote: {counts:?}"
    );
    assert!(
        counts.refused_by_sqlstate.is_empty() && counts.unknown == 0,
        "no write refused or lost in flight: {counts:?} {:?}",
        report.errors
    );
    let (mut client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    let oracle = oracle::check(
        &mut client,
        &report.ledger,
        &TableRef::events(),
        &OracleOptions::DEFAULT,
    )
    .await
    .expect("the oracle runs");
    assert!(oracle.is_clean(), "{oracle:#?}");

    let (_, json) = pgshift_json(&live, &["diff", target]);
    assert_eq!(json["changes"].as_array().map(Vec::len), Some(0), "{json}");
    let native = cluster()
        .fresh_database("desired_relay_native")
        .expect("database");
    cluster()
        .psql_file(&native, desired.join("manifest.sql"))
        .expect("the desired files run natively");
    let public = ["--schema=public"];
    assert_eq!(dump_with(&live, &public), dump_with(&native, &public));
    let _ = fs::remove_dir_all(&work);
}
