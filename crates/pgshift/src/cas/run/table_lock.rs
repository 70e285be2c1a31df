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
/// [`lock_table`], naming the holder.
pub(super) async fn lock_table_after_stop(client: &Client, oid: u32) -> Result<(), CasError> {
    let deadline = Instant::now() + AFTER_STOP_WAIT;
    loop {
        match lock_table(client, oid).await {
            Err(CasError::Busy { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
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
