//! The static classification of a statement against its trace: where they differ, the
//! trace wins, and the difference is reported.
//!
//! Compared: whether the statement rewrites a table, and the strongest lock mode on
//! each relation. A lock the classifier states on a relation (by name, on a parent
//! whose partitions it recurses to, or by role when it cannot name them) covers the
//! relation up to its mode; a table's lock covers its indexes and TOAST table, which
//! are not compared. Relations the statement creates are not compared.

use serde::Serialize;

use pgshift_sql::QualifiedName;

use super::types::{Outcome, StatementTrace, TracedLock};
use crate::classify::{Classification, WorkClass};
use crate::lock::LockMode;

/// One way the static classification and the trace disagree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// `rewrite` or `lock`.
    pub kind: DifferenceKind,
    /// The relation, for a lock (or a rewritten table).
    pub relation: Option<QualifiedName>,
    /// What the classifier stated (`access-exclusive`, `rewrite`, `no lock`, …).
    pub stated: String,
    /// What the server did.
    pub observed: String,
    /// Whether the server did more than the classifier stated (a stronger lock, an
    /// unstated lock or rewrite): the static judgement understated the risk.
    pub understated: bool,
}

/// What a difference is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DifferenceKind {
    /// Rewrite yes or no.
    Rewrite,
    /// A lock mode on a relation.
    Lock,
}

/// Every difference between `classification` and `trace` (none when the statement did
/// not run, and no lock differences when its locks were not read).
pub fn compare(classification: &Classification, trace: &StatementTrace) -> Vec<Difference> {
    let mut out = Vec::new();
    if trace.outcome != Outcome::Ran {
        return out;
    }
    rewrite_difference(classification, trace, &mut out);
    if let Some(locks) = &trace.locks {
        stated_lock_differences(classification, trace, locks, &mut out);
        unstated_lock_differences(classification, locks, &mut out);
    }
    out
}

fn states_rewrite(classification: &Classification) -> bool {
    classification.work == WorkClass::Rewrite
        || classification
            .operations
            .iter()
            .any(|operation| operation.work == WorkClass::Rewrite)
}

fn rewrite_difference(
    classification: &Classification,
    trace: &StatementTrace,
    out: &mut Vec<Difference>,
) {
    let stated = states_rewrite(classification);
    match (stated, trace.rewrites.first()) {
        (true, None) => out.push(Difference {
            kind: DifferenceKind::Rewrite,
            relation: None,
            stated: "rewrite".to_owned(),
            observed: "no rewrite".to_owned(),
            understated: false,
        }),
        (false, Some(_)) => {
            for rewrite in &trace.rewrites {
                out.push(Difference {
                    kind: DifferenceKind::Rewrite,
                    relation: Some(rewrite.table.clone()),
                    stated: stated_work(classification),
                    observed: format!("rewrite ({})", rewrite.reasons.join(", ")),
                    understated: true,
                });
            }
        }
        _ => {}
    }
}

fn stated_work(classification: &Classification) -> String {
    if classification.work == WorkClass::Opaque {
        "unknown (procedural code)".to_owned()
    } else {
        "no rewrite".to_owned()
    }
}

fn created(classification: &Classification, relation: &QualifiedName) -> bool {
    classification
        .created_relations()
        .any(|created| created.matches(relation))
}

fn stated_lock_differences(
    classification: &Classification,
    trace: &StatementTrace,
    locks: &[TracedLock],
    out: &mut Vec<Difference>,
) {
    for stated in &classification.locks {
        if created(classification, &stated.relation)
            || locks
                .iter()
                .any(|lock| lock.created && stated.relation.matches(&lock.relation))
        {
            continue;
        }
        let observed = trace.mode_on(&stated.relation);
        if observed == Some(stated.mode) {
            continue;
        }
        let relation = locks
            .iter()
            .find(|lock| stated.relation.matches(&lock.relation))
            .map_or_else(|| stated.relation.clone(), |lock| lock.relation.clone());
        out.push(Difference {
            kind: DifferenceKind::Lock,
            relation: Some(relation),
            stated: mode_words(Some(stated.mode)),
            observed: mode_words(observed),
            understated: observed > Some(stated.mode),
        });
    }
}

/// The mode the classification states on `lock`'s relation: by name, through a
/// recursing lock on its parent, or by role.
fn covering_mode(classification: &Classification, lock: &TracedLock) -> Option<LockMode> {
    let by_name = classification
        .locks
        .iter()
        .filter(|stated| stated.relation.matches(&lock.relation))
        .map(|stated| stated.mode);
    let by_parent = classification
        .locks
        .iter()
        .filter(|stated| {
            stated.recurses
                && lock
                    .parent
                    .as_ref()
                    .is_some_and(|parent| stated.relation.matches(parent))
        })
        .map(|stated| stated.partition_mode.unwrap_or(stated.mode));
    let by_role = classification
        .related_locks
        .iter()
        .map(|related| related.mode);
    by_name.chain(by_parent).chain(by_role).max()
}

fn unstated_lock_differences(
    classification: &Classification,
    locks: &[TracedLock],
    out: &mut Vec<Difference>,
) {
    for lock in locks {
        let compared = matches!(
            lock.kind,
            "table" | "partitioned-table" | "view" | "materialized-view" | "foreign-table"
        );
        let named = classification
            .locks
            .iter()
            .any(|stated| stated.relation.matches(&lock.relation));
        if !compared || lock.created || named || created(classification, &lock.relation) {
            continue;
        }
        let covering = covering_mode(classification, lock);
        if covering >= Some(lock.mode) {
            continue;
        }
        out.push(Difference {
            kind: DifferenceKind::Lock,
            relation: Some(lock.relation.clone()),
            stated: mode_words(covering),
            observed: mode_words(Some(lock.mode)),
            understated: true,
        });
    }
}

fn mode_words(mode: Option<LockMode>) -> String {
    mode.map_or_else(|| "no lock".to_owned(), |mode| mode.sql_name().to_owned())
}
