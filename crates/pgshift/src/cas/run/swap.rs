//! Waiting for a requested cutover, and catching up outside the lock.
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use crate::cas::applier::Applier;
use crate::cas::error::CasError;
use crate::cas::ledger::Ledger;
use crate::cas::plan::RunPlan;
use crate::cas::statements::Statements;
use crate::cas::store::{self};

/// Waits, keeping the shadow in step, until `pgshift cutover` asks for the swap.
pub(super) async fn wait_for_cutover(
    client: &Client,
    plan: &RunPlan,
    applier: Option<&ApplierTask>,
) -> Result<(), CasError> {
    loop {
        if let Some(task) = applier {
            task.check()?;
        }
        let record = store::by_id(client, plan.run).await?;
        if record.cutover_requested {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Catches up outside the lock (used when the backlog was too large to drain under
/// it): apply until the backlog is small.
pub(super) async fn catch_up(
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
) -> Result<(), CasError> {
    let mut applier = Applier::new(statements.clone());
    let finished = Mutex::new((Ledger::resume(None, true), 0));
    for _ in 0..10_000 {
        let batch = applier.step(client, &finished, 5_000).await?;
        if batch.read == 0 || applier.backlog(client).await? < plan.options.cutover.max_drain / 2 {
            return Ok(());
        }
    }
    Ok(())
}
