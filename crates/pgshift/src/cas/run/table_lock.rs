//! The per-table session advisory lock: one process runs a table at a time.
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::cas::liveness;

/// Takes the per-table session advisory lock, never waiting (INV: OC-2).
pub(super) async fn lock_table(client: &Client, oid: u32) -> Result<(), CasError> {
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended($1, 0))",
            &[&liveness::lock_key(oid)],
        )
        .await
        .map_err(|e| CasError::db("taking the run lock", e))?;
    // INV: OC-2 — a second run on the same table is refused at once, naming the holder.
    if row.get::<_, bool>(0) {
        return Ok(());
    }
    let holder = liveness::holder(client, oid).await.ok().flatten();
    Err(CasError::Busy {
        run: None,
        pid: holder,
    })
}

/// Takes the per-table lock for `resume` or `abort`, which often follow a process that
/// was just killed: its backend holds the lock until it notices the client is gone
/// (within about a second, `client_connection_check_interval`, or when its current
/// statement ends). Waits for that at most [`AFTER_STOP_WAIT`], then refuses like
/// [`lock_table`], naming the holder. A holder whose backend starts a new statement
/// while this waits has a live client (a killed process sends none): that is refused
/// at once, since no wait would free the table.
pub(super) async fn lock_table_after_stop(client: &Client, oid: u32) -> Result<(), CasError> {
    let deadline = Instant::now() + AFTER_STOP_WAIT;
    let mut first_seen: Option<(i32, String)> = None;
    loop {
        match lock_table(client, oid).await {
            Err(CasError::Busy {
                pid: Some(pid),
                run,
            }) if Instant::now() < deadline => {
                let started = statement_started(client, pid).await;
                match (&first_seen, started) {
                    (Some((seen, before)), Some(now)) if *seen == pid && *before != now => {
                        return Err(CasError::Busy {
                            pid: Some(pid),
                            run,
                        });
                    }
                    (Some((seen, _)), _) if *seen == pid => {}
                    (_, started) => first_seen = started.map(|s| (pid, s)),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(CasError::Busy { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

/// When backend `pid` started its current (or last) statement, as text, if this
/// session may see it (`pg_stat_activity` shows it to the same role, superusers and
/// `pg_read_all_stats`).
async fn statement_started(client: &Client, pid: i32) -> Option<String> {
    client
        .query_opt(
            "SELECT a.query_start::pg_catalog.text FROM pg_catalog.pg_stat_activity a \
              WHERE a.pid OPERATOR(pg_catalog.=) $1 AND a.query_start IS NOT NULL",
            &[&pid],
        )
        .await
        .ok()
        .flatten()
        .map(|row| row.get(0))
}

/// How long `resume` and `abort` wait for the backend of a stopped process to let go
/// of the table.
pub(super) const AFTER_STOP_WAIT: Duration = Duration::from_secs(15);

/// Releases the per-table lock before the session closes, so that a command run right
/// after this one returns never finds the lock still held by a closing backend.
pub(super) async fn unlock_table(client: &Client, oid: u32) {
    let _ = client
        .query_one(
            "SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended($1, 0))",
            &[&liveness::lock_key(oid)],
        )
        .await;
}
