//! `pgshift audit`: the live database's triggers as a user needs to see them, and
//! every way a write can get past one.
//!
//! # Brief overview
//! - [`read`](read::read) reads every user table, its partition edge, its triggers and
//!   foreign keys, and who may set `session_replication_role`, in one
//!   `REPEATABLE READ READ ONLY` snapshot, taking no relation lock.
//! - [`judge`] walks each trigger down the partition tree by `tgparentid` and says
//!   which writes skip it: a replica session (ORIGIN), an ordinary one (REPLICA),
//!   every one (disabled), rows landing in a partition that lacks its clone, and
//!   partitions attached later (the parent's own state); plus notes on how triggers
//!   fire that do not let a write through (deferred, partition-only, statement
//!   triggers on a parent, `TRUNCATE`, foreign keys in replica sessions).
//! - [`audit`] does both; the findings that count as bypasses are
//!   [`FindingKind::is_bypass`], listed in `docs/AUDIT.md`.

mod facts;
mod family;
mod finding;
mod index;
mod inventory;
mod judge;
mod notes;
mod read;

pub use facts::{fires, AuditFacts, AuditRelation, AuditTrigger, Events, TableKind, Timing};
pub use finding::{Finding, FindingKind};
pub use inventory::{TableTriggers, TriggerEntry};
pub use judge::judge;
pub use read::read;

use tokio_postgres::Client;

use crate::catalog::{CatalogError, ServerFacts};

/// One audit: what was read, every table's triggers, and the findings.
#[derive(Clone, Debug)]
pub struct Audit {
    /// The server.
    pub server: ServerFacts,
    /// Tables read.
    pub tables_read: usize,
    /// Roles that may set `session_replication_role`.
    pub replica_role_holders: Vec<String>,
    /// The tables that have triggers.
    pub tables: Vec<TableTriggers>,
    /// The findings, by table, kind, trigger.
    pub findings: Vec<Finding>,
}

impl Audit {
    /// Whether some finding lets a write bypass a trigger.
    pub fn has_bypass(&self) -> bool {
        self.findings.iter().any(|f| f.bypass)
    }
}

/// Reads the catalog (one snapshot, no relation locks) and judges it.
pub async fn audit(client: &Client) -> Result<Audit, CatalogError> {
    let facts = read(client).await?;
    Ok(of_facts(&facts))
}

/// Judges facts already read.
pub fn of_facts(facts: &AuditFacts) -> Audit {
    let index = index::Index::new(facts);
    Audit {
        server: facts.server.clone(),
        tables_read: facts.relations.len(),
        replica_role_holders: facts.replica_role_holders.clone(),
        tables: inventory::inventory(&index),
        findings: judge(facts),
    }
}
