//! The client-side ledger of writes: one entry per write the load issued, in
//! the order the writers issued them, with the outcome the client saw.
//!
//! A write is **acknowledged** when COMMIT returned OK *and* the statement
//! affected the expected number of rows (1 for inserts and deletes, 0 for an
//! exact replay). A commit that affected another number of rows is
//! **skipped** (a BEFORE trigger returning NULL makes an INSERT affect 0
//! rows: nothing was written). A write the client saw fail is **refused**,
//! with its SQLSTATE. A write whose COMMIT was sent but never answered (the
//! connection was lost, or the client gave up waiting) is **unknown**: it may
//! or may not have committed.
//!
//! Each entry carries the row state the write leads to ([`RowState`]): the
//! content hash of the row, or absent. [`Ledger::expectations`] folds the
//! entries of each key into the states the table may hold for it now; the
//! oracle compares those with the table. A writer only ever touches rows it
//! inserted itself and stops touching a row after an unknown outcome, so the
//! ledger order of one key's entries is their commit order.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::key::{ContentHash, EventKey};
use crate::timeline::OpKind;

/// A kind of write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    /// An insert.
    Insert,
    /// An insert older than the floor (see [`OpKind::StaleInsert`]).
    StaleInsert,
    /// A soft delete (`UPDATE … SET deleted_at`).
    SoftDelete,
    /// A hard delete.
    HardDelete,
    /// An exact replay of a replaceable event.
    Replay,
}

impl WriteOp {
    /// Rows the statement must affect for the write to be acknowledged.
    pub fn expected_rows(self) -> u64 {
        match self {
            WriteOp::Replay => 0,
            _ => 1,
        }
    }
}

impl From<WriteOp> for OpKind {
    fn from(op: WriteOp) -> Self {
        match op {
            WriteOp::Insert => OpKind::Insert,
            WriteOp::StaleInsert => OpKind::StaleInsert,
            WriteOp::SoftDelete => OpKind::SoftDelete,
            WriteOp::HardDelete => OpKind::HardDelete,
            WriteOp::Replay => OpKind::Replay,
        }
    }
}

/// The state of a row, as the oracle sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowState {
    /// No row with the key.
    Absent,
    /// A row with this content hash.
    Present(ContentHash),
}

/// An error the client saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriteError {
    /// The SQLSTATE, when the server sent one.
    pub sqlstate: Option<String>,
    /// The server's message, or the client's (connection closed, timeout).
    pub message: String,
}

impl WriteError {
    /// The SQLSTATE, or `"none"` for errors without one.
    pub fn code(&self) -> &str {
        self.sqlstate.as_deref().unwrap_or("none")
    }

    /// From a client error.
    pub(crate) fn from_client(error: &tokio_postgres::Error) -> Self {
        match error.as_db_error() {
            Some(db) => WriteError {
                sqlstate: Some(db.code().code().to_owned()),
                message: db.message().to_owned(),
            },
            None => WriteError {
                sqlstate: None,
                message: error.to_string(),
            },
        }
    }
}

/// What the client saw of a write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Committed with the expected row count.
    Acknowledged,
    /// Committed with another row count: nothing the client meant was written.
    Skipped {
        /// Rows the statement affected.
        rows: u64,
    },
    /// Failed with an error the client saw; nothing was written.
    Refused(WriteError),
    /// COMMIT was sent but its answer never came: either way is possible.
    Unknown {
        /// Why the outcome is unknown.
        reason: String,
    },
}

/// One write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LedgerEntry {
    /// The row's primary key.
    pub key: EventKey,
    /// The kind of write.
    pub op: WriteOp,
    /// The row state the write leads to when it commits; `None` when it is not
    /// meant to change the row (an exact replay).
    pub after: Option<RowState>,
    /// What the client saw.
    pub outcome: Outcome,
    /// The writer (0-based).
    pub writer: u32,
    /// Whether the writer ran with `session_replication_role = replica`.
    pub replica_role: bool,
    /// When the write started, since the start of the run.
    pub started: Duration,
    /// When its outcome was known (`None` for unknown outcomes cut short).
    pub finished: Option<Duration>,
}

/// The table states that the ledger allows for one key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyExpectation {
    /// The key.
    pub key: EventKey,
    /// The states the row may be in (one, or two after an unknown outcome).
    pub accept: Vec<RowState>,
    /// The last acknowledged write of the key, if any.
    pub last_acknowledged: Option<WriteOp>,
    /// Whether the last acknowledged change of the key removed the row (a hard
    /// delete, or a soft delete the purge trigger turns into one).
    pub deleted: bool,
    /// Whether some write of the key had an unknown outcome.
    pub had_unknown: bool,
    /// The writer of the key's entries.
    pub writer: u32,
    /// Whether that writer ran as `replica`.
    pub replica_role: bool,
}

impl KeyExpectation {
    /// Whether an absent row is acceptable.
    pub fn absent_ok(&self) -> bool {
        self.accept.contains(&RowState::Absent)
    }

    /// The acceptable content hashes.
    pub fn hashes(&self) -> impl Iterator<Item = &ContentHash> {
        self.accept.iter().filter_map(|s| match s {
            RowState::Present(hash) => Some(hash),
            RowState::Absent => None,
        })
    }
}

/// Counts of a ledger's entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LedgerCounts {
    /// Entries.
    pub entries: u64,
    /// Acknowledged writes, per kind.
    pub acknowledged: BTreeMap<WriteOp, u64>,
    /// Skipped writes.
    pub skipped: u64,
    /// Refused writes, per SQLSTATE (`none` for errors without one).
    pub refused_by_sqlstate: BTreeMap<String, u64>,
    /// Writes with an unknown outcome.
    pub unknown: u64,
}

impl LedgerCounts {
    /// Acknowledged writes of every kind.
    pub fn acknowledged_total(&self) -> u64 {
        self.acknowledged.values().sum()
    }

    /// Refused writes of every SQLSTATE.
    pub fn refused_total(&self) -> u64 {
        self.refused_by_sqlstate.values().sum()
    }
}

/// The ledger: an append-only list of writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ledger {
    entries: Vec<LedgerEntry>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Ledger::default()
    }

    /// Appends a write. Entries of one key must be appended in commit order.
    pub fn push(&mut self, entry: LedgerEntry) {
        self.entries.push(entry);
    }

    /// The entries, in the order they were appended.
    pub fn entries(&self) -> &[LedgerEntry] {
        &self.entries
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Counts by outcome.
    pub fn counts(&self) -> LedgerCounts {
        let mut counts = LedgerCounts {
            entries: self.entries.len() as u64,
            ..LedgerCounts::default()
        };
        for entry in &self.entries {
            match &entry.outcome {
                Outcome::Acknowledged => *counts.acknowledged.entry(entry.op).or_default() += 1,
                Outcome::Skipped { .. } => counts.skipped += 1,
                Outcome::Refused(error) => {
                    *counts
                        .refused_by_sqlstate
                        .entry(error.code().to_owned())
                        .or_default() += 1;
                }
                Outcome::Unknown { .. } => counts.unknown += 1,
            }
        }
        counts
    }

    /// The states each key may be in now, keys in order of first appearance.
    ///
    /// A key starts absent; an acknowledged write moves it to its `after`
    /// state; an unknown outcome allows both the state before and after;
    /// refused and skipped writes change nothing.
    pub fn expectations(&self) -> Vec<KeyExpectation> {
        let mut index: HashMap<EventKey, usize> = HashMap::new();
        let mut out: Vec<KeyExpectation> = Vec::new();
        for entry in &self.entries {
            let slot = *index.entry(entry.key).or_insert_with(|| {
                out.push(KeyExpectation {
                    key: entry.key,
                    accept: vec![RowState::Absent],
                    last_acknowledged: None,
                    deleted: false,
                    had_unknown: false,
                    writer: entry.writer,
                    replica_role: entry.replica_role,
                });
                out.len() - 1
            });
            let expectation = &mut out[slot];
            let Some(after) = entry.after else {
                if entry.outcome == Outcome::Acknowledged {
                    expectation.last_acknowledged = Some(entry.op);
                }
                continue;
            };
            match entry.outcome {
                Outcome::Acknowledged => {
                    expectation.accept = vec![after];
                    expectation.last_acknowledged = Some(entry.op);
                    expectation.deleted = after == RowState::Absent;
                }
                Outcome::Unknown { .. } => {
                    expectation.had_unknown = true;
                    if !expectation.accept.contains(&after) {
                        expectation.accept.push(after);
                    }
                }
                Outcome::Skipped { .. } | Outcome::Refused(_) => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::PgUuid;

    fn key(n: u8) -> EventKey {
        EventKey {
            community_id: PgUuid([n; 16]),
            created_at_us: i64::from(n),
            id: [n; 32],
        }
    }

    fn entry(key: EventKey, op: WriteOp, after: Option<RowState>, outcome: Outcome) -> LedgerEntry {
        LedgerEntry {
            key,
            op,
            after,
            outcome,
            writer: 0,
            replica_role: false,
            started: Duration::ZERO,
            finished: None,
        }
    }

    fn present(n: u8) -> RowState {
        RowState::Present(ContentHash([n; 32]))
    }

    fn refused(code: &str) -> Outcome {
        Outcome::Refused(WriteError {
            sqlstate: Some(code.to_owned()),
            message: "no".to_owned(),
        })
    }

    #[test]
    fn expectations_follow_acknowledged_writes_only() {
        let mut ledger = Ledger::new();
        let (a, b, c) = (key(1), key(2), key(3));
        ledger.push(entry(
            a,
            WriteOp::Insert,
            Some(present(1)),
            Outcome::Acknowledged,
        ));
        ledger.push(entry(
            b,
            WriteOp::Insert,
            Some(present(2)),
            refused("23514"),
        ));
        ledger.push(entry(
            a,
            WriteOp::SoftDelete,
            Some(present(9)),
            Outcome::Acknowledged,
        ));
        ledger.push(entry(
            c,
            WriteOp::Insert,
            Some(present(3)),
            Outcome::Skipped { rows: 0 },
        ));
        ledger.push(entry(a, WriteOp::Replay, None, Outcome::Acknowledged));
        let got = ledger.expectations();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].accept, vec![present(9)]);
        assert_eq!(got[0].last_acknowledged, Some(WriteOp::Replay));
        assert_eq!(got[1].accept, vec![RowState::Absent]);
        assert_eq!(got[1].last_acknowledged, None);
        assert!(!got[1].deleted);
        assert_eq!(got[2].accept, vec![RowState::Absent]);
        let counts = ledger.counts();
        assert_eq!(counts.acknowledged_total(), 3);
        assert_eq!(counts.refused_by_sqlstate["23514"], 1);
        assert_eq!(counts.skipped, 1);
    }

    #[test]
    fn an_unknown_outcome_allows_the_state_before_and_after() {
        let mut ledger = Ledger::new();
        let a = key(1);
        ledger.push(entry(
            a,
            WriteOp::Insert,
            Some(present(1)),
            Outcome::Acknowledged,
        ));
        ledger.push(entry(
            a,
            WriteOp::HardDelete,
            Some(RowState::Absent),
            Outcome::Unknown {
                reason: "connection lost during COMMIT".to_owned(),
            },
        ));
        let got = ledger.expectations();
        assert_eq!(got[0].accept, vec![present(1), RowState::Absent]);
        assert!(got[0].had_unknown);
        assert!(!got[0].deleted);
        assert_eq!(ledger.counts().unknown, 1);
    }
}
