//! How many transactions a file runs as under pgshift, next to how many it was under
//! the project's own migration runner, so that a file pgshift splits says so.
//!
//! A runner such as sqlx, refinery or Flyway wraps each file in one transaction
//! unless the file opts out (`-- no-transaction`); pgshift runs each statement outside
//! an explicit `BEGIN … COMMIT` as its own bounded unit, and a statement replaced by a
//! safer sequence as several (`docs/EXECUTION.md`). A backfill `UPDATE` and a
//! `SET NOT NULL` that committed together under the runner then commit separately.

use serde::Serialize;

use super::schedule::{Schedule, Scheduled, StatementRefusal};
use crate::classify::{OperationKind, TransactionUse};
use crate::refusal::{Refusal, RefusalCause};
use crate::script::{transaction_mode_for, Script, TransactionMode};

/// A file that runs as more units than it had transactions under its runner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Split {
    /// How the project's runner runs the file: `file` (one transaction around it) or
    /// `statement` (the file opts out with `-- no-transaction`).
    pub runner_mode: TransactionMode,
    /// Transactions under the project's runner.
    pub runner_transactions: usize,
    /// Units pgshift runs it as.
    pub units: usize,
    /// Of those, units that are one transaction each.
    pub transactions: usize,
    /// Units that run outside a transaction (`CONCURRENTLY`, `VACUUM`).
    pub outside_transaction: usize,
    /// Units that run through copy-and-swap.
    pub copy_and_swap: usize,
}

impl Split {
    /// The split of a scheduled file, when pgshift runs it as more units than its
    /// runner had transactions; `None` when it does not (or nothing runs: refused).
    pub fn of(script: &Script, schedule: &Schedule) -> Option<Split> {
        let first = script.statements.first()?;
        let runner_mode = transaction_mode_for(
            std::slice::from_ref(&first.statement),
            TransactionMode::File,
        );
        let runner_transactions = match runner_mode {
            TransactionMode::File => 1,
            TransactionMode::Statement => {
                let outside = script
                    .statements
                    .iter()
                    .filter(|s| {
                        s.transaction
                            .is_none_or(|t| !script.transactions[t].explicit)
                            && s.classification.transaction != TransactionUse::Control
                    })
                    .count();
                outside + script.transactions.iter().filter(|t| t.explicit).count()
            }
        };
        let mut split = Split {
            runner_mode,
            runner_transactions,
            units: 0,
            transactions: 0,
            outside_transaction: 0,
            copy_and_swap: 0,
        };
        for item in &schedule.items {
            let Scheduled::Unit { unit } = item else {
                continue;
            };
            split.units += 1;
            if unit.copy_and_swap.is_some() {
                split.copy_and_swap += 1;
            } else if unit.transactional {
                split.transactions += 1;
            } else {
                split.outside_transaction += 1;
            }
        }
        (split.units > split.runner_transactions).then_some(split)
    }

    /// One line for people: `runs as 5 units (4 transactions, 1 outside a
    /// transaction); under its runner it was 1 transaction`.
    pub fn describe(&self) -> String {
        let mut kinds = Vec::new();
        if self.transactions > 0 {
            kinds.push(count(self.transactions, "transaction", "transactions"));
        }
        if self.outside_transaction > 0 {
            kinds.push(format!(
                "{} outside a transaction",
                self.outside_transaction
            ));
        }
        if self.copy_and_swap > 0 {
            kinds.push(format!("{} copy-and-swap", self.copy_and_swap));
        }
        let runner = match self.runner_mode {
            TransactionMode::File => "under its runner it was 1 transaction".to_owned(),
            TransactionMode::Statement => format!(
                "under its runner (-- no-transaction) it was {}",
                count(self.runner_transactions, "transaction", "transactions")
            ),
        };
        format!(
            "runs as {} ({}); {runner}",
            count(self.units, "separate unit", "separate units"),
            kinds.join(", ")
        )
    }
}

/// A `LOCK TABLE` that the project's runner held to the end of the file (its one
/// transaction) but that pgshift's split would release at the end of its own unit,
/// leaving the statements after it unprotected: refused, the same rule as for a
/// `LOCK TABLE` in an explicit block that must be split (`not-splittable`).
// INV: RF-4 — a split never drops a LOCK TABLE's protection of the statements after it.
pub fn lock_table_lost(script: &Script, schedule: &Schedule) -> Option<StatementRefusal> {
    let split = Split::of(script, schedule)?;
    if split.runner_mode != TransactionMode::File {
        return None;
    }
    let last = script.statements.len().checked_sub(1)?;
    let (index, item) = script.statements.iter().enumerate().find(|(i, s)| {
        *i < last
            && s.transaction
                .is_none_or(|t| !script.transactions[t].explicit)
            && s.classification
                .operations
                .iter()
                .any(|op| op.kind == OperationKind::LockTable)
    })?;
    let line = item.statement.position.line;
    Some(StatementRefusal {
        statement: index,
        line,
        refusal: Refusal::new(
            RefusalCause::NotSplittable,
            format!(
                "under its migration runner this file is one transaction, so the LOCK TABLE at line {line} protects every statement after it until the end of the file; pgshift {}, and the lock would end with its own. Move the LOCK TABLE and what it protects into an explicit BEGIN … COMMIT of their own (or their own file), and the rest elsewhere",
                split.describe().split(';').next().unwrap_or("splits it")
            ),
        ),
    })
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::schedule::{schedule, ScheduleOptions};
    use crate::script::{analyze, Knowledge};

    fn split(sql: &str, mode: TransactionMode) -> Option<Split> {
        let statements = pgshift_sql::parse(sql).expect("valid");
        let mode = transaction_mode_for(&statements, mode);
        let script = analyze(statements, mode, Knowledge::offline());
        let options = ScheduleOptions {
            max_table_size: None,
            disk_room: None,
            allow_blocking: Vec::new(),
            copy_and_swap: true,
        };
        Split::of(&script, &schedule(&script, &options))
    }

    #[test]
    fn a_backfill_and_set_not_null_under_one_runner_transaction_is_split() {
        let s = split(
            "UPDATE t SET c = 0 WHERE c IS NULL;\nALTER TABLE t ALTER COLUMN c SET NOT NULL;",
            TransactionMode::Statement,
        )
        .expect("split");
        assert_eq!(s.runner_mode, TransactionMode::File);
        assert_eq!(s.runner_transactions, 1);
        assert!(s.units > 2, "{s:?}");
        assert_eq!(s.units, s.transactions + s.outside_transaction);
        assert!(s
            .describe()
            .ends_with("under its runner it was 1 transaction"));
    }

    fn lock_lost(sql: &str) -> Option<StatementRefusal> {
        let statements = pgshift_sql::parse(sql).expect("valid");
        let script = analyze(statements, TransactionMode::Statement, Knowledge::offline());
        let options = ScheduleOptions {
            max_table_size: None,
            disk_room: None,
            allow_blocking: Vec::new(),
            copy_and_swap: true,
        };
        lock_table_lost(&script, &schedule(&script, &options))
    }

    #[test]
    fn inv_rf_4_a_lock_table_the_split_would_release_early_is_refused() {
        let refused = lock_lost(
            "LOCK TABLE t IN SHARE MODE;\nUPDATE t SET c = 0 WHERE c IS NULL;\nALTER TABLE t ALTER COLUMN c SET NOT NULL;",
        )
        .expect("refused");
        assert_eq!(refused.refusal.cause, RefusalCause::NotSplittable);
        assert_eq!(refused.line, 1);
        // In an explicit block of its own, or opted out of the runner's transaction,
        // or last in the file, there is nothing it stops protecting.
        assert!(lock_lost(
            "BEGIN;\nLOCK TABLE t IN SHARE MODE;\nUPDATE t SET c = 0;\nCOMMIT;\nALTER TABLE t ADD COLUMN d int;"
        )
        .is_none());
        assert!(lock_lost(
            "-- no-transaction\nLOCK TABLE t IN SHARE MODE;\nALTER TABLE t ALTER COLUMN c SET NOT NULL;"
        )
        .is_none());
        assert!(
            lock_lost("ALTER TABLE t ADD COLUMN d int;\nLOCK TABLE t IN SHARE MODE;").is_none()
        );
    }

    #[test]
    fn one_statement_run_as_written_is_no_split() {
        assert_eq!(
            split(
                "ALTER TABLE t ADD COLUMN c int;",
                TransactionMode::Statement
            ),
            None
        );
    }

    #[test]
    fn a_no_transaction_file_counts_its_statements_and_explicit_blocks() {
        let s = split(
            "-- no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a);\nBEGIN;\nALTER TABLE t ADD COLUMN c int;\nALTER TABLE t ADD COLUMN d int;\nCOMMIT;",
            TransactionMode::File,
        );
        // Two runner transactions (the index, the block), two pgshift units: no split.
        assert_eq!(s, None);
    }
}
