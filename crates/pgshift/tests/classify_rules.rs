//! Classifier rules, hermetic: offline worst cases, and how facts (declared here, as a
//! server would report them) refine routes.

use pgshift::catalog::{CatalogSnapshot, DeclaredSchema};
use pgshift::classify::{classify, Classification, Context, WorkClass};
use pgshift::refusal::RefusalCause;
use pgshift::route::Route;
use pgshift_sql::QualifiedName;

fn offline(sql: &str) -> Classification {
    let statements = pgshift_sql::parse(sql).expect("valid SQL");
    classify(&statements[0], &Context::default())
}

/// Facts for `schema_sql` as a live server at `version_num` would give them: names not
/// declared are missing.
fn live_facts(schema_sql: &str, missing: &[&str]) -> CatalogSnapshot {
    let mut schema = DeclaredSchema::new();
    schema.absorb(&pgshift_sql::parse(schema_sql).expect("valid schema"));
    let mut snapshot = schema.snapshot();
    snapshot.server.version_num = 150_004;
    snapshot.server.version = "15.4".to_owned();
    for name in missing {
        snapshot
            .resolutions
            .push((QualifiedName::bare(*name), None));
    }
    snapshot
}

fn with_facts(sql: &str, facts: &CatalogSnapshot, version_num: i32) -> Classification {
    let statements = pgshift_sql::parse(sql).expect("valid SQL");
    let context = Context {
        facts: Some(facts),
        server_version_num: Some(version_num),
        ..Context::default()
    };
    classify(&statements[0], &context)
}

fn cause(classification: &Classification) -> Option<RefusalCause> {
    classification.route.refusal().map(|refusal| refusal.cause)
}

fn steps(classification: &Classification) -> Vec<String> {
    match &classification.route {
        Route::NativeSequence { steps } => steps.iter().map(|s| s.sql.clone()).collect(),
        other => panic!("expected a native sequence, got {}", other.name()),
    }
}

const SCHEMA: &str = "
CREATE TABLE communities (id uuid PRIMARY KEY, display_name varchar(100), name text NOT NULL);
CREATE TABLE events (community_id uuid, id bytea, created_at timestamptz, kind int,
  PRIMARY KEY (community_id, created_at, id)) PARTITION BY RANGE (created_at);
CREATE TABLE events_a PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2026-07-01');
CREATE TABLE events_b PARTITION OF events FOR VALUES FROM ('2026-07-01') TO ('2027-01-01');
CREATE TABLE with_default (id int PRIMARY KEY, k int) PARTITION BY LIST (k);
CREATE TABLE with_default_1 PARTITION OF with_default FOR VALUES IN (1);
CREATE TABLE with_default_other PARTITION OF with_default DEFAULT;
CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY, v int);
CREATE TABLE keyless (v int, w int);
";

#[test]
fn inv_co_3_offline_classification_assumes_the_worst() {
    let widen = offline("ALTER TABLE communities ALTER COLUMN display_name TYPE varchar(200)");
    assert_eq!(widen.work, WorkClass::Rewrite);
    assert_eq!(widen.route, Route::CopyAndSwap);
    assert!(
        widen.reasons.iter().any(|r| r.contains("offline")),
        "{:?}",
        widen.reasons
    );

    let unknown_default = offline("ALTER TABLE t ADD COLUMN x int DEFAULT my_func()");
    assert_eq!(unknown_default.work, WorkClass::Rewrite);

    let index = offline("CREATE INDEX i ON t (a)");
    assert!(index
        .reasons
        .iter()
        .any(|r| r.contains("assumed not partitioned")));

    let pk = offline("ALTER TABLE t ADD PRIMARY KEY (a)");
    let pk_steps = steps(&pk);
    assert!(
        pk_steps[0].contains("CHECK (\"a\" IS NOT NULL) NOT VALID"),
        "{pk_steps:?}"
    );
}

#[test]
fn binary_coercible_type_change_is_catalog_only_with_facts() {
    let facts = live_facts(SCHEMA, &[]);
    let widen = with_facts(
        "ALTER TABLE communities ALTER COLUMN display_name TYPE varchar(200)",
        &facts,
        150_004,
    );
    assert_eq!(widen.work, WorkClass::CatalogOnly);
    assert_eq!(widen.route, Route::Native);
    let narrow = with_facts(
        "ALTER TABLE communities ALTER COLUMN display_name TYPE varchar(50)",
        &facts,
        150_004,
    );
    assert_eq!(narrow.route, Route::CopyAndSwap);
}

#[test]
fn index_on_a_partitioned_parent_goes_partition_by_partition() {
    let facts = live_facts(SCHEMA, &[]);
    for sql in [
        "CREATE INDEX events_kind_idx ON events (kind)",
        "CREATE INDEX CONCURRENTLY events_kind_idx ON events (kind)",
    ] {
        let c = with_facts(sql, &facts, 150_004);
        let sqls = steps(&c);
        assert_eq!(sqls.len(), 5, "{sqls:?}");
        assert!(sqls[0].contains("ON ONLY events"), "{sqls:?}");
        assert!(
            sqls[1].starts_with("CREATE INDEX CONCURRENTLY events_a_kind_idx ON events_a"),
            "{sqls:?}"
        );
        assert_eq!(
            sqls[2],
            "ALTER INDEX \"events_kind_idx\" ATTACH PARTITION \"events_a_kind_idx\""
        );
        assert!(sqls[3].contains("ON events_b"), "{sqls:?}");
    }
}

#[test]
fn missing_tables_and_columns_are_refused_with_facts() {
    let facts = live_facts(SCHEMA, &["nowhere"]);
    let c = with_facts("ALTER TABLE nowhere ADD COLUMN x int", &facts, 150_004);
    assert_eq!(cause(&c), Some(RefusalCause::TableMissing));
    let c = with_facts(
        "ALTER TABLE communities ALTER COLUMN nope SET NOT NULL",
        &facts,
        150_004,
    );
    assert_eq!(cause(&c), Some(RefusalCause::ColumnMissing));
    let c = with_facts("CREATE INDEX i ON nowhere (a)", &facts, 150_004);
    assert_eq!(cause(&c), Some(RefusalCause::TableMissing));
}

#[test]
fn declared_facts_never_prove_absence() {
    let mut schema = DeclaredSchema::new();
    schema.absorb(&pgshift_sql::parse(SCHEMA).expect("valid"));
    let declared = schema.snapshot();
    let c = with_facts(
        "ALTER TABLE communities ALTER COLUMN nope SET NOT NULL",
        &declared,
        150_004,
    );
    assert_eq!(cause(&c), None);
    assert_eq!(c.work, WorkClass::ScanUnderLock);
}

#[test]
fn not_null_already_holding_needs_no_scan() {
    let facts = live_facts(SCHEMA, &[]);
    let c = with_facts(
        "ALTER TABLE communities ALTER COLUMN name SET NOT NULL",
        &facts,
        150_004,
    );
    assert_eq!(c.work, WorkClass::CatalogOnly);
    assert_eq!(c.route, Route::Native);
}

#[test]
fn detach_concurrently_is_refused_beside_a_default_partition() {
    let facts = live_facts(SCHEMA, &[]);
    let c = with_facts(
        "ALTER TABLE with_default DETACH PARTITION with_default_1 CONCURRENTLY",
        &facts,
        150_004,
    );
    assert_eq!(cause(&c), Some(RefusalCause::DetachConcurrentlyWithDefault));
    let plain = with_facts(
        "ALTER TABLE with_default DETACH PARTITION with_default_1",
        &facts,
        150_004,
    );
    assert_eq!(
        plain.route,
        Route::Native,
        "no CONCURRENTLY form is possible here"
    );
    let events = with_facts(
        "ALTER TABLE events DETACH PARTITION events_a",
        &facts,
        150_004,
    );
    assert!(steps(&events)[0].ends_with("CONCURRENTLY"));
}

#[test]
fn copy_and_swap_needs_a_permanent_table_with_a_key() {
    let facts = live_facts(SCHEMA, &[]);
    let c = with_facts(
        "ALTER TABLE scratch ALTER COLUMN v TYPE bigint",
        &facts,
        150_004,
    );
    assert_eq!(cause(&c), Some(RefusalCause::NonPermanentTable));
    let c = with_facts(
        "ALTER TABLE keyless ALTER COLUMN v TYPE bigint",
        &facts,
        150_004,
    );
    assert_eq!(cause(&c), Some(RefusalCause::NoUsableKey));
}

#[test]
fn version_specific_forms_are_refused_on_older_servers() {
    let facts = live_facts(SCHEMA, &[]);
    let c = with_facts(
        "ALTER TABLE communities ADD COLUMN v int GENERATED ALWAYS AS (1) VIRTUAL",
        &facts,
        170_000,
    );
    assert_eq!(cause(&c), Some(RefusalCause::ServerTooOld));
    let c = with_facts(
        "ALTER TABLE communities ALTER COLUMN name SET EXPRESSION AS ('x')",
        &facts,
        160_000,
    );
    assert_eq!(cause(&c), Some(RefusalCause::ServerTooOld));
}

#[test]
fn inv_rf_2_unclassified_and_opaque_statements_are_refused() {
    assert_eq!(
        cause(&offline("DO $$ BEGIN END $$")),
        Some(RefusalCause::OpaqueProceduralCode)
    );
    assert_eq!(
        cause(&offline("CALL p()")),
        Some(RefusalCause::OpaqueProceduralCode)
    );
    assert_eq!(
        cause(&offline("LISTEN relay")),
        Some(RefusalCause::UnclassifiedStatement)
    );
    assert_eq!(
        cause(&offline("CREATE DATABASE x")),
        Some(RefusalCause::UnclassifiedStatement)
    );
    assert_eq!(
        cause(&offline("PREPARE TRANSACTION 'x'")),
        Some(RefusalCause::TwoPhaseCommit)
    );
}

#[test]
fn concurrently_inside_a_transaction_block_is_refused() {
    let statements = pgshift_sql::parse("CREATE INDEX CONCURRENTLY i ON t (a)").expect("valid");
    let context = Context {
        in_transaction: true,
        ..Context::default()
    };
    let c = classify(&statements[0], &context);
    assert_eq!(cause(&c), Some(RefusalCause::NotAllowedInTransaction));
}

#[test]
fn the_altered_table_is_the_first_lock_even_when_a_subcommand_references_another() {
    // Copy-and-swap takes its table from the first lock: a foreign key's referenced
    // table must not come first.
    for sql in [
        "ALTER TABLE plain ADD COLUMN x bigint DEFAULT (random() * 10)::bigint REFERENCES outbox (id)",
        "ALTER TABLE plain ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES outbox (id), ALTER COLUMN b TYPE bigint",
    ] {
        let c = offline(sql);
        assert_eq!(c.route, Route::CopyAndSwap, "{sql}");
        assert_eq!(
            c.locks.first().map(|l| l.relation.clone()),
            Some(QualifiedName::bare("plain")),
            "{sql}: {:?}",
            c.locks
        );
    }
}
