//! [`Session`]: a connection prepared the way every pgshift session must be before
//! it runs anything.
//!
//! Once [`super::attempt`] has reached a server, the session is prepared in this
//! order:
//! 1. `application_name = 'pgshift'` and the [`SessionBudgets`] (`lock_timeout`,
//!    `statement_timeout`, `idle_in_transaction_session_timeout`), so every later
//!    statement is bounded server-side;
//! 2. `server_version_num` (older than 14 is refused), the role's own `search_path`,
//!    `current_user` and `current_database()`, kept as the user's view for resolving
//!    unqualified names;
//! 3. `search_path = pg_catalog, pg_temp`, so no schema the user can create objects
//!    in can shadow a function or operator that pgshift's own queries call;
//! 4. `deadlock_timeout` = [`DEADLOCK_TIMEOUT_MS`], where the role may set it (a
//!    superuser, or a role granted `SET` on it), so that an autovacuum worker holding
//!    a lock the session waits for is cancelled by the server within the wait.
//!
//! The preparation is bounded by the connect timeout. Only validated integers are
//! formatted into SQL.

use std::fmt;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use super::budgets::SessionBudgets;
use super::error::ConnectError;
use super::search_path;

/// The oldest server pgshift works with: PostgreSQL 14.
pub const MIN_SERVER_VERSION_NUM: u32 = 140_000;

/// The `deadlock_timeout` of a session, where the role may set it. A backend waiting
/// for a lock runs the deadlock check after `deadlock_timeout`, and only then has the
/// server cancel an autovacuum worker that blocks it (not one that prevents
/// wraparound). The server's default is 1 s, the same as the engine's lock budgets:
/// both timers then fire at once, the lock timeout's error is raised first, and the
/// worker is never cancelled — an autovacuum of a large table (often right after a
/// copy-and-swap, which inserts every row) then failed every attempt of a step.
/// A step with a lock budget under this still times out before the cancellation.
pub const DEADLOCK_TIMEOUT_MS: u64 = 100;

/// The `application_name` of every pgshift session.
pub(crate) const APPLICATION_NAME: &str = "pgshift";

/// A connected, prepared session: budgets set, `search_path` locked down, and the
/// user's own view (role, database, `search_path`) recorded.
pub struct Session {
    client: Client,
    endpoint: String,
    server_version_num: u32,
    user_search_path: Vec<String>,
    current_user: String,
    database: String,
}

impl Session {
    /// The driver client; its session runs under the budgets and with
    /// `search_path = pg_catalog, pg_temp`.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The server that accepted the connection (`host:port` or socket path).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The server's `server_version_num`, such as `150004`.
    pub fn server_version_num(&self) -> u32 {
        self.server_version_num
    }

    /// The `search_path` the role had before pgshift replaced it, as schema names
    /// (unquoted; the special entry is `$user`).
    pub fn user_search_path(&self) -> &[String] {
        &self.user_search_path
    }

    /// The role the session runs as.
    pub fn current_user(&self) -> &str {
        &self.current_user
    }

    /// The database the session is connected to.
    pub fn database(&self) -> &str {
        &self.database
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("endpoint", &self.endpoint)
            .field("server_version_num", &self.server_version_num)
            .field("user_search_path", &self.user_search_path)
            .field("current_user", &self.current_user)
            .field("database", &self.database)
            .finish_non_exhaustive()
    }
}

/// Prepares a connected session (see the module docs), bounded by `timeout`.
pub(crate) async fn prepare(
    client: Client,
    endpoint: String,
    budgets: &SessionBudgets,
    timeout: Duration,
) -> Result<Session, ConnectError> {
    match tokio::time::timeout(timeout, prepare_unbounded(client, &endpoint, budgets)).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError::timeout(&endpoint, "session setup", timeout)),
    }
}

async fn prepare_unbounded(
    client: Client,
    endpoint: &str,
    budgets: &SessionBudgets,
) -> Result<Session, ConnectError> {
    // INV: LK-2 — budgets are validated and set before the session is used for anything.
    let budget_sql = format!(
        "SET application_name = '{APPLICATION_NAME}'; {}",
        budgets.set_statements()?
    );
    client
        .batch_execute(&budget_sql)
        .await
        .map_err(|error| ConnectError::setup("set_budgets", error))?;
    let row = client
        .query_one(
            "SELECT pg_catalog.current_setting('server_version_num'), \
                    pg_catalog.current_setting('search_path'), \
                    current_user, \
                    pg_catalog.current_database()",
            &[],
        )
        .await
        .map_err(|error| ConnectError::setup("read_session", error))?;
    let column = |index: usize| {
        row.try_get::<_, String>(index)
            .map_err(|error| ConnectError::setup("read_session", error))
    };
    let server_version_num =
        column(0)?
            .parse::<u32>()
            .map_err(|_| ConnectError::UnexpectedServerValue {
                what: "server_version_num",
            })?;
    if server_version_num < MIN_SERVER_VERSION_NUM {
        return Err(ConnectError::ServerTooOld {
            endpoint: endpoint.to_owned(),
            server_version_num,
        });
    }
    let user_search_path =
        search_path::parse(&column(1)?).ok_or(ConnectError::UnexpectedServerValue {
            what: "search_path",
        })?;
    let current_user = column(2)?;
    let database = column(3)?;
    client
        // INV: SE-1 — no schema the user can write to is searched before pg_catalog.
        .batch_execute("SET search_path = pg_catalog, pg_temp")
        .await
        .map_err(|error| ConnectError::setup("set_search_path", error))?;
    // INV: LK-10 — an autovacuum worker that blocks a lock request of this session is
    // cancelled within the request's budget; a role that may not set it keeps the
    // server's (and the limit is stated in the README).
    match client
        .batch_execute(&format!("SET deadlock_timeout = {DEADLOCK_TIMEOUT_MS}"))
        .await
    {
        Ok(()) => {}
        Err(error) if error.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {}
        Err(error) => return Err(ConnectError::setup("set_deadlock_timeout", error)),
    }
    Ok(Session {
        client,
        endpoint: endpoint.to_owned(),
        server_version_num,
        user_search_path,
        current_user,
        database,
    })
}
