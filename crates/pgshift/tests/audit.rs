//! `pgshift::audit` against real PostgreSQL: generated table shapes (plain,
//! partitioned on one and two levels, partitions attached after the trigger), each
//! with its triggers put into a state PostgreSQL really lets a database reach
//! (ENABLE ALWAYS / REPLICA / DISABLE on the parent or on one partition only, `ONLY`
//! the parent, a partition-only trigger, a clone removed from the catalog, a clone
//! renamed where the server allows it). PostgreSQL is the oracle: every partition is
//! written to in an ordinary and in a `session_replication_role = replica` session,
//! and the triggers that really fired must be exactly the ones the audit says fire;
//! every trigger that did not fire must be covered by a bypass finding; a partition
//! created under each partitioned table must take the state the audit says it will;
//! and the audit's fix statements, run on a copy of the database, must leave no bypass.

mod common;

use std::collections::BTreeSet;

use pgshift::audit::{audit, Audit, FindingKind, TableKind};
use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

use common::{client, cluster, session};

/// The trigger function every generated trigger calls: it logs which trigger fired,
/// on which table, at which level.
const PRELUDE: &str = r#"
CREATE TABLE public.fired (trigger text, schema text, tbl text, level text);
CREATE FUNCTION public.log_fire() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.fired VALUES (TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_LEVEL);
  IF TG_LEVEL = 'ROW' AND TG_WHEN = 'BEFORE' THEN RETURN NEW; END IF;
  RETURN NULL;
END $$;
"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Plain,
    OneLevel,
    TwoLevels,
    AttachedLater,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    None,
    AlwaysOnParent,
    ReplicaOnOnePartition,
    DisabledOnOnePartition,
    OnlyParentAlways,
    CloneRemoved,
    PartitionOnlyTrigger,
    CloneRenamed,
}

const SHAPES: [Shape; 4] = [
    Shape::Plain,
    Shape::OneLevel,
    Shape::TwoLevels,
    Shape::AttachedLater,
];
const CHANGES: [Change; 8] = [
    Change::None,
    Change::AlwaysOnParent,
    Change::ReplicaOnOnePartition,
    Change::DisabledOnOnePartition,
    Change::OnlyParentAlways,
    Change::CloneRemoved,
    Change::PartitionOnlyTrigger,
    Change::CloneRenamed,
];

/// One generated scenario: its own schema, its root table, and a value landing in
/// each partition that holds rows.
struct Scenario {
    shape: Shape,
    change: Change,
    schema: String,
    leaves: Vec<(String, i32)>,
    /// Whether the server accepted the change (renaming a clone: PostgreSQL 14 only).
    applied: bool,
}

impl Scenario {
    fn root(&self) -> QualifiedName {
        QualifiedName::qualified(&self.schema, "t")
    }

    fn name(&self, table: &str) -> QualifiedName {
        QualifiedName::qualified(&self.schema, table)
    }

    fn partitioned(&self) -> bool {
        self.shape != Shape::Plain
    }
}

/// The shape's tables, and the three triggers every scenario starts with: `guard`
/// (BEFORE INSERT, row; the one the change acts on), `late_check` (a deferred
/// constraint trigger, left ORIGIN) and, on partitioned roots, `stmt_log` (AFTER
/// INSERT, statement, ALWAYS).
fn shape_sql(shape: Shape, s: &str) -> (String, Vec<(String, i32)>) {
    let q = |t: &str| {
        format!(
            "{}.{}",
            pgshift_sql::quote_ident(s),
            pgshift_sql::quote_ident(t)
        )
    };
    let triggers = format!(
        "CREATE TRIGGER guard BEFORE INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION public.log_fire();
         CREATE CONSTRAINT TRIGGER late_check AFTER INSERT ON {t} DEFERRABLE INITIALLY DEFERRED
           FOR EACH ROW EXECUTE FUNCTION public.log_fire();",
        t = q("t")
    );
    let stmt = format!(
        "CREATE TRIGGER stmt_log AFTER INSERT ON {t} FOR EACH STATEMENT EXECUTE FUNCTION public.log_fire();
         ALTER TABLE {t} ENABLE ALWAYS TRIGGER stmt_log;",
        t = q("t")
    );
    let schema = format!("CREATE SCHEMA {};", pgshift_sql::quote_ident(s));
    match shape {
        Shape::Plain => (
            format!("{schema} CREATE TABLE {} (id int);\n{triggers}", q("t")),
            vec![("t".into(), 1)],
        ),
        Shape::OneLevel => (
            format!(
                "{schema} CREATE TABLE {t} (id int) PARTITION BY RANGE (id);
                 CREATE TABLE {a} PARTITION OF {t} FOR VALUES FROM (0) TO (10);
                 CREATE TABLE {b} PARTITION OF {t} FOR VALUES FROM (10) TO (20);
                 {triggers} {stmt}",
                t = q("t"),
                a = q("t_a"),
                b = q("t_b")
            ),
            vec![("t_a".into(), 1), ("t_b".into(), 11)],
        ),
        Shape::TwoLevels => (
            format!(
                "{schema} CREATE TABLE {t} (id int) PARTITION BY RANGE (id);
                 CREATE TABLE {a} PARTITION OF {t} FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (id);
                 CREATE TABLE {a1} PARTITION OF {a} FOR VALUES FROM (0) TO (5);
                 CREATE TABLE {a2} PARTITION OF {a} FOR VALUES FROM (5) TO (10);
                 CREATE TABLE {b} PARTITION OF {t} FOR VALUES FROM (10) TO (20);
                 {triggers} {stmt}",
                t = q("t"),
                a = q("t_a"),
                a1 = q("t_a1"),
                a2 = q("t_a2"),
                b = q("t_b")
            ),
            vec![("t_a1".into(), 1), ("t_a2".into(), 6), ("t_b".into(), 11)],
        ),
        Shape::AttachedLater => (
            format!(
                "{schema} CREATE TABLE {t} (id int) PARTITION BY RANGE (id);
                 CREATE TABLE {a} PARTITION OF {t} FOR VALUES FROM (0) TO (10);
                 {triggers} {stmt}
                 CREATE TABLE {b} (id int);
                 ALTER TABLE {t} ATTACH PARTITION {b} FOR VALUES FROM (10) TO (20);
                 CREATE TABLE {c} PARTITION OF {t} FOR VALUES FROM (20) TO (30);",
                t = q("t"),
                a = q("t_a"),
                b = q("t_b"),
                c = q("t_c")
            ),
            vec![("t_a".into(), 1), ("t_b".into(), 11), ("t_c".into(), 21)],
        ),
    }
}

/// The change's SQL: `first` and `last` are the first and last partition holding rows.
fn change_sql(change: Change, scenario: &Scenario) -> Option<String> {
    let t = scenario.root().to_string();
    let first = scenario.name(&scenario.leaves[0].0).to_string();
    let last = scenario
        .name(&scenario.leaves[scenario.leaves.len() - 1].0)
        .to_string();
    let always = format!("ALTER TABLE {t} ENABLE ALWAYS TRIGGER guard;");
    let partitioned = scenario.partitioned();
    Some(match change {
        Change::None => String::new(),
        Change::AlwaysOnParent => always,
        Change::ReplicaOnOnePartition => {
            format!("{always} ALTER TABLE {first} ENABLE REPLICA TRIGGER guard;")
        }
        Change::DisabledOnOnePartition => {
            format!("{always} ALTER TABLE {last} DISABLE TRIGGER guard;")
        }
        Change::OnlyParentAlways if partitioned => {
            format!("ALTER TABLE ONLY {t} ENABLE ALWAYS TRIGGER guard;")
        }
        Change::CloneRemoved if partitioned => {
            // PostgreSQL refuses DROP TRIGGER on a clone; a superuser's catalog
            // edit (or damage from one) is how a partition comes to lack it. On two
            // levels the clone is removed from the sub-partitioned partition, so its
            // partitions lack it too.
            let holder = if scenario.shape == Shape::TwoLevels {
                scenario.name("t_a").to_string()
            } else {
                first
            };
            format!(
                "{always}
                 CREATE TEMP TABLE gone AS SELECT oid FROM pg_trigger
                  WHERE tgrelid = '{holder}'::regclass AND tgname = 'guard';
                 INSERT INTO gone SELECT oid FROM pg_trigger WHERE tgparentid IN (SELECT oid FROM gone);
                 DELETE FROM pg_depend WHERE classid = 'pg_trigger'::regclass
                   AND objid IN (SELECT oid FROM gone);
                 DELETE FROM pg_trigger WHERE oid IN (SELECT oid FROM gone);
                 DROP TABLE gone;"
            )
        }
        Change::PartitionOnlyTrigger if partitioned => format!(
            "{always} CREATE TRIGGER local_guard BEFORE INSERT ON {first} FOR EACH ROW EXECUTE FUNCTION public.log_fire();"
        ),
        Change::CloneRenamed if partitioned => {
            format!("ALTER TRIGGER guard ON {first} RENAME TO guard_renamed;")
        }
        _ => return None,
    })
}

fn scenarios(db: &str) -> Vec<Scenario> {
    let mut out = Vec::new();
    for shape in SHAPES {
        for change in CHANGES {
            let schema = format!("S {shape:?} {change:?}");
            let (sql, leaves) = shape_sql(shape, &schema);
            let mut scenario = Scenario {
                shape,
                change,
                schema,
                leaves,
                applied: true,
            };
            let Some(change_sql) = change_sql(change, &scenario) else {
                continue;
            };
            cluster().psql(db, &sql).expect("shape loads");
            if !change_sql.is_empty() {
                let result = cluster().psql(db, &change_sql);
                if change == Change::CloneRenamed {
                    // The server decides: PostgreSQL 15 refuses to rename a clone.
                    let version = cluster().version().major;
                    assert_eq!(
                        result.is_ok(),
                        version < 15,
                        "rename a clone on {version}: {result:?}"
                    );
                    scenario.applied = result.is_ok();
                } else {
                    result.expect("change applies");
                }
            }
            out.push(scenario);
        }
    }
    out
}

/// The triggers that fired for one INSERT of `value` into `target`, as
/// (trigger, table, level).
async fn fired(
    c: &Client,
    replica: bool,
    target: &QualifiedName,
    value: i32,
) -> BTreeSet<(String, String, String)> {
    c.batch_execute("TRUNCATE public.fired")
        .await
        .expect("truncate");
    let role = if replica { "replica" } else { "origin" };
    c.batch_execute(&format!("SET session_replication_role = {role}"))
        .await
        .expect("set role");
    c.execute(&format!("INSERT INTO {target} VALUES ($1)"), &[&value])
        .await
        .expect("insert");
    c.batch_execute("RESET session_replication_role")
        .await
        .expect("reset");
    let rows = c
        .query(
            "SELECT trigger, schema || '.' || tbl, level FROM public.fired",
            &[],
        )
        .await
        .expect("log");
    rows.iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// What the audit's inventory says fires for that INSERT: the row triggers of the
/// partition the row lands in and the statement triggers of the table the statement
/// names, in the session's mode.
fn expected(
    report: &Audit,
    replica: bool,
    target: &QualifiedName,
    leaf: &QualifiedName,
) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for table in &report.tables {
        let lands = &table.table == leaf;
        let named = &table.table == target;
        for t in &table.triggers {
            let fires = if replica {
                t.fires_in_replica
            } else {
                t.fires_in_origin
            };
            if fires && ((t.definition.row && lands) || (!t.definition.row && named)) {
                let level = if t.definition.row { "ROW" } else { "STATEMENT" };
                let name = format!(
                    "{}.{}",
                    table.table.schema.as_deref().unwrap_or(""),
                    table.table.name
                );
                out.insert((t.name.clone(), name, level.to_owned()));
            }
        }
    }
    out
}

/// The bypass kinds that make a trigger not fire in an ordinary (`false`) or
/// replica (`true`) session.
fn stops(kind: FindingKind, replica: bool) -> bool {
    match kind {
        FindingKind::MissingClone | FindingKind::Disabled => true,
        FindingKind::SkippedInReplica => replica,
        FindingKind::ReplicaOnly => !replica,
        _ => false,
    }
}

/// Writes every partition of every scenario, through the root and directly, in both
/// modes, and compares what fired with the audit.
async fn check_against_writes(db: &str, scenarios: &[Scenario], report: &Audit) {
    let c = client(db).await;
    for s in scenarios {
        let root = s.root();
        for (leaf, value) in &s.leaves {
            let leaf = s.name(leaf);
            for target in [&root, &leaf] {
                for replica in [false, true] {
                    let seen = fired(&c, replica, target, *value).await;
                    let want = expected(report, replica, target, &leaf);
                    assert_eq!(
                        seen, want,
                        "{:?}/{:?}: INSERT INTO {target} landing in {leaf}, replica = {replica}",
                        s.shape, s.change
                    );
                    // `guard` (by any name) not firing for this row must be a bypass
                    // finding that names this partition.
                    let guard_fired = seen
                        .iter()
                        .any(|(name, _, level)| name.starts_with("guard") && level == "ROW");
                    if !guard_fired {
                        assert!(
                            report.findings.iter().any(|f| f.bypass
                                && f.table == root
                                && f.trigger.as_deref() == Some("guard")
                                && f.relations.contains(&leaf)
                                && stops(f.kind, replica)),
                            "{:?}/{:?}: guard skipped on {leaf} (replica = {replica}) without a bypass finding: {:#?}",
                            s.shape,
                            s.change,
                            report.findings
                        );
                    }
                }
            }
        }
    }
}

/// The kinds the audit reports for a scenario's root.
fn kinds(report: &Audit, s: &Scenario) -> BTreeSet<FindingKind> {
    report
        .findings
        .iter()
        .filter(|f| f.table.schema.as_deref() == Some(s.schema.as_str()))
        .map(|f| f.kind)
        .collect()
}

/// Whether a partitioned table's own entry of `guard` is left in a state its fix
/// does not reach: `ONLY` the root made ALWAYS leaves a sub-partitioned partition's
/// clone ORIGIN; a renamed clone makes every fix per partition.
fn template_differs(s: &Scenario) -> bool {
    (s.change == Change::OnlyParentAlways && s.shape == Shape::TwoLevels)
        || (s.change == Change::CloneRenamed && s.applied)
}

/// What each change must make the audit say about `guard` (the catalog state set up).
fn check_kinds(report: &Audit, s: &Scenario) {
    let kinds = kinds(report, s);
    let guard_bypass: BTreeSet<FindingKind> = report
        .findings
        .iter()
        .filter(|f| f.table == s.root() && f.trigger.as_deref() == Some("guard") && f.bypass)
        .map(|f| f.kind)
        .collect();
    let want: &[FindingKind] = match s.change {
        Change::None => &[FindingKind::SkippedInReplica],
        Change::AlwaysOnParent | Change::PartitionOnlyTrigger => &[],
        Change::ReplicaOnOnePartition => &[FindingKind::ReplicaOnly],
        Change::DisabledOnOnePartition => &[FindingKind::Disabled],
        Change::OnlyParentAlways | Change::CloneRenamed if template_differs(s) => &[
            FindingKind::ParentStateDiffers,
            FindingKind::SkippedInReplica,
        ],
        Change::OnlyParentAlways | Change::CloneRenamed => &[FindingKind::SkippedInReplica],
        Change::CloneRemoved => &[FindingKind::MissingClone],
    };
    assert_eq!(
        guard_bypass,
        want.iter().copied().collect(),
        "{:?}/{:?}: {:#?}",
        s.shape,
        s.change,
        report.findings
    );
    // Every scenario has the deferred, ORIGIN-enabled `late_check`.
    assert!(kinds.contains(&FindingKind::DeferrableConstraintTrigger));
    assert_eq!(
        kinds.contains(&FindingKind::StatementTriggerOnParent),
        s.partitioned()
    );
    assert_eq!(
        kinds.contains(&FindingKind::PartitionOnlyTrigger),
        s.change == Change::PartitionOnlyTrigger
    );
    assert_eq!(
        kinds.contains(&FindingKind::CloneRenamed),
        s.change == Change::CloneRenamed && s.applied
    );
    assert_eq!(
        kinds.contains(&FindingKind::ParentStateDiffers),
        template_differs(s),
        "{:?}/{:?}",
        s.shape,
        s.change
    );
}

/// Under each partitioned table, a partition created now (in a transaction rolled
/// back) takes the state of that table's own entry, as the inventory says.
async fn check_new_partitions(db: &str, scenarios: &[Scenario], report: &Audit) {
    let c = client(db).await;
    for s in scenarios.iter().filter(|s| s.partitioned()) {
        for table in report.tables.iter().filter(|t| {
            t.table.schema.as_deref() == Some(&s.schema) && t.kind == TableKind::Partitioned
        }) {
            let Some(guard) = table
                .triggers
                .iter()
                .find(|t| t.name.starts_with("guard") && t.definition.row)
            else {
                continue;
            };
            c.batch_execute("BEGIN").await.expect("begin");
            let parent = &table.table;
            // No generated partition reaches 1000.
            let low = 1000;
            let new = QualifiedName::qualified(&s.schema, "t_new");
            c.batch_execute(&format!(
                "CREATE TABLE {new} PARTITION OF {parent} FOR VALUES FROM ({low}) TO ({})",
                low + 10
            ))
            .await
            .expect("new partition");
            let row = c
                .query_one(
                    "SELECT tgenabled::text FROM pg_trigger
                      WHERE tgrelid = $1::text::regclass AND tgparentid <> 0 AND tgname = $2",
                    &[&new.to_string(), &guard.name],
                )
                .await
                .expect("clone on the new partition");
            let state: String = row.get(0);
            c.batch_execute("ROLLBACK").await.expect("rollback");
            let want = serde_json::to_value(guard.enabled).expect("json");
            let letter = match want.as_str() {
                Some("origin") => "O",
                Some("always") => "A",
                Some("replica") => "R",
                _ => "D",
            };
            assert_eq!(
                state, letter,
                "{:?}/{:?}: new partition of {parent}",
                s.shape, s.change
            );
            if letter != "A" {
                assert!(
                    report
                        .findings
                        .iter()
                        .any(|f| f.bypass && f.table == s.root()),
                    "{:?}/{:?}: a new partition of {parent} would skip guard, unreported",
                    s.shape,
                    s.change
                );
            }
        }
    }
}

#[tokio::test]
async fn inv_au_1_audit_says_what_the_server_fires_on_generated_shapes() {
    let db = cluster().fresh_database("audit_shapes").expect("database");
    cluster().psql(&db, PRELUDE).expect("prelude");
    let scenarios = scenarios(&db);
    assert!(scenarios.len() >= 25, "{} scenarios", scenarios.len());

    // The read never waits for a relation lock: another session holds ACCESS
    // EXCLUSIVE on one root for the whole audit (the session's lock_timeout is 1 s).
    let holder = client(&db).await;
    holder
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
            scenarios[1].root()
        ))
        .await
        .expect("lock");
    let audited = session(&db).await;
    let report = audit(audited.client()).await.expect("audit");
    holder.batch_execute("ROLLBACK").await.expect("unlock");
    assert!(report.has_bypass());

    for s in &scenarios {
        check_kinds(&report, s);
    }
    check_against_writes(&db, &scenarios, &report).await;
    check_new_partitions(&db, &scenarios, &report).await;

    // The fixes, run on a copy, leave no bypass and every guard firing everywhere.
    drop((holder, audited));
    let copy = cluster().fresh_database("audit_fixed").expect("copy name");
    cluster()
        .psql(
            "postgres",
            &format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}';
                 DROP DATABASE \"{copy}\"; CREATE DATABASE \"{copy}\" TEMPLATE \"{db}\";"
            ),
        )
        .expect("copy");
    let fixes: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.bypass || f.kind == FindingKind::CloneRenamed)
        .flat_map(|f| f.fix.iter().cloned())
        .collect();
    assert!(!fixes.is_empty());
    cluster().psql(&copy, &fixes.join("\n")).expect("fixes run");
    let fixed_session = session(&copy).await;
    let fixed = audit(fixed_session.client())
        .await
        .expect("audit of the fixed copy");
    let left: Vec<_> = fixed.findings.iter().filter(|f| f.bypass).collect();
    assert!(left.is_empty(), "after the fixes: {left:#?}");
    check_against_writes(&copy, &scenarios, &fixed).await;
}

/// The relay schema (`workloads/relay/schema.sql`, the demo's): its five triggers on
/// `events` are ORIGIN-enabled, so the demo's replica-role writer skips all five on
/// every partition; the audit says so, and its fix makes the server fire them.
#[tokio::test]
async fn relay_schema_audit_finds_the_five_origin_triggers_the_replica_writer_skips() {
    let db = cluster().fresh_database("audit_relay").expect("database");
    let schema =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/relay/schema.sql");
    cluster().psql_file(&db, &schema).expect("relay schema");
    let s = session(&db).await;
    let report = audit(s.client()).await.expect("audit");
    let events = QualifiedName::qualified("public", "events");
    let skipped: BTreeSet<&str> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::SkippedInReplica && f.table == events)
        .inspect(|f| assert_eq!(f.relations.len(), 8, "{f:#?}"))
        .filter_map(|f| f.trigger.as_deref())
        .collect();
    let five = [
        "events_channel_ttl_refresh",
        "events_created_at_floor_guard",
        "events_outbox_enqueue",
        "events_replay_skipper",
        "events_soft_delete_purge",
    ];
    assert_eq!(skipped, five.into_iter().collect());
    let other_bypasses: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.bypass && f.kind != FindingKind::SkippedInReplica)
        .collect();
    assert!(other_bypasses.is_empty(), "{other_bypasses:#?}");
    let deferred = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::DeferrableConstraintTrigger)
        .count();
    assert_eq!(deferred, 2);
    assert!(report
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::ForeignKeysSkippedInReplica && f.table == events));

    // The server: a direct message written by a replica session is not enqueued.
    let c = client(&db).await;
    c.batch_execute(
        "INSERT INTO communities (id, host) VALUES ('00000000-0000-0000-0000-000000000001', 'a.example');",
    )
    .await
    .expect("community");
    let write = |n: u8| {
        format!(
            "INSERT INTO events (community_id, id, pubkey, created_at, kind, content)
             VALUES ('00000000-0000-0000-0000-000000000001', '\\x{n:02x}', '\\x00', '2026-10-05 00:00:00+00', 4, 'dm')"
        )
    };
    c.batch_execute(&format!(
        "SET session_replication_role = replica; {}; RESET session_replication_role",
        write(1)
    ))
    .await
    .expect("replica write");
    assert_eq!(
        enqueued(&c).await,
        0,
        "the replica write skipped the outbox trigger"
    );

    let fixes: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.bypass)
        .flat_map(|f| f.fix.clone())
        .collect();
    c.batch_execute(&fixes.join("\n")).await.expect("fixes");
    let fixed = audit(s.client()).await.expect("audit again");
    assert!(!fixed.has_bypass(), "{:#?}", fixed.findings);
    c.batch_execute(&format!(
        "SET session_replication_role = replica; {}; RESET session_replication_role",
        write(2)
    ))
    .await
    .expect("replica write");
    assert_eq!(
        enqueued(&c).await,
        1,
        "after ENABLE ALWAYS the replica write is enqueued"
    );
}

async fn enqueued(c: &Client) -> i64 {
    let row = c
        .query_one("SELECT count(*) FROM event_outbox", &[])
        .await
        .expect("count");
    row.get(0)
}

/// `docs/AUDIT.md` lists every finding kind, each under "Bypasses" exactly when it
/// counts as one (and so makes `audit` exit 2).
#[test]
fn audit_docs_list_every_kind_in_its_class() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/AUDIT.md");
    let text = std::fs::read_to_string(path).expect("docs/AUDIT.md");
    let mut section = "";
    let mut listed = Vec::new();
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            section = heading;
        }
        if let Some(rest) = line.strip_prefix("| `") {
            let code = rest.split('`').next().unwrap_or("").to_owned();
            listed.push((code, section.starts_with("Bypasses")));
        }
    }
    let want: Vec<(String, bool)> = FindingKind::ALL
        .iter()
        .map(|k| (k.code().to_owned(), k.is_bypass()))
        .collect();
    assert_eq!(listed, want, "docs/AUDIT.md, in FindingKind::ALL order");
    for kind in FindingKind::ALL {
        let json = serde_json::to_value(kind).expect("json");
        assert_eq!(json, kind.code(), "the JSON code is the documented one");
    }
}
