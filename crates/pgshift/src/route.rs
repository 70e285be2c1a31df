//! Routes: how a statement will run, and the exact steps of a safer native sequence.

use serde::{Deserialize, Serialize};

use crate::classify::WorkClass;
use crate::lock::LockMode;
use crate::refusal::Refusal;
use pgshift_sql::QualifiedName;

/// How a statement runs. Exactly one of three outcomes (native, copy-and-swap,
/// refused), with native split by whether the SQL runs as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "route", rename_all = "kebab-case")]
pub enum Route {
    /// The statement runs as written, under bounded lock and statement budgets.
    Native,
    /// The statement is replaced by safer native steps with the same end state, each
    /// committed on its own.
    NativeSequence {
        /// The steps, in order.
        steps: Vec<Step>,
    },
    /// A true rewrite: shadow table, chunked copy, catch-up, verification, swap.
    CopyAndSwap,
    /// Nothing runs.
    Refused {
        /// Why.
        refusal: Refusal,
    },
}

impl Route {
    /// The route's stable name (`native`, `native-sequence`, `copy-and-swap`,
    /// `refused`).
    pub fn name(&self) -> &'static str {
        match self {
            Route::Native => "native",
            Route::NativeSequence { .. } => "native-sequence",
            Route::CopyAndSwap => "copy-and-swap",
            Route::Refused { .. } => "refused",
        }
    }

    /// The refusal, when the route is one.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Route::Refused { refusal } => Some(refusal),
            _ => None,
        }
    }
}

/// One step of a native sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The SQL to run, complete and with every identifier quoted.
    pub sql: String,
    /// What the step is for.
    pub purpose: String,
    /// The strongest lock the step takes, and on what.
    pub lock: Option<StepLock>,
    /// The kind of work the step does.
    pub work: WorkClass,
    /// Whether the step may run inside a transaction block (`CONCURRENTLY` may not).
    pub transactional: bool,
}

/// The strongest lock a step takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLock {
    /// The relation locked.
    pub relation: QualifiedName,
    /// The mode.
    pub mode: LockMode,
}
