//! The crate's error type. Failures of individual writes during a load are not
//! errors: they are data, kept in the ledger and the load report. An [`Error`]
//! means a step of the harness itself could not be done (a bad configuration,
//! a schema that does not load, an oracle query that failed).

use std::time::Duration;

/// What went wrong in a harness step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The load configuration is out of range.
    #[error("invalid load configuration: {field} {reason}")]
    Config {
        /// The offending field of [`crate::load::LoadConfig`].
        field: &'static str,
        /// Why it is rejected.
        reason: String,
    },

    /// The connection string does not parse.
    #[error("invalid connection string: {reason}")]
    ConnInfo {
        /// The parser's complaint (never the string itself: it may hold a password).
        reason: String,
    },

    /// The load could not open its first session.
    #[error("cannot connect: {message} (sqlstate {sqlstate})")]
    Connect {
        /// The SQLSTATE, or `none` for a connection-level failure.
        sqlstate: String,
        /// The server's or the client's message.
        message: String,
    },

    /// A statement of a harness step failed.
    #[error("{step} failed: {message} (sqlstate {sqlstate})")]
    Sql {
        /// The step, e.g. `"seed: statement at line 52"`.
        step: String,
        /// The SQLSTATE, or `none` for a connection-level failure.
        sqlstate: String,
        /// The server's message, or the client's when there is no server error.
        message: String,
        /// The underlying error.
        #[source]
        source: tokio_postgres::Error,
    },

    /// A step did not finish within its bound.
    #[error("{what} did not finish within {waited:?}")]
    Timeout {
        /// The step.
        what: String,
        /// The bound.
        waited: Duration,
    },

    /// A psql script uses a meta-command this crate does not implement.
    #[error("{script} line {line}: unsupported psql meta-command \\{command}")]
    UnsupportedMetaCommand {
        /// The script, e.g. `seed.sql`.
        script: &'static str,
        /// The 1-based line.
        line: usize,
        /// The command name, without the backslash.
        command: String,
    },

    /// A psql script is malformed for the subset this crate implements.
    #[error("{script} line {line}: {detail}")]
    Script {
        /// The script, e.g. `seed.sql`.
        script: &'static str,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        detail: String,
    },

    /// The database holds no channel to write events to.
    #[error("the relay schema holds no community with a live channel; seed it first")]
    NoChannels,

    /// The table to check does not exist.
    #[error("relation {table} does not exist")]
    NoSuchRelation {
        /// The quoted name that was looked up.
        table: String,
    },
}

impl Error {
    /// Wraps a client error from `step`.
    pub(crate) fn sql(step: impl Into<String>, source: tokio_postgres::Error) -> Self {
        let (sqlstate, message) = match source.as_db_error() {
            Some(db) => (db.code().code().to_owned(), db.message().to_owned()),
            None => ("none".to_owned(), source.to_string()),
        };
        Error::Sql {
            step: step.into(),
            sqlstate,
            message,
            source,
        }
    }
}

/// The crate's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
