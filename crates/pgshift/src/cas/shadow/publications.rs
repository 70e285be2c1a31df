//! Publication membership, carried to the new tree at the swap.

use pgshift_sql::quote_ident;
use tokio_postgres::Client;

use super::relations::Relation;
use super::statement::columns_exist;
use super::{checked, db, refuse};
use crate::cas::error::CasError;
use crate::cas::plan::{Carry, RunPlan};

/// Publication membership of the table and of each partition, with row filters and
/// column lists (PostgreSQL 15 and later): moved to the new tree at the swap.
pub(super) async fn publications(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
    kept: &[String],
    carry: &mut Carry,
) -> Result<(), CasError> {
    let version: i32 = client
        .query_one(
            "SELECT pg_catalog.current_setting('server_version_num')::pg_catalog.int4",
            &[],
        )
        .await
        .map_err(db("reading the server version"))?
        .get(0);
    let details = if version >= 150000 {
        "pg_catalog.pg_get_expr(r.prqual, r.prrelid), \
         ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(r.prattrs::pg_catalog.int2[]) WITH ORDINALITY k(attnum, ord) \
                JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) r.prrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum ORDER BY k.ord)"
    } else {
        "NULL::pg_catalog.text, '{}'::pg_catalog.text[]"
    };
    let names = plan.names();
    for relation in tree {
        let rows = client
            .query(
                &format!(
                    "SELECT p.pubname::pg_catalog.text, {details} FROM pg_catalog.pg_publication_rel r \
                       JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid \
                      WHERE r.prrelid OPERATOR(pg_catalog.=) $1 ORDER BY 1"
                ),
                &[&relation.oid],
            )
            .await
            .map_err(db("reading publications"))?;
        for row in rows {
            let publication: String = row.get(0);
            let filter: Option<String> = row.get(1);
            let columns: Vec<String> = row.get(2);
            let filtered = filter
                .as_ref()
                .is_none_or(|f| columns_exist(&format!("SELECT 1 WHERE {f}"), kept));
            if !filtered || columns.iter().any(|c| !kept.contains(c)) {
                return Err(refuse(format!(
                    "publication {} names a column of {} that the statement drops (in its column list or row filter); PostgreSQL would refuse the statement too",
                    quote_ident(&publication),
                    relation.name
                )));
            }
            let mut add = format!(
                "ALTER PUBLICATION {} ADD TABLE {}",
                quote_ident(&publication),
                relation.name
            );
            if !columns.is_empty() {
                let columns: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
                add.push_str(&format!(" ({})", columns.join(", ")));
            }
            if let Some(filter) = filter {
                add.push_str(&format!(" WHERE ({filter})"));
            }
            carry.after_swap.push(format!(
                "ALTER PUBLICATION {} DROP TABLE {}",
                quote_ident(&publication),
                names.old(&relation.name)
            ));
            carry.after_swap.push(checked(add, 1)?);
        }
    }
    Ok(())
}
