//! Constraints on each relation (`pg_constraint.conrelid`), with the primary key and
//! the outgoing foreign keys derived from them.
//!
//! Every kind is listed (on PostgreSQL 18, `NOT NULL` constraints too, as `n`), except
//! the rows PostgreSQL adds for a foreign key that references a partitioned table: one
//! per referenced partition, on the same referencing table, whose parent constraint
//! is on that same table. They are internal plumbing of the one constraint the user
//! wrote. Clones on a partition of a constraint of its parent (parent constraint on
//! another table) are real constraints of the partition and are kept.

use std::collections::HashMap;

use tokio_postgres::Client;

use super::columns::Column;
use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::{ConstraintFacts, ForeignKeyFacts, KeyFacts};

const STEP: &str = "constraints";

const SQL: &str = concat!(
    locked_cte!(),
    "SELECT c.conrelid, c.oid, c.conname, c.contype, c.convalidated, c.conkey,
       CASE WHEN c.conrelid IN (SELECT k.relation FROM locked k) OR c.confrelid IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_constraintdef(c.oid) END AS definition,
       pc.conrelid AS parent_conrelid,
       rn.nspname AS referencing_schema, r.relname AS referencing_name,
       fn.nspname AS referenced_schema, f.relname AS referenced_name
  FROM pg_catalog.pg_constraint c
  JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) c.conrelid
  JOIN pg_catalog.pg_namespace rn ON rn.oid OPERATOR(pg_catalog.=) r.relnamespace
  LEFT JOIN pg_catalog.pg_constraint pc ON pc.oid OPERATOR(pg_catalog.=) c.conparentid
  LEFT JOIN pg_catalog.pg_class f ON f.oid OPERATOR(pg_catalog.=) c.confrelid
  LEFT JOIN pg_catalog.pg_namespace fn ON fn.oid OPERATOR(pg_catalog.=) f.relnamespace
 WHERE c.conrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
 ORDER BY c.conrelid, c.conname, c.oid"
);

const NEARBY_STEP: &str = "constraint names of the schema";

/// The constraint names of each relation's schema that begin as its name does (its
/// first 16 characters: an unnamed constraint's name starts with at least that much of
/// its table's name).
const NEARBY_SQL: &str = "SELECT r.oid, c.conname::pg_catalog.text AS conname
  FROM pg_catalog.pg_class r
  JOIN pg_catalog.pg_constraint c ON c.connamespace OPERATOR(pg_catalog.=) r.relnamespace
   AND pg_catalog.starts_with(c.conname::pg_catalog.text, pg_catalog.left(r.relname::pg_catalog.text, 16))
 WHERE r.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
 ORDER BY r.oid, c.conname";

/// The names [`NEARBY_SQL`] reads, by relation.
pub(super) async fn read_schema_names(
    client: &Client,
    oids: &[u32],
) -> Result<HashMap<u32, Vec<String>>, CatalogError> {
    if oids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = query(client, NEARBY_STEP, NEARBY_SQL, &[&oids]).await?;
    let mut names: HashMap<u32, Vec<String>> = HashMap::new();
    for row in &rows {
        let fields = Fields::new(row, NEARBY_STEP);
        names
            .entry(fields.get("oid")?)
            .or_default()
            .push(fields.get("conname")?);
    }
    Ok(names)
}

/// The constraint facts of one relation.
#[derive(Clone, Debug, Default)]
pub(super) struct ConstraintSet {
    /// Every constraint.
    pub(super) constraints: Vec<ConstraintFacts>,
    /// The primary key.
    pub(super) primary_key: Option<KeyFacts>,
    /// Foreign keys on this relation.
    pub(super) foreign_keys_out: Vec<ForeignKeyFacts>,
}

/// Reads the constraints of `oids`; `columns` gives the primary key's column names
/// and types.
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
    columns: &[Column],
) -> Result<HashMap<u32, ConstraintSet>, CatalogError> {
    if oids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut sets: HashMap<u32, ConstraintSet> = HashMap::new();
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let relid: u32 = fields.get("conrelid")?;
        if fields.get::<Option<u32>>("parent_conrelid")? == Some(relid) {
            continue;
        }
        let oid: u32 = fields.get("oid")?;
        let constraint = ConstraintFacts {
            name: fields.get("conname")?,
            kind: fields.required_char("contype")?,
            definition: fields.rendered("definition", oid)?,
            validated: fields.get("convalidated")?,
        };
        let set = sets.entry(relid).or_default();
        match constraint.kind {
            'p' => {
                let keys = fields
                    .get::<Option<Vec<i16>>>("conkey")?
                    .unwrap_or_default();
                set.primary_key = Some(KeyFacts {
                    name: constraint.name.clone(),
                    columns: key_columns(relid, &keys, columns)?,
                });
            }
            'f' => set.foreign_keys_out.push(ForeignKeyFacts {
                name: constraint.name.clone(),
                referencing: fields.name("referencing_schema", "referencing_name")?,
                referenced: fields
                    .optional_name("referenced_schema", "referenced_name")?
                    .ok_or(CatalogError::ChangedDuringRead { step: STEP, oid })?,
                definition: constraint.definition.clone(),
                validated: constraint.validated,
            }),
            _ => {}
        }
        set.constraints.push(constraint);
    }
    Ok(sets)
}

/// The names and types of the key columns `keys` of `relid`, in key order.
fn key_columns(
    relid: u32,
    keys: &[i16],
    columns: &[Column],
) -> Result<Vec<(String, String)>, CatalogError> {
    keys.iter()
        .map(|attnum| {
            columns
                .iter()
                .find(|column| column.relid == relid && column.attnum == *attnum)
                .map(|column| (column.facts.name.clone(), column.facts.type_sql.clone()))
                .ok_or(CatalogError::UnexpectedValue {
                    step: STEP,
                    what: "primary key column number",
                })
        })
        .collect()
}
