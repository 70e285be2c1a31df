//! What the connecting role needs before a run starts, checked in one catalog read so
//! that a missing privilege is a refusal naming the `GRANT` (or ownership) that would
//! give it, not a `permission denied` halfway through (target R5).
//!
//! A run creates objects in the `pgshift` schema (the run record, the change log, the
//! capture functions) and a scratch schema of its own, builds the shadow in the
//! table's schema, and alters the table (which needs ownership): it needs `CREATE` on
//! the database, `USAGE` and `CREATE` on `pgshift` and the run table's privileges when
//! they already exist (another role may have created them), `CREATE` on the table's
//! schema, and the table's owner's privileges.

use tokio_postgres::Client;

use super::error::CasError;
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::quote_ident;

/// The privileges the run needs, read in one query: one missing one is the refusal.
pub async fn check(client: &Client, table_oid: u32) -> Result<(), CasError> {
    let row = client
        .query_one(
            "SELECT CURRENT_USER::pg_catalog.text, \
                    pg_catalog.current_database()::pg_catalog.text, \
                    pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'), \
                    (SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE') \
                            AND pg_catalog.has_schema_privilege(n.oid, 'CREATE') \
                       FROM pg_catalog.pg_namespace n WHERE n.nspname OPERATOR(pg_catalog.=) 'pgshift'), \
                    (SELECT pg_catalog.has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE') \
                       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                      WHERE n.nspname OPERATOR(pg_catalog.=) 'pgshift' AND c.relname OPERATOR(pg_catalog.=) 'runs'), \
                    pg_catalog.pg_has_role(t.relowner, 'USAGE'), \
                    pg_catalog.pg_get_userbyid(t.relowner)::pg_catalog.text, \
                    pg_catalog.has_schema_privilege(t.relnamespace, 'CREATE'), \
                    tn.nspname::pg_catalog.text, t.relname::pg_catalog.text \
               FROM pg_catalog.pg_class t \
               JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.relnamespace \
              WHERE t.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
            &[&table_oid],
        )
        .await
        .map_err(|e| CasError::db("reading the role's privileges", e))?;
    let role: String = row.get(0);
    let database: String = row.get(1);
    let (schema, table): (String, String) = (row.get(8), row.get(9));
    let qualified = format!("{}.{}", quote_ident(&schema), quote_ident(&table));
    let role_q = quote_ident(&role);
    let missing = |what: String, grant: String| {
        Err(CasError::Refused(Refusal::new(
            RefusalCause::MissingPrivilege,
            format!("role {role_q} {what}; copy-and-swap of {qualified} needs it: {grant}"),
        )))
    };
    if !row.get::<_, bool>(5) {
        let owner = quote_ident(&row.get::<_, String>(6));
        return missing(
            format!("does not own {qualified} (its owner is {owner})"),
            format!("connect as {owner}, or `GRANT {owner} TO {role_q}`"),
        );
    }
    if !row.get::<_, bool>(2) {
        return missing(
            format!(
                "cannot create schemas in database {}",
                quote_ident(&database)
            ),
            format!(
                "`GRANT CREATE ON DATABASE {} TO {role_q}`",
                quote_ident(&database)
            ),
        );
    }
    if row.get::<_, Option<bool>>(3) == Some(false) {
        return missing(
            "cannot use or create objects in schema pgshift (created by another role)".to_owned(),
            format!("`GRANT USAGE, CREATE ON SCHEMA pgshift TO {role_q}`"),
        );
    }
    if row.get::<_, Option<bool>>(4) == Some(false) {
        return missing(
            "cannot read and write the run records in pgshift.runs (created by another role)"
                .to_owned(),
            format!("`GRANT SELECT, INSERT, UPDATE, DELETE ON pgshift.runs TO {role_q}`"),
        );
    }
    if !row.get::<_, bool>(7) {
        return missing(
            format!("cannot create tables in schema {}", quote_ident(&schema)),
            format!(
                "`GRANT CREATE ON SCHEMA {} TO {role_q}`",
                quote_ident(&schema)
            ),
        );
    }
    Ok(())
}
