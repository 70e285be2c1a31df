//! Why a trace could not be made. Each message says what to do about it.

use std::path::PathBuf;

/// Everything that stops a trace before or while it runs (a statement the server
/// rejects is not an error: it is recorded as [`super::Outcome::Failed`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The target could not be reached.
    #[error("cannot connect to the target to read its version: {0}")]
    Connect(#[from] crate::connect::ConnectError),
    /// The target's server version could not be read.
    #[error("cannot read the target's server version: {0}")]
    TargetVersion(String),
    /// The target's tablespaces, roles or extensions could not be read.
    #[error("cannot read the target's tablespaces, roles and extensions: {0}")]
    TargetGlobals(String),
    /// The target has extensions the clone's installation does not ship.
    #[error(
        "the target uses extensions that the PostgreSQL installation of the trace does not \
         ship: {0}; install their packages for that installation (the one PGSHIFT_PG_BIN \
         names, or the target's major found on this host), then trace again"
    )]
    MissingExtensions(String),
    /// No server binaries of the target's major version are installed.
    #[error(
        "the target runs PostgreSQL {major}, and no PostgreSQL {major} server binaries \
         (with pg_dump) were found (looked in: {looked_in}); install them (Debian/Ubuntu: \
         `apt-get install postgresql-{major}`, or `scripts/pg-versions {major}`) or set \
         PGSHIFT_PG_BIN to their bin directory"
    )]
    NoMatchingServer {
        /// The target's major version.
        major: u32,
        /// Where binaries were looked for.
        looked_in: String,
    },
    /// The installation has no `pg_dump`.
    #[error("{path} is missing: install the PostgreSQL client programs of the same version")]
    NoPgDump {
        /// Where it should be.
        path: PathBuf,
    },
    /// `pg_dump` failed.
    #[error("pg_dump --schema-only of the target failed: {0}")]
    Dump(String),
    /// The throwaway cluster could not be started or used.
    #[error("the throwaway cluster failed: {0}")]
    Cluster(#[from] pgshift_embedded::Error),
    /// The target's schema did not restore into the clone.
    #[error("the target's schema did not restore into the throwaway cluster: {0}")]
    Restore(String),
    /// A query of the tracer itself failed.
    #[error("the tracer's own query failed on the throwaway cluster: {0}")]
    Probe(String),
}

/// The server's words for a failed query: message and SQLSTATE.
pub(crate) fn server_words(err: &tokio_postgres::Error) -> (String, Option<String>) {
    match err.as_db_error() {
        Some(db) => (db.message().to_owned(), Some(db.code().code().to_owned())),
        None => (err.to_string(), None),
    }
}

/// A tracer query's failure as a [`TraceError::Probe`].
pub(crate) fn probe(err: tokio_postgres::Error) -> TraceError {
    let (message, sqlstate) = server_words(&err);
    match sqlstate {
        Some(code) => TraceError::Probe(format!("{message} (SQLSTATE {code})")),
        None => TraceError::Probe(message),
    }
}
