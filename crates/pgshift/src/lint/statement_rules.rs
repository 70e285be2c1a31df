//! Rules about single statements: rewrites, scans under lock, blocking locks, missing
//! `lock_timeout`, triggers, destructive changes, renames.

use pgshift_sql::{quote_ident, QualifiedName};

use super::{recipes, route_help, text_help, Code, Help, Sink};
use crate::catalog::TriggerEnabled;
use crate::classify::{
    Effect, LockTaken, Operation, OperationKind, WorkClass, HAS_DEFAULT_PARTITION, WHOLE_TABLE,
};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::Route;
use crate::script::{AnalyzedStatement, Script};

pub(super) fn check(script: &Script, sink: &mut Sink<'_>) {
    if script.statements.is_empty() {
        return;
    }
    let mut missing_timeout_reported = false;
    for (index, item) in script.statements.iter().enumerate() {
        refusals(item, index, sink);
        let heavy = heavy_work(item, index, sink);
        if !heavy {
            blocking_lock(item, index, sink);
        }
        if !missing_timeout_reported && missing_lock_timeout(script, item, index, sink) {
            missing_timeout_reported = true;
        }
        triggers(script, item, index, sink);
        destructive_and_renames(item, index, sink);
        partitions_and_functions(item, index, sink);
        session_settings(item, index, sink);
    }
}

/// The existing (not created in this file) relation an operation acts on.
fn existing_table<'a>(item: &AnalyzedStatement, op: &'a Operation) -> Option<&'a QualifiedName> {
    op.table
        .as_ref()
        .filter(|table| !item.new_relations.contains(table) && !is_created_here(item, table))
}

fn is_created_here(item: &AnalyzedStatement, table: &QualifiedName) -> bool {
    item.classification
        .created_relations()
        .any(|created| created == table)
}

/// The lock the statement takes on `table`.
fn lock_on<'a>(item: &'a AnalyzedStatement, table: &QualifiedName) -> Option<&'a LockTaken> {
    item.classification
        .locks
        .iter()
        .find(|lock| &lock.relation == table)
}

fn lock_phrase(item: &AnalyzedStatement, table: &QualifiedName) -> String {
    let mode = lock_on(item, table).map_or(LockMode::AccessExclusive, |lock| lock.mode);
    let partitions = if lock_on(item, table).is_some_and(|lock| lock.recurses) {
        " (and any partitions)"
    } else {
        ""
    };
    format!(
        "{} on {table}{partitions}: it {}",
        mode.sql_name(),
        mode.blocks_description()
    )
}

fn refusals(item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) {
    let Route::Refused { refusal } = &item.classification.route else {
        return;
    };
    let code = match refusal.cause {
        RefusalCause::OpaqueProceduralCode => Code::OpaqueCode,
        RefusalCause::UnclassifiedStatement => Code::Unclassified,
        RefusalCause::TwoPhaseCommit => Code::TwoPhaseCommit,
        RefusalCause::NotAllowedInTransaction => {
            sink.push(
                item,
                index,
                Code::NotInTransaction,
                format!(
                    "{} cannot run inside a transaction block, and this one runs inside one (the file's or an explicit BEGIN)",
                    sql_words(item)
                ),
                text_help("make `-- no-transaction` the file's first line (the runner then runs each statement on its own), or move this statement to its own file"),
            );
            return;
        }
        _ => return,
    };
    sink.push(item, index, code, refusal.message.clone(), None);
}

/// Rewrites and scans under lock; returns whether one was reported.
fn heavy_work(item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) -> bool {
    let mut reported = false;
    for op in &item.classification.operations {
        let Some(table) = existing_table(item, op) else {
            continue;
        };
        let column = op.object.as_deref().unwrap_or("");
        let found = match (op.work, op.kind) {
            (WorkClass::Rewrite, OperationKind::AddColumn)
                if op.detail.as_deref().is_some_and(|d| d.contains("volatil")) =>
            {
                let help = recipes::volatile_default_help(item, column);
                sink.push(
                    item,
                    index,
                    Code::VolatileDefault,
                    format!(
                        "ADD COLUMN {} with a volatile default rewrites {table} under {}",
                        quoted(op),
                        lock_phrase(item, table)
                    ),
                    help.or_else(|| route_help(item)),
                );
                reported = true;
                break;
            }
            (WorkClass::ScanUnderLock, OperationKind::AddColumn)
                if recipes::not_null_without_default(item, column) =>
            {
                sink.push(
                    item,
                    index,
                    Code::NotNullWithoutDefault,
                    format!(
                        "ADD COLUMN {} NOT NULL without a default fails unless {table} is empty: PostgreSQL rejects it when any existing row would hold NULL (and checks under {})",
                        quoted(op),
                        lock_phrase(item, table)
                    ),
                    recipes::not_null_help(item, table, column).or_else(|| route_help(item)),
                );
                reported = true;
                break;
            }
            (WorkClass::Rewrite, _) => Some((
                Code::TableRewrite,
                format!(
                    "{}{} rewrites every row of {table} and rebuilds its indexes under {}",
                    kind_name(op.kind),
                    detail(op),
                    lock_phrase(item, table)
                ),
            )),
            (WorkClass::ScanUnderLock, OperationKind::CreateIndex) => {
                Some(index_finding(item, table))
            }
            (WorkClass::ScanUnderLock, OperationKind::AttachPartition) => attach_finding(item, op),
            (
                WorkClass::ScanUnderLock,
                OperationKind::AddCheck
                | OperationKind::AddForeignKey
                | OperationKind::AddNotNullConstraint,
            ) => Some((
                Code::ConstraintWithoutNotValid,
                format!(
                    "adding constraint {} without NOT VALID scans every row of {table} under {}",
                    quoted(op),
                    lock_phrase(item, table)
                ),
            )),
            (WorkClass::ScanUnderLock, OperationKind::SetNotNull) => Some((
                Code::SetNotNull,
                format!(
                    "SET NOT NULL on {} scans every row of {table} under {}",
                    quoted(op),
                    lock_phrase(item, table)
                ),
            )),
            (WorkClass::ScanUnderLock, _) => Some((
                Code::ScanUnderLock,
                format!(
                    "{}{} scans every row of {table} under {}",
                    kind_name(op.kind),
                    detail(op),
                    lock_phrase(item, table)
                ),
            )),
            _ => None,
        };
        if let Some((code, message)) = found {
            sink.push(item, index, code, message, route_help(item));
            reported = true;
            break;
        }
    }
    reported
}

/// `ATTACH PARTITION` scans the attached table (and any default partition) under
/// ACCESS EXCLUSIVE; only the tables that existed before the file matter.
fn attach_finding(item: &AnalyzedStatement, op: &Operation) -> Option<(Code, String)> {
    let scanned: Vec<String> = item
        .classification
        .locks
        .iter()
        .filter(|lock| lock.mode == LockMode::AccessExclusive)
        .filter(|lock| !item.new_relations.contains(&lock.relation))
        .map(|lock| lock.relation.to_string())
        .collect();
    if scanned.is_empty() {
        return None;
    }
    Some((
        Code::ScanUnderLock,
        format!(
            "ATTACH PARTITION {} scans {} under ACCESS EXCLUSIVE to check the partition bound, unless a validated CHECK constraint already implies it",
            quoted(op),
            scanned.join(" and ")
        ),
    ))
}

fn index_finding(item: &AnalyzedStatement, table: &QualifiedName) -> (Code, String) {
    let partitioned = matches!(&item.classification.route, Route::NativeSequence { steps }
        if steps.iter().any(|step| step.sql.contains(" ON ONLY ")));
    if partitioned {
        (
            Code::IndexOnPartitionedParent,
            format!(
                "CREATE INDEX on the partitioned table {table} builds every partition's index under {}; CONCURRENTLY is not allowed on a partitioned parent",
                lock_phrase(item, table)
            ),
        )
    } else {
        (
            Code::IndexNotConcurrent,
            format!(
                "CREATE INDEX without CONCURRENTLY builds the whole index under {}",
                lock_phrase(item, table)
            ),
        )
    }
}

fn quoted(op: &Operation) -> String {
    op.object.as_deref().map_or_else(String::new, quote_ident)
}

fn detail(op: &Operation) -> String {
    let mut text = String::new();
    if let Some(object) = &op.object {
        text.push(' ');
        text.push_str(&quote_ident(object));
    }
    if let Some(detail) = &op.detail {
        text.push_str(&format!(" ({detail})"));
    }
    text
}

/// The statement in SQL words (`CREATE INDEX CONCURRENTLY`), from its first operation,
/// else from its kind (`create-index` → `CREATE INDEX`).
fn sql_words(item: &AnalyzedStatement) -> String {
    item.classification
        .operations
        .first()
        .map(|op| kind_name(op.kind))
        .filter(|words| !words.is_empty())
        .unwrap_or_else(|| {
            item.classification
                .statement
                .replace('-', " ")
                .to_uppercase()
        })
}

/// The operation kind in SQL-ish words (`alter-column-type` → `ALTER COLUMN TYPE`).
fn kind_name(kind: OperationKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|value| value.as_str().map(|s| s.replace('-', " ").to_uppercase()))
        .unwrap_or_default()
}

/// A lock that blocks reads or writes on an existing table, even if only briefly.
fn blocking_lock(item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) {
    let blocking = item
        .classification
        .locks
        .iter()
        .rev() // the first strongest: a relation the statement names before a related one
        .filter(|lock| lock.mode.blocks_writes() && !item.new_relations.contains(&lock.relation))
        .filter(|lock| !is_created_here(item, &lock.relation))
        .max_by_key(|lock| lock.mode);
    let Some(lock) = blocking else { return };
    let already_destructive = item
        .classification
        .operations
        .iter()
        .any(|op| matches!(op.kind, OperationKind::DropTable | OperationKind::Truncate));
    if already_destructive {
        return;
    }
    sink.push(
        item,
        index,
        Code::BlockingLock,
        format!(
            "{} takes {}; brief once granted, but while it waits for the lock every later query on the table queues behind it",
            item.classification.statement.replace('-', " ").to_uppercase(),
            lock_phrase(item, &lock.relation)
        ),
        route_help(item).or_else(|| text_help("run it with `pgshift apply`, which takes the lock under a short lock_timeout and retries")),
    );
}

/// A write-blocking lock requested with no `lock_timeout` in force. Reported once
/// per file (at the first such statement); returns whether it was.
fn missing_lock_timeout(
    script: &Script,
    item: &AnalyzedStatement,
    index: usize,
    sink: &mut Sink<'_>,
) -> bool {
    let needs = |item: &AnalyzedStatement| {
        item.locks_existing_at_least(LockMode::Share) && item.lock_timeout_ms.unwrap_or(0) == 0
    };
    if !needs(item) {
        return false;
    }
    let others = script.statements[index + 1..]
        .iter()
        .filter(|later| needs(later))
        .count();
    let more = if others > 0 {
        format!(
            " ({others} later statement{} too)",
            if others == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    sink.push(
        item,
        index,
        Code::MissingLockTimeout,
        format!(
            "no lock_timeout is set before this strong lock{more}: if a long transaction holds the table, this statement waits for it and every query arriving after it waits too"
        ),
        Some(Help {
            text: "set a lock timeout at the top of the file (`pgshift apply` and `pgshift migrate` set one and retry for you)".to_owned(),
            sql: vec!["SET lock_timeout = '2s'".to_owned()],
        }),
    );
    true
}

/// Trigger changes, and invariant-looking triggers that replica-role sessions skip.
fn triggers(script: &Script, item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) {
    for op in &item.classification.operations {
        if !matches!(
            op.kind,
            OperationKind::CreateTrigger
                | OperationKind::CreateConstraintTrigger
                | OperationKind::ReplaceTrigger
                | OperationKind::DropTrigger
        ) {
            continue;
        }
        let Some(table) = existing_table(item, op) else {
            continue;
        };
        let verb = if op.kind == OperationKind::DropTrigger {
            "DROP TRIGGER"
        } else {
            "CREATE TRIGGER"
        };
        sink.push(
            item,
            index,
            Code::TriggerChange,
            format!(
                "{verb} {} changes what every write to {table} does, and takes {}",
                quoted(op),
                lock_phrase(item, table)
            ),
            text_help("run it with `pgshift apply`, which takes the lock under a short lock_timeout and retries"),
        );
    }
    for effect in &item.classification.effects {
        let Effect::CreatesTrigger {
            table,
            name,
            function,
            is_constraint,
            before_row,
        } = effect
        else {
            continue;
        };
        let raises = function_raises(script, function);
        if !(*is_constraint || *before_row || raises) {
            continue;
        }
        if enabled_always_later(script, index, table, name) {
            continue;
        }
        let why = if *is_constraint {
            "a constraint trigger"
        } else if *before_row {
            "a BEFORE … FOR EACH ROW trigger (it can reject or change rows)"
        } else {
            "its function raises errors"
        };
        sink.push(
            item,
            index,
            Code::OriginInvariantTrigger,
            format!(
                "trigger {} on {table} looks like an invariant ({why}) but is left ORIGIN-enabled: sessions with session_replication_role = replica (logical replication apply, restores) skip it",
                quote_ident(name)
            ),
            Some(Help {
                text: "make it fire for every session".to_owned(),
                sql: vec![format!(
                    "ALTER TABLE {table} ENABLE ALWAYS TRIGGER {}",
                    quote_ident(name)
                )],
            }),
        );
    }
}

fn function_raises(script: &Script, function: &QualifiedName) -> bool {
    script.statements.iter().any(|item| {
        item.classification.effects.iter().any(|effect| {
            matches!(effect, Effect::DefinesFunction { name, raises: true, .. } if name.matches(function))
        })
    })
}

fn enabled_always_later(
    script: &Script,
    index: usize,
    table: &QualifiedName,
    trigger: &str,
) -> bool {
    script.statements[index + 1..].iter().any(|later| {
        later.classification.effects.iter().any(|effect| {
            matches!(effect, Effect::SetsTriggerState { table: t, name, state: TriggerEnabled::Always }
                if t.matches(table) && name.as_deref().is_none_or(|n| n == trigger))
        })
    })
}

fn destructive_and_renames(item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) {
    for op in &item.classification.operations {
        let Some(table) = existing_table(item, op) else {
            continue;
        };
        if op.destructive {
            sink.push(
                item,
                index,
                Code::Destructive,
                format!(
                    "{}{} on {table} destroys data for good",
                    kind_name(op.kind),
                    op.object.as_deref().filter(|o| *o != table.name).map_or_else(String::new, |o| format!(" {}", quote_ident(o)))
                ),
                text_help("make sure no application reads it any more and that a backup exists; ship the code change first, the drop later"),
            );
        }
        if matches!(
            op.kind,
            OperationKind::RenameTable | OperationKind::RenameColumn | OperationKind::SetSchema
        ) {
            sink.push(
                item,
                index,
                Code::BreakingRename,
                format!(
                    "{}{} breaks every running application that still uses the old name",
                    kind_name(op.kind),
                    detail(op)
                ),
                text_help("expand, then contract: add the new name alongside the old (a new column kept in sync, or a view), move the applications, then remove the old name"),
            );
        }
        let whole_table_change = matches!(op.kind, OperationKind::Update | OperationKind::Delete)
            && op.detail.as_deref() == Some(WHOLE_TABLE);
        if whole_table_change {
            sink.push(
                item,
                index,
                Code::UnbatchedDataChange,
                format!(
                    "{} of every row of {table} in one transaction holds each row's lock until it commits and bloats the table",
                    kind_name(op.kind)
                ),
                text_help("batch it by key range, each batch in its own transaction"),
            );
        }
    }
}

fn session_settings(item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) {
    for effect in &item.classification.effects {
        if let Effect::SetReplicationRole { role, .. } = effect {
            if role.as_str() == "replica" {
                sink.push(
                    item,
                    index,
                    Code::ReplicationRoleReplica,
                    "session_replication_role = replica makes this session skip ORIGIN triggers and foreign-key checks: invariants are not enforced for what follows".to_owned(),
                    text_help("remove it; if the triggers must not fire, change the triggers explicitly and review why"),
                );
            }
        }
    }
}

/// Replaced trigger functions, and detached partitions whose range no partition takes.
fn partitions_and_functions(item: &AnalyzedStatement, index: usize, sink: &mut Sink<'_>) {
    for effect in &item.classification.effects {
        if let Effect::DefinesFunction {
            name,
            returns_trigger: true,
            replaces: true,
            ..
        } = effect
        {
            sink.push(
                item,
                index,
                Code::TriggerFunctionReplaced,
                format!(
                    "CREATE OR REPLACE FUNCTION {name} replaces a trigger function: every trigger that calls it behaves differently from the moment this commits, on every row written by every session"
                ),
                text_help("review every trigger that calls it (pg_trigger.tgfoid); to roll out gradually, create a new function and switch triggers to it one by one"),
            );
        }
    }
    for op in &item.classification.operations {
        if !matches!(
            op.kind,
            OperationKind::DetachPartition | OperationKind::DetachPartitionConcurrently
        ) {
            continue;
        }
        let Some(table) = existing_table(item, op) else {
            continue;
        };
        if op.detail.as_deref() == Some(HAS_DEFAULT_PARTITION) {
            continue;
        }
        sink.push(
            item,
            index,
            Code::PartitionRangeRemoved,
            format!(
                "after detaching {} from {table}, no partition accepts its key range (unless {table} has a default partition): inserts of such rows fail",
                quoted(op)
            ),
            text_help("attach or create a partition for that range in the same change, or make sure nothing writes rows in it any more"),
        );
    }
}
