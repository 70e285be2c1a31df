//! `pgshift audit` end to end against real PostgreSQL: the relay schema (the demo's)
//! exits 2 with its five ORIGIN-enabled triggers, in text and in one JSON document;
//! made ALWAYS, it exits 0; a connection that fails exits 1 with a JSON error; and
//! the help lists every finding that counts as a bypass.

mod common;

use common::{pgshift, workspace_root};
use pgshift::audit::FindingKind;
use pgshift_embedded::shared_cluster;

const FIVE: [&str; 5] = [
    "events_channel_ttl_refresh",
    "events_created_at_floor_guard",
    "events_outbox_enqueue",
    "events_replay_skipper",
    "events_soft_delete_purge",
];

#[test]
fn audit_of_the_relay_exits_2_until_its_triggers_fire_for_replica_writers() {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database("audit_cli").expect("database");
    cluster
        .psql_file(&db, workspace_root().join("workloads/relay/schema.sql"))
        .expect("relay schema loads");
    let url = cluster.connection_string(&db);

    let text = pgshift(&["audit", "--url", &url, "--color", "never"]);
    assert_eq!(text.code, 2, "{}\n{}", text.stdout, text.stderr);
    assert!(
        text.stdout
            .contains("\n\"public\".\"events\" (partitioned)\n"),
        "{}",
        text.stdout
    );
    assert_eq!(
        text.stdout.matches("bypass skipped-in-replica").count(),
        5,
        "{}",
        text.stdout
    );
    for name in FIVE {
        assert!(
            text.stdout.contains(&format!(
                "ALTER TABLE \"public\".\"events\" ENABLE ALWAYS TRIGGER \"{name}\";"
            )),
            "{}",
            text.stdout
        );
    }
    assert!(
        text.stdout
            .contains("verdict: 5 findings let a write bypass a trigger"),
        "{}",
        text.stdout
    );

    let json = pgshift(&["audit", "--url", &url, "--format", "json"]);
    assert_eq!(json.code, 2, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["command"], "audit");
    assert_eq!(doc["bypass"], true);
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["summary"]["bypasses"], 5);
    let partitions = doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "skipped-in-replica")
        .map(|f| f["relations"].as_array().map_or(0, Vec::len))
        .collect::<Vec<_>>();
    assert_eq!(partitions, vec![8; 5]);

    let fix: String = FIVE
        .iter()
        .map(|name| format!("ALTER TABLE events ENABLE ALWAYS TRIGGER {name};"))
        .collect();
    cluster.psql(&db, &fix).expect("fix");
    let fixed = pgshift(&["audit", "--url", &url, "--format", "json"]);
    assert_eq!(fixed.code, 0, "{}\n{}", fixed.stdout, fixed.stderr);
    let doc: serde_json::Value = serde_json::from_str(&fixed.stdout).expect("one JSON document");
    assert_eq!(doc["bypass"], false);
    // The deferred constraint triggers stay notes.
    assert!(doc["summary"]["notes"].as_u64().unwrap_or(0) >= 2, "{doc}");
    let text = pgshift(&["audit", "--url", &url, "--color", "never", "-q"]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout
            .contains("verdict: no finding lets a write bypass a trigger"),
        "{}",
        text.stdout
    );
}

#[test]
fn audit_that_cannot_connect_exits_1_with_one_json_error() {
    let run = pgshift(&[
        "audit",
        "--url",
        "host=/nonexistent-pgshift-dir port=1 user=x dbname=x connect_timeout=2",
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(doc["kind"], "error");
    assert_eq!(doc["code"], "connect-failed");
    assert_eq!(doc["exit_code"], 1);
}

#[test]
fn audit_help_lists_every_bypass_finding() {
    let run = pgshift(&["audit", "--help"]);
    assert_eq!(run.code, 0);
    for kind in FindingKind::ALL {
        assert!(
            run.stdout.contains(kind.code()),
            "{} missing from help",
            kind.code()
        );
        let line = run
            .stdout
            .lines()
            .any(|l| l.starts_with("  ") && l.split_whitespace().next() == Some(kind.code()));
        assert_eq!(
            line,
            kind.is_bypass(),
            "{}: listed as a bypass iff it is one",
            kind.code()
        );
    }
}
