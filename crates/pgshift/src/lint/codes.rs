//! The closed vocabulary of lint findings: codes and severities.
//!
//! The list is mirrored in `docs/LINTS.md`; a test keeps the two identical.

use std::fmt;

use serde::{Serialize, Serializer};

/// How bad a finding is. Any `error` makes `pgshift lint` exit with 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Worth knowing; nothing blocks.
    Info,
    /// A hazard that is brief or deliberate, to review.
    Warning,
    /// Blocks reads or writes for a time that grows with the table, breaks the
    /// migration, or loses writes: do not merge as is.
    Error,
}

impl Severity {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $severity:ident; )*) => {
        /// What a finding is about. Closed vocabulary; serialized in kebab-case.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in documentation order.
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];

            /// The stable kebab-case name.
            pub fn name(self) -> &'static str {
                match self { $( Code::$variant => $name, )* }
            }

            /// The severity findings of this code carry.
            pub fn severity(self) -> Severity {
                match self { $( Code::$variant => Severity::$severity, )* }
            }

            /// The code with this name.
            pub fn from_name(name: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|code| code.name() == name)
            }
        }
    };
}

codes! {
    /// A rewrite of an existing table under ACCESS EXCLUSIVE.
    TableRewrite = "table-rewrite", Error;
    /// `ADD COLUMN` with a volatile default: a rewrite.
    VolatileDefault = "volatile-default", Error;
    /// A full scan of an existing table under a lock that blocks writes.
    ScanUnderLock = "scan-under-lock", Error;
    /// `CREATE INDEX` without `CONCURRENTLY` on an existing table.
    IndexNotConcurrent = "index-not-concurrent", Error;
    /// An index built on a partitioned parent, where `CONCURRENTLY` is not allowed.
    IndexOnPartitionedParent = "index-on-partitioned-parent", Error;
    /// A `CHECK` or `FOREIGN KEY` added without `NOT VALID`.
    ConstraintWithoutNotValid = "constraint-without-not-valid", Error;
    /// `SET NOT NULL` directly, which scans under ACCESS EXCLUSIVE.
    SetNotNull = "set-not-null", Error;
    /// `ADD COLUMN … NOT NULL` with no default: it fails unless the table is empty.
    NotNullWithoutDefault = "not-null-without-default", Error;
    /// A statement that cannot run inside a transaction block, placed in one.
    NotInTransaction = "not-in-transaction", Error;
    /// Two-phase commit in a migration.
    TwoPhaseCommit = "two-phase-commit", Error;
    /// A brief lock that still blocks reads or writes on an existing table.
    BlockingLock = "blocking-lock", Warning;
    /// A strong lock taken with no `lock_timeout` set: it can queue behind a long
    /// transaction and stall every query behind it.
    MissingLockTimeout = "missing-lock-timeout", Warning;
    /// A transaction that holds blocking locks across later statements.
    LocksAccumulated = "locks-accumulated", Warning;
    /// Data changes in the same transaction as schema changes.
    DmlWithDdl = "dml-with-ddl", Warning;
    /// `CREATE TRIGGER` or `DROP TRIGGER` on an existing table.
    TriggerChange = "trigger-change", Warning;
    /// An invariant-looking trigger left ORIGIN-enabled: replica-role sessions skip it.
    OriginInvariantTrigger = "origin-invariant-trigger", Warning;
    /// `CREATE OR REPLACE FUNCTION` of a trigger function: every trigger calling it
    /// changes behaviour at once.
    TriggerFunctionReplaced = "trigger-function-replaced", Warning;
    /// `DETACH PARTITION` with no default partition: inserts into the detached range
    /// start failing.
    PartitionRangeRemoved = "partition-range-removed", Warning;
    /// Data or objects dropped for good.
    Destructive = "destructive", Warning;
    /// A rename that breaks applications still using the old name.
    BreakingRename = "breaking-rename", Warning;
    /// `session_replication_role = replica` in a migration: triggers and foreign keys
    /// stop firing for the session.
    ReplicationRoleReplica = "replication-role-replica", Warning;
    /// Procedural code (`DO`, `CALL`) whose locks cannot be known.
    OpaqueCode = "opaque-code", Warning;
    /// A statement pgshift does not classify.
    Unclassified = "unclassified", Warning;
    /// A file with no statements.
    NoStatements = "no-statements", Warning;
    /// An `UPDATE` or `DELETE` of every row in one transaction.
    UnbatchedDataChange = "unbatched-data-change", Info;
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}
