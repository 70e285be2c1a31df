//! PostgreSQL's table-level lock modes, their conflicts, and what each one blocks.
//!
//! The conflict matrix is the one in the PostgreSQL documentation ("Explicit Locking",
//! table 13.2), identical in versions 14 to 18.

use std::fmt;

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
