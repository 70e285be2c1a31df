//! `pgshift migrate` on the relay's own migrations directory
//! (`crates/pgshift/tests/data/migrations/relay`), against PostgreSQL as the oracle:
//!
//! * on a fresh install (schema, no rows), the whole directory in one `migrate`, with
//!   no escape hatch and nothing applied by hand: the two blocks that must stay one
//!   transaction ([`WHOLE_ON_EMPTY`]) run whole because everything they lock is empty
//!   (TX-1, foreign-key partners and their partitions included); the
//!   procedural files (0024, 0034–0039) run by their traces ([`FRESH_PROCEDURAL`]),
//!   0034's hidden rewrite of `events` through copy-and-swap; the result is the
//!   catalog a native run of the directory produces;
//! * on a seeded relay at an earlier version, the rest under the relay write load
//!   (4 writers, one as `session_replication_role = replica`, 200 writes/s), in
//!   stretches between the files migrate refuses: the lost-write oracle finds no
//!   lost write, no writer waits longer than the lock budget plus a margin (the
//!   writers' own measurement), no write is refused; 0034's rewrite is expanded and
//!   runs through copy-and-swap (from migrate's JSON); 0036 is guarded (PC-5: run
//!   read-only on live, a no-op there, applied) and leaves `events` unrewritten; 0037's
//!   function calls are expanded (PC-2: the function's `ALTER TABLE … ADD COLUMN`s,
//!   each by its route), with no escape hatch; at the end the catalog and every
//!   trigger (names, enable states, a clone on every partition of `events`) are what
//!   a native run of the same files leaves. The stretch with the rewrites of `events`
//!   through copy-and-swap (0005–0014) is its own test; the other runs from 0009.
//!   Every copy-and-swap run's clean-up drops the old table (nothing left behind).

mod common;

use std::time::Duration;

use common::pgshift;
use common::relay::{
    apply_natively, events_triggers, partitions, schema_database, triggers, DIR, NEWEST,
};
use pgshift_embedded::{shared_cluster, Cluster};
use pgshift_workload::load::{self, LoadConfig, LoadReport};
use pgshift_workload::oracle::{self, OracleOptions};
use pgshift_workload::pacing::Pace;
use pgshift_workload::{schema, stats, TableRef};
use serde_json::Value;

/// The files whose explicit block must stay one transaction (data changes with schema
/// changes): on a fresh install they run whole, as written (TX-1). On a seeded relay
/// they are refused (`not-splittable`).
const WHOLE_ON_EMPTY: &[u32] = &[15, 20];

/// What the procedural files decide on a fresh install (empty tables): 0024, 0035–0038
/// run natively (catalog-only, a data check, or the tables they rewrite are empty),
/// 0034's hidden rewrite and 0039's index are expanded.
const FRESH_PROCEDURAL: &[(u32, &[(u64, &str)])] = &[
    (24, &[(10, "native")]),
    (34, &[(18, "expanded")]),
    (35, &[(15, "native")]),
    (36, &[(13, "native")]),
    (37, &[(12, "expanded"), (14, "expanded")]),
    (38, &[(14, "native")]),
    (39, &[(12, "expanded")]),
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
        file["version"].as_str()?.parse().ok()?,
        refusal["line"].as_u64()?,
        refusal["refusal"]["cause"].as_str()?.to_owned(),
    ))
}

/// Whether a file's status says it ran in this run (`applied-blocking`: with an
/// operator's escape hatch).
fn ran_now(file: &Value) -> bool {
    file["status"] == "applied" || file["status"] == "applied-blocking"
}

/// The versions a verdict applied in this run.
fn applied(json: &Value) -> Vec<u32> {
    json["verdict"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| ran_now(f))
        .filter_map(|f| f["version"].as_str().and_then(|v| v.parse().ok()))
        .collect()
}

/// Migrates `url` until a refusal or the end: `(exit code, verdict)`, with every file
/// before the stop applied or already applied.
fn migrate_until_stop(url: &str, extra: &[&str]) -> (i32, Value) {
    let (code, json) = migrate(url, extra);
    assert!(
        code == 0 || code == 2 || code == 3,
        "done, refused or done with an escape hatch, not failed: {json:#}"
    );
    let files = json["verdict"]["files"].as_array().expect("files");
    let stop = files
        .iter()
        .position(|f| f["status"] == "refused")
        .unwrap_or(files.len());
    for f in &files[..stop] {
        assert!(ran_now(f) || f["status"] == "already-applied", "{f:#}");
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

/// `catalog` without the [`DETACH_CHECK`] line.
fn without_detach_check(catalog: &str) -> String {
    catalog
        .lines()
        .filter(|line| !DETACH_CHECK.iter().all(|part| line.contains(part)))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The catalog of `live`, asserted to be the catalog of `native` (but for
/// [`DETACH_CHECK`]).
fn catalog_as_native(live: &str, native: &str) -> String {
    let native_catalog = catalog(native);
    let live_catalog = without_detach_check(&catalog(live));
    assert!(
        live_catalog == native_catalog,
        "the migrated catalog differs from a native run's:\n{}",
        diff(&live_catalog, &native_catalog)
    );
    live_catalog
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

    // One migrate, the whole directory, no escape hatch and nothing by hand.
    let (code, last) = migrate_until_stop(&url, &[]);
    assert_eq!(code, 0, "the whole directory migrates: {last:#}");
    assert_eq!(applied(&last), (1..=NEWEST).collect::<Vec<_>>());
    // 0015 and 0020 must stay one transaction (data changes with schema changes): on
    // empty tables, everything they lock (foreign-key partners and their partitions
    // included) is empty, so each runs whole, as written (TX-1).
    for version in WHOLE_ON_EMPTY {
        let file = file_entry(&last, *version);
        let said = file.to_string();
        assert!(
            said.contains("runs whole as one transaction"),
            "file {version}: {file:#}"
        );
    }
    // The procedural files, decided by their traces; the last run applied them all.
    for (version, decisions) in FRESH_PROCEDURAL {
        let expected: Vec<(u64, String)> = decisions
            .iter()
            .map(|(l, d)| (*l, (*d).to_owned()))
            .collect();
        assert_eq!(
            procedural(&last, *version),
            expected,
            "file {version}: {last:#}"
        );
    }
    // Why they ran natively: 0036 takes a strong lock (a rewrite) on a table that is
    // empty here (PC-3); 0038 only creates triggers (PC-1).
    for (version, why) in [(36, "are empty here"), (38, "changes only the catalog")] {
        for entry in file_entry(&last, version)["procedural"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let said = entry["why"].as_str().unwrap_or("");
            assert!(said.contains(why), "file {version}: {said}");
        }
    }
    // 0034's hidden rewrite ran as written: events has no rows here (TX-2), so
    // there is nothing to copy and no writer to hold up.
    let runs = copy_and_swap_runs(&last, 34);
    assert!(runs.is_empty(), "{runs:?}");

    let live_catalog = catalog_as_native(&live, &native);
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
    migrate_under_load_with(url, conninfo, &[]).await
}

/// [`migrate_under_load`] with `extra` arguments to `migrate`.
async fn migrate_under_load_with(url: &str, conninfo: &str, extra: &[&str]) -> Stretch {
    let mut config = LoadConfig::new(conninfo.to_owned(), Duration::from_secs(900));
    config.writers = 4;
    config.replica_writers = 1;
    config.write_pace = Pace::PerSecond(200.0);
    config.readers = 1;
    let load = load::start(config).await.expect("the load starts");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let url = url.to_owned();
    let mut args = vec![
        "--lock-timeout-ms".to_owned(),
        LOCK_BUDGET.as_millis().to_string(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let (code, json) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        migrate_until_stop(&url, &args)
    })
    .await
    .expect("migrate ran");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = load.stop().await;
    Stretch { json, code, report }
}

/// What the copy-and-swap runs of a verdict left behind after their swaps (objects
/// their clean-up could not drop within its budget).
fn left_behind(json: &Value) -> Vec<Value> {
    json["verdict"]["files"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|f| f["verdict"]["units"].as_array().into_iter().flatten())
        .flat_map(|u| {
            u["copy_and_swap"]["report"]["left_behind"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .cloned()
        .collect()
}

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
        "{label}: no write refused or lost in flight: {counts:?} {:?}\nserver log:\n{}",
        report.errors,
        cluster().log_tail(200)
    );
    let left = left_behind(&stretch.json);
    assert!(
        left.is_empty(),
        "{label}: every clean-up after a swap dropped the old table: {left:#?}"
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
    schema::seed(
        &schema::Psql::of_cluster(cluster(), &live),
        300,
        Duration::from_secs(300),
    )
    .await
    .expect("seed");
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
) -> Value {
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
    stretch.json
}

/// The two copy-and-swap rewrites of `events` (0007, 0008, and 0009's volatile
/// default) under load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_rewrites_of_events_run_through_copy_and_swap_under_load() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let (live, conninfo, native, mut client) = seeded_relay_at(4, "relay_cas_load").await;
    let json = up_to_0014_under_load(&live, &conninfo, &native, &mut client, 4).await;
    for version in [7, 8] {
        let swaps = copy_and_swap_runs(&json, version);
        assert!(
            matches!(swaps.as_slice(), [(table, phase, rows)]
                if table == "\"public\".\"events\"" && phase == "done" && *rows > 0),
            "{version:04}: the rewrite of events through copy-and-swap: {swaps:?}"
        );
    }
}

/// The file entry of `version` in a migrate verdict.
fn file_entry(json: &Value, version: u32) -> &Value {
    json["verdict"]["files"]
        .as_array()
        .and_then(|files| {
            files
                .iter()
                .find(|f| f["version"].as_str().and_then(|v| v.parse().ok()) == Some(version))
        })
        .unwrap_or_else(|| panic!("file {version} in the verdict: {json:#}"))
}

/// The decisions on the procedural statements of file `version`: line and decision.
fn procedural(json: &Value, version: u32) -> Vec<(u64, String)> {
    file_entry(json, version)["procedural"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["line"].as_u64().unwrap_or(0),
                p["decision"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The copy-and-swap reports of file `version`'s units: table, final phase and rows
/// copied.
fn copy_and_swap_runs(json: &Value, version: u32) -> Vec<(String, String, u64)> {
    file_entry(json, version)["verdict"]["units"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| {
            let report = &u["copy_and_swap"]["report"];
            Some((
                report["table"].as_str()?.to_owned(),
                report["phase"].as_str()?.to_owned(),
                report["rows_copied"].as_u64()?,
            ))
        })
        .collect()
}

/// The file nodes of `events` and its partitions: a rewrite changes them.
fn events_storage(db: &str) -> String {
    cluster()
        .psql(
            db,
            "SELECT c.relname, c.oid, c.relfilenode FROM pg_class c \
              WHERE c.oid = 'events'::regclass \
                 OR c.oid IN (SELECT inhrelid FROM pg_inherits \
                               WHERE inhparent = 'events'::regclass) \
              ORDER BY 1",
        )
        .expect("pg_class readable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_relay_migrates_to_the_newest_version_under_load() {
    let _serial = ONE_AT_A_TIME.lock().await;
    // From 0009 (after the rewrites of events, which the test above covers): the
    // trigger changes 0010-0014 under load, stopping at 0015.
    let (live, conninfo, native, mut client) = seeded_relay_at(9, "relay_load").await;
    let _ = up_to_0014_under_load(&live, &conninfo, &native, &mut client, 9).await;

    // 0015 and 0020 are refused (`not-splittable`, see the test above): applied by
    // hand (no load) and recorded; the files between them under load.
    apply_natively(cluster(), &live, 15..=15);
    baseline(&conninfo, 15);
    let stretch = migrate_under_load(&conninfo, &conninfo).await;
    assert_eq!(stretch.code, 2, "{:#}", stretch.json);
    assert_eq!(applied(&stretch.json), (16..=19).collect::<Vec<_>>());
    assert_eq!(
        refused(&stretch.json),
        Some((20, 13, "not-splittable".to_owned()))
    );
    check_load(&mut client, &stretch, "0016-0019").await;
    apply_natively(cluster(), &live, 20..=20);
    baseline(&conninfo, 20);

    // 0021-0036 under load, the procedural files included: 0024 natively, 0034's
    // hidden rewrite of events expanded and run through copy-and-swap, 0035's data
    // check natively against the live rows, and 0036, whose rewrite depends on the
    // data, guarded (PC-5): run read-only on live, where events has rows, it executes
    // nothing, so it is applied as the no-op it is here (no `--allow-procedural`).
    // Then 0037's two `SELECT relay_add_updated_at(…)`, whose function runs `ALTER
    // TABLE … ADD COLUMN` through EXECUTE: expanded (PC-2) into those statements, each
    // run by its route; 0038's trigger loop natively and 0039's index expanded.
    let before_0034 = events_storage(&live);
    let stretch = migrate_under_load(&conninfo, &conninfo).await;
    assert_eq!(stretch.code, 0, "{:#}", stretch.json);
    assert_eq!(applied(&stretch.json), (21..=NEWEST).collect::<Vec<_>>());
    assert_eq!(refused(&stretch.json), None);
    assert_eq!(procedural(&stretch.json, 24), [(10, "native".to_owned())]);
    assert_eq!(procedural(&stretch.json, 34), [(18, "expanded".to_owned())]);
    assert_eq!(procedural(&stretch.json, 35), [(15, "native".to_owned())]);
    assert_eq!(procedural(&stretch.json, 36), [(13, "guarded".to_owned())]);
    assert_eq!(file_entry(&stretch.json, 36)["status"], "applied");
    let guarded = &file_entry(&stretch.json, 36)["verdict"]["units"][0]["report"]["guarded"];
    assert_eq!(
        guarded,
        "ran read-only on live: a no-op here",
        "{:#}",
        file_entry(&stretch.json, 36)
    );
    assert_eq!(
        procedural(&stretch.json, 37),
        [(12, "expanded".to_owned()), (14, "expanded".to_owned())]
    );
    assert_eq!(file_entry(&stretch.json, 37)["status"], "applied");
    assert_eq!(procedural(&stretch.json, 38), [(14, "native".to_owned())]);
    assert_eq!(procedural(&stretch.json, 39), [(12, "expanded".to_owned())]);
    let swaps = copy_and_swap_runs(&stretch.json, 34);
    assert!(
        matches!(swaps.as_slice(), [(table, phase, rows)]
            if table == "\"public\".\"events\"" && phase == "done" && *rows > 0),
        "0034's rewrite of events through copy-and-swap: {swaps:?}"
    );
    check_load(&mut client, &stretch, "0021-0039").await;
    let storage = events_storage(&live);
    assert_ne!(
        storage, before_0034,
        "copy-and-swap gave events new storage in 0034"
    );
    assert!(
        storage.lines().count() > 5,
        "events and its partitions: {storage}"
    );
    // 0036 ran read-only: d_tag is still text (checked against the catalog below).
    assert!(
        cluster()
            .psql(&live, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'd_tag'")
            .expect("pg_attribute readable")
            .trim()
            == "text",
        "0036 did not rewrite events (it has rows)"
    );

    assert_eq!(
        cluster()
            .psql(&live, "SELECT count(*) FROM pg_attribute WHERE attname = 'updated_at' AND attrelid IN ('channels'::regclass, 'communities'::regclass)")
            .expect("pg_attribute readable")
            .trim(),
        "2",
        "0037's expanded ADD COLUMNs ran"
    );

    // PostgreSQL as the oracle: the same files run natively on the clone.
    apply_natively(cluster(), &native, 15..=NEWEST);
    let after = triggers(cluster(), &live);
    let parts = partitions(cluster(), &live);
    assert!(
        after == triggers(cluster(), &native),
        "every trigger is what a native run leaves:\n{}",
        diff(&after, &triggers(cluster(), &native))
    );
    let live_catalog = catalog_as_native(&live, &native);
    // A relay with rows keeps d_tag as text (0036 is a no-op there).
    assert!(
        live_catalog.contains("events|d_tag|text|"),
        "{live_catalog}"
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
