//! The one error type of [`crate::connect`].
//!
//! Every variant names what it is about (a parameter key, a file path, an endpoint,
//! a SQLSTATE) and none of them carries the password: connection strings are only
//! ever reported by byte position or key, never by value, and PostgreSQL errors are
//! kept as their typed source.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::error::SqlState;

/// Why connecting to PostgreSQL, or preparing the session, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection string is malformed at a byte offset.
    #[error("invalid connection string at byte {position}: {reason}")]
    InvalidSyntax {
        /// Byte offset into the connection string where parsing stopped.
        position: usize,
        /// What was expected there.
        reason: &'static str,
    },
    /// The connection string names a parameter pgshift does not know.
    #[error("unknown connection parameter \"{key}\"")]
    UnknownParameter {
        /// The parameter name as written (never its value).
        key: String,
    },
    /// A known parameter has a value pgshift cannot use.
    #[error("invalid value for connection parameter {key}: {reason}")]
    InvalidParameter {
        /// The parameter, or the environment variable it came from.
        key: String,
        /// What is wrong with the value (the value itself is never shown).
        reason: &'static str,
    },
    /// A [`SessionBudgets`](super::SessionBudgets) field is zero or too large.
    #[error("invalid session budget {field}: {reason}")]
    InvalidBudget {
        /// The budget field name.
        field: &'static str,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A TLS file (root certificate, client certificate or key) cannot be used.
    #[error("cannot use tls file {}: {problem}", path.display())]
    TlsFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: TlsFileProblem,
    },
    /// rustls rejected the TLS configuration (for example a certificate and key that
    /// do not belong together).
    #[error("tls configuration rejected")]
    TlsConfig {
        /// The rustls error.
        #[source]
        source: rustls::Error,
    },
    /// The TLS handshake failed, for example because the server certificate does not
    /// verify against the configured roots or names another host.
    #[error("tls handshake with {endpoint} failed: {source}; {next}")]
    TlsHandshake {
        /// The server that was tried.
        endpoint: String,
        /// What to do next (which `ssl*` parameter to look at).
        next: String,
        /// The rustls error.
        #[source]
        source: rustls::Error,
    },
    /// The server could not be reached or the connection broke during startup.
    #[error("could not connect to {endpoint}: {reason}; {next}")]
    ConnectionFailed {
        /// The server that was tried.
        endpoint: String,
        /// What the operating system or the driver said, such as
        /// `Connection refused (os error 111)`.
        reason: String,
        /// What to do next.
        next: String,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server answered the connection with an error other than a rejected role
    /// or password: a missing database (3D000), a server starting up, shutting down
    /// or in recovery (57P03), no free connection slot (53300), no `CONNECT`
    /// privilege (42501), …
    #[error(
        "server at {endpoint} refused the connection: {}; {next}",
        ServerWords(source)
    )]
    ServerRefused {
        /// The server that was tried.
        endpoint: String,
        /// The SQLSTATE the server sent.
        sqlstate: SqlState,
        /// What to do next.
        next: String,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server asked for a password and none was given (libpq: `fe_sendauth: no
    /// password supplied`).
    #[error(
        "server at {endpoint} asks for a password for user \"{user}\", and none was given; {next}"
    )]
    PasswordMissing {
        /// The server that was tried.
        endpoint: String,
        /// The role name that was used.
        user: String,
        /// Where a password can be given.
        next: String,
    },
    /// Connecting, or preparing the session, took longer than the connect timeout.
    #[error(
        "{step} timed out after {timeout_ms} ms at {endpoint}; {}",
        timeout_next(step)
    )]
    Timeout {
        /// The server that was tried.
        endpoint: String,
        /// What was being done: `connect` or `session setup`.
        step: &'static str,
        /// The bound that expired.
        timeout_ms: u64,
    },
    /// The server rejected the role or its credentials (SQLSTATE 28P01 or 28000): a
    /// wrong password, a role that does not exist or may not log in, no
    /// `pg_hba.conf` line for the connection, a failed peer or certificate check.
    #[error(
        "server at {endpoint} did not accept user \"{user}\": {}; {next}",
        ServerWords(source)
    )]
    AuthenticationFailed {
        /// The server that was tried.
        endpoint: String,
        /// The role name that was used.
        user: String,
        /// `INVALID_PASSWORD` or `INVALID_AUTHORIZATION_SPECIFICATION`.
        sqlstate: SqlState,
        /// What to do next.
        next: String,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server is not what `target_session_attrs` asked for.
    #[error("server at {endpoint} is not {wanted} (target_session_attrs)")]
    SessionAttrsMismatch {
        /// The server that was tried.
        endpoint: String,
        /// The wanted attribute, as spelled in libpq (`read-write`, `standby`, …).
        wanted: &'static str,
    },
    /// The server is older than PostgreSQL 14.
    #[error("server at {endpoint} has server_version_num {server_version_num}, pgshift needs 140000 or newer")]
    ServerTooOld {
        /// The server that was tried.
        endpoint: String,
        /// The server's `server_version_num`.
        server_version_num: u32,
    },
    /// A statement that prepares the session failed.
    #[error("session setup failed at step {step} (sqlstate {})", SqlStateText(sqlstate.as_ref()))]
    SessionSetup {
        /// Which setup step failed.
        step: &'static str,
        /// The SQLSTATE, when the server reported one.
        sqlstate: Option<SqlState>,
        /// The driver error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server answered a setup query with a value pgshift cannot interpret.
    #[error("server returned an unexpected value for {what}")]
    UnexpectedServerValue {
        /// Which value.
        what: &'static str,
    },
    /// The connection was refused before anything was set or taken on it: it has no
    /// server session of its own (`pooled-without-session`, INV: SE-4).
    #[error("refused: {}: {}", .0.cause, .0.message)]
    Refused(crate::refusal::Refusal),
    /// Checking that the connection has a server session of its own needs a second
    /// connection to the same server for a moment, and that one failed.
    #[error(
        "checking that the connection to {endpoint} has a server session of its own needs a second connection for a moment, and it failed: {source}"
    )]
    AffinityCheck {
        /// The server that was tried.
        endpoint: String,
        /// Why the second connection failed.
        source: Box<ConnectError>,
    },
    /// Every host in the connection string failed; one error per attempt, in order.
    #[error("all {} connection attempts failed: {}", attempts.len(), Attempts(attempts))]
    AllHostsFailed {
        /// The error of each attempt.
        attempts: Vec<ConnectError>,
    },
}

impl ConnectError {
    /// A failed session setup step, keeping the SQLSTATE.
    pub(crate) fn setup(step: &'static str, error: tokio_postgres::Error) -> ConnectError {
        ConnectError::SessionSetup {
            step,
            sqlstate: error.code().cloned(),
            source: error,
        }
    }

    /// A bound that expired during `step`.
    pub(crate) fn timeout(endpoint: &str, step: &'static str, bound: Duration) -> ConnectError {
        ConnectError::Timeout {
            endpoint: endpoint.to_owned(),
            step,
            timeout_ms: u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The refusal, when the connection was refused rather than failed.
    pub fn refusal(&self) -> Option<&crate::refusal::Refusal> {
        match self {
            ConnectError::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// Whether this error, or any attempt inside [`ConnectError::AllHostsFailed`], is an
    /// authentication failure (a missing password included).
    pub fn is_authentication_failure(&self) -> bool {
        match self {
            ConnectError::AuthenticationFailed { .. } | ConnectError::PasswordMissing { .. } => {
                true
            }
            ConnectError::AllHostsFailed { attempts } => {
                attempts.iter().any(ConnectError::is_authentication_failure)
            }
            _ => false,
        }
    }
}

/// What is wrong with a TLS file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsFileProblem {
    /// The file does not exist.
    #[error("file not found")]
    NotFound,
    /// The file exists but could not be read.
    #[error("file is not readable ({0})")]
    Unreadable(std::io::ErrorKind),
    /// The file holds no PEM certificate.
    #[error("no pem certificate found")]
    NoCertificate,
    /// The file holds no PEM private key.
    #[error("no pem private key found")]
    NoPrivateKey,
    /// The file is not valid PEM.
    #[error("invalid pem")]
    InvalidPem,
    /// A private key file is readable by group or others (libpq refuses these too).
    #[error("private key has group or world access, use u=rw (0600) or less, or u=rw,g=r (0640) if owned by root")]
    KeyPermissions,
}

/// Renders each attempt, separated by `; `, with its immediate cause where its own
/// message does not already say it.
struct Attempts<'a>(&'a [ConnectError]);

impl fmt::Display for Attempts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, attempt) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{attempt}")?;
            let says_its_cause = matches!(
                attempt,
                ConnectError::ConnectionFailed { .. }
                    | ConnectError::ServerRefused { .. }
                    | ConnectError::AuthenticationFailed { .. }
                    | ConnectError::TlsHandshake { .. }
            );
            if let Some(cause) = std::error::Error::source(attempt).filter(|_| !says_its_cause) {
                write!(f, ": {cause}")?;
            }
        }
        Ok(())
    }
}

/// The server's own words in a driver error: `FATAL: message (SQLSTATE code;
/// detail: …; hint: …)`.
struct ServerWords<'a>(&'a tokio_postgres::Error);

impl fmt::Display for ServerWords<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(db) = self.0.as_db_error() else {
            return write!(f, "{}", self.0);
        };
        write!(
            f,
            "{}: {} (SQLSTATE {}",
            db.severity(),
            db.message(),
            db.code().code()
        )?;
        if let Some(detail) = db.detail() {
            write!(f, "; detail: {detail}")?;
        }
        if let Some(hint) = db.hint() {
            write!(f, "; hint: {hint}")?;
        }
        f.write_str(")")
    }
}

/// What to do after a timeout, by the step that took too long.
fn timeout_next(step: &str) -> &'static str {
    match step {
        "connect" => {
            "is the server running there, and reachable (address, port, firewall)? \
             connect_timeout=SECONDS waits longer"
        }
        "session check" => {
            "a second connection, needed for a moment to check that this one has a server \
             session of its own, got no answer: a pooler with no free server connection? \
             connect directly, or through a session-mode pool with room for one more client"
        }
        _ => "the server accepted the connection but answered too slowly; is it overloaded?",
    }
}

/// Renders an optional SQLSTATE as its code, or `none`.
struct SqlStateText<'a>(Option<&'a SqlState>);

impl fmt::Display for SqlStateText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(state) => f.write_str(state.code()),
            None => f.write_str("none"),
        }
    }
}

impl From<std::io::Error> for TlsFileProblem {
    fn from(error: std::io::Error) -> Self {
        match error.kind() {
            std::io::ErrorKind::NotFound => TlsFileProblem::NotFound,
            kind => TlsFileProblem::Unreadable(kind),
        }
    }
}
