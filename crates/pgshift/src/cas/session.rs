//! Sessions of a run: every one with pgshift's budgets, a catalog-safe `search_path`,
//! and fixed output settings so that key values round-trip exactly as text.

use tokio_postgres::Client;

use super::error::CasError;
use crate::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift_sql::QualifiedName;

/// Budgets of a run's sessions; each statement of the run sets tighter ones where it
/// matters (`SET LOCAL lock_timeout` before strong locks).
pub const RUN_SESSION: SessionBudgets = SessionBudgets {
    lock_timeout_ms: 1_000,
    statement_timeout_ms: 3_600_000,
    idle_in_transaction_timeout_ms: 600_000,
};

/// How long the engine waits for the shadow's own lock. Only the engine and autovacuum
/// use the shadow, so waiting queues no user's query behind it; and a wait longer than
/// `deadlock_timeout` (1 s by default) is what makes PostgreSQL cancel an autovacuum
/// worker holding it (one often starts on the freshly copied heap). The sessions' 1 s
/// `lock_timeout` raced that cancellation, and lost under load.
const SHADOW_LOCK_WAIT_MS: u64 = 60_000;

/// Statements, inside a transaction, that take `shadow` (and its partitions) for
/// this transaction — waiting up to [`SHADOW_LOCK_WAIT_MS`] — and then put
/// `lock_timeout` back to `lock_timeout_ms` for every other lock the transaction takes.
pub fn lock_shadow(shadow: &QualifiedName, lock_timeout_ms: u64) -> String {
    lock_shadow_in(shadow, lock_timeout_ms, ShadowLock::Exclusive)
}

/// The mode [`lock_shadow_in`] takes the shadow in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShadowLock {
    /// ACCESS EXCLUSIVE: nobody else reads the shadow meanwhile.
    Exclusive,
    /// SHARE, what `CREATE INDEX` takes: verification reads the shadow beside it, and
    /// an autovacuum worker on it (SHARE UPDATE EXCLUSIVE) is still waited out.
    Share,
    /// SHARE UPDATE EXCLUSIVE, what `ANALYZE` takes: verification's reads and the
    /// applier's writes go on beside it, and an autovacuum worker on it is still
    /// waited out.
    Analyze,
}

/// [`lock_shadow`] in `mode`.
pub fn lock_shadow_in(shadow: &QualifiedName, lock_timeout_ms: u64, mode: ShadowLock) -> String {
    let mode = match mode {
        ShadowLock::Exclusive => "ACCESS EXCLUSIVE",
        ShadowLock::Share => "SHARE",
        ShadowLock::Analyze => "SHARE UPDATE EXCLUSIVE",
    };
    format!(
        "SET LOCAL lock_timeout = {SHADOW_LOCK_WAIT_MS}; \
         LOCK TABLE {shadow} IN {mode} MODE; \
         SET LOCAL lock_timeout = {lock_timeout_ms}"
    )
}

/// Output settings that make text forms of key values stable and exact, and
/// `row_security = off`: a read or write that row-level security policies would
/// filter raises 42501 instead (INV: SE-3).
const SETTINGS: &str =
    "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; \
     SET bytea_output = 'hex'; SET extra_float_digits = 3; SET synchronous_commit = on; \
     SET row_security = off";

/// Opens a session for a run, named `application` (visible in `pg_stat_activity`).
pub async fn open(spec: &ConnectionSpec, application: &str) -> Result<Session, CasError> {
    let session = connect(spec, &RUN_SESSION)
        .await
        .map_err(|e| CasError::Connect(e.to_string()))?;
    prepare(session.client(), application).await?;
    Ok(session)
}

/// Applies the fixed settings and the application name to a client. Every session of
/// a run (runner, copiers, applier, index builder, verifiers, the swap) is made here.
pub async fn prepare(client: &Client, application: &str) -> Result<(), CasError> {
    // INV: SE-3 — no engine read is ever filtered by row security: it raises instead.
    client
        .batch_execute(SETTINGS)
        .await
        .map_err(|e| CasError::db("preparing a session", e))?;
    client
        .execute(
            "SELECT pg_catalog.set_config('application_name', $1, false)",
            &[&application],
        )
        .await
        .map_err(|e| CasError::db("naming a session", e))?;
    // If this process dies, the server notices within a second even mid-statement and
    // ends the backend (releasing its locks, the run's advisory lock included). Not
    // every platform supports it; without it the backend ends when its statement does.
    let _ = client
        .batch_execute("SET client_connection_check_interval = 1000")
        .await;
    Ok(())
}

/// The end of a transaction whose body (ending in `COMMIT`) produced `result`: on an
/// error, the transaction is rolled back and the error says what was being done.
pub async fn settle<T>(
    client: &Client,
    what: &str,
    result: Result<T, tokio_postgres::Error>,
) -> Result<T, CasError> {
    match result {
        Ok(value) => Ok(value),
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(CasError::db(what.to_owned(), e))
        }
    }
}
