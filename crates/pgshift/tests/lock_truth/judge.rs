//! Whether the locks a statement is observed to take are covered by what the
//! classifier states: shared by `lock_truth.rs` (a generated corpus) and
//! `lock_truth_regress.rs` (PostgreSQL's regression SQL).

use std::collections::BTreeMap;

use pgshift::classify::Classification;
use pgshift::lock::{LockMode, Role};
use tokio_postgres::Client;

use crate::oracle::Oracle;

/// A server error as one line: its message and SQLSTATE.
pub fn err(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// How one observed lock is covered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cover {
    /// By a lock on it, on a table recursing to it, or on the table owning it.
    Named,
    /// By a lock stated by role.
    Role(Role),
    /// Not covered: the strongest stated mode on it (if any).
    Weaker(Option<LockMode>),
}

/// A lock the classifier states on a relation, resolved in the test database.
pub struct Stated {
    pub oid: u32,
    pub mode: LockMode,
    pub recurses: bool,
    pub partition_mode: LockMode,
    pub index_mode: LockMode,
}

pub fn stated(classification: &Classification, oracle: &Oracle) -> Vec<Stated> {
    classification
        .locks
        .iter()
        .filter_map(|lock| {
            let oid = oracle.resolve(&lock.relation)?;
            Some(Stated {
                oid,
                mode: lock.mode,
                recurses: lock.recurses,
                partition_mode: lock.partition_mode.unwrap_or(lock.mode),
                index_mode: lock.index_mode.unwrap_or(lock.mode).max(lock.mode),
            })
        })
        .collect()
}

/// Whether a lock on `oid` in `mode` is covered by a stated lock on `root` (in `own`
/// mode on it, `covered` on what it owns) or, recursing, on its descendants.
pub fn covers(oracle: &Oracle, s: &Stated, oid: u32, mode: LockMode) -> bool {
    if s.oid == oid {
        return s.mode >= mode;
    }
    if oracle.covered(s.oid).contains(&oid) && s.index_mode >= mode {
        return true;
    }
    if s.recurses {
        for d in oracle.descendants(s.oid) {
            let partition_index_mode = s.partition_mode.max(s.index_mode);
            if d == oid && s.partition_mode >= mode
                || oracle.covered(d).contains(&oid) && partition_index_mode >= mode
            {
                return true;
            }
        }
    }
    false
}

pub async fn judge(
    b: &Client,
    oracle: &mut Oracle,
    classification: &Classification,
    oid: u32,
    mode: LockMode,
) -> Result<Cover, String> {
    let stated = stated(classification, oracle);
    if stated.iter().any(|s| covers(oracle, s, oid, mode)) {
        return Ok(Cover::Named);
    }
    for lock in &classification.related_locks {
        if lock.mode < mode {
            continue;
        }
        let members = oracle
            .members(b, lock.related_to.role, &lock.related_to.of)
            .await?;
        for member in members {
            let s = Stated {
                oid: member,
                mode: lock.mode,
                recurses: lock.recurses,
                partition_mode: lock.mode,
                index_mode: lock.mode,
            };
            if covers(oracle, &s, oid, mode) {
                return Ok(Cover::Role(lock.related_to.role));
            }
        }
    }
    Ok(Cover::Weaker(
        stated.iter().filter(|s| s.oid == oid).map(|s| s.mode).max(),
    ))
}

/// A's granted relation locks in this database, strongest mode per relation.
pub async fn locks_of(b: &Client, pid: i32) -> Result<BTreeMap<u32, LockMode>, String> {
    let rows = b
        .query(
            "SELECT l.relation, l.mode FROM pg_locks l \
              WHERE l.pid = $1 AND l.locktype = 'relation' AND l.granted \
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[&pid],
        )
        .await
        .map_err(err)?;
    let mut locks = BTreeMap::new();
    for row in rows {
        let oid: u32 = row.get(0);
        let mode: String = row.get(1);
        if let Some(mode) = LockMode::from_pg_locks_name(&mode) {
            let entry = locks.entry(oid).or_insert(mode);
            *entry = (*entry).max(mode);
        }
    }
    Ok(locks)
}
