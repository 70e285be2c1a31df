//! The relation itself (`pg_class`): kind, persistence, owner, RLS, replica identity,
//! its partitioned parent or indexed table, its partition key, and its direct
//! partitions.

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::{PartitionFacts, Persistence, RelationFacts, RelationKind, Sizes};

const STEP: &str = "relation";
const PARTITIONS_STEP: &str = "partitions";

const SQL: &str = concat!(
    locked_cte!(),
    "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relpersistence,
       pg_catalog.pg_get_userbyid(c.relowner) AS owner,
       c.relrowsecurity, c.relforcerowsecurity, c.relreplident,
       CASE WHEN c.relkind OPERATOR(pg_catalog.<>) 'p' THEN NULL WHEN c.oid IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_partkeydef(c.oid) END AS partition_key,
       pn.nspname AS parent_schema, p.relname AS parent_name,
       tn.nspname AS table_schema, t.relname AS table_name
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  LEFT JOIN pg_catalog.pg_inherits i
    ON c.relispartition AND i.inhrelid OPERATOR(pg_catalog.=) c.oid
  LEFT JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) i.inhparent
  LEFT JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.relnamespace
  LEFT JOIN pg_catalog.pg_index x ON x.indexrelid OPERATOR(pg_catalog.=) c.oid
  LEFT JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) x.indrelid
  LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.relnamespace
 WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])"
);

const PARTITIONS_SQL: &str = concat!(
    locked_cte!(),
    "SELECT i.inhparent, c.oid, n.nspname, c.relname, c.relkind,
       CASE WHEN c.oid IN (SELECT k.relation FROM locked k) OR i.inhparent IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_expr(c.relpartbound, c.oid) END AS bound,
       pt.partdefid OPERATOR(pg_catalog.=) c.oid AS is_default
  FROM pg_catalog.pg_inherits i
  JOIN pg_catalog.pg_partitioned_table pt ON pt.partrelid OPERATOR(pg_catalog.=) i.inhparent
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 WHERE i.inhparent OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
   AND c.relispartition
 ORDER BY i.inhparent, n.nspname, c.relname"
);

/// Reads the relations `oids` (in that order), every fact family left empty.
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
) -> Result<Vec<RelationFacts>, CatalogError> {
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut relations = Vec::with_capacity(rows.len());
    for row in &rows {
        relations.push(relation(Fields::new(row, STEP))?);
    }
    let mut ordered = Vec::with_capacity(oids.len());
    for oid in oids {
        let position = relations
            .iter()
            .position(|relation: &RelationFacts| relation.oid == *oid)
            .ok_or(CatalogError::ChangedDuringRead {
                step: STEP,
                oid: *oid,
            })?;
        ordered.push(relations.swap_remove(position));
    }
    Ok(ordered)
}

fn relation(fields: Fields<'_>) -> Result<RelationFacts, CatalogError> {
    let persistence = match fields.required_char("relpersistence")? {
        'p' => Persistence::Permanent,
        'u' => Persistence::Unlogged,
        't' => Persistence::Temporary,
        _ => {
            return Err(CatalogError::UnexpectedValue {
                step: STEP,
                what: "relpersistence",
            })
        }
    };
    Ok(RelationFacts {
        oid: fields.get("oid")?,
        name: fields.name("nspname", "relname")?,
        kind: RelationKind::from_relkind(fields.required_char("relkind")?),
        persistence,
        owner: fields.get::<Option<String>>("owner")?.unwrap_or_default(),
        sizes: Sizes::default(),
        row_estimate: -1,
        sizes_estimated: false,
        locks_elsewhere: Vec::new(),
        parent: fields.optional_name("parent_schema", "parent_name")?,
        indexed_table: fields.optional_name("table_schema", "table_name")?,
        partition_key: fields.get("partition_key")?,
        partitions: Vec::new(),
        columns: Vec::new(),
        primary_key: None,
        indexes: Vec::new(),
        constraints: Vec::new(),
        triggers: Vec::new(),
        foreign_keys_out: Vec::new(),
        schema_constraint_names: Vec::new(),
        added_by_input: Vec::new(),
        foreign_keys_in: Vec::new(),
        dependent_views: Vec::new(),
        publications: Vec::new(),
        rls_enabled: fields.get("relrowsecurity")?,
        rls_forced: fields.get("relforcerowsecurity")?,
        replica_identity: fields.required_char("relreplident")?,
        related: Vec::new(),
    })
}

/// The direct partitions of each partitioned table among `oids`, by parent OID.
pub(super) async fn partitions(
    client: &Client,
    oids: &[u32],
) -> Result<Vec<(u32, PartitionFacts)>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(client, PARTITIONS_STEP, PARTITIONS_SQL, &[&oids]).await?;
    let mut partitions = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, PARTITIONS_STEP);
        let bound = fields.rendered("bound", fields.get("oid")?)?;
        partitions.push((
            fields.get("inhparent")?,
            PartitionFacts {
                name: fields.name("nspname", "relname")?,
                is_default: fields.get::<Option<bool>>("is_default")?.unwrap_or(false),
                bound,
                is_partitioned: fields.required_char("relkind")? == 'p',
            },
        ));
    }
    Ok(partitions)
}
