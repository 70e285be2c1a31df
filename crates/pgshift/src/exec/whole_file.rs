//! New and empty tables run as written (`docs/EXECUTION.md`, "Files on new and empty
//! tables").
//!
//! On a fresh install, or where a file works on tables an earlier file created and no
//! one has written to yet, the blocking forms have no rows to scan or rewrite and no
//! writer to hold up: splitting such a file into safer steps, or refusing a rewrite
//! that copy-and-swap cannot take, helps nobody and loses what the project's runner
//! gives it (one transaction, a `LOCK TABLE` that protects the rest of the file).
//!
//! - [`whole_file`]: a file its runner wraps in one transaction runs whole, as written,
//!   in one transaction, when every table that existed before the input and that the
//!   file locks in a mode that blocks writes holds no rows on the live server, and
//!   every statement of it runs as written inside a transaction.
//! - [`as_written_on_empty`]: one statement outside such a file (a `-- no-transaction`
//!   file, `apply` of one statement) that would need a safer sequence or
//!   copy-and-swap, or is refused only because copy-and-swap cannot take its table,
//!   runs as written under the same condition.
//!
//! Emptiness is the live server's at planning time (`LiveVolume::empty`: no heap page
//! in the table or any partition); a table whose size is not known is not empty. It is
//! read again when the unit runs: its transaction first locks each such table in the
//! strongest mode the unit takes on it and checks it still has no heap page, and runs
//! nothing of the unit otherwise (refused, `table-no-longer-empty`). The hold of what
//! runs is bounded by the unit's budgets like any other unit's.

use super::schedule::{as_written, is_timeout_setting, sets_replica_role};
use super::schedule::{Schedule, Scheduled, StatementRefusal};
use super::unit::{EmptyAtStart, Unit};
use crate::classify::TransactionUse;
use crate::refusal::RefusalCause;
use crate::route::{Route, Step};
use crate::script::{AnalyzedStatement, Script, TransactionMode};

/// Whether every table existing before the input that `item` locks in a mode that
/// blocks writes holds no rows on the live server (tables the input created are new).
// INV: TX-2 — blocking forms run as written only on tables empty on the live server
// or created by the input.
pub fn locks_only_empty(item: &AnalyzedStatement) -> bool {
    let c = &item.classification;
    let related_blocking = c.related_locks.iter().any(|l| l.mode.blocks_writes());
    if related_blocking {
        return false;
    }
    c.locks.iter().all(|lock| {
        let strongest = lock
            .mode
            .max(lock.index_mode.unwrap_or(lock.mode))
            .max(lock.partition_mode.unwrap_or(lock.mode));
        if !strongest.blocks_writes() || item.new_relations.contains(&lock.relation) {
            return true;
        }
        // A relation with no rows of its own (an index, a view, a sequence) has no
        // live volume: its table or base relations are locked and judged themselves.
        match item
            .live
            .iter()
            .find(|v| v.relation.matches(&lock.relation))
        {
            Some(volume) => volume.empty(),
            None => true,
        }
    })
}

/// Whether the refusal of a statement is one that running it as written on empty
/// tables answers: the rewrite copy-and-swap cannot take, blocking work with no rows to
/// block on, a split the runner's single transaction would not have made.
fn answered_on_empty(cause: RefusalCause) -> bool {
    matches!(
        cause,
        RefusalCause::NoUsableKey
            | RefusalCause::NonPermanentTable
            | RefusalCause::RewriteUnsupported
            | RefusalCause::BlockingWork
            | RefusalCause::NotSplittable
            | RefusalCause::CopyAndSwapUnavailable
    )
}

/// Whether the statement runs as written inside a transaction, by its route (a
/// refusal only running on empty tables answers included).
fn runs_as_written(item: &AnalyzedStatement) -> bool {
    let c = &item.classification;
    if c.transaction == TransactionUse::OutsideOnly {
        return false;
    }
    if sets_replica_role(c) {
        return false;
    }
    match &c.route {
        Route::Native | Route::NativeSequence { .. } | Route::CopyAndSwap => true,
        Route::Refused { refusal } => answered_on_empty(refusal.cause),
    }
}

/// The file as one unit, when its runner wraps it in one transaction and the file only
/// blocks writes on empty or new tables; `None` when the schedule stands.
pub fn whole_file(script: &Script, schedule: &Schedule) -> Option<Schedule> {
    let first = script.statements.first()?;
    let runner = crate::script::transaction_mode_for(
        std::slice::from_ref(&first.statement),
        TransactionMode::File,
    );
    if runner != TransactionMode::File || !script.transactions.iter().all(|t| !t.explicit) {
        return None;
    }
    let units = schedule
        .items
        .iter()
        .filter(|i| matches!(i, Scheduled::Unit { .. }))
        .count();
    let only_answered_refusals = schedule
        .refusals
        .iter()
        .all(|r| answered_on_empty(r.refusal.cause));
    if !only_answered_refusals || (schedule.refusals.is_empty() && units <= 1) {
        return None;
    }
    let members: Vec<usize> = script
        .statements
        .iter()
        .enumerate()
        .filter(|(_, s)| s.classification.transaction != TransactionUse::Control)
        .map(|(i, _)| i)
        .collect();
    let fits = members.iter().all(|&i| {
        let item = &script.statements[i];
        runs_as_written(item) && locks_only_empty(item)
    });
    if !fits {
        return None;
    }
    let steps: Vec<Step> = members
        .iter()
        .map(|&i| &script.statements[i])
        .filter(|item| !is_timeout_setting(&item.classification))
        .map(as_written)
        .collect();
    let mut notes: Vec<String> = schedule.notes.clone();
    notes.push(
        "runs whole as one transaction, as written, as its runner runs it: every table it blocks writes on is new or empty here"
            .to_owned(),
    );
    let empty = empty_tables(members.iter().map(|&i| &script.statements[i]));
    Some(Schedule {
        items: vec![on_empty(steps, members, empty)],
        refusals: Vec::<StatementRefusal>::new(),
        notes,
    })
}

/// The statement as written, as a unit of its own, when it needs a safer sequence or
/// copy-and-swap (or copy-and-swap cannot take its table) and every table it blocks
/// writes on is empty or new.
pub fn as_written_on_empty(item: &AnalyzedStatement, index: usize) -> Option<Scheduled> {
    let c = &item.classification;
    let needs_more = match &c.route {
        Route::NativeSequence { .. } | Route::CopyAndSwap => true,
        Route::Refused { refusal } => answered_on_empty(refusal.cause),
        Route::Native => false,
    };
    if !needs_more || !runs_as_written(item) || !locks_only_empty(item) {
        return None;
    }
    Some(on_empty(
        vec![as_written(item)],
        vec![index],
        empty_tables(std::iter::once(item)),
    ))
}

/// The pre-existing tables `items` block writes on, which held no rows when planned:
/// each with the strongest mode the statements take on it, for the check at the start
/// of the unit ([`EmptyAtStart`]).
pub fn empty_tables<'a>(items: impl Iterator<Item = &'a AnalyzedStatement>) -> Vec<EmptyAtStart> {
    let mut out: Vec<EmptyAtStart> = Vec::new();
    for item in items {
        for lock in &item.classification.locks {
            // The table's own mode; its partitions too when the statements take that
            // mode on them (what `LOCK TABLE` without `ONLY` does), never a lock the
            // statements would not take.
            let mode = lock.mode;
            let only = !lock.recurses || lock.partition_mode.is_some_and(|m| m != mode);
            if !mode.blocks_writes() || item.new_relations.contains(&lock.relation) {
                continue;
            }
            let planned_empty = item
                .live
                .iter()
                .any(|v| v.relation.matches(&lock.relation) && v.empty());
            if !planned_empty {
                continue;
            }
            match out.iter_mut().find(|e| e.relation == lock.relation) {
                Some(known) => {
                    known.only = match mode.cmp(&known.mode) {
                        std::cmp::Ordering::Greater => only,
                        std::cmp::Ordering::Equal => known.only && only,
                        std::cmp::Ordering::Less => known.only,
                    };
                    known.mode = known.mode.max(mode);
                }
                None => out.push(EmptyAtStart {
                    relation: lock.relation.clone(),
                    mode,
                    only,
                }),
            }
        }
    }
    out
}

/// One transaction of `steps` run as written, from `statements`, on new or empty tables.
fn on_empty(steps: Vec<Step>, statements: Vec<usize>, empty: Vec<EmptyAtStart>) -> Scheduled {
    Scheduled::Unit {
        unit: Unit {
            steps,
            transactional: true,
            statements,
            accepted_blocking: false,
            copy_and_swap: None,
            guard: None,
            whole_on_empty: true,
            empty_at_start: empty,
        },
    }
}
