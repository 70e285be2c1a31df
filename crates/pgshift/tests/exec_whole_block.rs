//! Invariant TX-1 on real PostgreSQL: an explicit block that must stay one transaction
//! (data changes with schema changes) and has statements that would need a safer
//! sequence runs whole, as written, only where every pre-existing table it locks holds
//! no rows on the live server; elsewhere it is refused (`not-splittable`) with the
//! live sizes, and nothing changes.

mod common;

use common::*;
use pgshift::exec::Outcome;
use pgshift::refusal::RefusalCause;

const TABLES: &str = "CREATE TABLE ch (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE co (id int PRIMARY KEY);";

/// The relay's 0015 in miniature: a column added, backfilled and made NOT NULL on
/// two tables, in one explicit transaction.
const BLOCK: &str = "BEGIN;
ALTER TABLE ch ADD COLUMN topic text;
UPDATE ch SET topic = 'Welcome to #' || name WHERE topic IS NULL;
ALTER TABLE ch ALTER COLUMN topic SET NOT NULL;
ALTER TABLE co ADD COLUMN quota int;
UPDATE co SET quota = 100 WHERE quota IS NULL;
ALTER TABLE co ALTER COLUMN quota SET NOT NULL;
COMMIT;";

/// Columns, constraints and rows of the two tables, for comparison.
fn state(db: &str) -> String {
    cluster()
        .psql(
            db,
            "SELECT string_agg(line, E'\\n' ORDER BY line) FROM (
               SELECT format('col %s.%s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull) AS line
                 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                WHERE c.relname IN ('ch', 'co') AND a.attnum > 0 AND NOT a.attisdropped
               UNION ALL
               SELECT format('con %s %s', conrelid::regclass, pg_get_constraintdef(oid)) FROM pg_constraint
                WHERE conrelid IN ('ch'::regclass, 'co'::regclass)
               UNION ALL SELECT format('ch %s', to_jsonb(ch)) FROM ch
               UNION ALL SELECT format('co %s', to_jsonb(co)) FROM co) lines",
        )
        .expect("query")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_tx_1_a_block_on_empty_tables_runs_whole_and_equals_the_native_run() {
    let db = database("whole_empty", TABLES);
    let native = database("whole_native", TABLES);
    cluster().psql(&native, BLOCK).expect("the native run");
    let verdict = apply_sql(&db, BLOCK, TEST_BUDGETS, &[]).await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:?}");
    assert_eq!(verdict.units.len(), 1, "one transaction: {verdict:?}");
    assert!(
        verdict
            .notes
            .iter()
            .any(|n| n.contains("runs whole as one transaction") && n.contains("is empty here")),
        "{:?}",
        verdict.notes
    );
    assert_eq!(state(&db), state(&native));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_tx_1_a_block_on_tables_with_rows_is_refused_with_their_sizes_and_changes_nothing() {
    // Rows now, and rows deleted (their pages stay until VACUUM): both hold pages.
    for (prefix, rows) in [
        ("whole_rows", "INSERT INTO ch VALUES (1, 'general');"),
        (
            "whole_deleted",
            "INSERT INTO co VALUES (1); DELETE FROM co;",
        ),
    ] {
        let db = database(prefix, &format!("{TABLES}\n{rows}"));
        let before = state(&db);
        let verdict = apply_sql(&db, BLOCK, TEST_BUDGETS, &[]).await;
        assert_eq!(verdict.outcome, Outcome::Refused, "{prefix}: {verdict:?}");
        let refusal = &verdict.refusals[0].refusal;
        assert_eq!(refusal.cause, RefusalCause::NotSplittable, "{refusal:?}");
        assert!(
            refusal.message.contains("bytes") && refusal.message.contains("is not"),
            "{prefix}: the live size is named: {}",
            refusal.message
        );
        assert!(verdict.units.is_empty(), "nothing ran: {verdict:?}");
        assert_eq!(state(&db), before, "{prefix}: nothing changed");
    }
}

/// A table that references `ch` by a foreign key that cascades: an `UPDATE` of `ch`
/// locks it too, though no statement names it.
const PARTNER: &str =
    "CREATE TABLE ev (id int PRIMARY KEY, ch_id int REFERENCES ch ON UPDATE CASCADE);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_tx_1_a_block_is_judged_by_the_live_size_of_the_foreign_key_partners_it_locks() {
    // Empty partner: the block runs whole (its size was read, not "not known").
    let db = database("whole_partner_empty", &format!("{TABLES}\n{PARTNER}"));
    let native = database("whole_partner_native", &format!("{TABLES}\n{PARTNER}"));
    cluster().psql(&native, BLOCK).expect("the native run");
    let verdict = apply_sql(&db, BLOCK, TEST_BUDGETS, &[]).await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:?}");
    assert!(
        verdict.notes.iter().any(|n| n.contains("\"ev\"")),
        "the partner is among the tables judged empty: {:?}",
        verdict.notes
    );
    assert_eq!(state(&db), state(&native));

    // A partner with rows (a NULL key: nothing in `ch` is referenced): refused, with
    // the partner's live size named.
    let db = database(
        "whole_partner_rows",
        &format!("{TABLES}\n{PARTNER}\nINSERT INTO ev VALUES (1, NULL);"),
    );
    let before = state(&db);
    let verdict = apply_sql(&db, BLOCK, TEST_BUDGETS, &[]).await;
    assert_eq!(verdict.outcome, Outcome::Refused, "{verdict:?}");
    let refusal = &verdict.refusals[0].refusal;
    assert_eq!(refusal.cause, RefusalCause::NotSplittable, "{refusal:?}");
    assert!(
        refusal.message.contains("\"ev\" (8192 bytes") && !refusal.message.contains("not known"),
        "the partner's live size: {}",
        refusal.message
    );
    assert_eq!(state(&db), before, "nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_an_earlier_statement_adds_is_not_missing_to_a_later_one() {
    // Outside any block, on a table with rows: the second statement's column is not
    // in the live catalog yet, and SET NOT NULL takes its safer sequence.
    let sql = "ALTER TABLE ch ADD COLUMN topic text DEFAULT 'general';
ALTER TABLE ch ALTER COLUMN topic SET NOT NULL;";
    let db = database(
        "added_earlier",
        &format!("{TABLES}\nINSERT INTO ch VALUES (1, 'general');"),
    );
    let native = database(
        "added_earlier_native",
        &format!("{TABLES}\nINSERT INTO ch VALUES (1, 'general');"),
    );
    cluster().psql(&native, sql).expect("the native run");
    let verdict = apply_sql(&db, sql, TEST_BUDGETS, &[]).await;
    assert_eq!(verdict.outcome, Outcome::Done, "{verdict:?}");
    assert!(verdict.refusals.is_empty(), "{verdict:?}");
    // The scaffold check's steps ran: more units than statements.
    assert!(verdict.units.len() > 2, "the safer sequence: {verdict:?}");
    assert_eq!(state(&db), state(&native));
}
