//! The throttle in the run record: the operator's pause (`pgshift throttle TABLE
//! --pause|--resume` sets `pgshift.runs.throttle_paused`, which the running process
//! reads on every tick) and the throttle's state as `status` shows it
//! (`pgshift.runs.throttle`).

use tokio_postgres::Client;

use crate::cas::error::CasError;

/// Whether an operator paused run `run`; an error (the work then pauses) when the
/// record cannot be read.
pub async fn operator_paused(client: &Client, run: i64) -> Result<bool, String> {
    let row = client
        .query_opt(
            "SELECT throttle_paused FROM pgshift.runs WHERE id = $1",
            &[&run],
        )
        .await
        .map_err(|e| super::unread(&e))?;
    row.map(|row| row.get(0))
        .ok_or_else(|| format!("run {run} is not recorded any more"))
}

/// Records the throttle's state for `status`.
pub async fn set_state(client: &Client, run: i64, state: &str) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET throttle = $2 WHERE id = $1",
            &[&run, &state],
        )
        .await
        .map_err(|e| CasError::db("recording the throttle's state", e))?;
    Ok(())
}

/// Sets or clears the operator's pause of run `run`.
pub async fn set_paused(client: &Client, run: i64, paused: bool) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET throttle_paused = $2, updated_at = pg_catalog.now() WHERE id = $1",
            &[&run, &paused],
        )
        .await
        .map_err(|e| CasError::db("recording the operator's pause", e))?;
    Ok(())
}

/// Removes run `run`'s row of the probe's table (the table itself is the engine's, like
/// `pgshift.runs`, shared by every run of the database).
pub async fn forget_probe(client: &Client, run: i64) -> Result<(), CasError> {
    match client
        .execute("DELETE FROM pgshift.throttle_probe WHERE run = $1", &[&run])
        .await
    {
        Ok(_) => Ok(()),
        // A database whose engine schema predates the throttle has no probe to forget.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => Ok(()),
        Err(e) => Err(CasError::db("removing the run's probe row", e)),
    }
}
