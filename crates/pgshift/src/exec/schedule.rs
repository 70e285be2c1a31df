//! From a judged file to the units that run: pgshift's rules for what shares a
//! transaction (documented in `docs/EXECUTION.md`).
//!
//! 1. Outside an explicit `BEGIN … COMMIT`, every statement runs in its own bounded
//!    transaction; a statement replaced by a safer sequence runs each step on its own
//!    (in a transaction, or alone when the step cannot run in one).
//! 2. An explicit block whose statements all run as written stays one transaction.
//! 3. An explicit block with a statement that needs a safer sequence or copy-and-swap is
//!    split into rule-1 units — unless its meaning depends on being one transaction
//!    (`LOCK TABLE`, or data changes together with schema changes), which is refused
//!    (`not-splittable`) with a way to restructure it.
//! 4. A rewrite routed to copy-and-swap runs through it (a unit of its own). If the
//!    operator named its table with `--allow-blocking`, the blocking form runs as
//!    written instead, and the outcome says so. Without copy-and-swap (a caller that
//!    gives no connection for it), such a rewrite is refused
//!    (`copy-and-swap-unavailable`) unless accepted as blocking.
//! 5. A step whose work is a scan, build or rewrite of an existing relation under a
//!    lock that blocks writes never runs as if it were online (LK-6): the classifier
//!    gives such work a safer sequence or copy-and-swap where one exists; what is left
//!    runs only when the operator names its table with `--allow-blocking` (the unit is
//!    then accepted as blocking, and the outcome says so), and is refused
//!    (`blocking-work`) otherwise.
//! 6. `SET lock_timeout` / `statement_timeout` are dropped (pgshift's budgets govern);
//!    `SET search_path` sets the path later units run with; other `SET`s apply to the
//!    session as they come. `SET session_replication_role` is refused in the same
//!    way as it is flagged by lint: a migration must not bypass invariant triggers.

use serde::{Deserialize, Serialize};

use super::unit::Unit;
use super::whole::{self, Whole};
use crate::classify::{Classification, Effect, OperationKind, TransactionUse, WorkClass};
use crate::refusal::{Refusal, RefusalCause};
use crate::route::{Route, Step, StepLock};
use crate::script::{AnalyzedStatement, Script};
use pgshift_sql::QualifiedName;

/// One thing to do, in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Scheduled {
    /// A unit of steps.
    Unit {
        /// The unit.
        unit: Unit,
    },
    /// A session setting applied as it comes (`SET work_mem = …`).
    Setting {
        /// The statement.
        sql: String,
        /// Its index in the file.
        statement: usize,
    },
    /// The `search_path` later units run with.
    SearchPath {
        /// Schema names, in order.
        schemas: Vec<String>,
    },
}

/// A statement that will not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct StatementRefusal {
    /// Its index in the file.
    pub statement: usize,
    /// Its line.
    pub line: u32,
    /// Why.
    pub refusal: Refusal,
}

/// The schedule of a file.
#[derive(Clone, Debug, Serialize)]
pub struct Schedule {
    /// What runs, in order (empty when anything is refused).
    pub items: Vec<Scheduled>,
    /// Refused statements; when any, nothing runs.
    pub refusals: Vec<StatementRefusal>,
    /// Notes for people (dropped settings, split blocks).
    pub notes: Vec<String>,
}

/// Options of scheduling.
#[derive(Clone, Debug, Default)]
pub struct ScheduleOptions {
    /// Tables whose blocking rewrite the operator accepts explicitly.
    pub allow_blocking: Vec<QualifiedName>,
    /// The largest table (heap bytes over its partitions) a step may hold a lock that
    /// blocks writes on while it scans, builds or rewrites it (`--max-table-size`): an
    /// accepted blocking form on a larger one is refused (`table-too-large`).
    pub max_table_size: Option<u64>,
    /// Whether rewrites routed to copy-and-swap run through it (otherwise they are
    /// refused unless accepted as blocking).
    pub copy_and_swap: bool,
    /// The room copy-and-swap runs may write (`--disk-room`), where free disk cannot
    /// be measured.
    pub disk_room: Option<u64>,
}

/// Schedules a judged file.
pub fn schedule(script: &Script, options: &ScheduleOptions) -> Schedule {
    let mut schedule = build(script, options);
    finish(&mut schedule);
    schedule
}

/// The units of a file with its refusals, items kept even when something is refused
/// (so that pre-run checks can look at every unit).
pub(crate) fn build(script: &Script, options: &ScheduleOptions) -> Schedule {
    let mut schedule = Schedule {
        items: Vec::new(),
        refusals: Vec::new(),
        notes: Vec::new(),
    };
    let mut index = 0;
    while index < script.statements.len() {
        let item = &script.statements[index];
        if let Some(block) = explicit_block(script, index) {
            schedule_block(script, &block, options, &mut schedule);
            index = block.last().map_or(index, |last| last + 1);
            continue;
        }
        schedule_statement(item, index, options, &mut schedule);
        index += 1;
    }
    no_blocking_work_called_online(script, options, &mut schedule);
    if let Some(whole) = super::whole_file::whole_file(script, &schedule) {
        schedule = whole;
    }
    no_blocking_work_on_a_larger_table(script, options, &mut schedule);
    schedule
}

/// `--max-table-size`: a unit accepted as blocking whose step scans, builds or rewrites
/// a table larger than the limit, under a lock that blocks writes, is refused. Online
/// forms (concurrent builds, `NOT VALID` and `VALIDATE`, copy-and-swap, catalog-only
/// changes under a brief lock) are never accepted as blocking, so the limit leaves them
/// alone.
// INV: LK-11 — the size guard, judged on the live sizes before anything runs.
fn no_blocking_work_on_a_larger_table(
    script: &Script,
    options: &ScheduleOptions,
    schedule: &mut Schedule,
) {
    let Some(limit) = options.max_table_size else {
        return;
    };
    let mut refusals = Vec::new();
    for item in &schedule.items {
        let Scheduled::Unit { unit } = item else {
            continue;
        };
        if !unit.accepted_blocking {
            continue;
        }
        for step in unit.steps.iter().filter(|s| s.work.grows_under_lock()) {
            let Some(lock) = step.lock.as_ref().filter(|l| l.mode.blocks_writes()) else {
                continue;
            };
            let found = unit.statements.iter().find_map(|&index| {
                let statement = script.statements.get(index)?;
                let volume = statement
                    .live
                    .iter()
                    .find(|v| v.relation == lock.relation)?;
                Some((index, statement, volume))
            });
            // A relation with no live size (new in the input, or no live facts) has no
            // rows to judge by.
            let Some((index, statement, volume)) = found else {
                continue;
            };
            let size = volume.heap_bytes.and_then(|b| u64::try_from(b).ok());
            if size.is_some_and(|size| size <= limit) {
                continue;
            }
            refusals.push(StatementRefusal {
                statement: index,
                line: statement.statement.position.line,
                refusal: Refusal::new(
                    RefusalCause::TableTooLarge,
                    format!(
                        "this holds {} on {} while it {} it, and --max-table-size is {}: {}",
                        lock.mode.sql_name(),
                        volume.describe(),
                        work_words(step),
                        crate::cas::disk_watch::size(limit),
                        if size.is_some() {
                            "the table is larger; run it when the table is smaller, or raise the limit"
                        } else {
                            "its size is not known (another session holds it locked), so it is not run"
                        }
                    ),
                ),
            });
        }
    }
    schedule.refusals.extend(refusals);
}

/// Nothing of a file with a refused statement runs: its items go.
pub(crate) fn finish(schedule: &mut Schedule) {
    if !schedule.refusals.is_empty() {
        schedule.items.clear();
    }
    schedule.refusals.sort_by_key(|r| r.statement);
}

/// Rule 5: every unit that is not copy-and-swap is checked, step by step, for work that
/// grows with an existing relation while a lock that blocks writes is held. Such a unit
/// is accepted as blocking when the operator named one of its tables, and refused
/// otherwise.
// INV: LK-6 — the one place a unit is judged online or blocking before anything runs.
fn no_blocking_work_called_online(
    script: &Script,
    options: &ScheduleOptions,
    schedule: &mut Schedule,
) {
    for item in &mut schedule.items {
        let Scheduled::Unit { unit } = item else {
            continue;
        };
        // INV: TX-1 — a block run whole on tables that are empty on the live server
        // has no rows to scan or rewrite under its locks.
        if unit.copy_and_swap.is_some() || unit.whole_on_empty {
            continue;
        }
        let statements: Vec<(usize, &AnalyzedStatement)> = unit
            .statements
            .iter()
            .filter_map(|&i| script.statements.get(i).map(|s| (i, s)))
            .collect();
        // INV: TX-2 — on tables that are new or empty on the live server the work has
        // no rows to scan or rewrite under its locks: it runs as written, and says so.
        if statements
            .iter()
            .all(|(_, s)| super::whole_file::locks_only_empty(s))
        {
            unit.whole_on_empty = true;
            unit.empty_at_start =
                super::whole_file::empty_tables(statements.iter().map(|(_, s)| *s));
            continue;
        }
        let Some(step) = unit
            .steps
            .iter()
            .find(|step| blocks_while_working(step, &statements))
        else {
            continue;
        };
        let accepted = statements.iter().any(|(_, s)| {
            s.classification.locks.iter().any(|lock| {
                options
                    .allow_blocking
                    .iter()
                    .any(|t| t.matches(&lock.relation))
            })
        });
        if accepted {
            unit.accepted_blocking = true;
            continue;
        }
        let Some((index, statement)) = statements
            .iter()
            .find(|(_, s)| s.classification.work.grows_under_lock())
            .or(statements.first())
        else {
            continue;
        };
        schedule.refusals.push(StatementRefusal {
            statement: *index,
            line: statement.statement.position.line,
            refusal: blocking_refusal(step),
        });
    }
}

/// Whether a step scans, builds or rewrites a relation that existed before the file,
/// under a lock that blocks writes.
fn blocks_while_working(step: &Step, statements: &[(usize, &AnalyzedStatement)]) -> bool {
    step.work.grows_under_lock()
        && step.lock.as_ref().is_some_and(|lock| {
            lock.mode.blocks_writes()
                && !statements
                    .iter()
                    .any(|(_, s)| s.new_relations.iter().any(|n| n.matches(&lock.relation)))
        })
}

/// What a step blocking writes does to its relation, in a refusal's words.
fn work_words(step: &Step) -> &'static str {
    if step.work == crate::classify::WorkClass::Rewrite {
        "rewrites"
    } else {
        "scans or builds on"
    }
}

fn blocking_refusal(step: &Step) -> Refusal {
    let (relation, mode, argument) = step.lock.as_ref().map_or_else(
        || (String::new(), "", String::new()),
        |lock| {
            (
                lock.relation.to_string(),
                lock.mode.sql_name(),
                table_argument(&lock.relation),
            )
        },
    );
    let what = work_words(step);
    Refusal::new(
        RefusalCause::BlockingWork,
        format!(
            "this {what} {relation} under {mode}, which blocks writes for as long as the work takes, and pgshift has no online form of it; to run it as written anyway (reported as blocking, exit 3), pass --allow-blocking {argument}"
        ),
    )
}

/// `relation` as `--allow-blocking` reads it, ready for a shell: each part bare where
/// a bare name folds to it, else double-quoted, and the whole in single quotes when it
/// holds a double quote.
fn table_argument(relation: &pgshift_sql::QualifiedName) -> String {
    let part = |name: &str| {
        let bare = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
        if bare {
            name.to_owned()
        } else {
            format!("\"{}\"", name.replace('"', "\"\""))
        }
    };
    let text = match &relation.schema {
        Some(schema) => format!("{}.{}", part(schema), part(&relation.name)),
        None => part(&relation.name),
    };
    if text.contains('"') {
        format!("'{}'", text.replace('\'', "'\\''"))
    } else {
        text
    }
}

/// The statements of the explicit transaction block starting at `index`.
fn explicit_block(script: &Script, index: usize) -> Option<Vec<usize>> {
    let transaction = script.statements[index].transaction?;
    let block = &script.transactions[transaction];
    (block.explicit && block.statements.first() == Some(&index)).then(|| block.statements.clone())
}

fn schedule_block(
    script: &Script,
    block: &[usize],
    options: &ScheduleOptions,
    schedule: &mut Schedule,
) {
    let members: Vec<usize> = block
        .iter()
        .copied()
        .filter(|&i| script.statements[i].classification.transaction != TransactionUse::Control)
        .collect();
    let all_as_written = members.iter().all(|&i| {
        let c = &script.statements[i].classification;
        c.route == Route::Native && c.transaction != TransactionUse::OutsideOnly
    });
    let transaction = script.statements[block[0]]
        .transaction
        .map(|t| &script.transactions[t]);
    let has_lock_table = members.iter().any(|&i| {
        script.statements[i]
            .classification
            .operations
            .iter()
            .any(|op| op.kind == OperationKind::LockTable)
    });
    let dml_with_ddl =
        transaction.is_some_and(|t| !t.data_changes.is_empty() && !t.schema_changes.is_empty());
    let must_stay_whole = has_lock_table || dml_with_ddl;
    if all_as_written && !must_stay_whole {
        push_whole(script, &members, false, schedule);
        return;
    }
    if must_stay_whole {
        let first = &script.statements[block[0]];
        let line = first.statement.position.line;
        let why = if has_lock_table {
            "LOCK TABLE"
        } else {
            "data changes with schema changes"
        };
        // A block whose statements all run as written runs so on any table; on empty
        // ones it is also judged by TX-1, which a plan folded into its routes (each
        // statement of a block TX-1 runs whole is shown as written) must keep.
        let live = match whole::judge(script, &members) {
            Whole::Runs { tables } => {
                schedule.notes.push(format!(
                    "the transaction block at line {line} runs whole as one transaction, as written ({why}): every table it locks is empty here{}",
                    if tables.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", whole::names(&tables))
                    }
                ));
                push_whole(script, &members, true, schedule);
                return;
            }
            _ if all_as_written => {
                push_whole(script, &members, false, schedule);
                return;
            }
            Whole::Populated { tables } => format!(
                "; it would run whole only where every table it locks is empty, and here {} {}",
                whole::sizes(&tables),
                if tables.len() == 1 {
                    "is not"
                } else {
                    "are not"
                }
            ),
            Whole::NotAsWritten => String::new(),
        };
        schedule.refusals.push(StatementRefusal {
            statement: block[0],
            line,
            refusal: Refusal::new(
                RefusalCause::NotSplittable,
                format!(
                    "the transaction block at line {line} relies on running as one transaction ({why}), but some of its statements need steps that cannot share one bounded transaction{live}; move the data change (or the LOCK TABLE and what it protects) to its own migration file, and the schema changes to another"
                ),
            ),
        });
        return;
    }
    schedule.notes.push(format!(
        "the transaction block at line {} is split: its statements run as separate bounded steps",
        script.statements[block[0]].statement.position.line
    ));
    for &i in &members {
        schedule_statement(&script.statements[i], i, options, schedule);
    }
}

/// The block's statements as one transactional unit, each as written (settings of
/// the timeouts left out: pgshift's budgets govern).
fn push_whole(script: &Script, members: &[usize], whole_on_empty: bool, schedule: &mut Schedule) {
    for &i in members {
        refuse_replica_role(&script.statements[i], i, schedule);
    }
    let steps: Vec<Step> = members
        .iter()
        .filter(|&&i| !is_timeout_setting(&script.statements[i].classification))
        .map(|&i| as_written(&script.statements[i]))
        .collect();
    if steps.is_empty() {
        return;
    }
    schedule.items.push(Scheduled::Unit {
        unit: Unit {
            steps,
            transactional: true,
            statements: members.to_vec(),
            accepted_blocking: members
                .iter()
                .any(|&i| accepted_procedural(&script.statements[i].classification)),
            copy_and_swap: None,
            guard: None,
            whole_on_empty,
            empty_at_start: if whole_on_empty {
                super::whole_file::empty_tables(members.iter().map(|&i| &script.statements[i]))
            } else {
                Vec::new()
            },
        },
    });
}

pub(super) fn is_timeout_setting(c: &Classification) -> bool {
    c.effects.iter().any(|e| {
        matches!(
            e,
            Effect::SetLockTimeout { .. } | Effect::SetStatementTimeout { .. }
        )
    })
}

/// Whether the statement sets `session_replication_role = replica`.
pub(super) fn sets_replica_role(c: &Classification) -> bool {
    c.effects
        .iter()
        .any(|e| matches!(e, Effect::SetReplicationRole { role, .. } if role.as_str() == "replica"))
}

fn refuse_replica_role(item: &AnalyzedStatement, index: usize, schedule: &mut Schedule) -> bool {
    let replica = sets_replica_role(&item.classification);
    if replica {
        schedule.refusals.push(StatementRefusal {
            statement: index,
            line: item.statement.position.line,
            refusal: Refusal::new(
                RefusalCause::UnclassifiedStatement,
                "SET session_replication_role = replica would make what follows skip invariant triggers and foreign-key checks; pgshift does not run it",
            ),
        });
    }
    replica
}

fn schedule_statement(
    item: &AnalyzedStatement,
    index: usize,
    options: &ScheduleOptions,
    schedule: &mut Schedule,
) {
    let c = &item.classification;
    if c.transaction == TransactionUse::Control {
        return;
    }
    if refuse_replica_role(item, index, schedule) {
        return;
    }
    if is_timeout_setting(c) {
        schedule.notes.push(format!(
            "line {}: {} is not run; pgshift's own budgets set the timeouts of every step",
            item.statement.position.line, item.statement.text
        ));
        return;
    }
    if c.statement == "set" || c.statement == "reset" {
        if let Some(schemas) = search_path_of(item) {
            schedule.items.push(Scheduled::SearchPath { schemas });
        } else {
            schedule.items.push(Scheduled::Setting {
                sql: item.statement.text.clone(),
                statement: index,
            });
        }
        return;
    }
    if let Some(unit) = super::whole_file::as_written_on_empty(item, index) {
        schedule.notes.push(format!(
            "line {}: runs as written: every table it blocks writes on is new or empty here",
            item.statement.position.line
        ));
        schedule.items.push(unit);
        return;
    }
    match &c.route {
        Route::Native => schedule.items.push(Scheduled::Unit {
            unit: Unit {
                steps: vec![as_written(item)],
                transactional: c.transaction != TransactionUse::OutsideOnly,
                statements: vec![index],
                accepted_blocking: accepted_procedural(c),
                copy_and_swap: None,
                guard: guarded(c),
                whole_on_empty: false,
                empty_at_start: Vec::new(),
            },
        }),
        Route::NativeSequence { steps } => {
            for step in steps {
                schedule.items.push(Scheduled::Unit {
                    unit: Unit {
                        steps: vec![step.clone()],
                        transactional: step.transactional,
                        statements: vec![index],
                        accepted_blocking: false,
                        copy_and_swap: None,
                        guard: None,
                        whole_on_empty: false,
                        empty_at_start: Vec::new(),
                    },
                });
            }
        }
        Route::CopyAndSwap => {
            if blocking_accepted(c, options) {
                schedule.items.push(blocking_form(item, index));
            } else if let (true, Some(lock)) = (options.copy_and_swap, c.locks.first()) {
                schedule.items.push(Scheduled::Unit {
                    unit: Unit {
                        steps: vec![as_written(item)],
                        transactional: false,
                        statements: vec![index],
                        accepted_blocking: false,
                        copy_and_swap: Some(lock.relation.clone()),
                        guard: None,
                        whole_on_empty: false,
                        empty_at_start: Vec::new(),
                    },
                });
            } else {
                let table = c
                    .locks
                    .first()
                    .map_or_else(String::new, |l| l.relation.to_string());
                schedule.refusals.push(StatementRefusal {
                    statement: index,
                    line: item.statement.position.line,
                    refusal: Refusal::new(
                        RefusalCause::CopyAndSwapUnavailable,
                        format!(
                            "this rewrite runs online only through copy-and-swap, which this pgshift does not have yet; to run the blocking form anyway (ACCESS EXCLUSIVE for the whole rewrite), pass --allow-blocking {}",
                            table.trim_matches('"')
                        ),
                    ),
                });
            }
        }
        Route::Refused { refusal } if blocking_form_lifts(c, refusal) => {
            if blocking_accepted(c, options) {
                // Copy-and-swap cannot take the table, and the operator accepted the
                // blocking form: it runs as written under the step budgets.
                schedule.items.push(blocking_form(item, index));
            } else {
                let table = c.locks.first().map_or_else(String::new, |l| {
                    super::allow_blocking::command_line_name(&l.relation)
                });
                let mut refusal = refusal.clone();
                refusal.message = format!(
                    "{}; to run the blocking form instead (ACCESS EXCLUSIVE for the whole rewrite), pass --allow-blocking {table}",
                    refusal.message
                );
                schedule.refusals.push(StatementRefusal {
                    statement: index,
                    line: item.statement.position.line,
                    refusal,
                });
            }
        }
        Route::Refused { refusal } => schedule.refusals.push(StatementRefusal {
            statement: index,
            line: item.statement.position.line,
            refusal: refusal.clone(),
        }),
    }
}

/// The statement as written, as a unit of its own whose blocking form the operator
/// accepted.
/// A recorded schedule resumed with this run's `--allow-blocking`: each copy-and-swap
/// unit from the `from`-th unit on whose table the operator now names runs its
/// statement as written, accepted as blocking, as [`schedule`] would have scheduled it
/// with that option (rule 4). The units before `from` committed and are not touched.
/// Returns how many units changed.
pub fn accept_blocking_from(
    items: &mut [Scheduled],
    from: usize,
    allowed: &[QualifiedName],
) -> usize {
    let mut changed = 0;
    let units = items.iter_mut().filter_map(|item| match item {
        Scheduled::Unit { unit } => Some(unit),
        _ => None,
    });
    for unit in units.skip(from) {
        let named = unit
            .copy_and_swap
            .as_ref()
            .is_some_and(|table| allowed.iter().any(|t| t.matches(table)));
        if named {
            unit.copy_and_swap = None;
            unit.accepted_blocking = true;
            unit.transactional = unit.steps.iter().all(|step| step.transactional);
            changed += 1;
        }
    }
    changed
}

fn blocking_form(item: &AnalyzedStatement, index: usize) -> Scheduled {
    Scheduled::Unit {
        unit: Unit {
            steps: vec![as_written(item)],
            transactional: item.classification.transaction != TransactionUse::OutsideOnly,
            statements: vec![index],
            accepted_blocking: true,
            copy_and_swap: None,
            guard: None,
            whole_on_empty: false,
            empty_at_start: Vec::new(),
        },
    }
}

/// The guard's copy, when the statement is procedural code guarded by PC-5.
fn guarded(c: &Classification) -> Option<crate::procedural::Guard> {
    c.effects.iter().find_map(|e| match e {
        Effect::RunsGuarded { guard } => Some(guard.clone()),
        _ => None,
    })
}

/// Whether the statement is procedural code the operator named with
/// `--allow-procedural`.
// INV: PC-4 — named procedural code runs as written and is reported as accepted.
fn accepted_procedural(c: &Classification) -> bool {
    c.effects
        .iter()
        .any(|e| matches!(e, Effect::RunsProcedural { accepted: true }))
}

/// Whether the operator accepted the blocking form on a table the statement locks.
fn blocking_accepted(c: &Classification, options: &ScheduleOptions) -> bool {
    c.locks.iter().any(|lock| {
        options
            .allow_blocking
            .iter()
            .any(|t| t.matches(&lock.relation))
    })
}

/// Whether a refusal is one `--allow-blocking` lifts: a rewrite that copy-and-swap
/// cannot take on this table (no usable key, not a permanent table, a form it does not
/// carry), whose blocking form PostgreSQL runs as written.
fn blocking_form_lifts(c: &Classification, refusal: &Refusal) -> bool {
    c.work == WorkClass::Rewrite
        && matches!(
            refusal.cause,
            RefusalCause::NoUsableKey
                | RefusalCause::NonPermanentTable
                | RefusalCause::RewriteUnsupported
        )
}

/// The statement as one step, run as written.
pub(super) fn as_written(item: &AnalyzedStatement) -> Step {
    let c = &item.classification;
    Step {
        sql: item.statement.text.clone(),
        purpose: "run as written".to_owned(),
        lock: c.strongest_lock().map(|lock| StepLock {
            relation: lock.relation.clone(),
            mode: lock.mode,
        }),
        work: c.work,
        transactional: c.transaction != TransactionUse::OutsideOnly,
    }
}

/// The schemas of a `SET [LOCAL] search_path = …`, when that is what the statement is.
fn search_path_of(item: &AnalyzedStatement) -> Option<Vec<String>> {
    let pgshift_sql::NodeEnum::VariableSetStmt(set) = &item.statement.node else {
        return None;
    };
    if set.name != "search_path" {
        return None;
    }
    let schemas = set
        .args
        .iter()
        .filter_map(|arg| match &arg.node {
            Some(pgshift_sql::NodeEnum::AConst(constant)) => match &constant.val {
                Some(pgshift_sql::ast::a_const::Val::Sval(s)) => Some(s.sval.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    Some(schemas)
}

#[cfg(test)]
mod tests {
    use pgshift_sql::QualifiedName;

    use super::table_argument;

    #[test]
    fn the_allow_blocking_argument_a_refusal_suggests_names_the_table() {
        // It once stripped only the outer quotes of "a"."ev_1", giving a"."ev_1.
        assert_eq!(
            table_argument(&QualifiedName::qualified("a", "ev_1")),
            "a.ev_1"
        );
        assert_eq!(table_argument(&QualifiedName::bare("keyless")), "keyless");
        assert_eq!(
            table_argument(&QualifiedName::qualified("App", "it's")),
            r#"'"App"."it'\''s"'"#
        );
    }
}
