//! The crate's error type. Failures of individual writes during a load are not
//! errors: they are data, kept in the ledger and the load report. An [`Error`]
//! means a step of the harness itself could not be done (a bad configuration,
//! a schema that does not load, an oracle query that failed).

use std::path::PathBuf;
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
        /// The step, e.g. `"oracle: BEGIN"`.
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

    /// The psql program is not there.
    #[error("psql not found: {}", program.display())]
    PsqlNotFound {
        /// The path (or name looked up in `PATH`) that was tried.
        program: PathBuf,
    },

    /// psql could not be started or talked to (other than not being there).
    #[error("{action} {}: {source}", program.display())]
    PsqlIo {
        /// What was being done, e.g. `"starting"`.
        action: &'static str,
        /// The psql program.
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// psql stopped on an error in a script (`ON_ERROR_STOP`), or could not
    /// connect.
    #[error("{script}{}: {message}", line_suffix(*.line))]
    Psql {
        /// The script, e.g. `seed.sql`.
        script: &'static str,
        /// The 1-based line of the script psql names in its report, if any
        /// (for a statement over several lines, psql names its last line).
        line: Option<usize>,
        /// psql's standard error from its report of the failure on, without
        /// the `psql:<stdin>:LINE:` prefix (all of it if there is no such
        /// report).
        message: String,
    },

    /// psql ran a script but printed something the caller cannot read.
    #[error("{script}: unexpected output from psql: {detail}")]
    PsqlOutput {
        /// The script, e.g. `seed.sql`.
        script: &'static str,
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

/// `" line N"`, or nothing without a line.
fn line_suffix(line: Option<usize>) -> String {
    line.map(|line| format!(" line {line}")).unwrap_or_default()
}

/// The crate's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
