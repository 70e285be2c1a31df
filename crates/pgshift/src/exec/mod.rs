//! Running planned statements: bounded steps with retries, the schedule of a file,
//! and the verdict.
//!
//! Every step runs with `SET LOCAL lock_timeout` and `statement_timeout` (or the
//! session-level equivalents, reset afterwards, for steps that cannot run in a
//! transaction). Lock timeouts and deadlocks are retried with jittered exponential
//! backoff; statement timeouts are not. Rewrites run through copy-and-swap (`cas_unit`),
//! or blocking only when the operator names the table.

pub mod allow_blocking;
pub mod apply;
pub mod budgets;
pub mod cas_locks;
pub mod cas_unit;
pub mod errors;
mod guarded;
pub mod index_guard;
pub mod interrupt;
pub mod jitter;
pub mod judge;
pub mod progress;
pub mod schedule;
pub mod split;
pub mod unit;
mod whole;
pub mod whole_file;

pub use apply::{
    apply, run_schedule, ApplyOptions, ApplyVerdict, Ledger, Outcome, Sessions, UnitResult,
    COMMITTED_BEFORE,
};
pub use budgets::{BudgetError, StepBudgets};
pub use cas_unit::{CasSettings, CasUnitReport};
pub use judge::{judge, JudgeError};
pub use progress::{BuildProgress, NoProgress, Progress};
pub use schedule::{schedule, Schedule, ScheduleOptions, Scheduled, StatementRefusal};
pub use unit::{run_unit, Sleeper, TokioSleeper, Unit, UnitContext, UnitReport};
