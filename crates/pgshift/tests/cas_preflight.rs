//! What the swap must be allowed to do, and the disk it needs, are found before a run
//! is recorded (CO-9; issue 9, item 5): a publication, statistics object, referencing
//! table or view owned by another role, or a trigger function the role may not
//! execute, is a `missing-privilege` refusal naming the object, its owner and the fix
//! — where it used to fail with 42501 at the swap, after the whole copy. Free disk is
//! measured where the server lets it be, compared with the run's estimated need, and
//! said to be unchecked, with the reason, where it cannot be.

mod common;

use std::sync::{Arc, Mutex};

use common::cas::{
    artifacts, ensure_roles, options, run_as, runs_recorded, server_version, spec_as, value,
};
use common::*;
use pgshift::cas::{self, CasError, CasProgress, Mode, Phase};
use pgshift::refusal::RefusalCause;
use pgshift_sql::QualifiedName;

/// The disk test changes the process's environment: the tests of this binary take
/// turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SCHEMA: &str = "
CREATE SCHEMA shop;
CREATE TABLE shop.customers (id bigint PRIMARY KEY);
INSERT INTO shop.customers SELECT g FROM generate_series(1, 10) g;
CREATE TABLE shop.orders (id bigint PRIMARY KEY, qty int NOT NULL, note text,
                          customer_id bigint REFERENCES shop.customers (id));
INSERT INTO shop.orders SELECT g, g % 50, 'order ' || g, g % 10 + 1 FROM generate_series(1, 3000) g;
CREATE STATISTICS shop.orders_stats (ndistinct) ON qty, note FROM shop.orders;
CREATE TABLE shop.lines (id bigint PRIMARY KEY, order_id bigint REFERENCES shop.orders (id));
CREATE VIEW shop.big_orders AS SELECT id, qty FROM shop.orders WHERE qty > 40;
CREATE FUNCTION shop.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.touch();
CREATE PUBLICATION orders_pub FOR TABLE shop.orders;
ALTER TABLE shop.orders OWNER TO pf_owner;
ALTER TABLE shop.lines OWNER TO pf_owner;
ALTER VIEW shop.big_orders OWNER TO pf_owner;
ALTER STATISTICS shop.orders_stats OWNER TO pf_owner;
GRANT USAGE, CREATE ON SCHEMA shop TO pf_owner, pf_other;
ALTER FUNCTION shop.touch() OWNER TO pf_other;
ALTER TABLE shop.customers OWNER TO pf_other;
GRANT REFERENCES ON shop.customers TO pf_owner;
";

const ALTER: &str = "ALTER TABLE shop.orders ALTER COLUMN qty TYPE bigint";

/// An in-place tablespace (a directory under `pg_tblspc`, whose location the server
/// gives relative to the data directory), made once per cluster; `false` before
/// PostgreSQL 15, which has no in-place tablespaces.
async fn in_place_tablespace() -> bool {
    if server_version("postgres") < 150_000 {
        return false;
    }
    let client = client("postgres").await;
    let made = client
        .query_one(
            "SELECT count(*) FROM pg_tablespace WHERE spcname = 'pf_space'",
            &[],
        )
        .await
        .expect("tablespaces")
        .get::<_, i64>(0);
    if made == 0 {
        client
            .batch_execute("SET allow_in_place_tablespaces = on")
            .await
            .expect("in-place tablespaces");
        client
            .batch_execute("CREATE TABLESPACE pf_space LOCATION ''")
            .await
            .expect("tablespace");
    }
    true
}

fn orders() -> QualifiedName {
    QualifiedName::qualified("shop", "orders")
}

fn refusal(result: Result<cas::RunReport, CasError>, cause: RefusalCause) -> String {
    match result {
        Err(CasError::Refused(r)) if r.cause == cause => r.message,
        other => panic!("expected a {cause} refusal, got {other:?}"),
    }
}

fn untouched(db: &str) {
    assert_eq!(runs_recorded(db), 0, "nothing is recorded");
    assert_eq!(artifacts(db), "");
    assert_eq!(
        value(db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'shop.orders'::regclass AND attname = 'qty'"),
        "integer"
    );
}

/// A progress that keeps the notes.
#[derive(Default)]
struct Notes(Arc<Mutex<Vec<String>>>);

impl CasProgress for Notes {
    fn phase(&mut self, _phase: Phase) {}
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, text: &str) {
        self.0.lock().expect("notes").push(text.to_owned());
    }
}

async fn run_noting(
    db: &str,
    role: &str,
    disk_room: Option<u64>,
) -> (Result<cas::RunReport, CasError>, Vec<String>) {
    let notes = Notes::default();
    let seen = notes.0.clone();
    let mut progress = notes;
    let statements = pgshift_sql::parse(ALTER).expect("valid");
    let result = cas::start(
        &spec_as(db, role),
        &statements[0],
        &orders(),
        cas::RunOptions {
            disk_room,
            ..options(Mode::Live)
        },
        &mut progress,
    )
    .await;
    let notes = seen.lock().expect("notes").clone();
    (result, notes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_9_what_the_swap_alters_is_checked_before_anything_is_recorded() {
    let _serial = SERIAL.lock().await;
    ensure_roles("postgres", &["pf_owner", "pf_other"]);
    cluster()
        .psql("postgres", "ALTER ROLE pf_owner LOGIN")
        .expect("login");
    let db = database("cas_pf_owners", SCHEMA);
    cluster()
        .psql(
            &db,
            &format!("GRANT CREATE ON DATABASE {db} TO pf_owner, pf_other"),
        )
        .expect("grants");
    let tablespace = in_place_tablespace().await;
    if tablespace {
        cluster()
            .psql(
                &db,
                "CREATE INDEX orders_note ON shop.orders (note) TABLESPACE pf_space; \
                 GRANT CREATE ON TABLESPACE pf_space TO pf_owner",
            )
            .expect("an index in a tablespace");
    }
    let mut cases = vec![
        // Each object the swap would alter, in turn given to another role: refused
        // naming it, its owner and the fix; then given back. (The publication alone used
        // to fail with 42501 at the swap, after the whole copy.)
        (
            "publication orders_pub",
            "ALTER PUBLICATION orders_pub OWNER TO pf_other",
            "ALTER PUBLICATION orders_pub OWNER TO pf_owner",
            "GRANT \"pf_other\" TO \"pf_owner\"",
        ),
        (
            "statistics object shop.orders_stats",
            "ALTER STATISTICS shop.orders_stats OWNER TO pf_other",
            "ALTER STATISTICS shop.orders_stats OWNER TO pf_owner",
            "GRANT \"pf_other\" TO \"pf_owner\"",
        ),
        (
            "table shop.lines",
            "ALTER TABLE shop.lines OWNER TO pf_other",
            "ALTER TABLE shop.lines OWNER TO pf_owner",
            "GRANT \"pf_other\" TO \"pf_owner\"",
        ),
        (
            "view shop.big_orders",
            "ALTER VIEW shop.big_orders OWNER TO pf_other",
            "ALTER VIEW shop.big_orders OWNER TO pf_owner",
            "GRANT \"pf_other\" TO \"pf_owner\"",
        ),
        (
            "EXECUTE on function shop.touch()",
            "REVOKE EXECUTE ON FUNCTION shop.touch() FROM PUBLIC",
            "GRANT EXECUTE ON FUNCTION shop.touch() TO PUBLIC",
            "GRANT EXECUTE ON FUNCTION shop.touch() TO pf_owner",
        ),
        (
            "REFERENCES on table shop.customers",
            "REVOKE REFERENCES ON shop.customers FROM pf_owner",
            "GRANT REFERENCES ON shop.customers TO pf_owner",
            "GRANT REFERENCES ON TABLE shop.customers TO pf_owner",
        ),
    ];
    if tablespace {
        // Owned by the superuser, who is the "other role" here.
        cases.push((
            "CREATE on tablespace pf_space",
            "REVOKE CREATE ON TABLESPACE pf_space FROM pf_owner",
            "GRANT CREATE ON TABLESPACE pf_space TO pf_owner",
            "GRANT CREATE ON TABLESPACE pf_space TO pf_owner",
        ));
    }
    for (object, other_sql, back_sql, fix) in cases {
        cluster()
            .psql(&db, other_sql)
            .expect("given to another role");
        let message = refusal(
            run_as(&db, "pf_owner", &orders(), ALTER, options(Mode::Live)).await,
            RefusalCause::MissingPrivilege,
        );
        assert!(message.contains(object), "{object}: {message}");
        let owner = if object.contains("tablespace") {
            cluster().superuser()
        } else {
            "pf_other"
        };
        assert!(message.contains(owner), "{object}: the owner: {message}");
        assert!(message.contains(fix), "{object}: the fix: {message}");
        untouched(&db);
        cluster().psql(&db, back_sql).expect("given back");
    }

    // The publication owned by another role again, the run's role now a member of it:
    // the run goes through with the room the operator gives for the disk the role
    // cannot measure (said to be unmeasured, with the reason), and the membership
    // moves to the new table.
    cluster()
        .psql(
            &db,
            "ALTER PUBLICATION orders_pub OWNER TO pf_other; GRANT pf_other TO pf_owner",
        )
        .expect("membership");
    let (result, notes) = run_noting(&db, "pf_owner", Some(1 << 30)).await;
    let report = result.expect("the run goes through");
    assert_eq!(report.phase, "done");
    assert!(
        report
            .disk
            .starts_with("free disk not measured (role pf_owner may not read data_directory"),
        "{report:?}"
    );
    assert!(notes.contains(&report.disk), "{notes:?}");
    assert_eq!(
        value(&db, "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'orders_pub' AND tablename = 'orders'"),
        "1"
    );
    assert_eq!(value(&db, "SELECT count(*) FROM shop.orders"), "3000");
    if tablespace {
        assert_eq!(
            value(&db, "SELECT t.spcname FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace WHERE c.oid = 'shop.orders_note'::regclass"),
            "pf_space",
            "the index is made again in its tablespace"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_disk_is_measured_where_it_can_be_and_a_run_that_would_not_fit_is_refused() {
    let _serial = SERIAL.lock().await;
    let db = database(
        "cas_pf_disk",
        "CREATE SCHEMA shop;
         CREATE TABLE shop.orders (id bigint PRIMARY KEY, qty int NOT NULL, note text);
         INSERT INTO shop.orders SELECT g, g % 50, repeat('x', 200) FROM generate_series(1, 3000) g;",
    );
    // An index in an in-place tablespace: its location is relative to the data
    // directory, and measured there.
    if in_place_tablespace().await {
        cluster()
            .psql(
                &db,
                "CREATE INDEX orders_note ON shop.orders (note) TABLESPACE pf_space",
            )
            .expect("an index in a tablespace");
    }
    // The embedded cluster is on this host, over a Unix socket, and the superuser may
    // read data_directory: measured.
    std::env::set_var("PGSHIFT_DISK_MARGIN_PERCENT", "100000000000");
    let result = run_noting(&db, cluster().superuser(), None).await.0;
    std::env::remove_var("PGSHIFT_DISK_MARGIN_PERCENT");
    let message = refusal(result, RefusalCause::InsufficientDiskSpace);
    assert!(message.contains("is free"), "{message}");
    untouched(&db);

    let (result, notes) = run_noting(&db, cluster().superuser(), None).await;
    let report = result.expect("it fits");
    assert!(
        report.disk.starts_with("free disk checked: needs about"),
        "{report:?}"
    );
    assert!(notes.contains(&report.disk), "{notes:?}");
}
