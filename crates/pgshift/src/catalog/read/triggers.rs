//! User triggers on each relation: the internal triggers that enforce foreign keys
//! (and other constraints) are left out; clones of a parent's trigger on a partition
//! (`tgparentid <> 0`) are listed and flagged.
//!
//! A user trigger is one with `NOT tgisinternal`, or, because PostgreSQL 13 and 14
//! mark clones internal, a clone that belongs to no constraint or to a constraint
//! trigger's own constraint (`contype = 't'`).

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::{TriggerEnabled, TriggerFacts};

const STEP: &str = "triggers";

const SQL: &str = concat!(
    locked_cte!(),
    "SELECT t.tgrelid, t.oid, t.tgname, t.tgenabled, t.tgconstraint, t.tgdeferrable,
       t.tginitdeferred, t.tgparentid,
       CASE WHEN t.tgrelid IN (SELECT k.relation FROM locked k) THEN ",
    not_read!(),
    " ELSE pg_catalog.pg_get_triggerdef(t.oid) END AS definition
  FROM pg_catalog.pg_trigger t
  LEFT JOIN pg_catalog.pg_constraint c ON c.oid OPERATOR(pg_catalog.=) t.tgconstraint
 WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])
   AND (NOT t.tgisinternal
        OR (t.tgparentid OPERATOR(pg_catalog.<>) '0'::pg_catalog.oid
            AND (c.oid IS NULL OR c.contype OPERATOR(pg_catalog.=) 't')))
 ORDER BY t.tgrelid, t.tgname"
);

/// Reads the user triggers of `oids`, as (relation OID, facts).
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
) -> Result<Vec<(u32, TriggerFacts)>, CatalogError> {
    if oids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut triggers = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let enabled = enabled(&fields, STEP)?;
        triggers.push((
            fields.get("tgrelid")?,
            TriggerFacts {
                name: fields.get("tgname")?,
                enabled,
                is_constraint: fields.get::<u32>("tgconstraint")? != 0,
                deferrable: fields.get("tgdeferrable")?,
                initially_deferred: fields.get("tginitdeferred")?,
                is_clone: fields.get::<u32>("tgparentid")? != 0,
                definition: fields.rendered("definition", fields.get("oid")?)?,
            },
        ));
    }
    Ok(triggers)
}

/// The `tgenabled` column of a row of the query of `step`.
pub(crate) fn enabled(
    fields: &Fields<'_>,
    step: &'static str,
) -> Result<TriggerEnabled, CatalogError> {
    TriggerEnabled::from_char(fields.required_char("tgenabled")?).ok_or(
        CatalogError::UnexpectedValue {
            step,
            what: "tgenabled",
        },
    )
}
