//! Columns (`pg_attribute`), in order, dropped and system columns left out.
//!
//! `type_name` is the internal type name the binary-coercion rules use (`varchar`,
//! `int4`, `timestamptz`), schema-qualified outside `pg_catalog` (`public.mood`), and
//! `elem[]` for an array type (`int4[]`, as a parsed `int[]` is named); `typmod` is the
//! raw `atttypmod`. A generated column's expression lives in `pg_attrdef` too, but it
//! is not a default: `default` stays `None` for it; the columns it uses list it in
//! `used_by_generated` (read from `pg_depend`).

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::ColumnFacts;

const STEP: &str = "columns";

const SQL: &str = concat!(
    locked_cte!(),
    "SELECT a.attrelid, a.attnum, a.attname,
       pg_catalog.format_type(a.atttypid, a.atttypmod) AS type_sql,
       a.atttypid, a.atttypmod, a.attnotnull, a.attgenerated, a.attidentity,
       t.typname, tn.nspname AS type_schema,
       e.typname AS element_name, en.nspname AS element_schema,
       CASE WHEN d.adbin IS NULL THEN NULL WHEN d.adrelid IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_expr(d.adbin, d.adrelid) END AS default_expr,
       ARRAY(SELECT g.attname::pg_catalog.text
               FROM pg_catalog.pg_depend dep
               JOIN pg_catalog.pg_attrdef gd
                 ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                AND dep.objid OPERATOR(pg_catalog.=) gd.oid
               JOIN pg_catalog.pg_attribute g
                 ON g.attrelid OPERATOR(pg_catalog.=) gd.adrelid AND g.attnum OPERATOR(pg_catalog.=) gd.adnum
              WHERE dep.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                AND dep.refobjid OPERATOR(pg_catalog.=) a.attrelid
                AND dep.refobjsubid OPERATOR(pg_catalog.=) a.attnum
                AND g.attgenerated OPERATOR(pg_catalog.<>) ''
                AND g.attnum OPERATOR(pg_catalog.<>) a.attnum
                AND NOT g.attisdropped
              ORDER BY g.attnum) AS used_by_generated
  FROM pg_catalog.pg_attribute a
  LEFT JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
  LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.typnamespace
  LEFT JOIN pg_catalog.pg_type e
    ON e.oid OPERATOR(pg_catalog.=) t.typelem AND e.typarray OPERATOR(pg_catalog.=) t.oid
  LEFT JOIN pg_catalog.pg_namespace en ON en.oid OPERATOR(pg_catalog.=) e.typnamespace
  LEFT JOIN pg_catalog.pg_attrdef d
    ON d.adrelid OPERATOR(pg_catalog.=) a.attrelid AND d.adnum OPERATOR(pg_catalog.=) a.attnum
 WHERE a.attrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
   AND a.attnum OPERATOR(pg_catalog.>) 0
   AND NOT a.attisdropped
 ORDER BY a.attrelid, a.attnum"
);

/// One column with its number, which keys and constraints refer to.
#[derive(Clone, Debug)]
pub(super) struct Column {
    /// The relation.
    pub(super) relid: u32,
    /// `attnum`.
    pub(super) attnum: i16,
    /// The facts.
    pub(super) facts: ColumnFacts,
}

/// Reads the columns of `oids`, ordered by relation and `attnum`.
pub(super) async fn read(client: &Client, oids: &[u32]) -> Result<Vec<Column>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut columns = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let relid: u32 = fields.get("attrelid")?;
        let generated = fields.char("attgenerated")?;
        let default = fields.get::<Option<String>>("default_expr")?;
        columns.push(Column {
            relid,
            attnum: fields.get("attnum")?,
            facts: ColumnFacts {
                name: fields.get("attname")?,
                type_sql: fields.rendered("type_sql", relid)?,
                type_oid: fields.get("atttypid")?,
                type_name: type_name(fields)?.ok_or(CatalogError::ChangedDuringRead {
                    step: STEP,
                    oid: fields.get("atttypid")?,
                })?,
                typmod: fields.get("atttypmod")?,
                not_null: fields.get("attnotnull")?,
                default: if generated.is_some() { None } else { default },
                generated,
                identity: fields.char("attidentity")?,
                used_by_generated: fields.get("used_by_generated")?,
            },
        });
    }
    Ok(columns)
}

/// The internal name of the column's type, `None` when the type row is missing.
fn type_name(fields: Fields<'_>) -> Result<Option<String>, CatalogError> {
    let element = (
        fields.get::<Option<String>>("element_schema")?,
        fields.get::<Option<String>>("element_name")?,
    );
    if let (Some(schema), Some(name)) = element {
        return Ok(Some(format!("{}[]", qualified(&schema, &name))));
    }
    match (
        fields.get::<Option<String>>("type_schema")?,
        fields.get::<Option<String>>("typname")?,
    ) {
        (Some(schema), Some(name)) => Ok(Some(qualified(&schema, &name))),
        _ => Ok(None),
    }
}

/// `name` in `pg_catalog`, else `schema.name`.
fn qualified(schema: &str, name: &str) -> String {
    if schema == "pg_catalog" {
        name.to_owned()
    } else {
        format!("{schema}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_types_are_bare() {
        assert_eq!(qualified("pg_catalog", "varchar"), "varchar");
        assert_eq!(qualified("public", "mood"), "public.mood");
    }
}
