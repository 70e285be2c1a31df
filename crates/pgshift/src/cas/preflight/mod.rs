//! Everything a run checks before anything is recorded, as one read-only function that
//! `apply` (through [`crate::cas::start_request`]) and `plan` can both call: the role's
//! privileges, a run already recorded for the table, what the swap cannot carry, row
//! security that would filter the engine's reads (`row_security`), ownership of every
//! object the swap alters (`owners`), what the swap could not make again around the
//! views that read the table (`views`), a key the capture can compare, and free disk
//! (`disk`: measured, or within the room the operator gives).
//!
//! Nothing here writes: the only statements sent are catalog reads and a type probe
//! (`SELECT NULL::t = NULL::t`).

mod disk;
mod owners;
mod row_security;
mod views;

use tokio_postgres::Client;

use super::error::CasError;
use super::keys::KeySpec;
use super::privileges;
use super::source::{self, SourceFacts};
use super::store;
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::ast::AlterTableType;
use pgshift_sql::{quote_ident, NodeEnum, QualifiedName, Statement};

pub use disk::DiskCheck;
pub(crate) use row_security::check_shadow as check_shadow_row_security;

/// What the preflight read, for the run to start from.
#[derive(Debug)]
pub struct Preflight {
    /// The source, read in one snapshot.
    pub facts: SourceFacts,
    /// Free disk: measured and enough, or why it could not be measured.
    pub disk: DiskCheck,
}

/// Checks, without writing anything, that a run of `statement` on the table with OID
/// `oid` may start; a refusal names its one cause and what would lift it.
pub async fn preflight(
    client: &Client,
    oid: u32,
    statement: &Statement,
    disk_room: Option<u64>,
) -> Result<Preflight, CasError> {
    before_source(client, oid).await?;
    from_source(client, oid, statement, disk_room).await
}

/// The same checks for `plan` and `apply`'s verdict before anything runs, reading the
/// source's facts only when `read_source` (they need ACCESS SHARE on the table, which a
/// lock held elsewhere would make wait; the run then meets that lock in its budget).
pub async fn preflight_read_only(
    client: &Client,
    oid: u32,
    statement: &Statement,
    read_source: bool,
    disk_room: Option<u64>,
) -> Result<(), CasError> {
    before_source(client, oid).await?;
    if read_source {
        from_source(client, oid, statement, disk_room).await?;
    }
    Ok(())
}

/// The checks that need no relation lock: the role's privileges and a run already
/// recorded for the table.
async fn before_source(client: &Client, oid: u32) -> Result<(), CasError> {
    privileges::check(client, oid).await?;
    if let Some((id, phase)) = store::active_id(client, oid).await? {
        return Err(CasError::Refused(Refusal::new(
            RefusalCause::RunInProgress,
            format!(
                "run {id} on this table is {phase} — resume it (pgshift resume) or abort it (pgshift abort)"
            ),
        )));
    }
    Ok(())
}

/// The checks made on the source's facts, read in one snapshot.
async fn from_source(
    client: &Client,
    oid: u32,
    statement: &Statement,
    disk_room: Option<u64>,
) -> Result<Preflight, CasError> {
    let facts = source::read(client, oid).await?;
    structure(&facts)?;
    views::check(client, oid, &facts.table.name.to_string()).await?;
    row_security::check(client, &facts, statement).await?;
    let target = target_tablespace(statement);
    owners::check(client, oid, target.as_deref()).await?;
    if let Some(key) = &facts.key {
        probe_key_equality(client, key, &facts.table.name).await?;
    }
    let disk = disk::check(client, oid, target.as_deref(), disk_room).await?;
    Ok(Preflight { facts, disk })
}

/// The tablespace a `SET TABLESPACE` subcommand of `statement` names.
fn target_tablespace(statement: &Statement) -> Option<String> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return None;
    };
    stmt.cmds.iter().rev().find_map(|cmd| match &cmd.node {
        Some(NodeEnum::AlterTableCmd(cmd))
            if cmd.subtype == AlterTableType::AtSetTableSpace as i32 =>
        {
            Some(cmd.name.clone())
        }
        _ => None,
    })
}

/// What a run refuses from the source's shape alone.
fn structure(facts: &SourceFacts) -> Result<(), CasError> {
    let refuse = |cause, message: String| Err(CasError::Refused(Refusal::new(cause, message)));
    let name = &facts.table.name;
    if !facts.uncarried.is_empty() {
        return refuse(
            RefusalCause::RewriteUnsupported,
            format!(
                "copy-and-swap cannot carry {name} through a swap: {}",
                facts.uncarried.join("; ")
            ),
        );
    }
    if facts.table.persistence != "p" {
        return refuse(
            RefusalCause::NonPermanentTable,
            format!("{name} is unlogged or temporary; copy-and-swap needs a permanent table"),
        );
    }
    if let Some(partition) = facts
        .partitions
        .iter()
        .find(|p| p.relation.persistence != "p")
    {
        return refuse(
            RefusalCause::NonPermanentTable,
            format!(
                "partition {} of {name} is unlogged; copy-and-swap needs permanent tables",
                partition.relation.name
            ),
        );
    }
    if facts.key.is_none() {
        return refuse(
            RefusalCause::NoUsableKey,
            format!("{name} has no primary key; copy-and-swap copies and verifies in key order"),
        );
    }
    if facts.key_deferrable {
        return refuse(
            RefusalCause::NoUsableKey,
            format!(
                "the primary key of {name} is deferrable; the copy relies on an immediately checked key to never overwrite a row"
            ),
        );
    }
    if facts.nested_partitions {
        return refuse(
            RefusalCause::NestedPartitioning,
            format!("{name} has a partition that is itself partitioned"),
        );
    }
    // INV: CO-15 — what the swap cannot make again as it was is refused before any work.
    if let Some(view) = facts.dependent_matviews.first() {
        return refuse(
            RefusalCause::DependentMaterializedView,
            format!("materialized view {view} depends on {name}"),
        );
    }
    if facts.nested_views {
        return refuse(
            RefusalCause::NestedDependentViews,
            format!("a view depends on a view that depends on {name}"),
        );
    }
    Ok(())
}

/// The capture compares keys with `OPERATOR(pg_catalog.=)` in the writers' sessions:
/// a key type without such an operator would make every UPDATE of the source fail.
async fn probe_key_equality(
    client: &Client,
    key: &KeySpec,
    table: &QualifiedName,
) -> Result<(), CasError> {
    for column in key.columns() {
        let probe = format!(
            "SELECT NULL::{t} OPERATOR(pg_catalog.=) NULL::{t}",
            t = column.type_sql
        );
        if let Err(e) = client.batch_execute(&probe).await {
            return Err(CasError::Refused(Refusal::new(
                RefusalCause::NoUsableKey,
                format!(
                    "key column {} of {table} has type {}, which has no built-in = operator the capture trigger can use ({}); copy-and-swap needs a key of built-in comparable types",
                    quote_ident(&column.name),
                    column.type_sql,
                    e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned())
                ),
            )));
        }
    }
    Ok(())
}
