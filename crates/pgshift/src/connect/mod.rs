//! Connecting to PostgreSQL: libpq-compatible connection strings, TLS on rustls, and
//! sessions prepared with budgets and a locked-down `search_path`.
//!
//! # Brief overview
//! - [`ConnectionSpec`] parses a `postgres://` URL or a `key=value` string and resolves
//!   it like libpq: `PG*` environment variables, the password file, then defaults.
//!   The environment is injectable through [`Environment`]. The password never
//!   appears in `Debug`, `Display`, [`ConnectionSpec::redacted`] or any error.
//! - [`TlsSettings`] and [`SslMode`] give libpq's `sslmode` meaning on rustls (see
//!   the table in the `tls` module source); Unix sockets never use TLS.
//! - [`connect`] opens a [`Session`] under [`SessionBudgets`]: `application_name` is
//!   `pgshift`, `lock_timeout`, `statement_timeout` and
//!   `idle_in_transaction_session_timeout` are set, servers older than PostgreSQL 14
//!   are refused, the role's own `search_path` is recorded, and then replaced by
//!   `pg_catalog, pg_temp`. Before any of it, a connection without a server session
//!   of its own (a pooler in transaction or statement mode) is refused
//!   (`pooled-without-session`, `affinity`).
//! - [`ConnectError`] is the one error type; PostgreSQL errors are matched by
//!   SQLSTATE, and every failed connection says what the server or the operating
//!   system said and what to do next (`diagnose`).
//!
//! ```no_run
//! # async fn run() -> Result<(), pgshift::connect::ConnectError> {
//! use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
//!
//! let spec = ConnectionSpec::parse("postgres://app@db.example/app?sslmode=verify-full")?;
//! let session = connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await?;
//! assert!(session.server_version_num() >= 140000);
//! # Ok(())
//! # }
//! ```

mod affinity;
mod attempt;
mod budgets;
mod diagnose;
mod dsn;
mod env;
mod error;
mod kv;
mod notices;
mod params;
mod passfile;
mod pem;
mod search_path;
mod session;
mod target;
#[cfg(test)]
mod testing;
mod tls;
mod url;
mod verifier;

pub use attempt::{connect, DEFAULT_CONNECT_TIMEOUT};
pub use budgets::SessionBudgets;
pub use dsn::ConnectionSpec;
pub use env::{Environment, ProcessEnvironment};
pub use error::{ConnectError, TlsFileProblem};
pub use notices::NoticeTap;
pub(crate) use session::APPLICATION_NAME;
pub use session::{Session, MIN_SERVER_VERSION_NUM};
pub use target::{Host, Target, TargetSessionAttrs};
pub use tls::{RootCert, SslMode, TlsSettings};
