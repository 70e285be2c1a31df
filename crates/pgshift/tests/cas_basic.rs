//! Copy-and-swap end to end on a plain table under writes: the data is carried over
//! with no lost write, the table keeps its identity, no artifact is left behind.

mod common;

use std::time::Duration;

use common::cas::{artifacts, options, run, value};
use common::*;
use pgshift::cas::{Mode, Silent};

const SCHEMA: &str = "
CREATE ROLE cas_reader;
CREATE TABLE items (
    id bigint PRIMARY KEY,
    qty int NOT NULL,
    note text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT items_qty_nonneg CHECK (qty >= 0)
);
CREATE INDEX items_qty_idx ON items (qty);
CREATE UNIQUE INDEX items_note_key ON items (note);
INSERT INTO items (id, qty, note) SELECT g, g % 100, 'note ' || g FROM generate_series(1, 30000) g;
CREATE FUNCTION items_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.created_at := now(); RETURN NEW; END $$;
CREATE TRIGGER items_touch BEFORE UPDATE ON items FOR EACH ROW EXECUTE FUNCTION items_touch();
ALTER TABLE items ENABLE ALWAYS TRIGGER items_touch;
CREATE VIEW items_view AS SELECT id, qty FROM items WHERE qty > 10;
GRANT SELECT ON items TO cas_reader;
COMMENT ON TABLE items IS 'stock items';
CREATE TABLE orders (id bigint PRIMARY KEY, item_id bigint REFERENCES items (id));
INSERT INTO orders SELECT g, g FROM generate_series(1, 100) g;
ANALYZE;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_5_writes_during_a_run_all_reach_the_new_table() {
    let db = database("cas_basic", SCHEMA);
    let before = table_shape(&db, "items").await;
    let writer = Writer::start(
        &db,
        "INSERT INTO items (id, qty, note) VALUES ($1::bigint, ($1::bigint % 50)::int, 'w' || $1::bigint)",
        Duration::from_millis(2),
    )
    .await;
    let updater = Writer::start(
        &db,
        "UPDATE items SET qty = qty + 1 WHERE id = ($1::bigint % 30000) + 1",
        Duration::from_millis(3),
    )
    .await;
    // Both writers are going before the run starts, so that their entries gather in the
    // change log during the copy (which takes a fifth of a second on an idle machine).
    while writer.committed() < 20 || updater.committed() < 20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = run(
        &db,
        "items",
        "ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        options(Mode::Live),
        &mut Silent,
    )
    .await
    .expect("the run completes");
    let inserts = writer.stop().await;
    let updates = updater.stop().await;
    assert_eq!(report.phase, "done");
    assert!(report.rows_copied >= 30_000, "{report:?}");
    // Writes went on during the copy, whose entries wait for the shadow's key: the
    // report says how many gathered.
    assert!(report.backlog_max > 0, "{report:?}");
    assert!(
        inserts.committed > 10 && updates.committed > 10,
        "writes happened: {inserts:?} {updates:?}"
    );
    assert_eq!(inserts.failed, 0, "{inserts:?}");
    assert_eq!(updates.failed, 0, "{updates:?}");

    // Every acknowledged insert is in the new table; updates landed (qty moved).
    let count = cluster()
        .psql(&db, "SELECT count(*) FROM items WHERE id > 1000000")
        .expect("query");
    assert_eq!(
        count.trim().parse::<u64>().expect("count"),
        inserts.committed
    );
    let total = cluster()
        .psql(&db, "SELECT count(*) FROM items")
        .expect("query");
    assert_eq!(
        total.trim().parse::<u64>().expect("count"),
        30_000 + inserts.committed
    );
    let sum_delta = cluster()
        .psql(&db, "SELECT sum(qty) - (SELECT sum(g % 100) FROM generate_series(1, 30000) g) - (SELECT coalesce(sum((id % 50)), 0) FROM items WHERE id > 1000000) FROM items")
        .expect("query");
    assert_eq!(
        sum_delta.trim().parse::<u64>().expect("delta"),
        updates.committed,
        "every acknowledged update is in the new table"
    );

    // Identity: everything but the intended change is the same.
    let after = table_shape(&db, "items").await;
    assert_eq!(
        after.replace("qty bigint", "qty integer"),
        before,
        "only qty's type changed"
    );
    let grant = cluster()
        .psql(
            &db,
            "SELECT has_table_privilege('cas_reader', 'items', 'SELECT')",
        )
        .expect("query");
    assert_eq!(grant.trim(), "t");
    let comment = cluster()
        .psql(&db, "SELECT obj_description('items'::regclass, 'pg_class')")
        .expect("query");
    assert_eq!(comment.trim(), "stock items");
    let view = cluster()
        .psql(&db, "SELECT count(*) > 0 FROM items_view; SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'items_view'::regclass AND attname = 'qty'")
        .expect("the view works");
    assert!(
        view.contains("bigint"),
        "the view reads the new table: {view}"
    );
    let fk = cluster()
        .psql(&db, "SELECT confrelid = 'items'::regclass, convalidated FROM pg_constraint WHERE conname = 'orders_item_id_fkey'")
        .expect("query");
    assert_eq!(
        fk.trim(),
        "t|t",
        "the foreign key points at the new table and is validated"
    );
    // The new table has planner statistics at the swap: the shadow is analyzed after
    // its indexes, rather than left to autovacuum (and verification's ranges open at
    // one end are then planned on the key's index, not as a scan of the whole shadow).
    let analyzed = value(
        &db,
        "SELECT count(DISTINCT attname) FROM pg_stats WHERE schemaname = 'public' AND tablename = 'items'",
    );
    assert_eq!(
        analyzed, "4",
        "every column of the new table has statistics"
    );
    assert_eq!(artifacts(&db), "", "no artifact is left");
}
