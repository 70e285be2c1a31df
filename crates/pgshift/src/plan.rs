//! Planning against a live database: read the facts of every relation the input names
//! in one catalog snapshot, judge each file with them, then give each statement the
//! verdict `apply` would give.
//!
//! Planning is read-only: the only statements sent are catalog reads (inside a
//! `REPEATABLE READ READ ONLY` transaction for the snapshot) on a session whose
//! budgets and `search_path` were set by [`crate::connect`]. None of them takes a
//! relation lock that DDL holds, so a table locked by another session is planned as
//! usual, and the plan says who holds the lock.
//!
//! The verdict of each statement is its classification folded with [`judge`], the
//! same pre-run judgement `apply` makes: a statement the schedule or the live checks
//! refuse (blocking work without `--allow-blocking`, an invalid index under a build's
//! name, a stopped copy-and-swap run, a transaction block that cannot be split) is
//! shown refused with that refusal.

use std::collections::BTreeSet;

use thiserror::Error;

use crate::catalog::read::{read_snapshot_with, CatalogError};
use crate::catalog::{CatalogSnapshot, Lookup};
use crate::connect::Session;
use crate::exec::judge::{judge, JudgeError};
use crate::exec::schedule::{Schedule, ScheduleOptions, Scheduled};
use crate::lock::{ObjectClass, ObjectRef};
use crate::procedural::{ProceduralError, ProceduralOptions, ProceduralVerdict};
use crate::refusal::{Refusal, RefusalCause};
use crate::route::Route;
use crate::script::{
    analyze, analyze_evolving, transaction_mode_for, Knowledge, Script, TransactionMode,
};
use pgshift_sql::{QualifiedName, Statement};

/// One parsed input file to plan.
#[derive(Clone, Debug)]
pub struct PlanInput {
    /// The path as the user gave it.
    pub path: String,
    /// Its statements.
    pub statements: Vec<Statement>,
}

/// A planned file.
#[derive(Clone, Debug)]
pub struct PlannedFile {
    /// The path as the user gave it.
    pub path: String,
    /// The file judged with live facts, each statement's route folded with the
    /// pre-run verdict.
    pub script: Script,
    /// The pre-run verdict: what `apply` would schedule, and what it would refuse.
    pub schedule: Schedule,
    /// Its procedural statements, traced on a clone, and how each runs.
    pub procedural: Vec<ProceduralVerdict>,
}

/// How the plan judges what `apply` would do.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// Tables whose blocking forms the operator accepts (`--allow-blocking`).
    pub allow_blocking: Vec<QualifiedName>,
    /// The largest table (heap bytes over its partitions) a step may hold a lock that
    /// blocks writes on while it scans, builds or rewrites it (`--max-table-size`): an
    /// accepted blocking form on a larger one is refused (`table-too-large`).
    pub max_table_size: Option<u64>,
    /// Trace procedural code on a clone of the target and run it by the trace
    /// ([`crate::procedural`]); `None`: it is refused (`opaque-procedural-code`).
    pub procedural: Option<ProceduralOptions>,
    /// The room copy-and-swap runs have on the database's volumes (`--disk-room`),
    /// where free disk cannot be measured.
    pub disk_room: Option<u64>,
}

/// The result of planning.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The facts everything was judged with.
    pub snapshot: CatalogSnapshot,
    /// The files, in order.
    pub files: Vec<PlannedFile>,
}

impl Plan {
    /// Whether any statement would be refused.
    pub fn any_refused(&self) -> bool {
        self.files.iter().any(|file| {
            file.script
                .statements
                .iter()
                .any(|item| item.classification.route.refusal().is_some())
        })
    }
}

/// Why planning failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Reading the catalog failed.
    #[error("reading the catalog: {0}")]
    Catalog(#[from] CatalogError),
    /// The pre-run checks could not be made.
    #[error("{0}")]
    Judge(#[from] JudgeError),
    /// Procedural code could not be traced.
    #[error("{0}")]
    Procedural(#[from] ProceduralError),
}

/// Plans `inputs` in order against the database behind `session`. Relations created
/// by earlier statements of the same run count as new (the runner applies the files
/// one after another).
pub async fn plan(
    session: &Session,
    inputs: Vec<PlanInput>,
    default_mode: TransactionMode,
) -> Result<Plan, PlanError> {
    plan_with(session, inputs, default_mode, &PlanOptions::default()).await
}

/// [`plan`], with the operator's choices that change the verdict.
pub async fn plan_with(
    session: &Session,
    inputs: Vec<PlanInput>,
    default_mode: TransactionMode,
    options: &PlanOptions,
) -> Result<Plan, PlanError> {
    let (inputs, mut procedural) = match &options.procedural {
        Some(procedural) => {
            let prepared = crate::procedural::prepare(session, inputs, procedural).await?;
            (prepared.inputs, prepared.verdicts)
        }
        None => {
            let none = vec![Vec::new(); inputs.len()];
            (inputs, none)
        }
    };
    let (mut names, objects) = relation_names(&inputs, default_mode);
    let mut rereads = 0;
    let snapshot = loop {
        let snapshot = read_snapshot_with(
            session.client(),
            &names,
            &objects,
            session.user_search_path(),
        )
        .await?;
        // INV: TX-1 — the relations the statements lock that only the live facts name
        // (foreign-key partners, their partitions) are read too, so a block is judged
        // by the live size of everything it locks, not by "size not known".
        let unread = locked_unread(&inputs, default_mode, &snapshot);
        if unread.is_empty() || rereads == LOCK_AWARE_READS {
            break snapshot;
        }
        rereads += 1;
        names.extend(unread);
    };
    let server_version_num = Some(snapshot.server.version_num);
    let schedule_options = ScheduleOptions {
        max_table_size: options.max_table_size,
        disk_room: options.disk_room,
        allow_blocking: options.allow_blocking.clone(),
        copy_and_swap: true,
    };
    let mut created_in_run: BTreeSet<QualifiedName> = BTreeSet::new();
    // INV: CO-12 — each file starts from the catalog the files before it leave.
    let mut evolving = Some(std::borrow::Cow::Borrowed(&snapshot));
    let mut files = Vec::with_capacity(inputs.len());
    for (file_index, input) in inputs.into_iter().enumerate() {
        let verdicts = procedural
            .get_mut(file_index)
            .map(std::mem::take)
            .unwrap_or_default();
        let mode = transaction_mode_for(&input.statements, default_mode);
        let knowledge = Knowledge {
            facts: Some(&snapshot),
            server_version_num,
            created_earlier: Some(&created_in_run),
        };
        let mut script = analyze_evolving(input.statements, mode, knowledge, &mut evolving);
        let mut verdicts = verdicts;
        by_trace(&mut script, &mut verdicts);
        for item in &script.statements {
            created_in_run.extend(item.classification.created_relations().cloned());
        }
        let mut schedule = judge(
            session.client(),
            &script,
            &schedule_options,
            session.user_search_path(),
        )
        .await?;
        if let Some(refusal) = crate::exec::split::lock_table_lost(&script, &schedule) {
            schedule.refusals.push(refusal);
            crate::exec::schedule::finish(&mut schedule);
        }
        fold(&mut script, &schedule, &snapshot);
        files.push(PlannedFile {
            path: input.path,
            script,
            schedule,
            procedural: verdicts,
        });
    }
    Ok(Plan { snapshot, files })
}

/// Gives each procedural statement the route its trace decided (the trace wins over
/// the static classification), and each expanded statement the block it comes from.
fn by_trace(script: &mut Script, verdicts: &mut [ProceduralVerdict]) {
    for verdict in verdicts.iter_mut() {
        if verdict.decision == "guarded" {
            not_guarded_in_a_block(script, verdict);
        }
        let verdict = &*verdict;
        let traced = traced_summary(verdict);
        for &index in &verdict.statements {
            let Some(item) = script.statements.get_mut(index) else {
                continue;
            };
            let c = &mut item.classification;
            match verdict.decision {
                "expanded" => push_reason(
                    &mut c.reasons,
                    format!(
                        "expanded from the procedural statement at line {} ({traced}): it executed this on a clone of the target",
                        verdict.line
                    ),
                ),
                "refused" => {
                    if let Some(refusal) = &verdict.refusal {
                        c.route = Route::Refused {
                            refusal: refusal.clone(),
                        };
                    }
                    push_reason(&mut c.reasons, traced.clone());
                }
                decision => {
                    c.route = Route::Native;
                    stated_from_trace(c, verdict);
                    if let Some(guard) = &verdict.guard {
                        c.effects.push(crate::classify::Effect::RunsGuarded {
                            guard: guard.clone(),
                        });
                    }
                    c.effects.push(crate::classify::Effect::RunsProcedural {
                        accepted: decision == "accepted",
                    });
                    push_reason(&mut c.reasons, format!("{traced}; {}", verdict.why));
                }
            }
        }
    }
}

/// A guarded block (PC-5) runs in a read-only transaction of its own, so one inside
/// an explicit `BEGIN … COMMIT` is refused as PC-3 refuses it.
fn not_guarded_in_a_block(script: &Script, verdict: &mut ProceduralVerdict) {
    let in_block = verdict.statements.iter().any(|&index| {
        script
            .statements
            .get(index)
            .and_then(|item| item.transaction)
            .and_then(|t| script.transactions.get(t))
            .is_some_and(|t| t.explicit)
    });
    if !in_block {
        return;
    }
    let Some(guard) = verdict.guard.take() else {
        return;
    };
    let message = format!(
        "{}; it is not guarded (run read-only on live first) because it is inside an explicit transaction block, and the guard needs a transaction of its own",
        guard.otherwise
    );
    let refusal = Refusal::new(RefusalCause::ProceduralBlocking, message);
    verdict.decision = "refused";
    verdict.why = refusal.message.clone();
    verdict.refusal = Some(refusal);
}

/// Adds the locks the trace saw on relations that existed before the statement to the
/// locks it is stated to take (the trace wins: `SELECT f()` states none statically),
/// so that the unit runs under the lock budget of what it really takes — a function
/// that takes ACCESS EXCLUSIVE gets `--lock-timeout-ms`, not the budget of locks that
/// block nobody — and `plan` states it.
// INV: PC-1 — a procedural statement run natively is bounded by the budget of its traced locks.
fn stated_from_trace(c: &mut crate::classify::Classification, verdict: &ProceduralVerdict) {
    use crate::classify::{LockTaken, ObjectKind};
    for traced in verdict.locks.iter().flatten() {
        if traced.created || traced.gone {
            continue;
        }
        let object = match traced.kind {
            "table" | "partitioned-table" | "foreign-table" => ObjectKind::Table,
            "index" | "partitioned-index" => ObjectKind::Index,
            "view" | "materialized-view" => ObjectKind::View,
            "sequence" => ObjectKind::Sequence,
            _ => continue,
        };
        match c
            .locks
            .iter_mut()
            .find(|lock| lock.relation.matches(&traced.relation))
        {
            Some(lock) => lock.mode = lock.mode.max(traced.mode),
            None => c.locks.push(LockTaken {
                relation: traced.relation.clone(),
                object,
                mode: traced.mode,
                recurses: false,
                partition_mode: None,
                index_mode: None,
                related_to: None,
            }),
        }
    }
}

/// `traced: …` in words: the locks that block writes and the rewrites it took on the
/// clone.
fn traced_summary(verdict: &ProceduralVerdict) -> String {
    let locks: Vec<String> = verdict
        .locks
        .iter()
        .flatten()
        .filter(|lock| !lock.created && lock.kind != "index" && lock.kind != "toast")
        .map(|lock| format!("{} on {}", lock.mode.sql_name(), lock.relation))
        .collect();
    let rewrites: Vec<String> = verdict
        .rewrites
        .iter()
        .map(|r| format!("{} ({})", r.table, r.reasons.join(", ")))
        .collect();
    format!(
        "traced: locks {}; rewrites {}",
        if locks.is_empty() {
            "none".to_owned()
        } else {
            locks.join(", ")
        },
        if rewrites.is_empty() {
            "none".to_owned()
        } else {
            rewrites.join(", ")
        }
    )
}

/// Gives each statement the pre-run verdict: a refusal replaces its route; a unit
/// accepted as blocking, and a lock another session holds on what it locks, are said
/// in its reasons.
fn fold(script: &mut Script, schedule: &Schedule, snapshot: &CatalogSnapshot) {
    for refused in &schedule.refusals {
        if let Some(item) = script.statements.get_mut(refused.statement) {
            if item.classification.route.refusal().is_none() {
                item.classification.route = Route::Refused {
                    refusal: refused.refusal.clone(),
                };
            }
        }
    }
    for item in &schedule.items {
        let Scheduled::Unit { unit } = item else {
            continue;
        };
        if unit.whole_on_empty {
            for &index in &unit.statements {
                if let Some(item) = script.statements.get_mut(index) {
                    // The block runs each of its statements as written: a safer
                    // sequence or copy-and-swap it would need elsewhere is not used.
                    if item.classification.route != Route::Native {
                        item.classification.route = Route::Native;
                    }
                    push_reason(
                        &mut item.classification.reasons,
                        "runs as written: every table its unit blocks writes on is new or empty here (TX-1, TX-2)"
                            .to_owned(),
                    );
                }
            }
        }
        if !unit.accepted_blocking {
            continue;
        }
        for &index in &unit.statements {
            if let Some(item) = script.statements.get_mut(index) {
                push_reason(
                    &mut item.classification.reasons,
                    "runs as written, blocking: its table is named with --allow-blocking"
                        .to_owned(),
                );
            }
        }
    }
    for item in &mut script.statements {
        let mut held = Vec::new();
        for lock in &item.classification.locks {
            let Lookup::Found(facts) = snapshot.lookup(&lock.relation) else {
                continue;
            };
            for other in facts
                .locks_elsewhere
                .iter()
                .filter(|other| other.mode.conflicts_with(lock.mode))
            {
                held.push(format!(
                    "{} {} {} on {} now, which conflicts with the {} this statement takes: apply waits at most its lock budget for each attempt and refuses (lock-budget-exhausted) if it is still held",
                    other.pid.map_or_else(|| "a prepared transaction".to_owned(), |pid| format!("backend pid {pid}")),
                    if other.granted { "holds" } else { "waits for" },
                    other.mode.sql_name(),
                    other.relation,
                    lock.mode.sql_name()
                ));
            }
        }
        for reason in held {
            push_reason(&mut item.classification.reasons, reason);
        }
    }
}

fn push_reason(reasons: &mut Vec<String>, reason: String) {
    if !reasons.contains(&reason) {
        reasons.push(reason);
    }
}

/// How many times the snapshot is read again for relations that only the live facts
/// name: a partner's own partners are locked by nothing these statements do, so one
/// more read is enough; the second is a bound, not an expectation.
const LOCK_AWARE_READS: usize = 2;

/// The relations the inputs, judged with `snapshot`, lock that the snapshot holds no
/// facts of (neither found nor known missing), and that no earlier statement of the
/// run creates: what the live facts named that the text did not.
fn locked_unread(
    inputs: &[PlanInput],
    default_mode: TransactionMode,
    snapshot: &CatalogSnapshot,
) -> Vec<QualifiedName> {
    let mut created: BTreeSet<QualifiedName> = BTreeSet::new();
    let mut unread: BTreeSet<QualifiedName> = BTreeSet::new();
    for input in inputs {
        let mode = transaction_mode_for(&input.statements, default_mode);
        let knowledge = Knowledge {
            facts: Some(snapshot),
            server_version_num: Some(snapshot.server.version_num),
            created_earlier: Some(&created),
        };
        let script = analyze(input.statements.clone(), mode, knowledge);
        for item in &script.statements {
            for lock in &item.classification.locks {
                if !item.new_relations.contains(&lock.relation) && !snapshot.knows(&lock.relation) {
                    unread.insert(lock.relation.clone());
                }
            }
        }
        for item in &script.statements {
            created.extend(item.classification.created_relations().cloned());
        }
    }
    unread.into_iter().collect()
}

/// Every relation the inputs lock or create, as written, and every other object whose
/// related relations they lock, to look up in one go.
fn relation_names(
    inputs: &[PlanInput],
    default_mode: TransactionMode,
) -> (Vec<QualifiedName>, Vec<ObjectRef>) {
    let mut names: BTreeSet<QualifiedName> = BTreeSet::new();
    let mut objects: BTreeSet<ObjectRef> = BTreeSet::new();
    for input in inputs {
        let mode = transaction_mode_for(&input.statements, default_mode);
        let script = analyze(input.statements.clone(), mode, Knowledge::offline());
        for item in &script.statements {
            names.extend(item.classification.locks.iter().map(|l| l.relation.clone()));
            names.extend(item.classification.created_relations().cloned());
            // A `CREATE … IF NOT EXISTS` creates nothing offline (the relation may
            // exist): its target is looked up so the live facts say which it is.
            names.extend(
                item.classification
                    .operations
                    .iter()
                    .filter(|op| op.kind.creates_relation())
                    .filter_map(|op| op.table.clone()),
            );
            for related in &item.classification.related_locks {
                let of = &related.related_to.of;
                if of.class == ObjectClass::Relation {
                    names.insert(of.name.clone());
                } else {
                    objects.insert(of.clone());
                }
            }
        }
    }
    (names.into_iter().collect(), objects.into_iter().collect())
}
