//! Indexes on each relation (`pg_index.indrelid`), by name.

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::IndexFacts;

const STEP: &str = "indexes";

const SQL: &str = concat!(
    locked_cte!(),
    "SELECT x.indrelid, x.indexrelid, n.nspname, c.relname,
       x.indisunique, x.indisprimary, x.indisvalid,
       CASE WHEN x.indrelid IN (SELECT k.relation FROM locked k) OR x.indexrelid IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_indexdef(x.indexrelid) END AS definition
  FROM pg_catalog.pg_index x
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) x.indexrelid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 WHERE x.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
 ORDER BY x.indrelid, n.nspname, c.relname"
);

/// Reads the indexes of `oids`, as (table OID, facts).
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
) -> Result<Vec<(u32, IndexFacts)>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut indexes = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        indexes.push((
            fields.get("indrelid")?,
            IndexFacts {
                name: fields.name("nspname", "relname")?,
                definition: fields.rendered("definition", fields.get("indexrelid")?)?,
                is_unique: fields.get("indisunique")?,
                is_primary: fields.get("indisprimary")?,
                is_valid: fields.get("indisvalid")?,
            },
        ));
    }
    Ok(indexes)
}
