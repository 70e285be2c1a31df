//! Publications that publish each table: `FOR ALL TABLES` ones, ones that list the
//! table or one of its partition ancestors (`pg_publication_rel`), and on PostgreSQL
//! 15+ ones that list the schema of the table or of an ancestor
//! (`pg_publication_namespace`). Only permanent tables can be published, so the caller
//! passes only those.

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};

const STEP: &str = "publications";

/// The first server version with schema publications.
const SCHEMA_PUBLICATIONS_SINCE: i32 = 150000;

const SQL_BEFORE_15: &str = "\
WITH target AS (
    SELECT r.relid FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS r(relid)
), ancestor AS (
    SELECT t.relid, a.relid::pg_catalog.oid AS ancestor
      FROM target t CROSS JOIN LATERAL pg_catalog.pg_partition_ancestors(t.relid) AS a
    UNION
    SELECT t.relid, t.relid FROM target t
)
SELECT t.relid, p.pubname
  FROM target t CROSS JOIN pg_catalog.pg_publication p
 WHERE p.puballtables
UNION
SELECT an.relid, p.pubname
  FROM ancestor an
  JOIN pg_catalog.pg_publication_rel pr ON pr.prrelid OPERATOR(pg_catalog.=) an.ancestor
  JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) pr.prpubid
 ORDER BY 1, 2";

const SQL_SINCE_15: &str = "\
WITH target AS (
    SELECT r.relid FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS r(relid)
), ancestor AS (
    SELECT t.relid, a.relid::pg_catalog.oid AS ancestor
      FROM target t CROSS JOIN LATERAL pg_catalog.pg_partition_ancestors(t.relid) AS a
    UNION
    SELECT t.relid, t.relid FROM target t
)
SELECT t.relid, p.pubname
  FROM target t CROSS JOIN pg_catalog.pg_publication p
 WHERE p.puballtables
UNION
SELECT an.relid, p.pubname
  FROM ancestor an
  JOIN pg_catalog.pg_publication_rel pr ON pr.prrelid OPERATOR(pg_catalog.=) an.ancestor
  JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) pr.prpubid
UNION
SELECT an.relid, p.pubname
  FROM ancestor an
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) an.ancestor
  JOIN pg_catalog.pg_publication_namespace pn
    ON pn.pnnspid OPERATOR(pg_catalog.=) c.relnamespace
  JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) pn.pnpubid
 ORDER BY 1, 2";

/// Reads the publications of the tables `oids`, as (table OID, publication name).
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
    server_version_num: i32,
) -> Result<Vec<(u32, String)>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = if server_version_num >= SCHEMA_PUBLICATIONS_SINCE {
        SQL_SINCE_15
    } else {
        SQL_BEFORE_15
    };
    let rows = query(client, STEP, sql, &[&oids]).await?;
    let mut publications = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        publications.push((fields.get("relid")?, fields.get("pubname")?));
    }
    Ok(publications)
}
