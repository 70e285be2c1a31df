//! Whether a connection has a server session of its own, checked before anything is
//! set or taken on it (INV: SE-4).
//!
//! pgshift relies on session state: `search_path`, the budgets and the run settings
//! are `SET` once per session, the driver prepares named statements and runs them in
//! later transactions, and a copy-and-swap run holds a session advisory lock for its
//! whole life. Behind a pooler in transaction (or statement) mode, each transaction
//! of a client runs on whichever server backend the pool has free; the state lands on
//! a backend that the pool then hands to application clients (a `search_path` of
//! `pg_catalog, pg_temp` makes their unqualified names vanish), the next transaction
//! finds none of it, and the advisory lock stays on a pooled backend nobody owns.
//!
//! # How it is told
//! A backend is identified by `pg_backend_pid()`, its `backend_start` and the
//! postmaster's start time (a pid can be reused; a pooler can front several
//! servers). The connection being checked (A) reads its backend's identity in an
//! autocommit query, through the simple query protocol (no named statement is left
//! behind), then a second connection to the same target (B) opens a transaction,
//! reads its own backend's identity and keeps the transaction open while A reads
//! again. Then B rolls back and closes. Nothing is set on either.
//!
//! - With a session of its own (a direct connection, or a pool in session mode), A's
//!   backend serves only A for as long as A is connected: B's backend is another
//!   one, and A's second read comes from the backend of its first.
//! - Without one, A's backend went back to the pool when its first query ended, so:
//!   B's transaction may run on it (the same identity: the backend is shared); or,
//!   while B holds a server, A's second read may run on another backend (the
//!   identity changed); or, with no other server free, A's second read waits for B
//!   to finish. A server never makes a plain `SELECT` wait for another session's
//!   idle transaction, so a read still unanswered after [`held_wait`] is a pooler
//!   with no server left for A. Any of the three is a refusal.
//!
//! Reading the pid twice on A alone is not enough: with one idle server connection
//! in the pool, a transaction pooler hands the same backend back to A every time.
//! B's open transaction is what takes that backend away from the pool. With two or
//! more idle servers a pooler that picks the most recently used one (PgBouncer's
//! default) gives B A's backend at once; one that picks the least recently used one
//! (`server_round_robin = 1`) can give B another and A its own again in the first
//! round, but then A's backend becomes the least recently used and B gets it in the
//! second: hence [`ROUNDS`] rounds. Other clients' traffic only makes a change of
//! backend more likely. What stays possible is a pooler choosing at random, or
//! exactly around the probe; the check is evidence, not proof, and the refusal is
//! why nothing else in pgshift needs to guess.
//!
//! A session-scoped marker (a setting, a temporary table, an advisory lock) would
//! tell a shared backend from an own one only by leaving the marker on a shared
//! backend, which is the harm this check prevents; it is not used.
//!
//! A pooler in statement mode refuses B's `BEGIN`; an error from the server side for
//! `BEGIN`, which every PostgreSQL accepts, is taken as that and refused as well.
//! If B gets no answer at all within the connect timeout (a session-mode pool with no
//! room for one more client), the check cannot be made and the connection fails with
//! a timeout rather than being guessed either way.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

use super::error::ConnectError;
use crate::refusal::{Refusal, RefusalCause};

/// How many times B holds a transaction while A reads again.
pub(crate) const ROUNDS: usize = 2;

/// The shortest time A's second read may take before the wait itself shows that A
/// has no backend of its own.
pub(crate) const MIN_HELD_WAIT: Duration = Duration::from_secs(2);

/// The identity of the backend that runs the query. Everything is qualified (the
/// session's `search_path` is still the role's own), and `=` is `pg_catalog`'s.
const IDENTITY_SQL: &str = "SELECT pg_catalog.pg_backend_pid()::pg_catalog.text, \
     pg_catalog.pg_postmaster_start_time()::pg_catalog.text, \
     (SELECT a.backend_start::pg_catalog.text FROM pg_catalog.pg_stat_activity a \
      WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid())";

/// One server backend: its pid and when it and its postmaster started.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Backend {
    pid: String,
    postmaster_start: String,
    backend_start: String,
}

/// Checks that `client` has a server session of its own; `second` opens another
/// connection to the same target (nothing is set on it). `timeout` bounds each step.
pub(crate) async fn check<F, Fut>(
    client: &Client,
    endpoint: &str,
    timeout: Duration,
    second: F,
) -> Result<(), ConnectError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Client, ConnectError>>,
{
    // INV: SE-4 — only reads, through the simple query protocol: nothing is set,
    // locked or prepared before the connection is known to be its own.
    let started = Instant::now();
    let own = bounded(endpoint, timeout, identity(client, false)).await?;
    let wait = held_wait(started.elapsed(), timeout);
    let other = second()
        .await
        .map_err(|source| ConnectError::AffinityCheck {
            endpoint: endpoint.to_owned(),
            source: Box::new(source),
        })?;
    for _ in 0..ROUNDS {
        let outcome = round(client, &other, &own, endpoint, timeout, wait).await;
        // Best effort: the connection is closed right after, which ends the
        // transaction anyway.
        let _ = tokio::time::timeout(timeout, other.batch_execute("ROLLBACK")).await;
        outcome?;
    }
    Ok(())
}

/// One round: B holds a transaction open while A reads its backend again.
async fn round(
    client: &Client,
    other: &Client,
    own: &Backend,
    endpoint: &str,
    timeout: Duration,
    wait: Duration,
) -> Result<(), ConnectError> {
    let theirs = match bounded(endpoint, timeout, identity(other, true)).await {
        Err(ConnectError::SessionSetup {
            sqlstate: Some(_),
            source,
            ..
        }) => {
            return Err(pooled(
                endpoint,
                format!(
                    "a second connection could not open a transaction ({}), as a pooler in statement mode refuses",
                    source
                        .as_db_error()
                        .map_or_else(|| source.to_string(), |db| db.message().to_owned())
                ),
            ))
        }
        other => other?,
    };
    if &theirs == own {
        return Err(pooled(
            endpoint,
            format!(
                "another connection's transaction ran on this connection's server backend (pid {})",
                own.pid
            ),
        ));
    }
    let again = match tokio::time::timeout(wait, identity(client, false)).await {
        Err(_) => {
            return Err(pooled(
                endpoint,
                format!(
                    "a query waited more than {} ms for a server backend while another connection held a transaction open",
                    wait.as_millis()
                ),
            ))
        }
        Ok(result) => result?,
    };
    if &again != own {
        return Err(pooled(
            endpoint,
            format!(
                "two consecutive queries ran on different server backends (pid {}, then pid {})",
                own.pid, again.pid
            ),
        ));
    }
    Ok(())
}

/// How long A's second read may take: ten times its first read, at least
/// [`MIN_HELD_WAIT`], at most the connect timeout.
pub(crate) fn held_wait(first_read: Duration, timeout: Duration) -> Duration {
    first_read
        .saturating_mul(10)
        .max(MIN_HELD_WAIT)
        .min(timeout.max(MIN_HELD_WAIT))
}

/// The refusal of a connection without a session of its own.
fn pooled(endpoint: &str, evidence: String) -> ConnectError {
    ConnectError::Refused(Refusal::new(
        RefusalCause::PooledWithoutSession,
        format!(
            "the connection to {endpoint} has no server session of its own: {evidence}; a pooler in transaction or statement mode is in between, and nothing was set or taken"
        ),
    ))
}

/// The identity of the backend that answers, read through the simple query protocol
/// (in a transaction left open when `in_transaction`).
async fn identity(client: &Client, in_transaction: bool) -> Result<Backend, ConnectError> {
    let sql = if in_transaction {
        format!("BEGIN; {IDENTITY_SQL}")
    } else {
        IDENTITY_SQL.to_owned()
    };
    let messages = client
        .simple_query(&sql)
        .await
        .map_err(|error| ConnectError::setup("session check", error))?;
    let unexpected = ConnectError::UnexpectedServerValue {
        what: "the backend's identity",
    };
    let Some(row) = messages.iter().find_map(|message| match message {
        SimpleQueryMessage::Row(row) => Some(row),
        _ => None,
    }) else {
        return Err(unexpected);
    };
    let column = |index: usize| {
        row.try_get(index).ok().flatten().map(str::to_owned).ok_or(
            ConnectError::UnexpectedServerValue {
                what: "the backend's identity",
            },
        )
    };
    Ok(Backend {
        pid: column(0)?,
        postmaster_start: column(1)?,
        backend_start: column(2)?,
    })
}

/// `future`, bounded by `timeout`.
async fn bounded<T>(
    endpoint: &str,
    timeout: Duration,
    future: impl Future<Output = Result<T, ConnectError>>,
) -> Result<T, ConnectError> {
    tokio::time::timeout(timeout, future)
        .await
        .map_err(|_| ConnectError::timeout(endpoint, "session check", timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_held_wait_grows_with_a_slow_first_read_within_the_timeout() {
        let ten = Duration::from_secs(10);
        assert_eq!(held_wait(Duration::from_millis(3), ten), MIN_HELD_WAIT);
        assert_eq!(
            held_wait(Duration::from_millis(500), ten),
            Duration::from_secs(5)
        );
        assert_eq!(held_wait(Duration::from_secs(4), ten), ten);
        assert_eq!(
            held_wait(Duration::from_secs(4), Duration::from_secs(1)),
            MIN_HELD_WAIT
        );
    }
}
