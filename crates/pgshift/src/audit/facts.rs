//! What the audit reads from the catalog: the tables, their partition edges, their
//! triggers and foreign keys, and who may write as a replica. Plain data.

use pgshift_sql::QualifiedName;
use serde::Serialize;

use crate::catalog::{ServerFacts, TriggerEnabled};

/// Everything one audit read returns, from one snapshot.
#[derive(Clone, Debug)]
pub struct AuditFacts {
    /// The server.
    pub server: ServerFacts,
    /// Every user table (plain, partitioned, foreign) outside the system schemas.
    pub relations: Vec<AuditRelation>,
    /// Their user triggers and the clones of those on partitions.
    pub triggers: Vec<AuditTrigger>,
    /// Roles that may set `session_replication_role` (superusers; on PostgreSQL 15+
    /// also roles granted `SET` on the parameter), sorted.
    pub replica_role_holders: Vec<String>,
}

/// What kind of table a relation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TableKind {
    /// `relkind = 'r'`.
    Table,
    /// `relkind = 'p'`: holds no rows itself.
    Partitioned,
    /// `relkind = 'f'`.
    Foreign,
}

/// One table.
#[derive(Clone, Debug)]
pub struct AuditRelation {
    /// `pg_class.oid`.
    pub oid: u32,
    /// Schema-qualified name.
    pub name: QualifiedName,
    /// Its kind.
    pub kind: TableKind,
    /// The partitioned table it is a partition of.
    pub parent: Option<u32>,
    /// Its partition bound as the server renders it (`FOR VALUES …`), for partitions.
    pub bound: Option<String>,
    /// Foreign keys declared on it (not the clones a partition inherits), by name.
    pub foreign_keys: Vec<String>,
}

impl AuditRelation {
    /// Whether rows live in it (writes land here).
    pub fn holds_rows(&self) -> bool {
        self.kind != TableKind::Partitioned
    }
}

/// When a trigger fires relative to the write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Timing {
    /// `BEFORE`.
    Before,
    /// `AFTER`.
    After,
    /// `INSTEAD OF`.
    InsteadOf,
}

/// The events of a trigger (`tgtype` bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Events {
    /// `INSERT`.
    pub insert: bool,
    /// `UPDATE`.
    pub update: bool,
    /// `DELETE`.
    pub delete: bool,
    /// `TRUNCATE`.
    pub truncate: bool,
}

/// One trigger.
#[derive(Clone, Debug)]
pub struct AuditTrigger {
    /// `pg_trigger.oid`.
    pub oid: u32,
    /// The table it is on.
    pub relation: u32,
    /// Its name.
    pub name: String,
    /// `tgenabled`.
    pub enabled: TriggerEnabled,
    /// What it is: level, timing, events, constraint, function.
    pub definition: Definition,
    /// The trigger on the parent it is a clone of (`tgparentid`).
    pub parent: Option<u32>,
}

/// What a trigger is, as `CREATE TRIGGER` says it (shared by the facts and the report).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Definition {
    /// `FOR EACH ROW` (else statement).
    pub row: bool,
    /// Its timing.
    pub timing: Timing,
    /// Its events.
    pub events: Events,
    /// A constraint trigger.
    pub constraint: bool,
    /// `DEFERRABLE`.
    pub deferrable: bool,
    /// `INITIALLY DEFERRED`.
    pub initially_deferred: bool,
    /// The function it calls (`regprocedure`, qualified).
    pub function: String,
}

impl Timing {
    /// The timing of a `tgtype`.
    pub fn of(tgtype: i16) -> Timing {
        if tgtype & 64 != 0 {
            Timing::InsteadOf
        } else if tgtype & 2 != 0 {
            Timing::Before
        } else {
            Timing::After
        }
    }
}

impl Events {
    /// The events of a `tgtype`.
    pub fn of(tgtype: i16) -> Events {
        Events {
            insert: tgtype & 4 != 0,
            delete: tgtype & 8 != 0,
            update: tgtype & 16 != 0,
            truncate: tgtype & 32 != 0,
        }
    }

    /// `INSERT OR UPDATE …`, as in `CREATE TRIGGER`.
    pub fn phrase(&self) -> String {
        let names = [
            (self.insert, "INSERT"),
            (self.update, "UPDATE"),
            (self.delete, "DELETE"),
            (self.truncate, "TRUNCATE"),
        ];
        names
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, name)| *name)
            .collect::<Vec<_>>()
            .join(" OR ")
    }
}

/// Whether a trigger in `state` fires in a session with `session_replication_role =
/// replica` (`replica`) or in an ordinary one (`origin` or `local`).
pub fn fires(state: TriggerEnabled, replica: bool) -> bool {
    match state {
        TriggerEnabled::Always => true,
        TriggerEnabled::Origin => !replica,
        TriggerEnabled::Replica => replica,
        TriggerEnabled::Disabled => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tgtype_bits_decode() {
        // BEFORE INSERT OR UPDATE FOR EACH ROW
        let t = 1 | 2 | 4 | 16;
        assert_eq!(Timing::of(t), Timing::Before);
        assert_eq!(Events::of(t).phrase(), "INSERT OR UPDATE");
        assert_eq!(Timing::of(8), Timing::After);
        assert_eq!(Timing::of(64 | 1 | 4), Timing::InsteadOf);
        assert_eq!(Events::of(32).phrase(), "TRUNCATE");
    }

    #[test]
    fn firing_follows_the_documented_table() {
        use TriggerEnabled::*;
        let table = [
            (Origin, true, false),
            (Always, true, true),
            (Replica, false, true),
            (Disabled, false, false),
        ];
        for (state, origin, replica) in table {
            assert_eq!(fires(state, false), origin, "{state:?} in origin");
            assert_eq!(fires(state, true), replica, "{state:?} in replica");
        }
    }
}
