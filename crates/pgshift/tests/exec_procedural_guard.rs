//! PC-5, the run-time guard of data-dependent procedural code, against a real
//! server: a logged `DO` block that PC-3 would refuse (its trace on the empty clone
//! rewrote a table that holds rows here) runs first on live in a READ ONLY
//! transaction, as a copy that raises a notice before each statement it executes and
//! in each exception handler it enters. A no-op there is done (and recorded by
//! `migrate`); a block that would change something is refused with nothing changed;
//! a handler that swallows the read-only error does not make it a no-op; a data
//! check that raises fails the unit.

mod common;

use common::cas::value;
use common::*;
use pgshift::exec::{
    apply, ApplyOptions, ApplyVerdict, NoProgress, Outcome, Sessions, TokioSleeper,
};
use pgshift::migrate::{FileStatus, MigrateOutcome};
use pgshift::plan::{plan_with, Plan, PlanInput, PlanOptions};
use pgshift::procedural::ProceduralOptions;
use pgshift::refusal::RefusalCause;
use pgshift::script::TransactionMode;

const SCHEMA: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int);
CREATE TABLE audit (note text);
CREATE FUNCTION bump() RETURNS void LANGUAGE plpgsql AS 'BEGIN UPDATE items SET qty = qty + 1; END';";

/// The relay's 0036 on `items`: a rewrite only when the table is empty.
const NO_OP_HERE: &str = "DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM items LIMIT 1) THEN
        ALTER TABLE items ALTER COLUMN qty TYPE bigint;
    END IF;
END $$;";

fn with_rows(prefix: &str) -> String {
    let db = database(prefix, SCHEMA);
    cluster()
        .psql(
            &db,
            "INSERT INTO items SELECT g, g FROM generate_series(1, 1000) g",
        )
        .expect("rows");
    db
}

fn procedural(db: &str) -> ProceduralOptions {
    ProceduralOptions {
        conninfo: cluster().connection_string(db),
        allow: Vec::new(),
    }
}

async fn planned(db: &str, sql: &str) -> Plan {
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
            procedural: Some(procedural(db)),
        },
    )
    .await
    .expect("plans")
}

async fn traced_apply(db: &str, sql: &str) -> (Plan, ApplyVerdict) {
    let plan = planned(db, sql).await;
    let session = session(db).await;
    let sessions = Sessions {
        main: session.client(),
        monitor: None,
        user_search_path: session.user_search_path(),
    };
    let options = ApplyOptions {
        max_table_size: None,
        budgets: TEST_BUDGETS,
        allow_blocking: Vec::new(),
        copy_and_swap: None,
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

/// `items`' file node, its column type and a digest of its rows.
fn state(db: &str) -> String {
    value(
        db,
        "SELECT pg_relation_filenode('items') || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || \
                (SELECT md5(string_agg(i::text, ',' ORDER BY id)) FROM items i) || ' ' || (SELECT count(*) FROM audit) \
           FROM pg_attribute a WHERE a.attrelid = 'items'::regclass AND a.attname = 'qty'",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_5_a_no_op_on_a_table_with_rows_runs_guarded_and_leaves_its_storage() {
    let db = with_rows("guard_noop");
    let before = state(&db);
    let plan = planned(&db, NO_OP_HERE).await;
    let block = &plan.files[0].procedural[0];
    assert_eq!(block.decision, "guarded", "{block:#?}");
    assert!(block.why.contains("READ ONLY"), "{}", block.why);
    assert_eq!(state(&db), before, "plan runs nothing of the block on live");

    let (_, verdict) = traced_apply(&db, NO_OP_HERE).await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:#?}");
    let report = verdict.units[0].report.as_ref().expect("ran");
    assert!(report.committed, "{report:#?}");
    assert_eq!(
        report.guarded.as_deref(),
        Some("ran read-only on live: a no-op here"),
        "{report:#?}"
    );
    assert_eq!(
        state(&db),
        before,
        "items keeps its file node, type and rows"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_5_a_guarded_no_op_is_recorded_as_applied_by_migrate() {
    let db = with_rows("guard_migrate");
    let before = state(&db);
    let dir = temp_dir("guard_migrate");
    std::fs::write(dir.join("0001_qty_bigint_fresh_install.sql"), NO_OP_HERE).expect("write");
    let mut options = migrate_options();
    options.procedural = Some(procedural(&db));
    let verdict = run_migrate(&db, &dir, &options).await.expect("runs");
    assert_eq!(verdict.outcome, MigrateOutcome::Done, "{verdict:#?}");
    assert_eq!(verdict.files[0].status, FileStatus::Applied, "{verdict:#?}");
    assert_eq!(verdict.files[0].procedural[0].decision, "guarded");
    assert_eq!(state(&db), before);
    let again = run_migrate(&db, &dir, &options).await.expect("runs");
    assert!(
        again
            .files
            .iter()
            .all(|f| f.status == FileStatus::AlreadyApplied),
        "the file is in the history: {again:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_5_a_block_whose_live_path_would_rewrite_is_refused_with_nothing_changed() {
    let db = with_rows("guard_rewrite");
    let before = state(&db);
    let sql = "DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM items) THEN
            EXECUTE format('ALTER TABLE %I ALTER COLUMN qty TYPE bigint', 'items');
        END IF;
    END $$;";
    let (plan, verdict) = traced_apply(&db, sql).await;
    assert_eq!(plan.files[0].procedural[0].decision, "guarded", "{plan:#?}");
    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:#?}");
    assert_eq!(verdict.committed_units, 0);
    let refusal = verdict
        .runtime_refusal
        .as_ref()
        .expect("a run-time refusal");
    assert_eq!(refusal.cause, RefusalCause::ProceduralBlocking);
    assert!(
        refusal
            .message
            .contains("it would have executed: ALTER TABLE items ALTER COLUMN qty TYPE bigint"),
        "what it would have executed on live: {}",
        refusal.message
    );
    assert_eq!(state(&db), before, "nothing of the block was done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_5_a_handler_that_swallows_the_read_only_error_is_not_taken_for_a_no_op() {
    let db = with_rows("guard_swallow");
    let before = state(&db);
    // On live the rewrite is skipped, and `bump()` (an UPDATE inside a PL/pgSQL
    // function: logged on the clone, but not instrumented on live, so no statement the
    // guard sees; a SQL-language function is not logged, so the block is refused at
    // plan time instead) fails read-only, which the handler swallows.
    let sql = "DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM items LIMIT 1) THEN
            ALTER TABLE items ALTER COLUMN qty TYPE bigint;
        END IF;
        BEGIN
            PERFORM bump();
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END $$;";
    let (plan, verdict) = traced_apply(&db, sql).await;
    assert_eq!(plan.files[0].procedural[0].decision, "guarded", "{plan:#?}");
    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:#?}");
    let refusal = verdict
        .runtime_refusal
        .as_ref()
        .expect("a run-time refusal");
    assert_eq!(refusal.cause, RefusalCause::ProceduralBlocking);
    assert!(
        refusal.message.contains("25006"),
        "the swallowed read-only error is named: {}",
        refusal.message
    );
    assert_eq!(state(&db), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_pc_5_a_data_check_that_raises_on_live_fails_the_unit() {
    let db = with_rows("guard_check");
    cluster()
        .psql(&db, "UPDATE items SET qty = -1 WHERE id = 7")
        .expect("a bad row");
    let before = state(&db);
    let sql = "DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM items LIMIT 1) THEN
            ALTER TABLE items ALTER COLUMN qty TYPE bigint;
        END IF;
        IF EXISTS (SELECT 1 FROM items WHERE qty < 0) THEN
            RAISE EXCEPTION 'items has a negative qty';
        END IF;
    END $$;";
    let (plan, verdict) = traced_apply(&db, sql).await;
    assert_eq!(plan.files[0].procedural[0].decision, "guarded", "{plan:#?}");
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:#?}");
    assert!(verdict.runtime_refusal.is_none(), "{verdict:#?}");
    let report = verdict.units[0].report.as_ref().expect("ran");
    assert!(!report.committed);
    assert!(
        report
            .failure
            .as_deref()
            .is_some_and(|f| f.contains("items has a negative qty")),
        "{report:#?}"
    );
    assert_eq!(state(&db), before);
}
