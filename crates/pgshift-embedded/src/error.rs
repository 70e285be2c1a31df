//! The crate's error type: one enum, one variant per way things go wrong, with
//! lowercase messages that say what to do about it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::install::PgVersion;

/// Everything that can go wrong while finding, starting, using or stopping a
/// throwaway cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No usable PostgreSQL 14+ server installation was found.
    #[error(
        "no PostgreSQL 14+ server binaries found (looked in: {}); install PostgreSQL 14+ server \
         binaries, e.g. `apt-get install postgresql`, or set PGSHIFT_PG_BIN to a bin directory",
        describe_candidates(.looked_in)
    )]
    NoServerBinaries {
        /// Every directory that was considered, with why it was not used.
        looked_in: Vec<Rejected>,
    },

    /// No server was found, and downloading one failed (or could not start).
    #[error(
        "no PostgreSQL 14+ server binaries found (looked in: {}), and none could be downloaded: \
         {reason}; install PostgreSQL 14+ server binaries, e.g. `apt-get install postgresql`, or \
         set PGSHIFT_PG_BIN to a bin directory",
        describe_candidates(.looked_in)
    )]
    FetchFailed {
        /// Every directory that was considered, with why it was not used.
        looked_in: Vec<Rejected>,
        /// Why the download failed.
        reason: Box<Error>,
    },

    /// A program that downloading a server needs is not installed.
    #[error(
        "{tool} is not installed (tried {tried}); install it {purpose} (Debian/Ubuntu: \
         `apt-get install {package}`)"
    )]
    MissingTool {
        /// The program, e.g. `pip`.
        tool: &'static str,
        /// What was tried, e.g. "`python3 -m pip`, `pip3` and `pip`".
        tried: &'static str,
        /// The Debian/Ubuntu package that installs it.
        package: &'static str,
        /// What it is needed for.
        purpose: &'static str,
    },

    /// Downloading or unpacking a server build failed.
    #[error("downloading {what} failed: {detail}")]
    Download {
        /// What was being downloaded.
        what: String,
        /// What went wrong and what to check.
        detail: String,
    },

    /// An environment variable (or a value standing for one) cannot be used.
    #[error("{name}={value:?}: {reason}")]
    BadEnv {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// `PGSHIFT_PG_BIN` names a directory that cannot be used.
    #[error(
        "PGSHIFT_PG_BIN={}: {reason}; set it to the bin directory of a PostgreSQL 14+ server \
         (holding `postgres` and `initdb`), or unset it to use an installed server or, if there \
         is none, a downloaded one",
        .path.display()
    )]
    BadPgBinEnv {
        /// The value of `PGSHIFT_PG_BIN`.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },

    /// A bin directory holds a server older than PostgreSQL 14.
    #[error("PostgreSQL {version} in {} is too old: pgshift needs 14 or newer", .bindir.display())]
    UnsupportedVersion {
        /// The version found.
        version: PgVersion,
        /// Where it was found.
        bindir: PathBuf,
    },

    /// `postgres --version` printed something that is not a version.
    #[error("could not read a version from `{} --version`: {output:?}", .binary.display())]
    UnparsableVersion {
        /// The `postgres` binary that was asked.
        binary: PathBuf,
        /// What it printed.
        output: String,
    },

    /// Running as root, but the `postgres` OS user does not exist.
    #[error(
        "running as root, but there is no `postgres` OS user to run the server as (PostgreSQL \
         refuses to run as root); create it, e.g. `useradd --system --user-group postgres`, or \
         run as a non-root user"
    )]
    NoPostgresUser,

    /// The user the server runs as cannot reach a directory it needs.
    #[error(
        "the `{user}` OS user cannot reach {} ({reason}); choose a location every user can \
         traverse, e.g. set PGSHIFT_EMBEDDED_DIR or PGSHIFT_PG_BIN accordingly",
        .path.display()
    )]
    NotReachable {
        /// The directory.
        path: PathBuf,
        /// The OS user that needs it.
        user: String,
        /// Which ancestor blocks it.
        reason: String,
    },

    /// The unix socket path would exceed the kernel limit.
    #[error(
        "unix socket path {} is {len} bytes, longer than the limit of {max}; set \
         PGSHIFT_EMBEDDED_DIR to a shorter directory",
        .path.display()
    )]
    SocketPathTooLong {
        /// The socket path that would be used.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The largest length allowed.
        max: usize,
    },

    /// A caller-supplied server setting cannot be written safely.
    #[error("invalid server setting {name:?} = {value:?}: {reason}")]
    InvalidSetting {
        /// The setting name.
        name: String,
        /// The value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A file system or process operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done, e.g. "creating /tmp/x".
        action: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A helper program (initdb, pg_basebackup, ...) exited unsuccessfully.
    #[error("`{command}` failed ({status}): {output}")]
    CommandFailed {
        /// The program and its arguments.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error (or output), trimmed.
        output: String,
    },

    /// `psql` reported an error while running SQL.
    #[error("sql in database {dbname:?} failed: {stderr}")]
    Sql {
        /// The database the SQL ran in.
        dbname: String,
        /// What psql printed on standard error.
        stderr: String,
    },

    /// The server process exited while starting up.
    #[error(
        "postgres exited during startup ({status}); last lines of the server log:\n{log_tail}"
    )]
    ServerExited {
        /// Its exit status.
        status: String,
        /// The server log file (removed with the cluster directory by now, when
        /// a new cluster failed to start).
        log: PathBuf,
        /// The last lines of the log.
        log_tail: String,
    },

    /// Something did not happen within its deadline.
    #[error("timed out after {:.1}s waiting for {what}{}", .waited.as_secs_f64(), tail_suffix(.log_tail))]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it waited.
        waited: Duration,
        /// The last lines of the server log, when relevant.
        log_tail: Option<String>,
    },
}

impl Error {
    /// An [`Error::Io`] saying what was being done.
    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            action: action.into(),
            source,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A directory considered during discovery and why it was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The candidate bin directory (or the command that was to name one).
    pub path: PathBuf,
    /// Why it was passed over.
    pub reason: String,
}

fn describe_candidates(looked_in: &[Rejected]) -> String {
    let mut out = String::new();
    for (i, r) in looked_in.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{} ({})", r.path.display(), r.reason);
    }
    if out.is_empty() {
        out.push_str("nowhere");
    }
    out
}

fn tail_suffix(tail: &Option<String>) -> String {
    match tail {
        Some(t) if !t.is_empty() => format!("; last lines of the server log:\n{t}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_found_message_lists_candidates_and_the_fix() {
        let err = Error::NoServerBinaries {
            looked_in: vec![
                Rejected {
                    path: PathBuf::from("pg_config --bindir"),
                    reason: "not on PATH".to_owned(),
                },
                Rejected {
                    path: PathBuf::from("/usr/lib/postgresql/13/bin"),
                    reason: "PostgreSQL 13.9 is older than 14".to_owned(),
                },
            ],
        };
        assert_eq!(
            err.to_string(),
            "no PostgreSQL 14+ server binaries found (looked in: pg_config --bindir (not on \
             PATH), /usr/lib/postgresql/13/bin (PostgreSQL 13.9 is older than 14)); install \
             PostgreSQL 14+ server binaries, e.g. `apt-get install postgresql`, or set \
             PGSHIFT_PG_BIN to a bin directory"
        );
        let none = Error::NoServerBinaries { looked_in: vec![] };
        assert!(none.to_string().contains("(looked in: nowhere)"));
    }
}
