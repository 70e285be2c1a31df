//! `pgshift::catalog::read_snapshot` against real PostgreSQL clusters from
//! `pgshift-embedded` (the version `PGSHIFT_PG_BIN` points at, or the one installed).
//!
//! Most tests read one shared database holding the relay workload
//! (`workloads/relay/schema.sql`, seeded with 50 rows per partition) plus
//! `tests/data/catalog/extras.sql`; tests that lock or change tables use a database
//! of their own.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use pgshift::catalog::{
    read_snapshot, resolve_relation, CatalogError, CatalogSnapshot, Lookup, Persistence,
    RelationFacts, RelationKind, TriggerEnabled,
};
use pgshift::classify::is_binary_coercible;
use pgshift_embedded::shared_cluster;
use pgshift_sql::QualifiedName;
use tokio_postgres::{Client, NoTls};

// ---------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/catalog")
        .join(name)
}

fn relay(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../workloads/relay")
        .join(name)
}

/// The shared relay database, loaded once per test binary.
fn relay_db() -> &'static str {
    static DB: OnceLock<String> = OnceLock::new();
    DB.get_or_init(|| new_relay_db("catalog_relay"))
}

/// A database of its own with the relay schema, for a test that compares live facts
/// (locks held elsewhere): on the shared one, other tests' reads take short locks of
/// their own (a size function opens the relation and its TOAST table).
fn new_relay_db(prefix: &str) -> String {
    let cluster = shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database(prefix).expect("database");
    for file in [
        relay("schema.sql"),
        data("seed_small.sql"),
        data("extras.sql"),
    ] {
        if let Err(error) = cluster.psql_file(&db, &file) {
            panic!("loading {}: {error}", file.display());
        }
    }
    db
}

/// A database of the test's own, with `sql` run in it.
fn own_db(sql: &str) -> String {
    let cluster = shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database("catalog").expect("database");
    cluster.psql(&db, sql).expect("setup sql");
    db
}

async fn connect_as(db: &str, user: &str) -> Client {
    let cluster = shared_cluster().expect("shared cluster");
    let conninfo = cluster
        .connection_string(db)
        .replace("user=postgres", &format!("user={user}"));
    let (client, connection) = tokio_postgres::connect(&conninfo, NoTls)
        .await
        .expect("connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A session prepared like `pgshift::connect` prepares one: locked-down
/// `search_path`; UTC, so partition bounds render the same everywhere.
async fn session(db: &str) -> Client {
    session_as(db, "postgres").await
}

async fn session_as(db: &str, user: &str) -> Client {
    let client = connect_as(db, user).await;
    client
        .batch_execute("SET search_path = pg_catalog, pg_temp; SET TimeZone = 'UTC'")
        .await
        .expect("session setup");
    client
}

fn bare(name: &str) -> QualifiedName {
    QualifiedName::bare(name)
}

fn q(schema: &str, name: &str) -> QualifiedName {
    QualifiedName::qualified(schema, name)
}

fn path(entries: &[&str]) -> Vec<String> {
    entries.iter().map(|e| (*e).to_owned()).collect()
}

async fn read(client: &Client, names: &[QualifiedName], search_path: &[&str]) -> CatalogSnapshot {
    match read_snapshot(client, names, &path(search_path)).await {
        Ok(snapshot) => snapshot,
        Err(error) => panic!("read_snapshot failed: {error}: {error:?}"),
    }
}

fn found<'a>(snapshot: &'a CatalogSnapshot, name: &QualifiedName) -> &'a RelationFacts {
    match snapshot.lookup(name) {
        Lookup::Found(relation) => relation,
        other => panic!("{name} should resolve, got {other:?}"),
    }
}

fn is_missing(snapshot: &CatalogSnapshot, name: &QualifiedName) -> bool {
    matches!(snapshot.lookup(name), Lookup::Missing)
}

async fn count(client: &Client, table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table}");
    client.query_one(&sql, &[]).await.expect("count").get(0)
}

fn names_of<T>(items: &[T], name: impl Fn(&T) -> String) -> Vec<String> {
    items.iter().map(name).collect()
}

const EVENTS_PARTITIONS: [(&str, &str); 8] = [
    (
        "events_2026_09",
        "FOR VALUES FROM ('2026-09-01 00:00:00+00') TO ('2026-10-01 00:00:00+00')",
    ),
    (
        "events_2026_10",
        "FOR VALUES FROM ('2026-10-01 00:00:00+00') TO ('2026-11-01 00:00:00+00')",
    ),
    (
        "events_2026_11",
        "FOR VALUES FROM ('2026-11-01 00:00:00+00') TO ('2026-12-01 00:00:00+00')",
    ),
    (
        "events_2026_12",
        "FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00')",
    ),
    (
        "events_2027_01",
        "FOR VALUES FROM ('2027-01-01 00:00:00+00') TO ('2027-02-01 00:00:00+00')",
    ),
    (
        "events_2027_02",
        "FOR VALUES FROM ('2027-02-01 00:00:00+00') TO ('2027-03-01 00:00:00+00')",
    ),
    (
        "events_future",
        "FOR VALUES FROM ('2027-03-01 00:00:00+00') TO (MAXVALUE)",
    ),
    (
        "events_past",
        "FOR VALUES FROM (MINVALUE) TO ('2026-09-01 00:00:00+00')",
    ),
];

const EVENTS_TRIGGERS: [&str; 5] = [
    "events_channel_ttl_refresh",
    "events_created_at_floor_guard",
    "events_outbox_enqueue",
    "events_replay_skipper",
    "events_soft_delete_purge",
];

/// Checks the five relay triggers as read on `events` or on one of its partitions.
fn check_event_triggers(relation: &RelationFacts, clones: bool) {
    assert_eq!(
        names_of(&relation.triggers, |t| t.name.clone()),
        EVENTS_TRIGGERS
    );
    for trigger in &relation.triggers {
        let deferred = trigger.name.contains("ttl_refresh") || trigger.name.contains("floor_guard");
        assert_eq!(trigger.enabled, TriggerEnabled::Origin, "{}", trigger.name);
        assert_eq!(trigger.is_constraint, deferred, "{}", trigger.name);
        assert_eq!(trigger.deferrable, deferred, "{}", trigger.name);
        assert_eq!(trigger.initially_deferred, deferred, "{}", trigger.name);
        assert_eq!(trigger.is_clone, clones, "{}", trigger.name);
        let table = relation.name.to_string();
        let table = table.replace('"', "");
        assert!(
            trigger.definition.contains(&format!(" ON {table} ")),
            "{}",
            trigger.definition
        );
    }
    let ttl = &relation.triggers[0];
    assert!(
        ttl.definition
            .starts_with("CREATE CONSTRAINT TRIGGER events_channel_ttl_refresh AFTER INSERT ON "),
        "{}",
        ttl.definition
    );
}

// ---------------------------------------------------------------------------------
// The relay's partitioned events table
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn events_facts_match_the_relay_schema() {
    let db = relay_db();
    let client = session(db).await;
    let snapshot = read(&client, &[bare("events")], &["public"]).await;
    let events = found(&snapshot, &bare("events"));
    let major = snapshot.server.major();

    assert_eq!(events.name, q("public", "events"));
    assert_eq!(events.kind, RelationKind::PartitionedTable);
    assert_eq!(events.persistence, Persistence::Permanent);
    assert_eq!(events.owner, "postgres");
    assert_eq!(events.parent, None);
    assert_eq!(events.indexed_table, None);
    assert_eq!(events.partition_key.as_deref(), Some("RANGE (created_at)"));

    // Partitions and bounds.
    let partitions: Vec<(String, String)> = events
        .partitions
        .iter()
        .map(|p| (p.name.to_string().replace('"', ""), p.bound.clone()))
        .collect();
    let expected: Vec<(String, String)> = EVENTS_PARTITIONS
        .iter()
        .map(|(name, bound)| (format!("public.{name}"), (*bound).to_owned()))
        .collect();
    assert_eq!(partitions, expected);
    assert!(events
        .partitions
        .iter()
        .all(|p| !p.is_default && !p.is_partitioned));
    assert!(events.default_partition().is_none());

    // Columns, with the internal type names the coercion rules use.
    let columns: Vec<(&str, &str, &str, i32, bool)> = events
        .columns
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.type_sql.as_str(),
                c.type_name.as_str(),
                c.typmod,
                c.not_null,
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("community_id", "uuid", "uuid", -1, true),
            ("id", "bytea", "bytea", -1, true),
            ("pubkey", "bytea", "bytea", -1, true),
            (
                "created_at",
                "timestamp with time zone",
                "timestamptz",
                -1,
                true
            ),
            ("kind", "integer", "int4", -1, true),
            ("tags", "jsonb", "jsonb", -1, true),
            ("content", "text", "text", -1, true),
            ("channel_id", "uuid", "uuid", -1, false),
            (
                "received_at",
                "timestamp with time zone",
                "timestamptz",
                -1,
                true
            ),
            (
                "deleted_at",
                "timestamp with time zone",
                "timestamptz",
                -1,
                false
            ),
            ("d_tag", "text", "text", -1, false),
            ("search_tsv", "tsvector", "tsvector", -1, false),
        ]
    );
    let tsv = events.column("search_tsv").expect("search_tsv");
    assert_eq!(tsv.generated, Some('s'));
    assert_eq!(
        tsv.default, None,
        "a generation expression is not a default"
    );
    let tags = events.column("tags").expect("tags");
    assert_eq!(tags.default.as_deref(), Some("'[]'::jsonb"));
    assert_eq!(tags.generated, None);
    assert_eq!(
        events
            .column("received_at")
            .and_then(|c| c.default.as_deref()),
        Some("now()")
    );
    assert!(events.columns.iter().all(|c| c.identity.is_none()));
    assert_eq!(events.column("kind").map(|c| c.type_oid), Some(23));

    // Primary key in key order, with types.
    let pk = events.primary_key.as_ref().expect("primary key");
    assert_eq!(pk.name, "events_pkey");
    let pk_columns: Vec<(&str, &str)> = pk
        .columns
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        pk_columns,
        [
            ("community_id", "uuid"),
            ("created_at", "timestamp with time zone"),
            ("id", "bytea"),
        ]
    );

    // Indexes.
    assert_eq!(
        names_of(&events.indexes, |i| i.name.name.clone()),
        [
            "events_channel_window_idx",
            "events_kind_idx",
            "events_live_idx",
            "events_pkey",
            "events_pubkey_idx",
            "events_search_tsv_idx",
            "events_tags_idx",
        ]
    );
    for index in &events.indexes {
        assert!(index.is_valid, "{}", index.name);
        assert_eq!(index.is_primary, index.name.name == "events_pkey");
        assert_eq!(index.is_unique, index.name.name == "events_pkey");
        assert!(
            index.definition.contains(" ON ONLY public.events USING "),
            "{}",
            index.definition
        );
    }
    let live = events
        .indexes
        .iter()
        .find(|i| i.name.name == "events_live_idx")
        .expect("live idx");
    assert!(
        live.definition.ends_with("WHERE (deleted_at IS NULL)"),
        "{}",
        live.definition
    );

    // Constraints of every kind (NOT NULL ones too on PostgreSQL 18).
    let kinds = |kind: char| events.constraints.iter().filter(|c| c.kind == kind).count();
    assert_eq!(kinds('p'), 1);
    assert_eq!(kinds('f'), 1);
    assert_eq!(kinds('t'), 2, "the two constraint triggers");
    let not_null_columns = events.columns.iter().filter(|c| c.not_null).count();
    assert_eq!(kinds('n'), if major >= 18 { not_null_columns } else { 0 });
    let pkey = events
        .constraints
        .iter()
        .find(|c| c.kind == 'p')
        .expect("pkey constraint");
    assert_eq!(
        pkey.definition,
        "PRIMARY KEY (community_id, created_at, id)"
    );
    assert!(events.constraints.iter().all(|c| c.validated));

    check_event_triggers(events, false);

    // Foreign keys.
    assert_eq!(events.foreign_keys_out.len(), 1);
    let fk = &events.foreign_keys_out[0];
    assert_eq!(fk.name, "events_community_id_fkey");
    assert_eq!(fk.referencing, q("public", "events"));
    assert_eq!(fk.referenced, q("public", "communities"));
    assert_eq!(
        fk.definition,
        "FOREIGN KEY (community_id) REFERENCES public.communities(id)"
    );
    assert!(fk.validated);
    assert!(events.foreign_keys_in.is_empty());

    // Dependents, publications, RLS, replica identity.
    assert_eq!(events.dependent_views, [q("public", "recent_events")]);
    assert_eq!(events.publications, ["relay_pub"]);
    assert!(!events.rls_enabled && !events.rls_forced);
    assert_eq!(events.replica_identity, 'd');

    // Volume: every partition counted.
    let rows = count(&client, "public.events").await;
    assert_eq!(rows, 8 * 50);
    assert_eq!(events.row_estimate, rows);
    let sizes = events.sizes;
    assert!(
        sizes.heap_bytes > 0 && sizes.index_bytes > 0 && sizes.toast_bytes > 0,
        "{sizes:?}"
    );
    assert!(sizes.heap_bytes <= sizes.total_bytes, "{sizes:?}");
    assert!(
        sizes.heap_bytes + sizes.index_bytes + sizes.toast_bytes <= sizes.total_bytes,
        "{sizes:?}"
    );
}

#[tokio::test]
async fn a_partition_read_by_name_shows_clones_and_its_parent() {
    let db = relay_db();
    let client = session(db).await;
    let mut names = vec![bare("events")];
    names.extend(EVENTS_PARTITIONS.iter().map(|(name, _)| bare(name)));
    let snapshot = read(&client, &names, &["public"]).await;
    let events = found(&snapshot, &bare("events"));
    let partition = found(&snapshot, &bare("events_2026_09"));

    assert_eq!(partition.kind, RelationKind::Table);
    assert_eq!(partition.parent, Some(q("public", "events")));
    assert_eq!(partition.partition_key, None);
    assert!(partition.partitions.is_empty());
    check_event_triggers(partition, true);

    // The partition's clone of the foreign key is its own.
    assert_eq!(partition.foreign_keys_out.len(), 1);
    assert_eq!(
        partition.foreign_keys_out[0].name,
        "events_community_id_fkey"
    );
    assert_eq!(
        partition.foreign_keys_out[0].referencing,
        q("public", "events_2026_09")
    );
    assert_eq!(
        partition.foreign_keys_out[0].referenced,
        q("public", "communities")
    );
    assert_eq!(
        partition.primary_key.as_ref().map(|k| k.name.as_str()),
        Some("events_2026_09_pkey")
    );
    assert_eq!(partition.indexes.len(), events.indexes.len());
    assert!(partition.dependent_views.is_empty());
    assert_eq!(
        partition.publications,
        ["relay_pub"],
        "published through its parent"
    );
    assert_eq!(partition.row_estimate, 50);

    // The parent's figures are the sums over its partitions.
    let partitions: Vec<&RelationFacts> = EVENTS_PARTITIONS
        .iter()
        .map(|(name, _)| found(&snapshot, &bare(name)))
        .collect();
    let sum = |f: fn(&RelationFacts) -> i64| partitions.iter().map(|p| f(p)).sum::<i64>();
    assert_eq!(events.sizes.heap_bytes, sum(|p| p.sizes.heap_bytes));
    assert_eq!(events.sizes.index_bytes, sum(|p| p.sizes.index_bytes));
    assert_eq!(events.sizes.toast_bytes, sum(|p| p.sizes.toast_bytes));
    assert_eq!(events.sizes.total_bytes, sum(|p| p.sizes.total_bytes));
    assert_eq!(events.row_estimate, sum(|p| p.row_estimate));
}

#[tokio::test]
async fn communities_sees_each_incoming_foreign_key_once() {
    let db = relay_db();
    let client = session(db).await;
    let snapshot = read(&client, &[bare("communities")], &["public"]).await;
    let communities = found(&snapshot, &bare("communities"));

    let incoming: Vec<(String, QualifiedName, QualifiedName)> = communities
        .foreign_keys_in
        .iter()
        .map(|fk| {
            (
                fk.name.clone(),
                fk.referencing.clone(),
                fk.referenced.clone(),
            )
        })
        .collect();
    assert_eq!(
        incoming,
        [
            (
                "channels_community_id_fkey".to_owned(),
                q("public", "channels"),
                q("public", "communities")
            ),
            (
                "events_community_id_fkey".to_owned(),
                q("public", "events"),
                q("public", "communities")
            ),
        ]
    );
    assert!(communities.foreign_keys_out.is_empty());
    assert_eq!(
        communities.dependent_views,
        [q("public", "community_hosts")]
    );
    let mut constraints: Vec<(String, char)> = communities
        .constraints
        .iter()
        .filter(|c| c.kind != 'n')
        .map(|c| (c.name.clone(), c.kind))
        .collect();
    constraints.sort();
    assert_eq!(
        constraints,
        [
            ("communities_deletion_state_check".to_owned(), 'c'),
            ("communities_host_key".to_owned(), 'u'),
            ("communities_pkey".to_owned(), 'p'),
        ]
    );
    assert_eq!(
        communities.column("id").and_then(|c| c.default.as_deref()),
        Some("gen_random_uuid()")
    );
    assert_eq!(communities.row_estimate, 3);
    assert!(communities.publications.is_empty());
}

#[tokio::test]
async fn foreign_keys_to_a_partitioned_table_are_listed_once() {
    let db = relay_db();
    let client = session(db).await;
    let names = [
        bare("regions"),
        bare("regions_eu"),
        bare("region_notes"),
        bare("region_logs"),
        bare("region_logs_2026"),
    ];
    let snapshot = read(&client, &names, &["public"]).await;
    let fk_names = |relation: &RelationFacts, incoming: bool| -> Vec<(String, String, String)> {
        let keys = if incoming {
            &relation.foreign_keys_in
        } else {
            &relation.foreign_keys_out
        };
        keys.iter()
            .map(|fk| {
                (
                    fk.name.clone(),
                    fk.referencing.name.clone(),
                    fk.referenced.name.clone(),
                )
            })
            .collect()
    };
    let owned = |rows: &[(&str, &str, &str)]| -> Vec<(String, String, String)> {
        rows.iter()
            .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
            .collect()
    };

    let regions = found(&snapshot, &bare("regions"));
    assert_eq!(
        fk_names(regions, true),
        owned(&[
            ("region_logs_code_fkey", "region_logs", "regions"),
            ("region_notes_code_fkey", "region_notes", "regions"),
        ])
    );
    // A referenced partition is referenced only through its parent.
    assert!(found(&snapshot, &bare("regions_eu"))
        .foreign_keys_in
        .is_empty());

    let notes = found(&snapshot, &bare("region_notes"));
    assert_eq!(
        fk_names(notes, false),
        owned(&[("region_notes_code_fkey", "region_notes", "regions")])
    );
    let fk_constraints: Vec<&str> = notes
        .constraints
        .iter()
        .filter(|c| c.kind == 'f')
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(fk_constraints, ["region_notes_code_fkey"]);

    let logs = found(&snapshot, &bare("region_logs"));
    assert_eq!(
        fk_names(logs, false),
        owned(&[("region_logs_code_fkey", "region_logs", "regions")])
    );
    let partition = found(&snapshot, &bare("region_logs_2026"));
    assert_eq!(
        fk_names(partition, false),
        owned(&[("region_logs_code_fkey", "region_logs_2026", "regions")])
    );
    // Internal foreign-key triggers never show up as user triggers.
    for relation in &snapshot.relations {
        assert!(
            relation.triggers.is_empty(),
            "{}: {:?}",
            relation.name,
            relation.triggers
        );
    }
}

#[tokio::test]
async fn a_list_partitioned_table_with_a_default_partition() {
    let db = relay_db();
    let client = session(db).await;
    let names = [
        bare("metrics"),
        bare("metrics_eu"),
        bare("metrics_other"),
        bare("metrics_us_0"),
        bare("metrics_us_1"),
    ];
    let snapshot = read(&client, &names, &["public"]).await;
    let metrics = found(&snapshot, &bare("metrics"));

    assert_eq!(metrics.partition_key.as_deref(), Some("LIST (region)"));
    let partitions: Vec<(&str, &str, bool, bool)> = metrics
        .partitions
        .iter()
        .map(|p| {
            (
                p.name.name.as_str(),
                p.bound.as_str(),
                p.is_default,
                p.is_partitioned,
            )
        })
        .collect();
    assert_eq!(
        partitions,
        [
            ("metrics_eu", "FOR VALUES IN ('eu')", false, false),
            ("metrics_other", "DEFAULT", true, false),
            ("metrics_us", "FOR VALUES IN ('us')", false, true),
        ]
    );
    assert_eq!(
        metrics.default_partition().map(|p| p.name.clone()),
        Some(q("public", "metrics_other"))
    );

    // Identity, numeric and varchar modifiers, arrays, a type outside pg_catalog.
    let id = metrics.column("id").expect("id");
    assert_eq!(
        (id.type_name.as_str(), id.identity, id.not_null),
        ("int8", Some('a'), true)
    );
    assert_eq!(id.default, None);
    let amount = metrics.column("amount").expect("amount");
    assert_eq!(amount.type_sql, "numeric(12,2)");
    assert_eq!(
        (amount.type_name.as_str(), amount.typmod),
        ("numeric", ((12 << 16) | 2) + 4)
    );
    let label = metrics.column("label").expect("label");
    assert_eq!(label.type_sql, "character varying(100)");
    assert_eq!((label.type_name.as_str(), label.typmod), ("varchar", 104));
    assert_eq!(label.default.as_deref(), Some("'none'::character varying"));
    assert!(is_binary_coercible(
        &label.type_name,
        label.typmod,
        "varchar",
        204
    ));
    assert!(!is_binary_coercible(
        &label.type_name,
        label.typmod,
        "varchar",
        54
    ));
    assert!(is_binary_coercible(
        &amount.type_name,
        amount.typmod,
        "numeric",
        ((14 << 16) | 2) + 4
    ));
    let tags = metrics.column("tags").expect("tags");
    assert_eq!(
        (tags.type_sql.as_str(), tags.type_name.as_str()),
        ("integer[]", "int4[]")
    );
    let feeling = metrics.column("feeling").expect("feeling");
    assert_eq!(
        (feeling.type_sql.as_str(), feeling.type_name.as_str()),
        ("public.mood", "public.mood")
    );

    let check = metrics
        .constraints
        .iter()
        .find(|c| c.name == "metrics_amount_check")
        .expect("check constraint");
    assert_eq!((check.kind, check.validated), ('c', false));
    assert_eq!(
        metrics.primary_key.as_ref().map(|k| k.columns.clone()),
        Some(vec![
            ("id".to_owned(), "bigint".to_owned()),
            ("region".to_owned(), "text".to_owned())
        ])
    );

    // Sizes and estimates come from the leaves, two levels down included.
    let leaves: Vec<&RelationFacts> = names[1..].iter().map(|n| found(&snapshot, n)).collect();
    assert_eq!(
        metrics.sizes.total_bytes,
        leaves.iter().map(|l| l.sizes.total_bytes).sum::<i64>()
    );
    assert_eq!(metrics.row_estimate, 300);
    assert_eq!(found(&snapshot, &bare("metrics_other")).row_estimate, 100);
    assert_eq!(
        found(&snapshot, &bare("metrics_us_0")).parent,
        Some(q("public", "metrics_us"))
    );
}

#[tokio::test]
async fn rls_replica_identity_and_publications() {
    let db = relay_db();
    let client = session(db).await;
    let names = [bare("channels"), bare("event_outbox"), q("app", "accounts")];
    let snapshot = read(&client, &names, &["public"]).await;

    let channels = found(&snapshot, &bare("channels"));
    assert!(channels.rls_enabled && channels.rls_forced);
    assert_eq!(channels.replica_identity, 'd');
    assert_eq!(channels.publications, ["relay_pub"]);

    let outbox = found(&snapshot, &bare("event_outbox"));
    assert!(!outbox.rls_enabled);
    assert_eq!(outbox.replica_identity, 'f');
    assert!(outbox.publications.is_empty());
    assert_eq!(outbox.column("seq").and_then(|c| c.identity), Some('a'));

    let accounts = found(&snapshot, &q("app", "accounts"));
    let schema_publication: &[&str] = if snapshot.server.major() >= 15 {
        &["app_pub"]
    } else {
        &[]
    };
    assert_eq!(accounts.publications, schema_publication);
}

#[tokio::test]
async fn generated_columns_stored_and_virtual() {
    let db = relay_db();
    let client = session(db).await;
    let snapshot = read(&client, &[bare("shapes")], &["public"]).await;
    let shapes = found(&snapshot, &bare("shapes"));
    let generated: Vec<(&str, Option<char>, bool)> = shapes
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.generated, c.default.is_some()))
        .collect();
    let mut expected = vec![("side", None, false), ("area", Some('s'), false)];
    if snapshot.server.major() >= 18 {
        expected.push(("double", Some('v'), false));
    }
    assert_eq!(generated, expected);
}

// ---------------------------------------------------------------------------------
// Name resolution
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn unqualified_names_follow_the_users_search_path() {
    let db = relay_db();
    let client = session(db).await;
    let names = [
        bare("events"),
        bare("accounts"),
        bare("communities"),
        bare("secrets"),
        q("hidden", "secrets"),
        q("nowhere", "thing"),
        bare("pg_type"),
        q("public", "events"),
        q("pg_temp", "communities"),
    ];
    let snapshot = read(&client, &names, &["app", "public"]).await;

    assert_eq!(found(&snapshot, &bare("events")).name, q("app", "events"));
    assert_eq!(found(&snapshot, &bare("events")).columns.len(), 1);
    assert_eq!(
        found(&snapshot, &bare("accounts")).name,
        q("app", "accounts")
    );
    assert_eq!(
        found(&snapshot, &bare("communities")).name,
        q("public", "communities")
    );
    assert!(
        is_missing(&snapshot, &bare("secrets")),
        "hidden is not on the path"
    );
    assert_eq!(
        found(&snapshot, &q("hidden", "secrets")).name,
        q("hidden", "secrets")
    );
    assert!(is_missing(&snapshot, &q("nowhere", "thing")));
    assert!(
        is_missing(&snapshot, &q("pg_temp", "communities")),
        "no temp schema yet"
    );
    let pg_type = found(&snapshot, &bare("pg_type"));
    assert_eq!(
        pg_type.name,
        q("pg_catalog", "pg_type"),
        "pg_catalog is searched first"
    );
    assert_eq!(
        found(&snapshot, &q("public", "events")).kind,
        RelationKind::PartitionedTable
    );
    let written: Vec<QualifiedName> = snapshot
        .resolutions
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(written, names);
    assert_eq!(snapshot.relations.len(), 6);

    // pg_catalog listed after public: public's table wins.
    let later = read(&client, &[bare("pg_type")], &["public", "pg_catalog"]).await;
    assert_eq!(found(&later, &bare("pg_type")).name, q("public", "pg_type"));

    // "$user" is the role's schema; duplicates collapse to one relation.
    let user = read(
        &client,
        &[
            bare("mine"),
            bare("communities"),
            q("public", "communities"),
        ],
        &["$user", "public"],
    )
    .await;
    assert_eq!(found(&user, &bare("mine")).name, q("postgres", "mine"));
    assert_eq!(user.relations.len(), 2);
    assert_eq!(user.resolutions[1].1, user.resolutions[2].1);
}

#[tokio::test]
async fn resolving_one_name_agrees_with_the_snapshot() {
    let db = relay_db();
    let client = session(db).await;
    let names = [
        bare("events"),
        bare("communities"),
        bare("secrets"),
        q("hidden", "secrets"),
        q("nowhere", "thing"),
        bare("pg_type"),
        q("pg_temp", "communities"),
    ];
    let path = ["app".to_owned(), "public".to_owned()];
    let snapshot = read(&client, &names, &["app", "public"]).await;
    for name in &names {
        let alone = resolve_relation(&client, name, &path)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        match snapshot.lookup(name) {
            Lookup::Found(facts) => {
                let alone = alone.unwrap_or_else(|| panic!("{name} resolves alone too"));
                assert_eq!(
                    (alone.oid, &alone.name, alone.kind),
                    (facts.oid, &facts.name, facts.kind),
                    "{name}"
                );
            }
            _ => assert!(alone.is_none(), "{name} is missing alone too: {alone:?}"),
        }
    }
    // The session is left outside a transaction: a snapshot can be read next.
    read(&client, &[bare("events")], &["app"]).await;
}

#[tokio::test]
async fn schemas_without_usage_are_skipped_in_the_path() {
    let cluster = shared_cluster().expect("shared cluster");
    let db = own_db(
        "CREATE SCHEMA locked; CREATE TABLE locked.thing (id int); \
         CREATE TABLE public.thing (id int, other int);",
    );
    cluster
        .psql(
            "postgres",
            "DO $$ BEGIN \
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'catalog_reader') THEN \
                 CREATE ROLE catalog_reader LOGIN; \
               END IF; \
             END $$;",
        )
        .expect("role");
    let reader = session_as(&db, "catalog_reader").await;
    let names = [bare("thing"), q("locked", "thing")];
    let snapshot = read(&reader, &names, &["locked", "public"]).await;
    assert_eq!(found(&snapshot, &bare("thing")).name, q("public", "thing"));
    assert_eq!(
        found(&snapshot, &q("locked", "thing")).name,
        q("locked", "thing")
    );

    let superuser = session(&db).await;
    let snapshot = read(&superuser, &names, &["locked", "public"]).await;
    assert_eq!(found(&snapshot, &bare("thing")).name, q("locked", "thing"));
}

#[tokio::test]
async fn indexes_sequences_and_views_resolve_too() {
    let db = relay_db();
    let client = session(db).await;
    let names = [
        bare("events_pkey"),
        bare("events_2026_09_pkey"),
        bare("communities_pkey"),
        bare("ticket_seq"),
        bare("recent_events"),
        bare("community_hosts"),
    ];
    let snapshot = read(&client, &names, &["public"]).await;

    let pkey = found(&snapshot, &bare("events_pkey"));
    assert_eq!(pkey.kind, RelationKind::PartitionedIndex);
    assert_eq!(pkey.indexed_table, Some(q("public", "events")));
    assert_eq!(
        names_of(&pkey.columns, |c| c.name.clone()),
        ["community_id", "created_at", "id"]
    );
    let partition_pkey = found(&snapshot, &bare("events_2026_09_pkey"));
    assert_eq!(partition_pkey.kind, RelationKind::Index);
    assert_eq!(
        partition_pkey.indexed_table,
        Some(q("public", "events_2026_09"))
    );
    assert_eq!(partition_pkey.parent, Some(q("public", "events_pkey")));
    assert!(partition_pkey.sizes.heap_bytes > 0);
    assert!(
        pkey.sizes.total_bytes > partition_pkey.sizes.total_bytes,
        "summed over 8 partitions"
    );
    let communities_pkey = found(&snapshot, &bare("communities_pkey"));
    assert_eq!(communities_pkey.kind, RelationKind::Index);
    assert_eq!(
        communities_pkey.indexed_table,
        Some(q("public", "communities"))
    );

    assert_eq!(
        found(&snapshot, &bare("ticket_seq")).kind,
        RelationKind::Sequence
    );
    let view = found(&snapshot, &bare("recent_events"));
    assert_eq!(view.kind, RelationKind::View);
    assert_eq!(
        names_of(&view.columns, |c| c.name.clone()),
        ["community_id", "id", "created_at"]
    );
    assert_eq!(view.dependent_views, [q("public", "recent_events_ids")]);
    assert!(view.publications.is_empty());
    let matview = found(&snapshot, &bare("community_hosts"));
    assert_eq!(matview.kind, RelationKind::MaterializedView);
    assert_eq!(matview.row_estimate, 3);
}

#[tokio::test]
async fn a_temporary_table_shadows_the_path() {
    let db = relay_db();
    let client = session(db).await;
    client
        .batch_execute("CREATE TEMP TABLE communities (x int)")
        .await
        .expect("temp table");
    let names = [
        bare("communities"),
        q("pg_temp", "communities"),
        q("public", "communities"),
    ];
    let snapshot = read(&client, &names, &["public"]).await;

    let temp = found(&snapshot, &bare("communities"));
    assert_eq!(temp.persistence, Persistence::Temporary);
    assert!(
        temp.name
            .schema
            .as_deref()
            .is_some_and(|s| s.starts_with("pg_temp_")),
        "{}",
        temp.name
    );
    assert_eq!(temp.row_estimate, -1, "never analysed");
    assert!(temp.publications.is_empty());
    assert_eq!(snapshot.resolutions[0].1, snapshot.resolutions[1].1);
    let public = found(&snapshot, &q("public", "communities"));
    assert_eq!(public.persistence, Persistence::Permanent);
    assert_ne!(public.oid, temp.oid);

    // Listed explicitly after public, pg_temp loses.
    let later = read(&client, &[bare("communities")], &["public", "pg_temp"]).await;
    assert_eq!(
        found(&later, &bare("communities")).name,
        q("public", "communities")
    );
}

// ---------------------------------------------------------------------------------
// Safety and consistency
// ---------------------------------------------------------------------------------

// INV: SE-1 — a hostile schema first in the search path changes no fact pgshift reads.
#[tokio::test]
async fn inv_se_1_hostile_schema_cannot_shadow_catalog_reads() {
    let db = &new_relay_db("catalog_hostile");
    let names = [
        bare("events"),
        bare("events_2026_09"),
        bare("communities"),
        bare("channels"),
        bare("metrics"),
        bare("events_pkey"),
        bare("recent_events"),
        bare("missing_table"),
    ];
    let normal = session(db).await;
    let expected = read(&normal, &names, &["public"]).await;

    let hostile = connect_as(db, "postgres").await;
    hostile
        .batch_execute("SET search_path = evil, pg_catalog, pg_temp; SET TimeZone = 'UTC'")
        .await
        .expect("hostile search_path");
    // The hostile objects do take over unqualified names in this session.
    let row = hostile
        .query_one(
            "SELECT format_type(23, -1), (SELECT count(*) FROM pg_class), 1::oid = 1::oid",
            &[],
        )
        .await
        .expect("hostile probe");
    assert_eq!(row.get::<_, String>(0), "evil");
    assert_eq!(row.get::<_, i64>(1), 1);
    assert!(!row.get::<_, bool>(2));

    let snapshot = read(&hostile, &names, &["public"]).await;
    assert_eq!(snapshot, expected);
    let events = found(&snapshot, &bare("events"));
    assert_eq!(events.kind, RelationKind::PartitionedTable);
    assert_eq!(events.owner, "postgres");
    assert_eq!(events.columns.len(), 12);
    assert!(events.columns.iter().all(|c| c.type_sql != "evil"));
    assert!(events.sizes.heap_bytes > 0);
}

#[tokio::test]
async fn a_read_during_an_uncommitted_change_sees_the_table_as_it_was() {
    let db = own_db(
        "CREATE TABLE snap (id int PRIMARY KEY, v text); \
         INSERT INTO snap SELECT i, 'v' || i FROM generate_series(1, 100) AS i;",
    );
    let reader = Arc::new(session(&db).await);
    let changer = session(&db).await;
    let watcher = session(&db).await;
    let reader_pid: i32 = reader
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);

    // An uncommitted change holding ACCESS EXCLUSIVE on the table.
    changer
        .batch_execute(
            "BEGIN; \
             ALTER TABLE public.snap ADD COLUMN extra int; \
             CREATE INDEX snap_extra_idx ON public.snap (extra); \
             ALTER TABLE public.snap ADD CONSTRAINT snap_v_check CHECK (v <> '');",
        )
        .await
        .expect("change");

    // The read does not wait for the change's lock: it sees the table as it was.
    let snapshot = match read_snapshot(&reader, &[bare("snap")], &path(&["public"])).await {
        Ok(snapshot) => snapshot,
        Err(error) => panic!("read failed: {error}: {error:?}"),
    };
    let waited: i64 = watcher
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_locks WHERE pid = $1 AND NOT granted",
            &[&reader_pid],
        )
        .await
        .expect("pg_locks")
        .get(0);
    assert_eq!(waited, 0);
    changer.batch_execute("COMMIT").await.expect("commit");
    let snap = found(&snapshot, &bare("snap"));
    assert_eq!(names_of(&snap.columns, |c| c.name.clone()), ["id", "v"]);
    assert_eq!(
        names_of(&snap.indexes, |i| i.name.name.clone()),
        ["snap_pkey"]
    );
    assert_eq!(
        names_of(&snap.constraints, |c| c.name.clone())
            .into_iter()
            .filter(|n| !n.ends_with("_not_null"))
            .collect::<Vec<_>>(),
        ["snap_pkey"]
    );

    // The next read sees all of it.
    let after = read(&reader, &[bare("snap")], &["public"]).await;
    let snap = found(&after, &bare("snap"));
    assert_eq!(
        names_of(&snap.columns, |c| c.name.clone()),
        ["id", "v", "extra"]
    );
    assert_eq!(
        names_of(&snap.indexes, |i| i.name.name.clone()),
        ["snap_extra_idx", "snap_pkey"]
    );
    assert!(snap.constraints.iter().any(|c| c.name == "snap_v_check"));
}

#[tokio::test]
async fn a_held_lock_does_not_stop_the_read_and_leaves_the_session_usable() {
    let db = own_db("CREATE TABLE busy (id int PRIMARY KEY, v int DEFAULT 1 CHECK (v > 0));");
    let holder = session(&db).await;
    let reader = session(&db).await;
    holder
        .batch_execute("BEGIN; LOCK TABLE public.busy IN ACCESS EXCLUSIVE MODE;")
        .await
        .expect("lock");
    reader
        .batch_execute("SET lock_timeout = '300ms'")
        .await
        .expect("lock_timeout");
    let snapshot = read(&reader, &[bare("busy")], &["public"]).await;
    let busy = found(&snapshot, &bare("busy"));
    assert!(busy.sizes_estimated);
    // Definitions that would need the lock to be rendered say so.
    assert!(busy
        .constraints
        .iter()
        .all(|c| c.definition == pgshift::catalog::NOT_READ_WHILE_LOCKED));
    assert_eq!(
        busy.column("v").and_then(|c| c.default.as_deref()),
        Some(pgshift::catalog::NOT_READ_WHILE_LOCKED)
    );

    holder.batch_execute("COMMIT").await.expect("release");
    let snapshot = read(&reader, &[bare("busy")], &["public"]).await;
    let busy = found(&snapshot, &bare("busy"));
    assert!(!busy.sizes_estimated);
    assert!(busy.locks_elsewhere.is_empty());
    assert_eq!(
        busy.column("v").and_then(|c| c.default.as_deref()),
        Some("1")
    );
}

#[tokio::test]
async fn a_read_inside_the_callers_transaction_is_refused() {
    let db = relay_db();
    let client = session(db).await;
    // A fresh transaction block, and one that already ran a query.
    for setup in ["BEGIN", "BEGIN; SELECT 1"] {
        client.batch_execute(setup).await.expect("begin");
        let error = read_snapshot(&client, &[bare("events")], &path(&["public"]))
            .await
            .expect_err("the read needs its own transaction");
        assert!(
            matches!(error, CatalogError::AlreadyInTransaction),
            "{setup}: {error:?}"
        );
        // The caller's transaction is still there, healthy and as it was.
        let row = client
            .query_one(
                "SELECT pg_catalog.current_setting('transaction_isolation'), \
                        pg_catalog.current_setting('transaction_read_only')",
                &[],
            )
            .await
            .expect("still usable");
        assert_eq!(row.get::<_, String>(0), "read committed", "{setup}");
        assert_eq!(row.get::<_, String>(1), "off", "{setup}");
        client.batch_execute("COMMIT").await.expect("commit");
    }
    // Outside a transaction block, the read works on the same client.
    let snapshot = read(&client, &[bare("events")], &["public"]).await;
    assert!(matches!(snapshot.lookup(&bare("events")), Lookup::Found(_)));
}

#[tokio::test]
async fn no_names_still_reads_the_server() {
    let db = relay_db();
    let client = session(db).await;
    let snapshot = read(&client, &[], &["public"]).await;
    assert!(snapshot.relations.is_empty() && snapshot.resolutions.is_empty());
    let version_num: String = client
        .query_one(
            "SELECT pg_catalog.current_setting('server_version_num')",
            &[],
        )
        .await
        .expect("version")
        .get(0);
    assert_eq!(snapshot.server.version_num.to_string(), version_num);
    assert!(snapshot.server.major() >= 14);
    assert!(!snapshot.server.version.is_empty());
}
