//! `script_analyze`: a file judged as a whole (`pgshift::script::analyze`) in both
//! transaction modes and in the mode its markers choose, then scheduled into the units
//! `apply` would run (`pgshift::exec::schedule`), with and without copy-and-swap and
//! with blocking forms accepted on the tables the bytes choose.

use pgshift::exec::{schedule, Schedule, ScheduleOptions, Scheduled};
use pgshift::script::{analyze, transaction_mode_for, Knowledge, Script, TransactionMode};
use pgshift_sql::Statement;

use super::{assert_one_statement, check_written_sql, parsed};

/// Runs one input.
pub fn script_analyze(data: &[u8]) {
    let Some(statements) = parsed(data) else {
        return;
    };
    let marked = transaction_mode_for(&statements, TransactionMode::File);
    let modes = [TransactionMode::File, TransactionMode::Statement];
    for mode in modes
        .into_iter()
        .chain((marked != TransactionMode::File).then_some(marked))
    {
        let script = analyze(statements.clone(), mode, Knowledge::offline());
        check_script(&statements, &script);
        let tables: Vec<_> = script
            .statements
            .iter()
            .flat_map(|item| item.classification.locks.iter())
            .map(|lock| lock.relation.clone())
            .take(usize::from(data.first().copied().unwrap_or(0) % 3))
            .collect();
        for copy_and_swap in [false, true] {
            let options = ScheduleOptions {
                max_table_size: None,
                disk_room: None,
                allow_blocking: tables.clone(),
                copy_and_swap,
            };
            check_schedule(&script, &schedule(&script, &options));
        }
    }
}

/// The script keeps every statement, in order, and its transactions point at them.
fn check_script(statements: &[Statement], script: &Script) {
    assert_eq!(script.statements.len(), statements.len());
    for (index, item) in script.statements.iter().enumerate() {
        assert_eq!(item.statement.index, index);
        check_written_sql(&item.classification);
        if let Some(transaction) = item.transaction {
            assert!(transaction < script.transactions.len());
        }
    }
    for transaction in &script.transactions {
        for &index in transaction
            .statements
            .iter()
            .chain(&transaction.data_changes)
            .chain(&transaction.schema_changes)
        {
            assert!(index < statements.len(), "{index} in {transaction:?}");
        }
        for lock in &transaction.locks {
            assert!(lock.taken_at < statements.len());
        }
    }
}

/// What a schedule runs is SQL of one statement per step, from statements of the
/// file; a refused schedule runs nothing.
fn check_schedule(script: &Script, schedule: &Schedule) {
    let count = script.statements.len();
    for refusal in &schedule.refusals {
        assert!(refusal.statement < count);
    }
    if !schedule.refusals.is_empty() {
        assert!(schedule.items.is_empty(), "a refused file runs nothing");
    }
    for item in &schedule.items {
        match item {
            Scheduled::Unit { unit } => {
                assert!(!unit.steps.is_empty(), "a unit has steps");
                assert!(unit.statements.iter().all(|&index| index < count));
                for step in &unit.steps {
                    assert_one_statement(&step.sql);
                }
            }
            Scheduled::Setting { sql, statement } => {
                assert!(*statement < count);
                assert_one_statement(sql);
            }
            Scheduled::SearchPath { .. } => {}
        }
    }
    serde_json::to_string(schedule).expect("a schedule serializes");
}
