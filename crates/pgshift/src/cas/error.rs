//! Errors of copy-and-swap runs.

use thiserror::Error;

use crate::refusal::Refusal;

/// Why a run stopped (or could not start).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CasError {
    /// The run was refused before it created anything (one cause, one class).
    #[error("refused: {}: {}", .0.cause, .0.message)]
    Refused(Refusal),
    /// Connecting failed.
    #[error("connecting: {0}")]
    Connect(String),
    /// Another run holds this table.
    #[error("another pgshift run holds this table{}", pid.map_or_else(String::new, |p| format!(" (backend pid {p})")))]
    Busy {
        /// The other run's number, when known.
        run: Option<i64>,
        /// The holder's backend pid, when visible.
        pid: Option<i32>,
    },
    /// No run of that number or for that table.
    #[error("no pgshift run {0}")]
    NoSuchRun(String),
    /// The run is in a state that does not allow the operation.
    #[error("run {run} is {state}: {what}")]
    WrongState {
        /// The run.
        run: i64,
        /// Its state.
        state: String,
        /// What was asked.
        what: String,
    },
    /// Verification found the shadow different from the source.
    #[error("verification failed: {0}")]
    Divergence(String),
    /// The swap was refused (fence or capture not intact, schema changed, lock budget).
    #[error("cutover refused: {}: {}", .0.cause, .0.message)]
    CutoverRefused(Refusal),
    /// A statement failed.
    #[error("{what}: {message}{}", sqlstate.as_ref().map_or_else(String::new, |s| format!(" ({s})")))]
    Database {
        /// What the run was doing.
        what: String,
        /// The server's or driver's message.
        message: String,
        /// The SQLSTATE, when the server sent one.
        sqlstate: Option<String>,
    },
    /// The table's data rejects the change (a value the new type, a `USING`
    /// expression or a constraint refuses): no resume can succeed, so the run removed
    /// itself.
    #[error("{what}: the table's data rejects the change: {message} ({sqlstate}); the run stopped and removed itself (capture triggers, shadow and change log dropped; the table is as it was)")]
    DataRejected {
        /// What the run was doing.
        what: String,
        /// The server's message.
        message: String,
        /// The SQLSTATE (class 22, data exception, or 23, integrity constraint).
        sqlstate: String,
    },
    /// The change-log applier stopped (its own error replaces this one when known).
    #[error("the change-log applier stopped")]
    ApplierStopped,
    /// The run's record could not be read back.
    #[error("run record: {0}")]
    Record(String),
    /// A stop was asked for (SIGINT, SIGTERM): the run stopped at a safe point and is
    /// checkpointed; `resume` continues it, `abort` removes it.
    #[error("stopped by {signal} at a safe point; the run is checkpointed and resumable")]
    Interrupted {
        /// The signal's name.
        signal: String,
    },
}

impl CasError {
    /// The error of a stop asked for with `signal`.
    pub fn interrupted(signal: i32) -> Self {
        CasError::Interrupted {
            signal: crate::exec::interrupt::signal_name(signal),
        }
    }

    /// `Err(Interrupted)` once a stop is asked for: a safe point.
    pub fn check_interrupt() -> Result<(), CasError> {
        match crate::exec::interrupt::requested() {
            Some(signal) => Err(CasError::interrupted(signal)),
            None => Ok(()),
        }
    }
}

impl CasError {
    /// The error as [`CasError::DataRejected`], when it is a database error of the
    /// data: SQLSTATE class 22 (a data exception: a value a type or cast refuses) or
    /// 23 (an integrity constraint: NOT NULL, CHECK, a unique key). The same rows fail
    /// the same way on every try, so such a run cannot be resumed to success.
    pub fn as_data_rejection(&self) -> Option<CasError> {
        match self {
            CasError::Database {
                what,
                message,
                sqlstate: Some(code),
            } if code.starts_with("22") || code.starts_with("23") => Some(CasError::DataRejected {
                what: what.clone(),
                message: message.clone(),
                sqlstate: code.clone(),
            }),
            _ => None,
        }
    }

    /// The error as a `disk-space-running-out` refusal, when it is one: the run's disk
    /// watch found a volume short of its reserve or the run past its room, or the
    /// server reported a full disk (SQLSTATE 53100) while the run wrote.
    pub fn as_disk_stop(&self) -> Option<CasError> {
        match self {
            CasError::Refused(refusal)
                if refusal.cause == crate::refusal::RefusalCause::DiskSpaceRunningOut =>
            {
                Some(CasError::Refused(refusal.clone()))
            }
            CasError::Database {
                what,
                message,
                sqlstate: Some(code),
            } if code == "53100" => Some(CasError::Refused(crate::refusal::Refusal::new(
                crate::refusal::RefusalCause::DiskSpaceRunningOut,
                format!(
                    "{what}: the server ran out of disk: {message} (53100); the run stopped and removed itself \
                     (capture triggers, shadow and change log dropped; the table is as it was). Free space, and run the change again"
                ),
            ))),
            _ => None,
        }
    }

    /// A database error while doing `what`.
    pub fn db(what: impl Into<String>, error: tokio_postgres::Error) -> Self {
        CasError::Database {
            what: what.into(),
            message: error
                .as_db_error()
                .map_or_else(|| error.to_string(), |db| db.message().to_owned()),
            sqlstate: error.code().map(|c| c.code().to_owned()),
        }
    }
}
