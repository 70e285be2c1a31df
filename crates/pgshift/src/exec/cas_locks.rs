//! The locks a copy-and-swap run takes on the table, phase by phase, with their
//! budgets and what holds them — what `plan` states for a statement routed to
//! copy-and-swap, instead of the lock of the statement as written (which only the
//! blocking form, accepted with `--allow-blocking`, takes).
//!
//! The modes are those of the statements the run sends (checked against `pg_locks`
//! by `plan_cli`'s `copy_and_swap_plan_states_the_locks_the_run_waits_for`):
//! `CREATE TRIGGER` / `ALTER TABLE … ENABLE ALWAYS TRIGGER` to install the capture
//! (SHARE ROW EXCLUSIVE), plain reads for the copy and the verification (ACCESS SHARE),
//! and `LOCK TABLE … IN ACCESS EXCLUSIVE MODE` for the swap.

use serde::Serialize;

use crate::cas::{Mode, RunOptions};
use crate::catalog::RelationFacts;
use crate::classify::{Classification, LockTaken};
use crate::lock::LockMode;
use crate::route::Route;
use pgshift_sql::QualifiedName;

/// One lock a run takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CasLock {
    /// The phase taking it (`capture`, `copy`, `verify`, `indexing`, `swap`,
    /// `cleanup`).
    pub phase: &'static str,
    /// What it is taken for.
    pub purpose: &'static str,
    /// The table (taken on each of its partitions too when it has any).
    pub relation: QualifiedName,
    /// Partitions locked with it.
    pub partitions: usize,
    /// The mode.
    pub mode: LockMode,
    /// What it blocks, in words.
    pub blocks: &'static str,
    /// The `lock_timeout` of each request, when the run bounds it itself.
    pub lock_timeout_ms: Option<u64>,
    /// Requests before the run gives up (and stops, the source untouched).
    pub attempts: Option<u32>,
    /// How long it is held, in words: what runs while it is held.
    pub held: String,
}

/// What `plan` states for a statement routed to copy-and-swap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CasLocks {
    /// The locks the run takes, in order.
    pub locks: Vec<CasLock>,
    /// Also locked, ACCESS EXCLUSIVE, inside the swap's transaction: the tables whose
    /// foreign keys point at the table (re-pointed) and its dependent views
    /// (recreated).
    pub swap_also_locks: Vec<QualifiedName>,
    /// The locks of the statement as written: what the blocking form
    /// (`--allow-blocking`) would take, for the whole rewrite.
    pub blocking_form: Vec<LockTaken>,
}

/// The locks a copy-and-swap run of `classification` takes with `options`; `None`
/// unless the statement is routed to copy-and-swap. `facts` are the table's, when
/// known (its partitions, foreign keys in, dependent views).
pub fn cas_locks(
    classification: &Classification,
    facts: Option<&RelationFacts>,
    options: &RunOptions,
) -> Option<CasLocks> {
    if classification.route != Route::CopyAndSwap {
        return None;
    }
    let relation = classification.locks.first()?.relation.clone();
    let partitions = facts.map_or(0, |f| f.partitions.len());
    let cutover = options.cutover;
    let lock = |phase, purpose, mode: LockMode, budget: bool, held: String| CasLock {
        phase,
        purpose,
        relation: relation.clone(),
        partitions,
        mode,
        blocks: mode.blocks_description(),
        lock_timeout_ms: budget.then_some(cutover.lock_timeout_ms),
        attempts: budget.then_some(cutover.attempts),
        held,
    };
    let trigger = match options.mode {
        Mode::Live => "the capture triggers",
        Mode::Quiesced => "the write fence",
    };
    let locks = vec![
        lock(
            "capture",
            match options.mode {
                Mode::Live => "install the capture triggers",
                Mode::Quiesced => "install the write fence",
            },
            LockMode::ShareRowExclusive,
            true,
            format!(
                "one short transaction creating the change log, its functions and {trigger}: catalog changes only, no row is read"
            ),
        ),
        lock(
            "copy",
            "read the rows in key order",
            LockMode::AccessShare,
            false,
            format!(
                "one chunk transaction at a time per copy worker ({} workers; chunks aimed at {} ms)",
                options.workers, options.chunk_target_ms
            ),
        ),
        lock(
            "verify",
            "compare shadow and source chunk by chunk",
            LockMode::AccessShare,
            false,
            "one chunk comparison at a time per worker".to_owned(),
        ),
        lock(
            "swap",
            "exchange the names",
            LockMode::AccessExclusive,
            true,
            format!(
                "the swap's transaction: the drain of the last captured changes (at most {}; with more, the lock is given back to catch up first), the checks and the renames; no row is copied under it (`apply` reports the hold it measured)",
                cutover.max_drain
            ),
        ),
    ];
    let mut locks = locks;
    if let Some(facts) = facts {
        let (indexing, cleanup) = partner_locks(facts, &cutover);
        // The shadow's indexes and constraints are built after the copy, before the
        // verification; the clean-up follows the swap.
        locks.splice(2..2, indexing);
        locks.extend(cleanup);
    }
    let mut swap_also_locks: Vec<QualifiedName> = Vec::new();
    if let Some(facts) = facts {
        for fk in &facts.foreign_keys_in {
            if !fk.referencing.matches(&facts.name) && !swap_also_locks.contains(&fk.referencing) {
                swap_also_locks.push(fk.referencing.clone());
            }
        }
        swap_also_locks.extend(facts.dependent_views.iter().cloned());
    }
    Some(CasLocks {
        locks,
        swap_also_locks,
        blocking_form: classification.locks.clone(),
    })
}

/// The locks on the tables the table's foreign keys reference: adding each foreign key
/// to the shadow (SHARE ROW EXCLUSIVE on the referenced table, as `ADD FOREIGN KEY`
/// takes it; a partitioned shadow's key is validated under it, a plain one's under a
/// weaker lock afterwards), and dropping the old table's after the swap (ACCESS
/// EXCLUSIVE, one referenced table per transaction, under the cutover's budget: LK-8).
fn partner_locks(
    facts: &RelationFacts,
    cutover: &crate::cas::CutoverBudgets,
) -> (Vec<CasLock>, Vec<CasLock>) {
    let mut partners: Vec<&QualifiedName> = Vec::new();
    for fk in &facts.foreign_keys_out {
        if !fk.referenced.matches(&facts.name) && !partners.contains(&&fk.referenced) {
            partners.push(&fk.referenced);
        }
    }
    let partitioned = !facts.partitions.is_empty();
    let (mut indexing, mut cleanup) = (Vec::new(), Vec::new());
    for partner in partners {
        indexing.push(CasLock {
            phase: "indexing",
            purpose: "add the shadow's foreign key to it",
            relation: partner.clone(),
            partitions: 0,
            mode: LockMode::ShareRowExclusive,
            blocks: LockMode::ShareRowExclusive.blocks_description(),
            lock_timeout_ms: Some(crate::cas::session::RUN_SESSION.lock_timeout_ms),
            attempts: None,
            held: if partitioned {
                "the transaction adding the constraint to the shadow, which validates it: a scan of the shadow".to_owned()
            } else {
                "the transaction adding the constraint to the shadow NOT VALID (catalog only); it is validated afterwards under ROW SHARE".to_owned()
            },
        });
        cleanup.push(CasLock {
            phase: "cleanup",
            purpose: "drop the old table's foreign key to it",
            relation: partner.clone(),
            partitions: 0,
            mode: LockMode::AccessExclusive,
            blocks: LockMode::AccessExclusive.blocks_description(),
            lock_timeout_ms: Some(cutover.lock_timeout_ms),
            attempts: Some(cutover.attempts),
            held: "one short transaction per referenced table after the swap (catalog only); out of attempts, the old table is left behind and reported".to_owned(),
        });
    }
    (indexing, cleanup)
}
