//! Sessions of a run: every one with pgshift's budgets, a catalog-safe `search_path`,
//! and fixed output settings so that key values round-trip exactly as text.

use tokio_postgres::Client;

use super::error::CasError;
use super::plan::RunPlan;
use crate::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift_sql::{quote_ident, QualifiedName};

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
/// this transaction — waiting up to `SHADOW_LOCK_WAIT_MS` — and then put
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
        .map_err(|e| match e.refusal() {
            // INV: SE-4 — a run's session (runner, workers, the advisory lock's) has a
            // server session of its own, or the run is refused.
            Some(refusal) => CasError::Refused(refusal.clone()),
            None => CasError::Connect(e.to_string()),
        })?;
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

/// The `search_path` setting the statement was written for, after `pg_catalog` (so
/// built-in names cannot be shadowed): the plan's, or the role's own when the plan
/// has none.
pub(crate) async fn statement_search_path(
    client: &Client,
    plan: &RunPlan,
) -> Result<String, CasError> {
    if !plan.search_path.is_empty() {
        let mut parts = vec!["pg_catalog".to_owned()];
        parts.extend(plan.search_path.iter().map(|s| quote_ident(s)));
        return Ok(parts.join(", "));
    }
    let row = client
        .query_one(
            "SELECT s.reset_val FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'search_path'",
            &[],
        )
        .await
        .map_err(|e| CasError::db("reading the role's search_path", e))?;
    let own: String = row.get(0);
    Ok(if own.trim().is_empty() {
        "pg_catalog".to_owned()
    } else {
        format!("pg_catalog, {own}")
    })
}

/// Opens a session that evaluates the user's expressions over source rows (the copy,
/// the applier, verification), named `application`. When the plan fills any column
/// through an expression of the user's (a `USING`), the session runs with the
/// `search_path` the statement was written for, after `pg_catalog`, as the native
/// statement would evaluate it: a function it calls may name a type or table without a
/// schema in its body. pgshift's own SQL on it names every relation by schema, and its
/// built-in functions and operators resolve in `pg_catalog` first either way.
pub async fn open_evaluating(
    spec: &ConnectionSpec,
    application: &str,
    plan: &RunPlan,
) -> Result<Session, CasError> {
    let session = open(spec, application).await?;
    evaluate_with_statement_path(session.client(), plan).await?;
    Ok(session)
}

/// Whether the plan fills any column through an expression of the user's.
fn evaluates(plan: &RunPlan) -> bool {
    plan.columns.iter().any(|c| !c.copied_as_is())
}

/// Sets the session's `search_path` to the statement's (see [`open_evaluating`]) when
/// the plan evaluates the user's expressions; the swap's session does this for the
/// drain it runs under the lock, and [`pin_search_path`] undoes it afterwards.
pub async fn evaluate_with_statement_path(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    if !evaluates(plan) {
        return Ok(());
    }
    let path = statement_search_path(client, plan).await?;
    client
        .execute(
            "SELECT pg_catalog.set_config('search_path', $1, false)",
            &[&path],
        )
        .await
        .map_err(|e| CasError::db("setting the statement's search_path", e))?;
    Ok(())
}

/// Puts the session's `search_path` back to pgshift's pinned one.
pub async fn pin_search_path(client: &Client) -> Result<(), CasError> {
    client
        .batch_execute("SET search_path = pg_catalog, pg_temp")
        .await
        .map_err(|e| CasError::db("pinning the search_path", e))
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
