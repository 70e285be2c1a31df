//! Copy-and-swap as the table's owner, without superuser (target R5): every missing
//! privilege is refused before anything is created, naming the GRANT that gives it,
//! and once granted the run completes as that role.

mod common;

use common::cas::{artifacts, ensure_roles, options, value};
use common::*;
use pgshift::cas::{self, CasError, Mode};
use pgshift::refusal::RefusalCause;
use pgshift_sql::QualifiedName;

const SCHEMA: &str = "
CREATE SCHEMA shop;
CREATE TABLE shop.orders (id bigint PRIMARY KEY, qty int NOT NULL, note text);
INSERT INTO shop.orders SELECT g, g % 50, 'order ' || g FROM generate_series(1, 5000) g;
ALTER TABLE shop.orders OWNER TO priv_owner;
GRANT USAGE ON SCHEMA shop TO priv_owner, priv_other;
";

async fn run_as(db: &str, role: &str) -> Result<cas::RunReport, CasError> {
    common::cas::run_as(
        db,
        role,
        &QualifiedName::qualified("shop", "orders"),
        "ALTER TABLE shop.orders ALTER COLUMN qty TYPE bigint",
        // The role may not read data_directory: the room is the operator's to give.
        cas::RunOptions {
            disk_room: Some(1 << 30),
            ..options(Mode::Live)
        },
    )
    .await
}

/// The refusal's message, when `result` is a `missing-privilege` refusal.
fn missing_privilege(result: Result<cas::RunReport, CasError>) -> String {
    match result {
        Err(CasError::Refused(r)) if r.cause == RefusalCause::MissingPrivilege => r.message,
        other => panic!("expected a missing-privilege refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_privileges_are_refused_with_their_grant_and_the_owner_then_runs() {
    ensure_roles("postgres", &["priv_owner", "priv_other"]);
    cluster()
        .psql(
            "postgres",
            "ALTER ROLE priv_owner LOGIN; ALTER ROLE priv_other LOGIN",
        )
        .expect("roles log in");
    let db = database("cas_priv", SCHEMA);
    let nothing_created = |db: &str| {
        assert_eq!(artifacts(db), "", "nothing is created before the refusal");
        assert_eq!(
            value(db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'shop.orders'::regclass AND attname = 'qty'"),
            "integer"
        );
    };

    let message = missing_privilege(run_as(&db, "priv_other").await);
    assert!(message.contains("does not own"), "{message}");
    assert!(
        message.contains(r#"GRANT "priv_owner" TO "priv_other""#),
        "{message}"
    );
    nothing_created(&db);

    let message = missing_privilege(run_as(&db, "priv_owner").await);
    assert!(
        message.contains(&format!(
            r#"GRANT CREATE ON DATABASE "{db}" TO "priv_owner""#
        )),
        "{message}"
    );
    nothing_created(&db);

    // The engine's schema, made by another role (an earlier run as a superuser).
    cluster()
        .psql(
            &db,
            &format!("GRANT CREATE ON DATABASE {db} TO priv_owner; CREATE SCHEMA pgshift;"),
        )
        .expect("grant");
    let message = missing_privilege(run_as(&db, "priv_owner").await);
    assert!(
        message.contains(r#"GRANT USAGE, CREATE ON SCHEMA pgshift TO "priv_owner""#),
        "{message}"
    );
    nothing_created(&db);

    cluster()
        .psql(&db, "GRANT USAGE, CREATE ON SCHEMA pgshift TO priv_owner")
        .expect("grant");
    let message = missing_privilege(run_as(&db, "priv_owner").await);
    assert!(
        message.contains(r#"GRANT CREATE ON SCHEMA "shop" TO "priv_owner""#),
        "{message}"
    );
    nothing_created(&db);

    cluster()
        .psql(&db, "GRANT CREATE ON SCHEMA shop TO priv_owner")
        .expect("grant");
    let report = run_as(&db, "priv_owner")
        .await
        .expect("the owner, not a superuser, runs it");
    assert_eq!(report.phase, "done");
    assert_eq!(
        value(&db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'shop.orders'::regclass AND attname = 'qty'"),
        "bigint"
    );
    assert_eq!(value(&db, "SELECT count(*) FROM shop.orders"), "5000");
    assert_eq!(
        value(
            &db,
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'shop.orders'::regclass"
        ),
        "priv_owner"
    );
    assert_eq!(artifacts(&db), "");
}
