//! `pgshift migrate` on the relay's own migrations directory
//! (`crates/pgshift/tests/data/migrations/relay`), against PostgreSQL as the oracle:
//!
//! * on a fresh install (schema, no rows), the whole directory: migrate runs every
//!   file it can and refuses exactly the files listed in [`REFUSED_TODAY`], each
//!   applied natively by hand (`psql`) and recorded with `--baseline` so migrate goes
//!   on; the result is the catalog a native run of the directory produces;
//! * on a seeded relay at an earlier version, the rest under the relay write load
//!   (4 writers, one as `session_replication_role = replica`, 200 writes/s): the
//!   lost-write oracle finds no lost write, no writer waits longer than the lock
//!   budget plus a margin (the writers' own measurement), and every trigger of
//!   `events` (names, enable states, a clone on every partition) is what a native run
//!   of the same files leaves; no write is refused. The stretch with the rewrites of
//!   `events` through copy-and-swap (0005–0014) is its own test, ignored until a known
//!   defect of copy-and-swap's cleanup is fixed ([`SWAP_CLEANUP_DEADLOCK`]); the other
//!   runs from 0009.
//!
//! The procedural files (0024, 0034–0039) are refused today
//! (`opaque-procedural-code`); the load test stops at the first of them that it
//! reaches, after the newest plain-SQL version (0033).

mod common;

use std::time::Duration;

use common::pgshift;
use common::relay::{
    apply_natively, events_triggers, partitions, schema_database, triggers, DIR, NEWEST,
};
use pgshift_bench::load::{self, LoadConfig, LoadReport};
use pgshift_bench::oracle::{self, OracleOptions};
use pgshift_bench::pacing::Pace;
use pgshift_bench::{schema, stats, TableRef};
use pgshift_embedded::{shared_cluster, Cluster};
use serde_json::Value;

/// The files `migrate` refuses today, with the line and cause of the refusal.
/// after issue 11 expansion: the `opaque-procedural-code` entries leave this list
/// (0034 through copy-and-swap, 0035 and 0036 natively, 0038 and 0039 expanded), and
/// this test applies the whole directory through `migrate` alone.
const REFUSED_TODAY: &[(u32, u64, &str)] = &[
    (15, 12, "not-splittable"),
    (20, 13, "not-splittable"),
    (24, 10, "opaque-procedural-code"),
    (34, 18, "opaque-procedural-code"),
    (35, 15, "opaque-procedural-code"),
    (36, 13, "opaque-procedural-code"),
    (38, 14, "opaque-procedural-code"),
    (39, 12, "opaque-procedural-code"),
];

/// The one intended difference from a native run: `migrate` runs 0021's `DETACH
/// PARTITION` as `DETACH PARTITION … CONCURRENTLY`, after which PostgreSQL (15.18 here)
/// leaves a CHECK constraint duplicating the old partition bound on the detached table;
/// the blocking `DETACH` leaves none. The line is allowed to be there, not required.
const DETACH_CHECK: [&str; 3] = [
    "events_archive_before_2026_09|events_past_created_at_check|",
    "(created_at < '2026-09-01 00:00:00+00'::timestamp with time zone)",
    "|t",
];

/// The lock budget the load test gives `migrate` (`--lock-timeout-ms`).
const LOCK_BUDGET: Duration = Duration::from_millis(500);
/// What a writer may wait on top of the lock budget: the strong lock's own hold
/// (a swap, a catalog change), the writer's deferred triggers at COMMIT, and
/// scheduling on a small shared machine.
const MARGIN: Duration = Duration::from_millis(1_500);

/// One test at a time in this binary: the load test measures waits.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn cluster() -> &'static Cluster {
    shared_cluster().expect("a PostgreSQL cluster starts")
}

/// `pgshift migrate --format json` with `extra` arguments: the exit code and the
/// document.
fn migrate(url: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["migrate", "--url", url, "--format", "json"];
    args.extend_from_slice(extra);
    args.push(DIR);
    let run = pgshift(&args);
    let json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|err| panic!("one JSON document ({err}):\n{}\n{}", run.stdout, run.stderr));
    (run.code, json)
}

/// Records every file up to `version` as applied (`--baseline`).
fn baseline(url: &str, version: u32) {
    let (code, json) = migrate(url, &["--baseline", &version.to_string()]);
    assert_eq!(code, 0, "baseline {version}: {json:#}");
}

/// The refused file of a verdict: version, line and cause.
fn refused(json: &Value) -> Option<(u32, u64, String)> {
    let files = json["verdict"]["files"].as_array()?;
    let file = files.iter().find(|f| f["status"] == "refused")?;
    let refusal = &file["verdict"]["refusals"][0];
    Some((
        u32::try_from(file["version"].as_u64()?).ok()?,
        refusal["line"].as_u64()?,
        refusal["refusal"]["cause"].as_str()?.to_owned(),
    ))
}

/// The versions a verdict applied in this run.
fn applied(json: &Value) -> Vec<u32> {
    json["verdict"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["status"] == "applied")
        .filter_map(|f| f["version"].as_u64().and_then(|v| u32::try_from(v).ok()))
        .collect()
}

/// Migrates `url` until a refusal or the end: `(exit code, verdict)`, with every file
/// before the stop applied or already applied.
fn migrate_until_stop(url: &str, extra: &[&str]) -> (i32, Value) {
    let (code, json) = migrate(url, extra);
    assert!(
        code == 0 || code == 2,
        "done or refused, not failed ({SWAP_CLEANUP_DEADLOCK}): {json:#}"
    );
    let files = json["verdict"]["files"].as_array().expect("files");
    let stop = files
        .iter()
        .position(|f| f["status"] == "refused")
        .unwrap_or(files.len());
    for f in &files[..stop] {
        assert!(
            f["status"] == "applied" || f["status"] == "already-applied",
            "{f:#}"
        );
    }
    (code, json)
}

/// The schema of the public tables as PostgreSQL shows it, without OIDs or column
/// order: columns (type, nullability, default, generation), indexes, constraints
/// and triggers.
fn catalog(db: &str) -> String {
    let columns = cluster()
        .psql(
            db,
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, \
                    a.attgenerated, coalesce(pg_get_expr(d.adbin, d.adrelid), '') \
               FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
               LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
              WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') \
                AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2",
        )
        .expect("columns");
    let indexes = cluster()
        .psql(
            db,
            "SELECT pg_get_indexdef(i.indexrelid), i.indisvalid FROM pg_index i \
               JOIN pg_class c ON c.oid = i.indexrelid \
              WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1",
        )
        .expect("indexes");
    let constraints = cluster()
        .psql(
            db,
            "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid), k.convalidated \
               FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid \
              WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1, 2",
        )
        .expect("constraints");
    format!(
        "-- columns\n{columns}-- indexes\n{indexes}-- constraints\n{constraints}-- triggers\n{}",
        triggers(cluster(), db)
    )
}

/// Lines of `left` missing from `right` and the other way round.
fn diff(left: &str, right: &str) -> String {
    let only = |a: &str, b: &str| -> Vec<String> {
        let b: Vec<&str> = b.lines().collect();
        a.lines()
            .filter(|l| !b.contains(l))
            .map(str::to_owned)
            .collect()
    };
    format!(
        "only in the first:\n{}\nonly in the second:\n{}",
        only(left, right).join("\n"),
        only(right, left).join("\n")
    )
}

#[test]
fn the_whole_directory_on_a_fresh_install_matches_a_native_run() {
    let _serial = ONE_AT_A_TIME.blocking_lock();
    let live = schema_database(cluster(), "relay_dir_migrate");
    let native = schema_database(cluster(), "relay_dir_native");
    apply_natively(cluster(), &native, 1..=NEWEST);
    let url = cluster().connection_string(&live);

    let mut refusals = Vec::new();
    let mut ran = Vec::new();
    for _ in 0..=REFUSED_TODAY.len() {
        let (code, json) = migrate_until_stop(&url, &[]);
        ran.extend(applied(&json));
        if code == 0 {
            break;
        }
        let (version, line, cause) = refused(&json).expect("the refused file");
        refusals.push((version, line, cause));
        // What an operator does with a refused file: run it by hand, record it.
        apply_natively(cluster(), &live, version..=version);
        baseline(&url, version);
    }
    let expected: Vec<(u32, u64, String)> = REFUSED_TODAY
        .iter()
        .map(|(v, l, c)| (*v, *l, (*c).to_owned()))
        .collect();
    assert_eq!(refusals, expected, "the files migrate refuses today");
    // The first run applied everything before 0015: the last file migrate reaches
    // on its own today is 0014.
    assert_eq!(ran[..14], (1..=14).collect::<Vec<_>>());
    let by_migrate: Vec<u32> = (1..=NEWEST)
        .filter(|v| !REFUSED_TODAY.iter().any(|r| r.0 == *v))
        .collect();
    assert_eq!(ran, by_migrate, "every other file ran through migrate");

    let native_catalog = catalog(&native);
    let live_catalog: String = catalog(&live)
        .lines()
        .filter(|line| !DETACH_CHECK.iter().all(|part| line.contains(part)))
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(
        live_catalog == native_catalog,
        "the migrated catalog differs from a native run's:\n{}",
        diff(&live_catalog, &native_catalog)
    );
    // A fresh install: 0036 changed d_tag (events had no rows).
    assert!(live_catalog.contains("events|d_tag|character varying(256)|"));
}

/// One stretch of the directory migrated under the relay load: what the load saw.
struct Stretch {
    json: Value,
    code: i32,
    report: LoadReport,
}

async fn migrate_under_load(url: &str, conninfo: &str) -> Stretch {
    let mut config = LoadConfig::new(conninfo.to_owned(), Duration::from_secs(900));
    config.writers = 4;
    config.replica_writers = 1;
    config.write_pace = Pace::PerSecond(200.0);
    config.readers = 1;
    let load = load::start(config).await.expect("the load starts");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let url = url.to_owned();
    let budget = LOCK_BUDGET.as_millis().to_string();
    let (code, json) = tokio::task::spawn_blocking(move || {
        migrate_until_stop(&url, &["--lock-timeout-ms", &budget])
    })
    .await
    .expect("migrate ran");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = load.stop().await;
    Stretch { json, code, report }
}

/// A known defect the copy-and-swap stretch finds (in 7 of 19 runs, on PostgreSQL 15,
/// 16 and 18, on a busy 2-core machine): after the swap of `events` (0007, 0008), `DROP TABLE`
/// of the old table takes ACCESS EXCLUSIVE on the tables its foreign keys reference
/// (`communities`, `channels`) under a fixed 5 s `lock_timeout`, not the lock budget
/// (`cas/run.rs`), and deadlocks with a writer whose insert checks the two keys in the
/// other order. PostgreSQL refuses one of them: the writer's insert (40P01), or the
/// drop, and `migrate` fails ("dropping the old table: deadlock detected").
const SWAP_CLEANUP_DEADLOCK: &str = "known defect: the old table's DROP after a swap deadlocks with writers (see SWAP_CLEANUP_DEADLOCK)";

/// The load's verdicts: nothing lost, nothing refused, no writer waited past the
/// bound.
async fn check_load(client: &mut tokio_postgres::Client, stretch: &Stretch, label: &str) {
    let report = &stretch.report;
    let counts = report.ledger.counts();
    assert!(
        counts.acknowledged_total() > 200,
        "{label}: the load wrote: {counts:?}"
    );
    if !counts.refused_by_sqlstate.is_empty() {
        eprintln!("{label}: refused writes {:?}", counts.refused_by_sqlstate);
    }
    assert!(
        counts.refused_by_sqlstate.is_empty() && counts.unknown == 0,
        "{label}: no write refused or lost in flight: {counts:?} {:?}\n{}\nserver log:\n{}",
        report.errors,
        SWAP_CLEANUP_DEADLOCK,
        cluster().log_tail(200)
    );
    let replica = report
        .ledger
        .entries()
        .iter()
        .filter(|e| e.replica_role)
        .count();
    assert!(
        replica > 20,
        "{label}: the replica-role writer wrote ({replica})"
    );
    let verdict = oracle::check(
        client,
        &report.ledger,
        &TableRef::events(),
        &OracleOptions::DEFAULT,
    )
    .await
    .expect("the oracle runs");
    assert!(verdict.is_clean(), "{label}: {verdict:#?}");
    let longest = stats::longest_write(
        &report.ledger,
        Duration::ZERO,
        report.elapsed,
        report.elapsed,
    );
    eprintln!("{label}: {counts:?}; longest write {longest:?}");
    assert!(
        longest <= LOCK_BUDGET + MARGIN,
        "{label}: a writer waited {longest:?} (lock budget {LOCK_BUDGET:?} + margin {MARGIN:?})"
    );
}

/// `CREATE DATABASE … TEMPLATE source` (nobody may be connected to `source`).
fn clone_of(source: &str, prefix: &str) -> String {
    let name = format!("{prefix}_{}", std::process::id());
    cluster()
        .psql(
            "postgres",
            &format!("CREATE DATABASE \"{name}\" TEMPLATE \"{source}\""),
        )
        .expect("template clone");
    name
}

/// A seeded relay at `version` (the files up to it applied natively, as its own
/// runner did, and adopted with `--baseline`): its name and connection string, a
/// `TEMPLATE` clone of it for the native run, and a client.
async fn seeded_relay_at(
    version: u32,
    prefix: &str,
) -> (String, String, String, tokio_postgres::Client) {
    let live = schema_database(cluster(), prefix);
    let conninfo = cluster().connection_string(&live);
    {
        let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
            .await
            .expect("connects");
        let task = tokio::spawn(connection);
        schema::seed(&client, 300, Duration::from_secs(300))
            .await
            .expect("seed");
        drop(client);
        let _ = task.await;
    }
    apply_natively(cluster(), &live, 1..=version);
    baseline(&conninfo, version);
    let native = clone_of(&live, &format!("{prefix}_native"));
    let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    (live, conninfo, native, client)
}

/// From `version` + 1 to 0014 under load: migrate stops at 0015, which it refuses;
/// the load's verdicts hold and the triggers of `events` and its partitions are what
/// a native run of the same files leaves.
async fn up_to_0014_under_load(
    live: &str,
    conninfo: &str,
    native: &str,
    client: &mut tokio_postgres::Client,
    version: u32,
) {
    let label = format!("{:04}-0014", version + 1);
    let stretch = migrate_under_load(conninfo, conninfo).await;
    assert_eq!(stretch.code, 2, "{:#}", stretch.json);
    assert_eq!(
        applied(&stretch.json),
        (version + 1..=14).collect::<Vec<_>>()
    );
    assert_eq!(
        refused(&stretch.json),
        Some((15, 12, "not-splittable".to_owned()))
    );
    check_load(client, &stretch, &label).await;
    apply_natively(cluster(), native, version + 1..=14);
    let parts = partitions(cluster(), live);
    assert_eq!(
        events_triggers(&triggers(cluster(), live), &parts),
        events_triggers(&triggers(cluster(), native), &parts),
        "{label}: the triggers of events and its partitions are what a native run leaves"
    );
}

/// The two copy-and-swap rewrites of `events` (0007, 0008, and 0009's volatile
/// default) under load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known defect (SWAP_CLEANUP_DEADLOCK): the old table's DROP after the swap deadlocks with writers; un-ignore once it runs under the lock budget"]
async fn the_relay_rewrites_of_events_run_through_copy_and_swap_under_load() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (live, conninfo, native, mut client) = seeded_relay_at(4, "relay_cas_load").await;
    up_to_0014_under_load(&live, &conninfo, &native, &mut client, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_relay_migrates_to_the_newest_plain_sql_version_under_load() {
    let _serial = ONE_AT_A_TIME.lock().await;
    // From 0009 (after the rewrites of events, which the test above covers): the
    // trigger changes 0010-0014 under load, stopping at 0015.
    let (live, conninfo, native, mut client) = seeded_relay_at(9, "relay_load").await;
    up_to_0014_under_load(&live, &conninfo, &native, &mut client, 9).await;

    // 0015–0024 hold the refused files 0015, 0020 and 0024: applied by hand (no
    // load), on both databases, and recorded.
    apply_natively(cluster(), &live, 15..=24);
    apply_natively(cluster(), &native, 15..=24);
    baseline(&conninfo, 24);

    // 0025–0033 under load: everything up to the newest plain-SQL version; migrate
    // stops at 0034, the first procedural file after it.
    // after issue 11 expansion: it goes on through 0034–0039 (0034's rewrite through
    // copy-and-swap) and this stretch ends at the newest version.
    let before = triggers(cluster(), &live);
    let second = migrate_under_load(&conninfo, &conninfo).await;
    assert_eq!(second.code, 2, "{:#}", second.json);
    assert_eq!(applied(&second.json), (25..=33).collect::<Vec<_>>());
    assert_eq!(
        refused(&second.json),
        Some((34, 18, "opaque-procedural-code".to_owned()))
    );
    check_load(&mut client, &second, "0025-0033").await;
    apply_natively(cluster(), &native, 25..=33);
    let after = triggers(cluster(), &live);
    let parts = partitions(cluster(), &live);
    assert_eq!(
        events_triggers(&after, &parts),
        events_triggers(&before, &parts),
        "no file of 0025-0033 changes a trigger of events"
    );
    assert!(
        after == triggers(cluster(), &native),
        "every trigger is what a native run leaves:\n{}",
        diff(&after, &triggers(cluster(), &native))
    );
    // Every partition carries a clone of each of events' triggers.
    let on_parent: Vec<&str> = after.lines().filter(|l| l.starts_with("events|")).collect();
    assert!(on_parent.len() >= 5, "{after}");
    for partition in &parts {
        let clones = after
            .lines()
            .filter(|l| l.starts_with(&format!("{partition}|")) && l.contains("|events."))
            .count();
        assert_eq!(clones, on_parent.len(), "{partition}:\n{after}");
    }
}
