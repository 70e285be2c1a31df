//! What is attached to a dependent view follows it through the swap (CO-15): its
//! `INSTEAD OF` and statement triggers, its `DO INSTEAD` rules, its column defaults,
//! comments and grants, its options, owner, grants and comment; and what cannot be
//! carried is refused before anything is created. Checked in the catalog and by
//! writing through the views afterwards.

mod common;

use common::cas::*;
use common::*;
use pgshift::cas::{CasError, Mode, RunReport, Silent};
use pgshift::refusal::RefusalCause;

const ROLES: &[&str] = &["ties_owner", "ties_reader", "ties_grantor"];

/// `stock_entry` reads `qty` (so a type change of `qty` drops and makes it again):
/// an `INSTEAD OF INSERT` trigger that writes the table and an audit row, a statement
/// trigger, a rule that protects every row from `DELETE` (`DO INSTEAD NOTHING`), an
/// `UPDATE` rule with two actions, a column default the trigger sees, column comments
/// and grants, options, another owner. `stock_priced` does not read `qty` (so it is
/// replaced in place): its `DELETE` rule clears the price instead of deleting.
const SCHEMA: &str = "
CREATE TABLE stock (id int PRIMARY KEY, sku text NOT NULL, qty int NOT NULL, price numeric(8,2), note text);
INSERT INTO stock SELECT g, 's' || g, g % 30, g, 'note ' || g FROM generate_series(1, 500) g;
CREATE TABLE stock_audit (n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, op text NOT NULL, id int, sku text);
CREATE FUNCTION stock_entry_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.stock (id, sku, qty) VALUES (NEW.id, NEW.sku, NEW.qty * 10);
  INSERT INTO public.stock_audit (op, id, sku) VALUES ('trigger ' || TG_OP, NEW.id, NEW.sku);
  RETURN NEW;
END $$;
CREATE FUNCTION stock_entry_stmt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.stock_audit (op) VALUES ('statement ' || TG_OP);
  RETURN NULL;
END $$;
CREATE VIEW stock_entry WITH (security_barrier) AS SELECT id, sku, qty FROM stock WHERE qty >= 0;
CREATE TRIGGER stock_entry_in INSTEAD OF INSERT ON stock_entry FOR EACH ROW EXECUTE FUNCTION stock_entry_in();
CREATE TRIGGER stock_entry_stmt AFTER INSERT ON stock_entry FOR EACH STATEMENT EXECUTE FUNCTION stock_entry_stmt();
COMMENT ON TRIGGER stock_entry_in ON stock_entry IS 'tenfold, audited';
CREATE RULE stock_entry_keep AS ON DELETE TO stock_entry DO INSTEAD NOTHING;
CREATE RULE stock_entry_update AS ON UPDATE TO stock_entry DO INSTEAD (
  UPDATE stock SET qty = NEW.qty WHERE id = OLD.id;
  INSERT INTO stock_audit (op, id) VALUES ('rule UPDATE', OLD.id));
COMMENT ON RULE stock_entry_keep ON stock_entry IS 'rows are never deleted through the view';
ALTER VIEW stock_entry ALTER COLUMN sku SET DEFAULT 'unnamed';
COMMENT ON COLUMN stock_entry.sku IS 'stock keeping unit';
COMMENT ON VIEW stock_entry IS 'entry of stock';
ALTER VIEW stock_entry OWNER TO ties_owner;
GRANT SELECT, INSERT, UPDATE ON stock, stock_audit TO ties_owner;
GRANT SELECT ON stock_entry TO ties_reader;
GRANT INSERT (id, qty), UPDATE (qty) ON stock_entry TO ties_reader WITH GRANT OPTION;
CREATE VIEW stock_priced AS SELECT id, price FROM stock WHERE price IS NOT NULL WITH LOCAL CHECK OPTION;
CREATE RULE stock_priced_delete AS ON DELETE TO stock_priced DO INSTEAD UPDATE stock SET price = NULL WHERE id = OLD.id;
COMMENT ON RULE stock_priced_delete ON stock_priced IS 'clears the price';
";

/// From PostgreSQL 15, `security_invoker` too.
const SCHEMA_PG15: &str = "ALTER VIEW stock_entry SET (security_invoker = true);";

fn prepared(prefix: &str) -> String {
    let db = database(prefix, "");
    ensure_roles(&db, ROLES);
    cluster().psql(&db, SCHEMA).expect("schema loads");
    if server_version(&db) >= 150000 {
        cluster().psql(&db, SCHEMA_PG15).expect("security_invoker");
    }
    db
}

/// Everything attached to the two views, one fact per line, by name.
fn view_ties(db: &str) -> String {
    value(
        db,
        "SELECT string_agg(x, E'\\n' ORDER BY x) FROM ( \
           SELECT format('view %s options=%s owner=%s acl=%s comment=%s', c.relname, c.reloptions, pg_get_userbyid(c.relowner), \
                         (SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(c.relacl) a), obj_description(c.oid, 'pg_class')) AS x \
             FROM pg_class c WHERE c.relname IN ('stock_entry', 'stock_priced') \
           UNION ALL SELECT format('column %s.%s default=%s comment=%s acl=%s', c.relname, a.attname, pg_get_expr(d.adbin, d.adrelid), \
                         col_description(c.oid, a.attnum), (SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest(a.attacl) x)) \
             FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 \
             LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum WHERE c.relname IN ('stock_entry', 'stock_priced') \
           UNION ALL SELECT format('trigger %s %s comment=%s', pg_get_triggerdef(t.oid), t.tgenabled, obj_description(t.oid, 'pg_trigger')) \
             FROM pg_trigger t WHERE t.tgrelid IN ('stock_entry'::regclass, 'stock_priced'::regclass) \
           UNION ALL SELECT format('rule %s %s comment=%s', r.rulename, pg_get_ruledef(r.oid), obj_description(r.oid, 'pg_rewrite')) \
             FROM pg_rewrite r WHERE r.ev_class IN ('stock_entry'::regclass, 'stock_priced'::regclass) AND r.rulename <> '_RETURN' \
         ) facts",
    )
}

/// Writes through both views and reads what they did to the table and the audit.
fn behaviour(db: &str) -> String {
    cluster()
        .psql(
            db,
            "INSERT INTO stock_entry (id, qty) VALUES (9001, 4), (9002, 5);
             UPDATE stock_entry SET qty = 77 WHERE id = 3;
             DELETE FROM stock_entry WHERE id <= 100;
             DELETE FROM stock_priced WHERE id = 7;",
        )
        .expect("writes through the views");
    value(
        db,
        "SELECT concat_ws(' | ', \
           (SELECT count(*) FROM stock), \
           (SELECT string_agg(format('%s %s %s', id, sku, qty), ',' ORDER BY id) FROM stock WHERE id IN (3, 9001, 9002)), \
           (SELECT coalesce(price::text, 'null') FROM stock WHERE id = 7), \
           (SELECT string_agg(format('%s %s %s', op, id, sku), ',' ORDER BY n) FROM stock_audit))",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_15_a_views_triggers_rules_and_column_settings_follow_it_through_the_swap() {
    let db = prepared("ties_carried");
    let oracle = clone_database(&db, "oracle");
    let before = view_ties(&db);
    assert!(before.contains("INSTEAD OF INSERT"), "{before}");
    let report = rewrite(&db, "ALTER TABLE stock ALTER COLUMN qty TYPE bigint")
        .await
        .expect("the run completes");
    assert_eq!(report.swap.as_ref().map(|s| s.views.len()), Some(2));
    assert_eq!(view_ties(&db), before, "everything attached to the views");
    assert_eq!(
        value(
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'stock_entry'::regclass AND attname = 'qty'"
        ),
        "bigint",
        "stock_entry was made again with the new type"
    );
    // The oracle: the same writes on the database as it was (natively, the ALTER is
    // refused while the view reads qty; the behaviour of the views is the point).
    let expected = behaviour(&oracle);
    assert!(
        expected.contains("9001 unnamed 40") && expected.contains("trigger INSERT 9001 unnamed"),
        "{expected}"
    );
    assert!(expected.starts_with("502 |"), "{expected}");
    assert_eq!(behaviour(&db), expected, "writes through the views");
    assert_eq!(artifacts(&db), "", "the old table is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_replaced_in_place_has_its_rules_write_the_new_table() {
    // Neither view reads `note`: both are replaced in place, and their rules, which
    // name the table by OID, must be made again to write the new one.
    let db = prepared("ties_rebound");
    let oracle = clone_database(&db, "oracle");
    let before = view_ties(&db);
    rewrite(&db, "ALTER TABLE stock ALTER COLUMN note TYPE varchar(40)")
        .await
        .expect("the run completes");
    assert_eq!(view_ties(&db), before);
    assert_eq!(
        behaviour(&db),
        behaviour(&oracle),
        "writes through the views"
    );
    assert_eq!(artifacts(&db), "", "the old table is dropped");
}

/// Each of `cases` (SQL added to the schema, the refusal expected) refuses the
/// rewrite before anything is recorded or created, and the views still work.
async fn refused_before_any_work(prefix: &str, extra: &str, expected: RefusalCause) {
    let db = prepared(prefix);
    cluster().psql(&db, extra).expect("the extra objects");
    let before = view_ties(&db);
    let err = rewrite(&db, "ALTER TABLE stock ALTER COLUMN qty TYPE bigint")
        .await
        .expect_err("refused");
    match &err {
        CasError::Refused(refusal) => {
            assert_eq!(refusal.cause, expected, "{err}");
            assert!(!refusal.next_step.is_empty(), "a next step: {err}");
        }
        other => panic!("a refusal before any work, not {other}"),
    }
    assert_eq!(runs_recorded(&db), 0, "nothing recorded");
    assert_eq!(artifacts(&db), "", "nothing created");
    assert_eq!(view_ties(&db), before, "the views are untouched");
    assert_eq!(
        value(
            &db,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'stock'::regclass AND attname = 'qty'"
        ),
        "integer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_another_object_uses_is_refused_before_any_work() {
    // A SQL-standard function body names the view by its identity.
    refused_before_any_work(
        "ties_in_use_function",
        "CREATE FUNCTION entries() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT count(*) FROM stock_entry; END;",
        RefusalCause::DependentViewInUse,
    )
    .await;
    // A table's column of the view's row type.
    refused_before_any_work(
        "ties_in_use_row_type",
        "CREATE TABLE entry_copies (entry stock_entry);",
        RefusalCause::DependentViewInUse,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_another_role_made_on_a_view_are_refused_before_any_work() {
    refused_before_any_work(
        "ties_grantor",
        "GRANT SELECT ON stock_priced TO ties_grantor WITH GRANT OPTION;
         SET ROLE ties_grantor; GRANT SELECT ON stock_priced TO ties_reader; RESET ROLE;",
        RefusalCause::DependentViewGrants,
    )
    .await;
    refused_before_any_work(
        "ties_narrowed",
        "REVOKE DELETE ON stock_priced FROM CURRENT_USER;",
        RefusalCause::DependentViewGrants,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_of_another_table_that_writes_the_table_is_refused_before_any_work() {
    refused_before_any_work(
        "ties_rule",
        "CREATE TABLE restock (id int, qty int);
         CREATE RULE restock_into_stock AS ON INSERT TO restock DO ALSO
           UPDATE stock SET qty = qty + NEW.qty WHERE id = NEW.id;",
        RefusalCause::RuleUsesTable,
    )
    .await;
}

/// A live run of `sql` on `stock`, to its end.
async fn rewrite(db: &str, sql: &str) -> Result<RunReport, CasError> {
    run(db, "stock", sql, options(Mode::Live), &mut Silent).await
}
