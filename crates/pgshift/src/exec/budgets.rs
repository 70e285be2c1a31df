//! The budgets every executed step runs under: how long it may wait for a lock, how
//! long it may run, and how often a lock wait may be retried.
//!
//! There is no `Default`: callers name a preset ([`StepBudgets::HOT_TABLE`]) or state
//! their numbers, and [`StepBudgets::validate`] rejects zero and absurd values.

use std::time::Duration;

use thiserror::Error;

use crate::classify::WorkClass;

/// Budgets for running steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepBudgets {
    /// `lock_timeout` for steps whose lock blocks reads or writes: the longest any
    /// writer can queue behind one of pgshift's lock requests.
    pub lock_timeout_ms: u64,
    /// `lock_timeout` for steps whose lock blocks no read or write (SHARE UPDATE
    /// EXCLUSIVE and weaker: concurrent builds, validations), which may wait longer —
    /// for older transactions to finish, for instance — without stalling anyone.
    pub weak_lock_timeout_ms: u64,
    /// `statement_timeout` for catalog-only and data steps.
    pub statement_timeout_ms: u64,
    /// `statement_timeout` for concurrent builds and validations, which take as long as
    /// the table is big but block no writer.
    pub build_timeout_ms: u64,
    /// How many times a step is tried when it times out on a lock or deadlocks.
    pub max_attempts: u32,
    /// The first backoff after a failed attempt.
    pub backoff_initial_ms: u64,
    /// The longest backoff between attempts.
    pub backoff_max_ms: u64,
}

/// A budget outside its accepted range.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("budget {field} = {value} is out of range ({reason})")]
pub struct BudgetError {
    /// The field.
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// Why it is refused.
    pub reason: &'static str,
}

impl StepBudgets {
    /// For hot tables: a writer waits at most 1 s behind a lock request, a failed
    /// request is retried up to 10 times with backoff from 200 ms to 5 s, catalog steps
    /// may run 60 s, concurrent builds a day (and may wait 10 minutes for their weak
    /// lock and for older transactions).
    pub const HOT_TABLE: StepBudgets = StepBudgets {
        lock_timeout_ms: 1_000,
        weak_lock_timeout_ms: 600_000,
        statement_timeout_ms: 60_000,
        build_timeout_ms: 86_400_000,
        max_attempts: 10,
        backoff_initial_ms: 200,
        backoff_max_ms: 5_000,
    };

    /// Rejects zero and oversized values.
    pub fn validate(&self) -> Result<(), BudgetError> {
        let check = |field, value: u64, max: u64| {
            if value == 0 {
                Err(BudgetError {
                    field,
                    value,
                    reason: "0 would mean no limit",
                })
            } else if value > max {
                Err(BudgetError {
                    field,
                    value,
                    reason: "larger than the accepted maximum",
                })
            } else {
                Ok(())
            }
        };
        check("lock_timeout_ms", self.lock_timeout_ms, 60_000)?;
        check(
            "weak_lock_timeout_ms",
            self.weak_lock_timeout_ms,
            86_400_000,
        )?;
        check(
            "statement_timeout_ms",
            self.statement_timeout_ms,
            86_400_000,
        )?;
        check("build_timeout_ms", self.build_timeout_ms, 7 * 86_400_000)?;
        check("max_attempts", u64::from(self.max_attempts), 1_000)?;
        check("backoff_initial_ms", self.backoff_initial_ms, 600_000)?;
        check("backoff_max_ms", self.backoff_max_ms, 600_000)?;
        if self.backoff_initial_ms > self.backoff_max_ms {
            return Err(BudgetError {
                field: "backoff_initial_ms",
                value: self.backoff_initial_ms,
                reason: "larger than backoff_max_ms",
            });
        }
        Ok(())
    }

    /// The `statement_timeout` for a step doing `work`.
    pub fn statement_timeout_for(&self, work: WorkClass) -> u64 {
        match work {
            WorkClass::ConcurrentBuild => self.build_timeout_ms,
            _ => self.statement_timeout_ms,
        }
    }

    /// The `lock_timeout` for steps whose strongest lock is `mode`.
    pub fn lock_timeout_for(&self, mode: Option<crate::lock::LockMode>) -> u64 {
        if mode.is_some_and(|m| m.blocks_writes() || m.blocks_reads()) {
            self.lock_timeout_ms
        } else {
            self.weak_lock_timeout_ms
        }
    }

    /// The backoff before attempt `attempt` (2, 3, …): exponential from
    /// `backoff_initial_ms`, capped at `backoff_max_ms`, scaled by `jitter` in
    /// `[0.5, 1.0)` so that retrying sessions do not move in step.
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exponent = attempt.saturating_sub(2).min(30);
        let base = self
            .backoff_initial_ms
            .saturating_mul(1u64 << exponent)
            .min(self.backoff_max_ms);
        let jitter = jitter.clamp(0.5, 1.0);
        Duration::from_millis((base as f64 * jitter) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_zero_is_not() {
        assert_eq!(StepBudgets::HOT_TABLE.validate(), Ok(()));
        let zero = StepBudgets {
            lock_timeout_ms: 0,
            ..StepBudgets::HOT_TABLE
        };
        assert!(zero.validate().is_err());
        let backwards = StepBudgets {
            backoff_initial_ms: 10_000,
            ..StepBudgets::HOT_TABLE
        };
        assert!(backwards.validate().is_err());
    }

    #[test]
    fn backoff_grows_and_caps() {
        let b = StepBudgets::HOT_TABLE;
        assert_eq!(b.backoff(2, 1.0), Duration::from_millis(200));
        assert_eq!(b.backoff(3, 1.0), Duration::from_millis(400));
        assert_eq!(b.backoff(4, 0.5), Duration::from_millis(400));
        assert_eq!(b.backoff(20, 1.0), Duration::from_millis(5_000));
    }
}
