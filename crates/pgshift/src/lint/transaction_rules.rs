//! Rules about transactions as a whole: locks held across later statements, and data
//! changes mixed with schema changes.

use pgshift_sql::Position;

use super::{text_help, Code, Sink};
use crate::classify::WorkClass;
use crate::script::{Script, Transaction, TransactionEnd};

pub(super) fn check(script: &Script, sink: &mut Sink<'_>) {
    for transaction in &script.transactions {
        locks_accumulated(script, transaction, sink);
        dml_with_ddl(script, transaction, sink);
    }
}

fn line(script: &Script, index: usize) -> Position {
    script.statements[index].statement.position
}

/// A transaction that takes a lock blocking writes and then runs more work before it
/// ends: every later statement extends how long writers wait.
fn locks_accumulated(script: &Script, transaction: &Transaction, sink: &mut Sink<'_>) {
    if transaction.end == TransactionEnd::Rollback {
        return;
    }
    let mut blocking: Vec<_> = transaction
        .locks
        .iter()
        .filter(|lock| lock.mode.blocks_writes())
        .collect();
    blocking.sort_by_key(|lock| lock.taken_at);
    let Some(first) = blocking.first() else {
        return;
    };
    let later_work = transaction
        .statements
        .iter()
        .filter(|&&index| index > first.taken_at)
        .filter(|&&index| script.statements[index].classification.work > WorkClass::None)
        .count();
    if later_work == 0 {
        return;
    }
    let held: Vec<String> = blocking
        .iter()
        .map(|lock| {
            format!(
                "{} on {} (line {})",
                lock.mode.sql_name(),
                lock.relation,
                line(script, lock.taken_at).line
            )
        })
        .collect();
    let end = transaction
        .statements
        .last()
        .map_or(0, |&last| line(script, last).line);
    let scope = if transaction.explicit {
        "this transaction"
    } else {
        "the file's transaction (the runner wraps the whole file)"
    };
    let item = &script.statements[first.taken_at];
    sink.push(
        item,
        first.taken_at,
        Code::LocksAccumulated,
        format!(
            "{scope} holds {} until it ends at line {end}; the {later_work} statement{} after line {} run while writers wait",
            held.join(", "),
            if later_work == 1 { "" } else { "s" },
            item.statement.position.line
        ),
        text_help("commit each blocking change on its own: split the file, or mark it `-- no-transaction`, or run it with `pgshift migrate`, which commits each step separately"),
    );
}

/// Data changes and schema changes to existing tables in one transaction.
fn dml_with_ddl(script: &Script, transaction: &Transaction, sink: &mut Sink<'_>) {
    let (Some(&first_dml), Some(&first_ddl)) = (
        transaction.data_changes.first(),
        transaction.schema_changes.first(),
    ) else {
        return;
    };
    let item = &script.statements[first_dml];
    sink.push(
        item,
        first_dml,
        Code::DmlWithDdl,
        format!(
            "this data change runs in the same transaction as the schema change at line {}: the schema change's locks are held while the data changes, and the rows changed stay locked until the end",
            line(script, first_ddl).line
        ),
        text_help("move the data change (backfill) to its own migration, batched by key range"),
    );
}
