//! Procedural code through the engine, decided by its trace on a throwaway clone
//! (`pgshift::procedural`): the relay's hidden rewrite (a `DO` block that drops and
//! re-adds the stored generated column of the partitioned `events` with `EXECUTE
//! format(…)`, from the expression it reads out of `pg_attrdef`) runs online through
//! copy-and-swap via `apply` and `migrate`, and ends as a native run of the same block
//! on a `TEMPLATE` clone ends; a catalog-only block runs natively; a data-dependent
//! rewrite is guarded (PC-5) on a table with rows and applies on an empty one; the escape
//! hatch is reported. Every test checks that the clone is gone afterwards.

mod common;

use common::cas::{clone_database, identity, options as cas_options, spec, value, LockHolder};
use common::*;
use pgshift::cas::Mode;
use pgshift::exec::{
    apply, ApplyOptions, ApplyVerdict, CasSettings, NoProgress, Outcome, Sessions, TokioSleeper,
};
use pgshift::migrate::MigrateOutcome;
use pgshift::plan::{plan_with, Plan, PlanInput, PlanOptions};
use pgshift::procedural::{AllowProcedural, ProceduralOptions};
use pgshift::refusal::RefusalCause;
use pgshift::route::Route;
use pgshift::script::TransactionMode;

/// One trace at a time in this binary, so that the count of cluster directories
/// before and after each is this test's own.
static CLONES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The relay's hidden rewrite: the stored generated column is dropped and added back
/// from the expression the block reads out of the catalog, with `kind` widened between.
const HIDDEN_REWRITE: &str = "DO $$
DECLARE
    expr text;
BEGIN
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO expr
      FROM pg_attrdef d
      JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
     WHERE a.attrelid = 'events'::regclass AND a.attname = 'search_tsv';
    ALTER TABLE events DROP COLUMN search_tsv;
    ALTER TABLE events ALTER COLUMN kind TYPE bigint;
    EXECUTE format('ALTER TABLE events ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (%s) STORED', expr);
END
$$;";

fn procedural(db: &str, allow: &[&str]) -> ProceduralOptions {
    ProceduralOptions {
        conninfo: cluster().connection_string(db),
        allow: allow
            .iter()
            .map(|a| AllowProcedural::parse(a).expect("valid"))
            .collect(),
    }
}

async fn planned(db: &str, sql: &str, allow: &[&str]) -> Plan {
    let session = session(db).await;
    plan_with(
        &session,
        vec![PlanInput {
            path: "<test>".to_owned(),
            statements: pgshift_sql::parse(sql).expect("valid SQL"),
        }],
        TransactionMode::Statement,
        &PlanOptions {
            max_table_size: None,
            disk_room: None,
            allow_blocking: Vec::new(),
            procedural: Some(procedural(db, allow)),
        },
    )
    .await
    .expect("plans")
}

/// Plans `sql` with tracing and applies it (copy-and-swap available).
async fn traced_apply(db: &str, sql: &str, allow: &[&str]) -> (Plan, ApplyVerdict) {
    let plan = planned(db, sql, allow).await;
    let session = session(db).await;
    let monitor = session_for(db).await;
    let sessions = Sessions {
        main: session.client(),
        monitor: Some(monitor.client()),
        user_search_path: session.user_search_path(),
    };
    let options = ApplyOptions {
        max_table_size: None,
        budgets: TEST_BUDGETS,
        allow_blocking: Vec::new(),
        copy_and_swap: Some(CasSettings {
            spec: spec(db),
            options: cas_options(Mode::Live),
            standbys: Vec::new(),
        }),
    };
    let verdict = apply(
        &sessions,
        &plan.files[0].script,
        &options,
        &TokioSleeper,
        &mut NoProgress,
    )
    .await;
    (plan, verdict)
}

async fn session_for(db: &str) -> pgshift::connect::Session {
    session(db).await
}

/// Every row of `events`, in key order, as text.
fn rows(db: &str) -> String {
    value(
        db,
        "SELECT md5(string_agg(e::text, E'\\n' ORDER BY community_id, created_at, id)) FROM events e",
    )
}

/// The identity of `events` without lines naming OIDs the two sides cannot share.
fn shape(db: &str) -> Vec<String> {
    let mut lines: Vec<String> = identity(db, "events").lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_2_the_relays_hidden_rewrite_runs_online_through_copy_and_swap_via_apply() {
    let _one = CLONES.lock().await;
    let db = relay_database("proc_hidden");
    let native = clone_database(&db, "native");
    cluster()
        .psql(&native, HIDDEN_REWRITE)
        .expect("the block runs natively");
    let dirs = cluster_dirs();

    let (plan, verdict) = traced_apply(&db, HIDDEN_REWRITE, &[]).await;
    assert_eq!(cluster_dirs(), dirs, "the clone is removed");

    let file = &plan.files[0];
    let procedural = &file.procedural;
    assert_eq!(procedural.len(), 1, "{procedural:#?}");
    let block = &procedural[0];
    assert_eq!(block.decision, "expanded", "{block:#?}");
    let executed = block.executed.as_ref().expect("logged");
    assert_eq!(executed.len(), 3, "{executed:#?}");
    assert!(
        executed[2]
            .starts_with("ALTER TABLE events ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (")
            && executed[2].contains("to_tsvector('simple'::regconfig, content)"),
        "the EXECUTE's string, as it ran: {executed:#?}"
    );
    assert!(
        !block.rewrites.is_empty(),
        "the clone saw the rewrite: {block:#?}"
    );
    assert_eq!(
        block.expanded.len(),
        1,
        "combined into one ALTER TABLE: {block:#?}"
    );
    assert_eq!(file.script.statements.len(), 1);
    let expanded = &file.script.statements[0];
    assert!(
        expanded.statement.text.starts_with("ALTER TABLE events DROP search_tsv, ALTER COLUMN kind TYPE bigint, ADD COLUMN search_tsv"),
        "{}",
        expanded.statement.text
    );
    assert_eq!(expanded.classification.route, Route::CopyAndSwap);
    assert!(
        expanded.classification.reasons.iter().any(|r| r
            .contains("expanded from the procedural statement at line 1")
            && r.contains("traced: locks")),
        "{:#?}",
        expanded.classification.reasons
    );

    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    assert!(verdict.units[0].copy_and_swap.is_some(), "{verdict:#?}");
    assert_eq!(value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'kind'"), "bigint");
    // PostgreSQL is the oracle: the same rows and the same table as the native run.
    assert_eq!(rows(&db), rows(&native), "rows equal the native run's");
    let (ours, theirs) = (shape(&db), shape(&native));
    let missing: Vec<&String> = theirs.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<&String> = ours.iter().filter(|l| !theirs.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the catalog equals the native run's\nmissing: {missing:#?}\nextra: {extra:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hidden_rewrite_runs_through_copy_and_swap_via_migrate() {
    let _one = CLONES.lock().await;
    let db = relay_database("proc_migrate");
    let dir = temp_dir("proc_migrate");
    std::fs::write(dir.join("0001_events_kind_bigint_do.sql"), HIDDEN_REWRITE).expect("write");
    let dirs = cluster_dirs();
    let mut options = migrate_options();
    options.apply.copy_and_swap = Some(CasSettings {
        spec: spec(&db),
        options: cas_options(Mode::Live),
        standbys: Vec::new(),
    });
    options.procedural = Some(procedural(&db, &[]));
    let verdict = run_migrate(&db, &dir, &options).await.expect("runs");
    assert_eq!(cluster_dirs(), dirs, "the clone is removed");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    let file = &verdict.files[0];
    assert_eq!(file.procedural[0].decision, "expanded", "{file:#?}");
    let ran = file.verdict.as_ref().expect("ran");
    assert!(ran.units[0].copy_and_swap.is_some(), "{ran:#?}");
    assert_eq!(value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'kind'"), "bigint");
    assert_eq!(
        value(&db, "SELECT count(*) FROM events WHERE search_tsv IS DISTINCT FROM CASE WHEN kind IN (1, 30023) THEN to_tsvector('simple', content) END"),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_1_catalog_only_and_read_only_blocks_run_natively() {
    let _one = CLONES.lock().await;
    let db = relay_database("proc_native");
    let dirs = cluster_dirs();
    let sql = "DO $$
DECLARE part regclass;
BEGIN
    FOR part IN SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'events'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0.02)', part);
    END LOOP;
END $$;
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM events WHERE kind < 0) THEN RAISE EXCEPTION 'negative kinds'; END IF;
END $$;";
    let (plan, verdict) = traced_apply(&db, sql, &[]).await;
    assert_eq!(cluster_dirs(), dirs, "the clone is removed");
    let decisions: Vec<&str> = plan.files[0]
        .procedural
        .iter()
        .map(|p| p.decision)
        .collect();
    assert_eq!(
        decisions,
        ["native", "native"],
        "{:#?}",
        plan.files[0].procedural
    );
    let first = &plan.files[0].procedural[0];
    assert!(
        first
            .locks
            .iter()
            .flatten()
            .any(|l| l.mode.sql_name() == "SHARE UPDATE EXCLUSIVE"),
        "the observed locks are reported: {first:#?}"
    );
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    assert_eq!(
        value(&db, "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass AND NOT c.reloptions @> ARRAY['autovacuum_vacuum_scale_factor=0.02']"),
        "0",
        "every partition got the option"
    );
}

/// A database with `schema` whose `items` holds 1,000 rows.
fn with_rows(prefix: &str, schema: &str) -> String {
    let db = database(prefix, schema);
    cluster()
        .psql(
            &db,
            "INSERT INTO items SELECT g, g FROM generate_series(1, 1000) g",
        )
        .expect("rows");
    db
}

const DATA_DEPENDENT: &str = "DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM items LIMIT 1) THEN
        ALTER TABLE items ALTER COLUMN qty TYPE bigint;
    END IF;
END $$;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_3_a_data_dependent_rewrite_is_guarded_on_a_table_with_rows_and_applies_on_an_empty_one(
) {
    let _one = CLONES.lock().await;
    let schema = "CREATE TABLE items (id bigint PRIMARY KEY, qty int)";
    let full = with_rows("proc_rows", schema);
    let dirs = cluster_dirs();
    let (plan, verdict) = traced_apply(&full, DATA_DEPENDENT, &[]).await;
    assert_eq!(cluster_dirs(), dirs, "the clone is removed");
    let block = &plan.files[0].procedural[0];
    // PC-3 alone would refuse it; PC-5 runs it read-only on live first, where it
    // executes nothing (tests/exec_procedural_guard.rs has the other outcomes).
    assert_eq!(block.decision, "guarded", "{block:#?}");
    assert!(
        block
            .why
            .contains("ALTER TABLE items ALTER COLUMN qty TYPE bigint"),
        "the traced statements are in the reasons: {}",
        block.why
    );
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    assert_eq!(
        value(&full, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "integer",
        "the live table with rows is not rewritten"
    );

    let empty = database("proc_empty", schema);
    let (plan, verdict) = traced_apply(&empty, DATA_DEPENDENT, &[]).await;
    assert_eq!(
        plan.files[0].procedural[0].decision, "native",
        "{:#?}",
        plan.files[0].procedural
    );
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    assert_eq!(
        value(&empty, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "bigint",
        "a fresh, empty database gets the change"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_4_the_escape_hatch_runs_procedural_code_as_written_and_says_so() {
    let _one = CLONES.lock().await;
    let db = database(
        "proc_allow",
        "CREATE TABLE items (id bigint PRIMARY KEY, qty int); INSERT INTO items VALUES (1, 1);",
    );
    let (plan, verdict) = traced_apply(&db, DATA_DEPENDENT, &["<test>:1"]).await;
    assert_eq!(plan.files[0].procedural[0].decision, "accepted");
    assert_eq!(verdict.outcome, Outcome::DoneWithBlocking, "{verdict:#?}");
    assert!(verdict.units[0].unit.accepted_blocking);
    // The block took its live path: the table has rows, so nothing was rewritten.
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'qty'"),
        "integer"
    );
    // A value that names nothing procedural is not accepted silently.
    let statements = pgshift_sql::parse(DATA_DEPENDENT).expect("parses");
    let allow = [
        AllowProcedural::parse("<test>:2").expect("valid"),
        AllowProcedural::parse("other.sql").expect("valid"),
        AllowProcedural::parse("<test>").expect("valid"),
    ];
    let unmatched = pgshift::procedural::unmatched(&allow, &[("<test>", statements.as_slice())]);
    assert_eq!(unmatched, vec![&allow[0], &allow[1]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_that_fails_on_the_clone_is_refused_and_the_clone_removed() {
    let _one = CLONES.lock().await;
    let db = database("proc_fails", "CREATE TABLE items (id bigint PRIMARY KEY)");
    let dirs = cluster_dirs();
    let (plan, verdict) = traced_apply(
        &db,
        "DO $$ BEGIN EXECUTE 'ALTER TABLE no_such_table ADD COLUMN x int'; END $$;",
        &[],
    )
    .await;
    assert_eq!(cluster_dirs(), dirs, "the clone is removed after a failure");
    let block = &plan.files[0].procedural[0];
    assert_eq!(block.decision, "refused");
    let refusal = block.refusal.as_ref().expect("refused");
    assert_eq!(refusal.cause, RefusalCause::ProceduralFailedOnClone);
    assert!(
        refusal.message.contains("no_such_table"),
        "{}",
        refusal.message
    );
    assert_eq!(verdict.outcome, Outcome::Refused);
}

/// The index definitions of `items`, sorted.
fn item_indexes(db: &str) -> String {
    value(
        db,
        "SELECT string_agg(indexdef, E'\\n' ORDER BY indexdef) FROM pg_indexes WHERE tablename = 'items'",
    )
}

const ADD_QTY_INDEX: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int);
    CREATE FUNCTION add_qty_index(t text) RETURNS void LANGUAGE plpgsql AS $f$
    BEGIN EXECUTE format('CREATE INDEX ON %I (qty)', t); END $f$;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_2_a_select_of_a_function_that_runs_ddl_is_expanded_and_each_statement_runs_by_its_route(
) {
    let _one = CLONES.lock().await;
    let sql = "SELECT add_qty_index('items');";
    let full = with_rows("proc_fn_rows", ADD_QTY_INDEX);
    let native = clone_database(&full, "native");
    cluster()
        .psql(&native, sql)
        .expect("the call runs natively");
    let dirs = cluster_dirs();
    let (plan, verdict) = traced_apply(&full, sql, &[]).await;
    assert_eq!(cluster_dirs(), dirs, "the clone is removed");
    let call = &plan.files[0].procedural[0];
    assert_eq!(call.decision, "expanded", "{call:#?}");
    assert_eq!(
        call.executed.as_deref(),
        Some(&["CREATE INDEX ON items (qty)".to_owned()][..]),
        "the function's EXECUTE is logged: {call:#?}"
    );
    assert!(
        call.functions
            .iter()
            .flatten()
            .any(|f| f.name.name == "add_qty_index" && f.not_logged.is_none()),
        "{call:#?}"
    );
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    assert_eq!(
        item_indexes(&full),
        item_indexes(&native),
        "same catalog as a native run"
    );
    assert_eq!(
        value(&full, "SELECT count(*) FROM items"),
        value(&native, "SELECT count(*) FROM items")
    );
    assert_eq!(
        value(
            &full,
            "SELECT count(*) FROM pg_index WHERE indrelid = 'items'::regclass AND NOT indisvalid"
        ),
        "0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_function_calls_are_logged_and_expanded() {
    let _one = CLONES.lock().await;
    let schema = format!(
        "{ADD_QTY_INDEX}
        CREATE FUNCTION outer_fn(t text) RETURNS void LANGUAGE plpgsql AS $f$
        BEGIN PERFORM add_qty_index(t); END $f$;"
    );
    let sql = "SELECT outer_fn('items');";
    let full = with_rows("proc_fn_nested", &schema);
    let native = clone_database(&full, "native");
    cluster()
        .psql(&native, sql)
        .expect("the call runs natively");
    let (plan, verdict) = traced_apply(&full, sql, &[]).await;
    let call = &plan.files[0].procedural[0];
    assert_eq!(call.decision, "expanded", "{call:#?}");
    assert_eq!(call.functions.as_ref().map(Vec::len), Some(2), "{call:#?}");
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    assert_eq!(item_indexes(&full), item_indexes(&native));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_whose_control_flow_reads_table_data_is_not_expanded() {
    let _one = CLONES.lock().await;
    let schema = "CREATE TABLE items (id bigint PRIMARY KEY, qty int);
        CREATE FUNCTION maybe_index(t text) RETURNS void LANGUAGE plpgsql AS $f$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM items WHERE qty > 5000) THEN
                EXECUTE format('CREATE INDEX ON %I (qty)', t);
            END IF;
        END $f$;";
    let full = with_rows("proc_fn_reads", schema);
    let (plan, verdict) = traced_apply(&full, "SELECT maybe_index('items');", &[]).await;
    let call = &plan.files[0].procedural[0];
    assert_eq!(call.decision, "refused", "{call:#?}");
    assert!(call.reads.iter().any(|r| r.name == "items"), "{call:#?}");
    assert_eq!(verdict.outcome, Outcome::Refused);
    assert_eq!(
        value(
            &full,
            "SELECT count(*) FROM pg_index WHERE indrelid = 'items'::regclass"
        ),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_with_an_unloggable_construct_is_not_expanded_and_says_why() {
    let _one = CLONES.lock().await;
    let schema = format!(
        "{ADD_QTY_INDEX}
        CREATE FUNCTION wrap() RETURNS void LANGUAGE sql AS $f$ CREATE INDEX ON items (qty) $f$;"
    );
    let full = with_rows("proc_fn_sql", &schema);
    let (plan, verdict) = traced_apply(&full, "SELECT wrap();", &[]).await;
    let call = &plan.files[0].procedural[0];
    assert_eq!(call.decision, "refused", "{call:#?}");
    let why = call.not_logged.as_deref().unwrap_or_default();
    assert!(
        why.contains("wrap") && why.contains("LANGUAGE sql"),
        "{call:#?}"
    );
    assert_eq!(verdict.outcome, Outcome::Refused);

    let empty = database("proc_fn_sql_empty", &schema);
    let (plan, verdict) = traced_apply(&empty, "SELECT wrap();", &[]).await;
    assert_eq!(plan.files[0].procedural[0].decision, "native");
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
}

/// A function that takes ACCESS EXCLUSIVE, called through `SELECT` (which states no
/// lock statically), runs natively on an empty table: its unit must be stated with the
/// lock the trace saw and bounded by `lock_timeout` (300 ms here), not by the budget of
/// locks that block nobody (30 s here). Found by the relay's migrate under load: 0037
/// waited ~7 s behind a reader with `--lock-timeout-ms 500`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_1_a_function_run_natively_waits_no_longer_than_the_budget_of_what_it_locks() {
    let _one = CLONES.lock().await;
    let schema = "CREATE TABLE notes (id bigint PRIMARY KEY);
        CREATE FUNCTION add_body(t text) RETURNS void LANGUAGE plpgsql AS $f$
        BEGIN
            -- Reads table data, so it is not expanded (PC-3): natively on an empty table.
            IF (SELECT count(*) FROM notes) = 0 THEN
                EXECUTE format('ALTER TABLE %I ADD COLUMN body text', t);
            END IF;
        END $f$;";
    let db = database("proc_fn_budget", schema);
    let sql = "SELECT add_body('notes');";
    let plan = planned(&db, sql, &[]).await;
    assert_eq!(plan.files[0].procedural[0].decision, "native");
    let stated = plan.files[0]
        .schedule
        .items
        .iter()
        .find_map(|item| match item {
            pgshift::exec::schedule::Scheduled::Unit { unit } => unit.strongest_lock(),
            _ => None,
        });
    assert_eq!(
        stated,
        Some(pgshift::lock::LockMode::AccessExclusive),
        "the unit states the lock the trace saw"
    );

    // A reader keeps ACCESS SHARE on the table for the whole apply.
    let reader = LockHolder::hold(&db, "BEGIN; SELECT count(*) FROM notes");
    let (_, verdict) = traced_apply(&db, sql, &[]).await;
    reader.release();
    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:#?}");
    let report = verdict.units[0].report.as_ref().expect("the unit ran");
    assert_eq!(report.attempts.len(), TEST_BUDGETS.max_attempts as usize);
    for attempt in &report.attempts {
        assert_eq!(attempt.outcome, "lock-timeout", "{attempt:?}");
        assert!(
            attempt.elapsed_us < TEST_BUDGETS.weak_lock_timeout_ms * 1_000 / 2,
            "each attempt gave up at the lock budget, not the weak-lock budget: {attempt:?}"
        );
    }
    assert_eq!(
        value(
            &db,
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'notes'::regclass AND attname = 'body'"
        ),
        "0"
    );
}
