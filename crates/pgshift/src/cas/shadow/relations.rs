//! Reading the source tree's relations, columns and indexes (and the scratch
//! tree's, after the statement) as the shadow needs them.

use std::collections::HashMap;

use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

use super::{db, ChildNames};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;

/// A relation of the source tree, as the shadow needs it beyond [`source::SourceFacts`].
#[derive(Debug)]
pub(super) struct Relation {
    pub(super) oid: u32,
    /// The source's name (the final name).
    pub(super) name: QualifiedName,
    /// Its counterpart in the scratch schema.
    pub(super) scratch: QualifiedName,
    /// The shadow's name for it (in the source's schema).
    pub(super) shadow: QualifiedName,
    pub(super) tablespace: Option<String>,
    pub(super) owner: String,
    pub(super) toast_options: Vec<String>,
    pub(super) replica_identity: String,
    pub(super) rls: (bool, bool),
    /// Its columns' settings.
    pub(super) columns: Vec<ColumnSettings>,
    /// `(name, default expression, not null)`.
    pub(super) defaults: Vec<(String, Option<String>, bool)>,
}

/// A column's settings that `LIKE` does not copy (or, on a partition, at all).
#[derive(Debug)]
pub(super) struct ColumnSettings {
    pub(super) name: String,
    /// An explicit statistics target.
    pub(super) statistics: Option<i32>,
    /// `attoptions`.
    pub(super) options: Vec<String>,
    pub(super) comment: Option<String>,
    /// `attcompression` (`p`, `l`, or empty for the default).
    pub(super) compression: String,
}

/// An index of the source tree.
#[derive(Debug)]
pub(super) struct SourceIndexFacts {
    /// Position of its relation in the tree (0: the table).
    pub(super) relation: usize,
    pub(super) name: String,
    pub(super) definition: String,
    /// `(name, pg_get_constraintdef)` of the constraint it backs.
    pub(super) constraint: Option<(String, String)>,
    /// The parent index it is attached to.
    pub(super) parent: Option<String>,
    pub(super) tablespace: Option<String>,
    pub(super) replica_identity: bool,
    pub(super) clustered: bool,
    pub(super) valid: bool,
    /// The index's storage parameters.
    pub(super) options: Vec<String>,
    pub(super) comment: Option<String>,
    pub(super) constraint_comment: Option<String>,
    /// Explicit statistics targets of its columns, as `ALTER INDEX … ALTER COLUMN`
    /// takes them: `(column number, target)`.
    pub(super) statistics: Vec<(i32, i32)>,
}

/// The explicit statistics targets of an index's columns (`i`: the `pg_index` row),
/// as `attnum:target` texts.
pub(super) const INDEX_STATISTICS: &str = "ARRAY(SELECT a.attnum::pg_catalog.text || ':' || a.attstattarget::pg_catalog.text \
      FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) i.indexrelid \
       AND coalesce(a.attstattarget::pg_catalog.int4, -1) OPERATOR(pg_catalog.<>) -1 ORDER BY a.attnum)";

/// Parses [`INDEX_STATISTICS`].
pub(super) fn index_statistics(texts: Vec<String>) -> Vec<(i32, i32)> {
    texts
        .iter()
        .filter_map(|t| {
            let (column, target) = t.split_once(':')?;
            Some((column.parse().ok()?, target.parse().ok()?))
        })
        .collect()
}

pub(super) async fn read_relations(
    client: &Client,
    plan: &RunPlan,
    scratch_schema: &str,
) -> Result<Vec<Relation>, CasError> {
    let mut out = Vec::new();
    let tree: Vec<(u32, &QualifiedName, &QualifiedName)> =
        std::iter::once((plan.source.table.oid, &plan.source.table.name, &plan.shadow))
            .chain(
                plan.source
                    .partitions
                    .iter()
                    .zip(&plan.shadow_partitions)
                    .map(|(p, s)| (p.relation.oid, &p.relation.name, s)),
            )
            .collect();
    for (oid, name, shadow) in tree {
        let row = client
            .query_one(
                "SELECT (SELECT ts.spcname::pg_catalog.text FROM pg_catalog.pg_tablespace ts WHERE ts.oid OPERATOR(pg_catalog.=) c.reltablespace), \
                        pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text, \
                        coalesce((SELECT t.reloptions FROM pg_catalog.pg_class t WHERE t.oid OPERATOR(pg_catalog.=) c.reltoastrelid), '{}')::pg_catalog.text[], \
                        c.relreplident::pg_catalog.text, c.relrowsecurity, c.relforcerowsecurity \
                   FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
                &[&oid],
            )
            .await
            .map_err(db("reading the source's relations"))?;
        let columns = client
            .query(
                "SELECT a.attname::pg_catalog.text, NULLIF(a.attstattarget::pg_catalog.int4, -1), \
                        coalesce(a.attoptions, '{}')::pg_catalog.text[], pg_catalog.col_description(a.attrelid, a.attnum), \
                        (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d \
                          WHERE d.adrelid OPERATOR(pg_catalog.=) a.attrelid AND d.adnum OPERATOR(pg_catalog.=) a.attnum), \
                        a.attnotnull, a.attgenerated::pg_catalog.text, a.attcompression::pg_catalog.text \
                   FROM pg_catalog.pg_attribute a \
                  WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped \
                  ORDER BY a.attnum",
                &[&oid],
            )
            .await
            .map_err(db("reading the source's columns"))?;
        out.push(Relation {
            oid,
            name: name.clone(),
            scratch: QualifiedName::qualified(scratch_schema, name.name.clone()),
            shadow: shadow.clone(),
            tablespace: row.get(0),
            owner: row.get(1),
            toast_options: row.get(2),
            replica_identity: row.get(3),
            rls: (row.get(4), row.get(5)),
            columns: columns
                .iter()
                .map(|r| ColumnSettings {
                    name: r.get(0),
                    statistics: r.get(1),
                    options: r.get(2),
                    comment: r.get(3),
                    compression: r.get(7),
                })
                .collect(),
            defaults: columns
                .iter()
                .filter(|r| r.get::<_, String>(6).is_empty())
                .map(|r| (r.get(0), r.get(4), r.get(5)))
                .collect(),
        });
    }
    Ok(out)
}

pub(super) async fn read_source_indexes(
    client: &Client,
    tree: &[Relation],
) -> Result<Vec<SourceIndexFacts>, CasError> {
    let oids: Vec<u32> = tree.iter().map(|r| r.oid).collect();
    let rows = client
        .query(
            format!("SELECT i.indrelid, ic.relname::pg_catalog.text, pg_catalog.pg_get_indexdef(i.indexrelid), \
                    con.conname::pg_catalog.text, CASE WHEN con.oid IS NOT NULL THEN pg_catalog.pg_get_constraintdef(con.oid) END, \
                    (SELECT p.relname::pg_catalog.text FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) h.inhparent \
                      WHERE h.inhrelid OPERATOR(pg_catalog.=) i.indexrelid), \
                    (SELECT ts.spcname::pg_catalog.text FROM pg_catalog.pg_tablespace ts WHERE ts.oid OPERATOR(pg_catalog.=) ic.reltablespace), \
                    i.indisreplident, i.indisclustered, i.indisvalid, coalesce(ic.reloptions, '{{}}')::pg_catalog.text[], \
                    pg_catalog.obj_description(i.indexrelid, 'pg_class'), \
                    CASE WHEN con.oid IS NOT NULL THEN pg_catalog.obj_description(con.oid, 'pg_constraint') END, \
                    {INDEX_STATISTICS} \
               FROM pg_catalog.pg_index i \
               JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
               LEFT JOIN pg_catalog.pg_constraint con ON con.conindid OPERATOR(pg_catalog.=) i.indexrelid \
                    AND con.conrelid OPERATOR(pg_catalog.=) i.indrelid AND con.contype OPERATOR(pg_catalog.=) ANY ('{{p,u,x}}') \
              WHERE i.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) ORDER BY i.indexrelid"
            ).as_str(),
            &[&oids],
        )
        .await
        .map_err(db("reading the source's indexes"))?;
    Ok(rows
        .iter()
        .map(|row| {
            let relid: u32 = row.get(0);
            SourceIndexFacts {
                relation: oids.iter().position(|o| *o == relid).unwrap_or(0),
                name: row.get(1),
                definition: row.get(2),
                constraint: match (
                    row.get::<_, Option<String>>(3),
                    row.get::<_, Option<String>>(4),
                ) {
                    (Some(name), Some(def)) => Some((name, def)),
                    _ => None,
                },
                parent: row.get(5),
                tablespace: row.get(6),
                replica_identity: row.get(7),
                clustered: row.get(8),
                valid: row.get(9),
                options: row.get(10),
                comment: row.get(11),
                constraint_comment: row.get(12),
                statistics: index_statistics(row.get(13)),
            }
        })
        .collect())
}

/// The indexes the partitions of the scratch table got for the table's indexes:
/// `(partition position, parent index name) → child name`.
pub(super) async fn read_children(
    client: &Client,
    scratch_schema: &str,
    tree: &[Relation],
) -> Result<ChildNames, CasError> {
    let rows = client
        .query(
            "SELECT t.relname::pg_catalog.text, p.relname::pg_catalog.text, ic.relname::pg_catalog.text \
               FROM pg_catalog.pg_inherits h \
               JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) h.inhrelid \
               JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) h.inhparent \
               JOIN pg_catalog.pg_index i ON i.indexrelid OPERATOR(pg_catalog.=) ic.oid \
               JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.indrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text",
            &[&scratch_schema],
        )
        .await
        .map_err(db("reading the shadow's partition indexes"))?;
    let mut out = HashMap::new();
    for row in rows {
        let table: String = row.get(0);
        if let Some(position) = tree.iter().position(|r| r.name.name == table) {
            out.insert((position, row.get::<_, String>(1)), row.get::<_, String>(2));
        }
    }
    Ok(out)
}

/// A column of the shadow, as its catalog has it after the statement.
pub(super) struct ShadowColumn {
    pub(super) name: String,
    /// `format_type`.
    pub(super) type_sql: String,
    /// Generated (stored or virtual): computed by the shadow, not copied.
    pub(super) generated: bool,
    /// `attnotnull`: a NOT NULL constraint, possibly not validated (PostgreSQL 18).
    pub(super) not_null: bool,
}

/// A table's columns, in order.
pub(super) async fn read_columns(
    client: &Client,
    table: &QualifiedName,
) -> Result<Vec<ShadowColumn>, CasError> {
    let rows = client
        .query(
            "SELECT a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attgenerated::pg_catalog.text, a.attnotnull \
               FROM pg_catalog.pg_attribute a \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table.schema.clone().unwrap_or_default(), &table.name],
        )
        .await
        .map_err(|e| CasError::db("reading the shadow's columns", e))?;
    Ok(rows
        .iter()
        .map(|r| ShadowColumn {
            name: r.get(0),
            type_sql: r.get(1),
            generated: !r.get::<_, String>(2).is_empty(),
            not_null: r.get(3),
        })
        .collect())
}
