//! The time budgets every pgshift session runs under.
//!
//! There is no `Default`: each call site states its numbers, or names a preset made
//! for its use such as [`SessionBudgets::READ_ONLY_PLAN`].

use super::error::ConnectError;

/// `lock_timeout`, `statement_timeout` and `idle_in_transaction_session_timeout` for a
/// session, in milliseconds. Each must be non-zero (zero means "wait forever" to
/// PostgreSQL) and at most its `*_MAX` constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBudgets {
    /// How long any statement may wait for a lock.
    pub lock_timeout_ms: u64,
    /// How long any statement may run.
    pub statement_timeout_ms: u64,
    /// How long the session may sit idle inside an open transaction.
    pub idle_in_transaction_timeout_ms: u64,
}

impl SessionBudgets {
    /// Budgets for read-only planning: catalog reads that should never queue behind a
    /// lock for long nor run for minutes.
    pub const READ_ONLY_PLAN: SessionBudgets = SessionBudgets {
        lock_timeout_ms: 2_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 60_000,
    };

    /// Budgets of the session that runs a migration (`apply`, `migrate`, the
    /// [`Migrator`](crate::Migrator)): its own statements queue at most 1 s behind a
    /// lock and run at most 60 s; each step then sets its own budgets
    /// ([`StepBudgets`](crate::exec::StepBudgets)).
    pub const APPLY: SessionBudgets = SessionBudgets {
        lock_timeout_ms: 1_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 60_000,
    };

    /// The largest accepted `lock_timeout`: one minute. Writers queue behind a waiting
    /// strong lock request, so longer waits are outages, not budgets.
    pub const LOCK_TIMEOUT_MS_MAX: u64 = 60_000;

    /// The largest accepted `statement_timeout`: one day (long enough for a
    /// `CREATE INDEX CONCURRENTLY` or a `VALIDATE CONSTRAINT` on a large table).
    pub const STATEMENT_TIMEOUT_MS_MAX: u64 = 86_400_000;

    /// The largest accepted `idle_in_transaction_session_timeout`: one hour.
    pub const IDLE_IN_TRANSACTION_TIMEOUT_MS_MAX: u64 = 3_600_000;

    /// Rejects zero and values above the `*_MAX` constants.
    pub fn validate(&self) -> Result<(), ConnectError> {
        check(
            "lock_timeout_ms",
            self.lock_timeout_ms,
            Self::LOCK_TIMEOUT_MS_MAX,
        )?;
        check(
            "statement_timeout_ms",
            self.statement_timeout_ms,
            Self::STATEMENT_TIMEOUT_MS_MAX,
        )?;
        check(
            "idle_in_transaction_timeout_ms",
            self.idle_in_transaction_timeout_ms,
            Self::IDLE_IN_TRANSACTION_TIMEOUT_MS_MAX,
        )
    }

    /// The `SET` statements for these budgets; only validated integers are formatted.
    pub(crate) fn set_statements(&self) -> Result<String, ConnectError> {
        self.validate()?;
        Ok(format!(
            "SET lock_timeout = {}; SET statement_timeout = {}; SET idle_in_transaction_session_timeout = {}",
            self.lock_timeout_ms, self.statement_timeout_ms, self.idle_in_transaction_timeout_ms
        ))
    }
}

fn check(field: &'static str, value: u64, max: u64) -> Result<(), ConnectError> {
    if value == 0 {
        return Err(ConnectError::InvalidBudget {
            field,
            reason: "zero disables the timeout",
        });
    }
    if value > max {
        return Err(ConnectError::InvalidBudget {
            field,
            reason: "above the allowed maximum",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(budgets: SessionBudgets) -> &'static str {
        match budgets.validate() {
            Err(ConnectError::InvalidBudget { field, .. }) => field,
            other => panic!("expected an invalid budget, got {other:?}"),
        }
    }

    #[test]
    fn read_only_plan_budgets_are_valid() {
        SessionBudgets::READ_ONLY_PLAN
            .validate()
            .expect("preset is valid");
    }

    #[test]
    fn zero_budgets_are_rejected() {
        let base = SessionBudgets::READ_ONLY_PLAN;
        let zero_lock = SessionBudgets {
            lock_timeout_ms: 0,
            ..base
        };
        assert_eq!(field_of(zero_lock), "lock_timeout_ms");
        let zero_idle = SessionBudgets {
            idle_in_transaction_timeout_ms: 0,
            ..base
        };
        assert_eq!(field_of(zero_idle), "idle_in_transaction_timeout_ms");
    }

    #[test]
    fn absurd_budgets_are_rejected_and_maxima_accepted() {
        let base = SessionBudgets::READ_ONLY_PLAN;
        let huge = SessionBudgets {
            statement_timeout_ms: u64::MAX,
            ..base
        };
        assert_eq!(field_of(huge), "statement_timeout_ms");
        let long_lock = SessionBudgets {
            lock_timeout_ms: SessionBudgets::LOCK_TIMEOUT_MS_MAX + 1,
            ..base
        };
        assert_eq!(field_of(long_lock), "lock_timeout_ms");
        let maxima = SessionBudgets {
            lock_timeout_ms: SessionBudgets::LOCK_TIMEOUT_MS_MAX,
            statement_timeout_ms: SessionBudgets::STATEMENT_TIMEOUT_MS_MAX,
            idle_in_transaction_timeout_ms: SessionBudgets::IDLE_IN_TRANSACTION_TIMEOUT_MS_MAX,
        };
        maxima.validate().expect("maxima are valid");
    }

    #[test]
    fn set_statements_format_only_the_integers() {
        let sql = SessionBudgets::READ_ONLY_PLAN
            .set_statements()
            .expect("valid");
        assert_eq!(
            sql,
            "SET lock_timeout = 2000; SET statement_timeout = 60000; SET idle_in_transaction_session_timeout = 60000"
        );
    }
}
