//! The one error type of [`crate::catalog::read`].

use tokio_postgres::error::SqlState;

/// Why reading the catalog snapshot failed.
///
/// Server errors are kept as their typed source and matched by SQLSTATE only; each
/// variant names the step (one fact family, such as `columns`) that was running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A query ran longer than the session's `statement_timeout` (SQLSTATE 57014),
    /// typically while waiting for a lock that a size function needs.
    #[error("catalog read timed out at step {step} (sqlstate 57014)")]
    StatementTimeout {
        /// The step that timed out.
        step: &'static str,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A lock could not be taken within the session's `lock_timeout`
    /// (SQLSTATE 55P03); size functions take `ACCESS SHARE` on every partition.
    #[error("catalog read could not take a lock in time at step {step} (sqlstate 55P03)")]
    LockTimeout {
        /// The step that waited.
        step: &'static str,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server rejected a statement.
    #[error("catalog read failed at step {step} (sqlstate {})", sqlstate.code())]
    Server {
        /// The step that failed.
        step: &'static str,
        /// The SQLSTATE the server reported.
        sqlstate: SqlState,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The driver failed without a server error (for example the connection closed).
    #[error("catalog read failed at step {step} without a server error")]
    Driver {
        /// The step that failed.
        step: &'static str,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A column of a catalog query could not be decoded into the expected type.
    #[error("cannot decode column {column} at step {step}")]
    Decode {
        /// The step whose query returned the row.
        step: &'static str,
        /// The column name.
        column: &'static str,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A catalog value is outside what PostgreSQL documents (for example an unknown
    /// `relpersistence`).
    #[error("unexpected catalog value for {what} at step {step}")]
    UnexpectedValue {
        /// The step whose query returned the value.
        step: &'static str,
        /// Which value.
        what: &'static str,
    },
    /// An object visible in the snapshot was dropped by another session while the
    /// catalog was read (a `pg_get_*def` or size function found nothing); reading
    /// again gives a consistent answer.
    #[error("object {oid} was dropped while the catalog was read (step {step}); read again")]
    ChangedDuringRead {
        /// The step that noticed.
        step: &'static str,
        /// The object's OID.
        oid: u32,
    },
    /// The client is inside a transaction, so the read cannot open its own snapshot
    /// (and must not commit the caller's transaction); nothing was changed.
    #[error("catalog read needs a connection outside any transaction block")]
    AlreadyInTransaction,
}

impl CatalogError {
    /// Classifies a driver error from the query of `step` by its SQLSTATE.
    pub(super) fn query(step: &'static str, source: tokio_postgres::Error) -> CatalogError {
        match source.code().cloned() {
            Some(SqlState::QUERY_CANCELED) => CatalogError::StatementTimeout { step, source },
            Some(SqlState::LOCK_NOT_AVAILABLE) => CatalogError::LockTimeout { step, source },
            Some(sqlstate) => CatalogError::Server {
                step,
                sqlstate,
                source,
            },
            None => CatalogError::Driver { step, source },
        }
    }

    /// The SQLSTATE, when the server reported one.
    pub fn sqlstate(&self) -> Option<&SqlState> {
        match self {
            CatalogError::StatementTimeout { source, .. }
            | CatalogError::LockTimeout { source, .. }
            | CatalogError::Server { source, .. } => source.code(),
            _ => None,
        }
    }
}
