//! The audit's one catalog read: every user table, its partition edge, its triggers
//! and foreign keys, and who may set `session_replication_role`, all in one
//! `REPEATABLE READ READ ONLY` transaction.
//!
//! Every catalog object is schema-qualified (SE-1) and nothing a user wrote is put
//! into SQL. No query takes a relation lock: only catalog rows are read, the trigger
//! function is rendered through `regprocedure` and a partition bound through
//! `pg_get_expr(relpartbound, 0)`, which (given no relation) opens none — checked
//! against `pg_locks` by `tests/audit.rs`. So the audit never queues behind, nor
//! blocks, a migration's lock.

use tokio_postgres::Client;

use super::facts::{
    AuditFacts, AuditRelation, AuditTrigger, Definition, Events, TableKind, Timing,
};
use crate::catalog::read::rows::{query, Fields};
use crate::catalog::read::{server, transaction, triggers};
use crate::catalog::CatalogError;

const RELATIONS_SQL: &str = "\
SELECT c.oid, n.nspname, c.relname, c.relkind::pg_catalog.text AS relkind,
       i.inhparent AS parent,
       CASE WHEN c.relispartition THEN pg_catalog.pg_get_expr(c.relpartbound, 0) END AS bound,
       ARRAY(SELECT k.conname::pg_catalog.text FROM pg_catalog.pg_constraint k
              WHERE k.conrelid OPERATOR(pg_catalog.=) c.oid
                AND k.contype OPERATOR(pg_catalog.=) 'f'
                AND k.conparentid OPERATOR(pg_catalog.=) '0'::pg_catalog.oid
              ORDER BY k.conname) AS foreign_keys
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  LEFT JOIN pg_catalog.pg_inherits i
         ON i.inhrelid OPERATOR(pg_catalog.=) c.oid AND c.relispartition
 WHERE c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p', 'f']::pg_catalog.\"char\"[])
   AND n.nspname OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog', 'information_schema'])
   AND n.nspname OPERATOR(pg_catalog.!~) '^pg_(toast|temp_|toast_temp_)'
 ORDER BY n.nspname, c.relname";

/// User triggers, as `catalog::read::triggers` defines them: not internal, or (since
/// PostgreSQL 13 and 14 mark clones internal) a clone that belongs to no constraint
/// or to a constraint trigger's own constraint.
const TRIGGERS_SQL: &str = "\
SELECT t.oid, t.tgrelid, t.tgname, t.tgenabled, t.tgtype, t.tgconstraint,
       t.tgdeferrable, t.tginitdeferred, t.tgparentid,
       t.tgfoid::pg_catalog.regprocedure::pg_catalog.text AS function
  FROM pg_catalog.pg_trigger t
  JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) t.tgrelid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) r.relnamespace
  LEFT JOIN pg_catalog.pg_constraint c ON c.oid OPERATOR(pg_catalog.=) t.tgconstraint
 WHERE r.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p', 'f']::pg_catalog.\"char\"[])
   AND n.nspname OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog', 'information_schema'])
   AND n.nspname OPERATOR(pg_catalog.!~) '^pg_(toast|temp_|toast_temp_)'
   AND (NOT t.tgisinternal
        OR (t.tgparentid OPERATOR(pg_catalog.<>) '0'::pg_catalog.oid
            AND (c.oid IS NULL OR c.contype OPERATOR(pg_catalog.=) 't')))
 ORDER BY t.tgrelid, t.tgname";

const SUPERUSERS_SQL: &str = "\
SELECT r.rolname::pg_catalog.text AS role FROM pg_catalog.pg_roles r WHERE r.rolsuper";

/// PostgreSQL 15+: roles granted `SET` on the parameter (`pg_parameter_acl`).
const PARAMETER_GRANTEES_SQL: &str = "\
SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) '0'::pg_catalog.oid THEN 'PUBLIC'
                     ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS role
  FROM pg_catalog.pg_parameter_acl p,
       LATERAL pg_catalog.aclexplode(p.paracl) a
 WHERE p.parname OPERATOR(pg_catalog.=) 'session_replication_role'
   AND a.privilege_type OPERATOR(pg_catalog.=) 'SET'";

/// Reads the audit's facts in one snapshot. The client must be outside any
/// transaction block ([`CatalogError::AlreadyInTransaction`] otherwise, nothing
/// touched); the read commits its own transaction, or rolls it back on error.
// INV: SE-1 — every catalog object here is schema-qualified; no user text reaches SQL.
pub async fn read(client: &Client) -> Result<AuditFacts, CatalogError> {
    transaction::within(client, read_in_transaction(client)).await
}

async fn read_in_transaction(client: &Client) -> Result<AuditFacts, CatalogError> {
    let server = server::read(client).await?.server;
    let relations = relations(client).await?;
    let triggers = triggers(client).await?;
    let mut replica_role_holders = roles(client, "superusers", SUPERUSERS_SQL).await?;
    if server.version_num >= 150_000 {
        replica_role_holders.extend(roles(client, "parameter-acl", PARAMETER_GRANTEES_SQL).await?);
    }
    replica_role_holders.sort();
    replica_role_holders.dedup();
    Ok(AuditFacts {
        server,
        relations,
        triggers,
        replica_role_holders,
    })
}

async fn relations(client: &Client) -> Result<Vec<AuditRelation>, CatalogError> {
    const STEP: &str = "audit-relations";
    let rows = query(client, STEP, RELATIONS_SQL, &[]).await?;
    let mut relations = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let kind = match fields.get::<String>("relkind")?.as_str() {
            "r" => TableKind::Table,
            "p" => TableKind::Partitioned,
            "f" => TableKind::Foreign,
            _ => {
                return Err(CatalogError::UnexpectedValue {
                    step: STEP,
                    what: "relkind",
                })
            }
        };
        relations.push(AuditRelation {
            oid: fields.get("oid")?,
            name: fields.name("nspname", "relname")?,
            kind,
            parent: fields.get("parent")?,
            bound: fields.get("bound")?,
            foreign_keys: fields.get("foreign_keys")?,
        });
    }
    Ok(relations)
}

async fn triggers(client: &Client) -> Result<Vec<AuditTrigger>, CatalogError> {
    const STEP: &str = "audit-triggers";
    let rows = query(client, STEP, TRIGGERS_SQL, &[]).await?;
    let mut triggers = Vec::with_capacity(rows.len());
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let enabled = triggers::enabled(&fields, STEP)?;
        let tgtype: i16 = fields.get("tgtype")?;
        let parent: u32 = fields.get("tgparentid")?;
        triggers.push(AuditTrigger {
            oid: fields.get("oid")?,
            relation: fields.get("tgrelid")?,
            name: fields.get("tgname")?,
            enabled,
            definition: Definition {
                row: tgtype & 1 != 0,
                timing: Timing::of(tgtype),
                events: Events::of(tgtype),
                constraint: fields.get::<u32>("tgconstraint")? != 0,
                deferrable: fields.get("tgdeferrable")?,
                initially_deferred: fields.get("tginitdeferred")?,
                function: fields.get("function")?,
            },
            parent: (parent != 0).then_some(parent),
        });
    }
    Ok(triggers)
}

async fn roles(
    client: &Client,
    step: &'static str,
    sql: &str,
) -> Result<Vec<String>, CatalogError> {
    let rows = query(client, step, sql, &[]).await?;
    rows.iter()
        .map(|row| Fields::new(row, step).get::<String>("role"))
        .collect()
}
