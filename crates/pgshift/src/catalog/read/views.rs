//! Views and materialized views whose rewrite rule depends on each relation
//! (`pg_depend` from `pg_rewrite` to `pg_class`), directly; a view on such a view
//! depends on the view, not on the relation.

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use pgshift_sql::QualifiedName;

const STEP: &str = "dependent views";

const SQL: &str = "\
SELECT DISTINCT d.refobjid, vn.nspname, v.relname, v.relkind
  FROM pg_catalog.pg_depend d
  JOIN pg_catalog.pg_rewrite w ON w.oid OPERATOR(pg_catalog.=) d.objid
  JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) w.ev_class
  JOIN pg_catalog.pg_namespace vn ON vn.oid OPERATOR(pg_catalog.=) v.relnamespace
 WHERE d.classid OPERATOR(pg_catalog.=)
           'pg_catalog.pg_rewrite'::pg_catalog.regclass::pg_catalog.oid
   AND d.refclassid OPERATOR(pg_catalog.=)
           'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
   AND d.refobjid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
   AND v.oid OPERATOR(pg_catalog.<>) d.refobjid
 ORDER BY d.refobjid, vn.nspname, v.relname";

/// Reads the views depending on `oids`, as (relation OID, view name).
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
) -> Result<Vec<(u32, QualifiedName)>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut views = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        if matches!(fields.required_char("relkind")?, 'v' | 'm') {
            views.push((fields.get("refobjid")?, fields.name("nspname", "relname")?));
        }
    }
    Ok(views)
}
