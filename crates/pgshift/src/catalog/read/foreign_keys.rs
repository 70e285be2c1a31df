//! Foreign keys on other tables (or this one) that reference each relation.
//!
//! Only top-level constraints (`conparentid = 0`) are listed: a foreign key on a
//! partitioned table has a clone on every partition, and one that references a
//! partitioned table has a row per referenced partition, all children of the one
//! constraint the user wrote.

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::ForeignKeyFacts;

const STEP: &str = "foreign keys in";

const SQL: &str = concat!(
    locked_cte!(),
    "SELECT c.confrelid, c.oid, c.conname, c.convalidated,
       CASE WHEN c.conrelid IN (SELECT k.relation FROM locked k) OR c.confrelid IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_constraintdef(c.oid) END AS definition,
       rn.nspname AS referencing_schema, r.relname AS referencing_name,
       fn.nspname AS referenced_schema, f.relname AS referenced_name
  FROM pg_catalog.pg_constraint c
  JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) c.conrelid
  JOIN pg_catalog.pg_namespace rn ON rn.oid OPERATOR(pg_catalog.=) r.relnamespace
  JOIN pg_catalog.pg_class f ON f.oid OPERATOR(pg_catalog.=) c.confrelid
  JOIN pg_catalog.pg_namespace fn ON fn.oid OPERATOR(pg_catalog.=) f.relnamespace
 WHERE c.contype OPERATOR(pg_catalog.=) 'f'
   AND c.confrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
   AND c.conparentid OPERATOR(pg_catalog.=) '0'::pg_catalog.oid
 ORDER BY c.confrelid, rn.nspname, r.relname, c.conname"
);

/// Reads the foreign keys referencing `oids`, as (referenced OID, facts).
pub(super) async fn read_incoming(
    client: &Client,
    oids: &[u32],
) -> Result<Vec<(u32, ForeignKeyFacts)>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut keys = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        keys.push((
            fields.get("confrelid")?,
            ForeignKeyFacts {
                name: fields.get("conname")?,
                referencing: fields.name("referencing_schema", "referencing_name")?,
                referenced: fields.name("referenced_schema", "referenced_name")?,
                definition: fields.rendered("definition", fields.get("oid")?)?,
                validated: fields.get("convalidated")?,
            },
        ));
    }
    Ok(keys)
}
