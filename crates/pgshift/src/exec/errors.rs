//! What a failed statement means for the executor, decided by SQLSTATE only.

use tokio_postgres::error::SqlState;

/// The executor's reading of a failed statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// `lock_timeout` expired (55P03): nothing happened; retry after a backoff.
    LockTimeout,
    /// Chosen as a deadlock victim (40P01): rolled back; retry after a backoff.
    Deadlock,
    /// `statement_timeout` expired (57014) while doing real work: never retried.
    StatementTimeout,
    /// The connection is gone: whether the last statement committed is unknown until
    /// the catalog is read again.
    ConnectionLost,
    /// A guarded block (PC-5) would have changed the database when run read-only on
    /// live; nothing of it was done. The words say what it would have executed.
    GuardWouldChange(String),
    /// A unit planned as written on tables that held no rows found one holding rows
    /// under its own lock (TX-2); nothing of it ran. The words name the table.
    NoLongerEmpty(String),
    /// Any other error, with its SQLSTATE when the server sent one.
    Other {
        /// The SQLSTATE.
        sqlstate: Option<String>,
        /// The server's (or driver's) message.
        message: String,
    },
}

impl Failure {
    /// Classifies a driver error.
    pub fn of(error: &tokio_postgres::Error) -> Failure {
        if error.is_closed() {
            return Failure::ConnectionLost;
        }
        match error.code() {
            Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => Failure::LockTimeout,
            Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED => Failure::Deadlock,
            Some(code) if *code == SqlState::QUERY_CANCELED => Failure::StatementTimeout,
            Some(code)
                if *code == SqlState::ADMIN_SHUTDOWN
                    || *code == SqlState::CRASH_SHUTDOWN
                    || *code == SqlState::CONNECTION_FAILURE =>
            {
                Failure::ConnectionLost
            }
            code => Failure::Other {
                sqlstate: code.map(|c| c.code().to_owned()),
                message: error
                    .as_db_error()
                    .map_or_else(|| error.to_string(), |db| db.message().to_owned()),
            },
        }
    }

    /// Whether another attempt may succeed (the failed one changed nothing).
    // INV: LK-4 — only lock timeouts and deadlocks (nothing changed) are retryable.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Failure::LockTimeout | Failure::Deadlock)
    }

    /// A short, stable name (`lock-timeout`, `deadlock`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Failure::LockTimeout => "lock-timeout",
            Failure::Deadlock => "deadlock",
            Failure::StatementTimeout => "statement-timeout",
            Failure::ConnectionLost => "connection-lost",
            Failure::GuardWouldChange(_) => "guard-would-change",
            Failure::NoLongerEmpty(_) => "no-longer-empty",
            Failure::Other { .. } => "error",
        }
    }

    /// For people.
    pub fn describe(&self) -> String {
        match self {
            Failure::LockTimeout => {
                "lock_timeout expired while waiting for a lock (55P03)".to_owned()
            }
            Failure::Deadlock => "deadlock detected (40P01)".to_owned(),
            Failure::StatementTimeout => {
                "statement_timeout expired while working (57014)".to_owned()
            }
            Failure::ConnectionLost => "the connection was lost".to_owned(),
            Failure::GuardWouldChange(words) | Failure::NoLongerEmpty(words) => words.clone(),
            Failure::Other { sqlstate, message } => match sqlstate {
                Some(code) => format!("{message} ({code})"),
                None => message.clone(),
            },
        }
    }
}
