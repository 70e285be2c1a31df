//! Ending the sessions an earlier process of a run left behind.
use std::time::Duration;

use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;

/// Ends (and waits out) the sessions of an earlier process of this run — copy, index,
/// applier, verification and throttle sessions, whose statements a killed process
/// leaves running until they end (run numbers are per database: only this database's
/// sessions).
pub(super) async fn terminate_earlier_sessions(
    client: &Client,
    plan: &RunPlan,
) -> Result<(), CasError> {
    terminate_sessions(client, &plan.names().task_applications()).await
}

/// Ends (and waits out) the copy sessions of an earlier process (its chunk
/// transactions).
pub(super) async fn terminate_copiers(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    terminate_sessions(client, &[plan.names().copy_application()]).await
}

pub(super) async fn terminate_sessions(
    client: &Client,
    applications: &[String],
) -> Result<(), CasError> {
    for _ in 0..600 {
        let row = client
            .query_one(
                "SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid)) FROM pg_catalog.pg_stat_activity a \
                  WHERE a.application_name OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]) \
                    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() \
                    AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()",
                &[&applications.to_vec()],
            )
            .await
            .map_err(|e| CasError::db("ending earlier sessions of the run", e))?;
        if row.get::<_, i64>(0) == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(CasError::Record(
        "sessions of an earlier process of the run would not end".to_owned(),
    ))
}
