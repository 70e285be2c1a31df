//! PostgreSQL's table-level lock modes, their conflicts, and what each one blocks; and
//! the roles that relate a locked relation a statement does not name to one it does.
//!
//! The conflict matrix is the one in the PostgreSQL documentation ("Explicit Locking",
//! table 13.2), identical in versions 14 to 18.

use std::fmt;

use pgshift_sql::QualifiedName;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A table-level lock mode, ordered from weakest to strongest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    /// Taken by `SELECT`.
    AccessShare,
    /// Taken by `SELECT … FOR UPDATE/SHARE`.
    RowShare,
    /// Taken by `INSERT`, `UPDATE`, `DELETE`, `MERGE`.
    RowExclusive,
    /// Taken by `VACUUM`, `ANALYZE`, `CREATE INDEX CONCURRENTLY`, `VALIDATE CONSTRAINT`.
    ShareUpdateExclusive,
    /// Taken by `CREATE INDEX` (without `CONCURRENTLY`).
    Share,
    /// Taken by `CREATE TRIGGER` and foreign-key creation.
    ShareRowExclusive,
    /// Taken by `REFRESH MATERIALIZED VIEW CONCURRENTLY`.
    Exclusive,
    /// Taken by most `ALTER TABLE` forms, `DROP`, `TRUNCATE`, `VACUUM FULL`.
    AccessExclusive,
}

impl LockMode {
    /// Every mode, weakest first.
    pub const ALL: [LockMode; 8] = [
        LockMode::AccessShare,
        LockMode::RowShare,
        LockMode::RowExclusive,
        LockMode::ShareUpdateExclusive,
        LockMode::Share,
        LockMode::ShareRowExclusive,
        LockMode::Exclusive,
        LockMode::AccessExclusive,
    ];

    /// The SQL spelling, as in `LOCK TABLE … IN <mode> MODE` (`ACCESS EXCLUSIVE`).
    pub fn sql_name(self) -> &'static str {
        match self {
            LockMode::AccessShare => "ACCESS SHARE",
            LockMode::RowShare => "ROW SHARE",
            LockMode::RowExclusive => "ROW EXCLUSIVE",
            LockMode::ShareUpdateExclusive => "SHARE UPDATE EXCLUSIVE",
            LockMode::Share => "SHARE",
            LockMode::ShareRowExclusive => "SHARE ROW EXCLUSIVE",
            LockMode::Exclusive => "EXCLUSIVE",
            LockMode::AccessExclusive => "ACCESS EXCLUSIVE",
        }
    }

    /// The spelling in `pg_locks.mode` (`AccessExclusiveLock`).
    pub fn pg_locks_name(self) -> &'static str {
        match self {
            LockMode::AccessShare => "AccessShareLock",
            LockMode::RowShare => "RowShareLock",
            LockMode::RowExclusive => "RowExclusiveLock",
            LockMode::ShareUpdateExclusive => "ShareUpdateExclusiveLock",
            LockMode::Share => "ShareLock",
            LockMode::ShareRowExclusive => "ShareRowExclusiveLock",
            LockMode::Exclusive => "ExclusiveLock",
            LockMode::AccessExclusive => "AccessExclusiveLock",
        }
    }

    /// Parses the `pg_locks.mode` spelling.
    pub fn from_pg_locks_name(name: &str) -> Option<LockMode> {
        LockMode::ALL
            .into_iter()
            .find(|mode| mode.pg_locks_name() == name)
    }

    /// The mode of PostgreSQL's `LockStmt.mode` / `LOCKMODE` number (1 to 8).
    pub fn from_pg_number(number: i32) -> Option<LockMode> {
        usize::try_from(number)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|index| LockMode::ALL.get(index).copied())
    }

    /// Whether a lock in this mode and one in `other`, held by two sessions on the same
    /// table, conflict.
    pub fn conflicts_with(self, other: LockMode) -> bool {
        use LockMode::*;
        let (weak, strong) = if self <= other {
            (self, other)
        } else {
            (other, self)
        };
        match weak {
            AccessShare => strong == AccessExclusive,
            RowShare => strong >= Exclusive,
            RowExclusive => strong >= Share,
            ShareUpdateExclusive => strong >= ShareUpdateExclusive,
            Share => strong != Share && strong >= ShareUpdateExclusive,
            ShareRowExclusive | Exclusive | AccessExclusive => true,
        }
    }

    /// Whether plain reads (`SELECT`) wait for this lock.
    pub fn blocks_reads(self) -> bool {
        self.conflicts_with(LockMode::AccessShare)
    }

    /// Whether writes (`INSERT`, `UPDATE`, `DELETE`) wait for this lock.
    pub fn blocks_writes(self) -> bool {
        self.conflicts_with(LockMode::RowExclusive)
    }

    /// What the lock blocks, in words, for diagnostics.
    pub fn blocks_description(self) -> &'static str {
        if self.blocks_reads() {
            "blocks all reads and writes"
        } else if self.blocks_writes() {
            "blocks all writes (reads continue)"
        } else if self >= LockMode::ShareUpdateExclusive {
            "blocks other schema changes and VACUUM (reads and writes continue)"
        } else {
            "blocks only schema changes that need a stronger lock"
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sql_name())
    }
}

impl Serialize for LockMode {
    /// Serialized as the kebab-case name (`access-exclusive`), a closed vocabulary.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.sql_name().to_lowercase().replace(' ', "-"))
    }
}

impl<'de> Deserialize<'de> for LockMode {
    /// Reads the kebab-case name written by `Serialize`.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        LockMode::ALL
            .into_iter()
            .find(|mode| mode.sql_name().to_lowercase().replace(' ', "-") == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown lock mode {name:?}")))
    }
}

/// What kind of catalog object a [`Role`] is relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectClass {
    /// A table, view, index, sequence (anything in `pg_class`).
    Relation,
    /// A type or a domain.
    Type,
    /// A schema.
    Schema,
    /// A publication.
    Publication,
    /// An extended statistics object.
    Statistics,
    /// A function or procedure called by name (every overload of the name).
    Function,
    /// Any other object (an operator, an extension, a function dropped).
    Other,
}

/// A catalog object as the statement writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Its class.
    pub class: ObjectClass,
    /// Its name (a schema or publication has no schema part).
    pub name: QualifiedName,
}

impl ObjectRef {
    /// A relation.
    pub fn relation(name: &QualifiedName) -> ObjectRef {
        ObjectRef {
            class: ObjectClass::Relation,
            name: name.clone(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.class {
            ObjectClass::Relation => "",
            ObjectClass::Type => "type ",
            ObjectClass::Schema => "schema ",
            ObjectClass::Publication => "publication ",
            ObjectClass::Statistics => "statistics ",
            ObjectClass::Function => "function ",
            ObjectClass::Other => "object ",
        };
        write!(f, "{class}{}", self.name)
    }
}

/// How a relation a statement locks without naming it relates to an object the
/// statement names: the closed vocabulary of related locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The partitioned table (or inheritance parents) a relation is a child of.
    Parent,
    /// Every partition or inheritance child, at every level.
    Descendants,
    /// The default partition of a partitioned table.
    DefaultPartition,
    /// Each table a table references by foreign key.
    ReferencedTables,
    /// Each table referencing a table (or one of its partitions) by foreign key, and
    /// the tables referencing those, at every level.
    ReferencingTables,
    /// The table an index is on (and, for a partitioned index, each partition's table
    /// and index).
    IndexedTable,
    /// Each sequence a table owns (serial and identity columns).
    OwnedSequences,
    /// Every relation whose objects are dropped with an object even without CASCADE
    /// (its indexes, constraints and their other tables, policies, rules, triggers).
    DroppedWith,
    /// Every relation holding an object that depends on it, dropped by CASCADE.
    CascadeDependents,
    /// Every table with a column of a type or domain (directly, through an array, a
    /// domain or a composite type), and every typed table of it.
    TablesOfType,
    /// The relations a view reads, through views at every level.
    ViewBaseRelations,
    /// The relations a table's rules act on or read.
    RuleRelations,
    /// The relations a table's policies read in their expressions.
    PolicyRelations,
    /// Every table of a publication.
    PublicationTables,
    /// Every relation in a schema.
    SchemaRelations,
    /// The table an extended statistics object is on.
    StatisticsTable,
    /// Whatever the functions of a table's triggers (or a statement's functions) lock:
    /// open-ended, so bounded by the strongest mode.
    UnknownDependents,
    /// The relations the body of a function the statement calls locks: named from the
    /// body with live facts when it is written in SQL (plain or `BEGIN ATOMIC`),
    /// open-ended without them (bounded by ACCESS EXCLUSIVE: any language, any DDL).
    FunctionBodies,
    /// Every other table whose index, constraint or statistics expressions use a
    /// table's row type (`((x, y)::t).a`): a type change of the table rebuilds them.
    RowTypeUsers,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 19] = [
        Role::Parent,
        Role::Descendants,
        Role::DefaultPartition,
        Role::ReferencedTables,
        Role::ReferencingTables,
        Role::IndexedTable,
        Role::OwnedSequences,
        Role::DroppedWith,
        Role::CascadeDependents,
        Role::TablesOfType,
        Role::ViewBaseRelations,
        Role::RuleRelations,
        Role::PolicyRelations,
        Role::PublicationTables,
        Role::SchemaRelations,
        Role::StatisticsTable,
        Role::UnknownDependents,
        Role::FunctionBodies,
        Role::RowTypeUsers,
    ];

    /// The kebab-case name (`default-partition`), as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Parent => "parent",
            Role::Descendants => "descendants",
            Role::DefaultPartition => "default-partition",
            Role::ReferencedTables => "referenced-tables",
            Role::ReferencingTables => "referencing-tables",
            Role::IndexedTable => "indexed-table",
            Role::OwnedSequences => "owned-sequences",
            Role::DroppedWith => "dropped-with",
            Role::CascadeDependents => "cascade-dependents",
            Role::TablesOfType => "tables-of-type",
            Role::ViewBaseRelations => "view-base-relations",
            Role::RuleRelations => "rule-relations",
            Role::PolicyRelations => "policy-relations",
            Role::PublicationTables => "publication-tables",
            Role::SchemaRelations => "schema-relations",
            Role::StatisticsTable => "statistics-table",
            Role::UnknownDependents => "unknown-dependents",
            Role::FunctionBodies => "function-bodies",
            Role::RowTypeUsers => "row-type-users",
        }
    }

    /// The relations in this role to `of`, in words (`the default partition of
    /// ledger`).
    pub fn describe(self, of: &ObjectRef) -> String {
        match self {
            Role::Parent => format!("the partitioned parent (or inheritance parents) of {of}"),
            Role::Descendants => {
                format!("every partition or inheritance child of {of}, at every level")
            }
            Role::DefaultPartition => format!("the default partition of {of}"),
            Role::ReferencedTables => format!("each table {of} references by foreign key"),
            Role::ReferencingTables => {
                format!("each table referencing {of} by foreign key, at every level")
            }
            Role::IndexedTable => format!("the table of index {of}"),
            Role::OwnedSequences => format!("each sequence {of} owns"),
            Role::DroppedWith => format!("every relation whose objects are dropped with {of}"),
            Role::CascadeDependents => format!("every dependent object of CASCADE on {of}"),
            Role::TablesOfType => format!("every table using {of}"),
            Role::ViewBaseRelations => format!("the base relations of view {of}, at every level"),
            Role::RuleRelations => format!("the relations the rules of {of} act on"),
            Role::PolicyRelations => format!("the relations the policies of {of} read"),
            Role::PublicationTables => format!("every table of {of}"),
            Role::SchemaRelations => format!("every relation in {of}"),
            Role::StatisticsTable => format!("the table of {of}"),
            Role::UnknownDependents => {
                format!("unknown relations reached through {of} (its dependents, what its triggers' functions lock, or what a statement pgshift does not classify does)")
            }
            Role::FunctionBodies => {
                format!("the relations the body of {of} locks")
            }
            Role::RowTypeUsers => format!(
                "every table whose indexes, constraints or statistics use the row type of {of}"
            ),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockMode::*;

    /// The documented conflict table, row by row (X = conflicts).
    const DOCUMENTED: [[bool; 8]; 8] = [
        [false, false, false, false, false, false, false, true],
        [false, false, false, false, false, false, true, true],
        [false, false, false, false, true, true, true, true],
        [false, false, false, true, true, true, true, true],
        [false, false, true, true, false, true, true, true],
        [false, false, true, true, true, true, true, true],
        [false, true, true, true, true, true, true, true],
        [true, true, true, true, true, true, true, true],
    ];

    #[test]
    fn conflicts_match_the_documented_table() {
        for (i, a) in LockMode::ALL.into_iter().enumerate() {
            for (j, b) in LockMode::ALL.into_iter().enumerate() {
                assert_eq!(a.conflicts_with(b), DOCUMENTED[i][j], "{a} vs {b}");
            }
        }
    }

    #[test]
    fn reads_and_writes_blocking() {
        assert!(AccessExclusive.blocks_reads());
        assert!(!Exclusive.blocks_reads());
        assert!(Share.blocks_writes());
        assert!(!ShareUpdateExclusive.blocks_writes());
    }

    #[test]
    fn role_names_are_their_json_spelling() {
        for role in Role::ALL {
            assert_eq!(
                serde_json::to_value(role).expect("serializes"),
                serde_json::Value::String(role.as_str().to_owned())
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for mode in LockMode::ALL {
            assert_eq!(
                LockMode::from_pg_locks_name(mode.pg_locks_name()),
                Some(mode)
            );
        }
        assert_eq!(LockMode::from_pg_number(8), Some(AccessExclusive));
        assert_eq!(LockMode::from_pg_number(0), None);
        assert_eq!(LockMode::from_pg_number(9), None);
        assert_eq!(
            serde_json::to_string(&ShareRowExclusive).expect("serializes"),
            "\"share-row-exclusive\""
        );
    }
}
