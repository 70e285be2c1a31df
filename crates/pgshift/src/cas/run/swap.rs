//! Waiting for a requested cutover, and catching up outside the lock.
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::drive::elapsed_ms;
use super::CasProgress;
use crate::cas::applier::Applier;
use crate::cas::error::CasError;
use crate::cas::ledger::Ledger;
use crate::cas::plan::RunPlan;
use crate::cas::statements::Statements;
use crate::cas::store::{self};
use crate::cas::throttle::record::operator_paused;

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

/// How often a run held by an operator's pause reads its record again.
const PAUSE_POLL: Duration = Duration::from_millis(500);

/// Holds the swap while an operator has the run paused (`pgshift throttle TABLE
/// --pause`), keeping the shadow in step, until `--resume`; a record that cannot be
/// read ends the run before the swap (resumable), never lets it swap. Returns how long
/// it held, in ms.
// INV: OC-5 — an operator's pause holds the swap, not only the work before it.
pub(super) async fn hold_while_paused(
    client: &Client,
    plan: &RunPlan,
    applier: Option<&ApplierTask>,
    progress: &mut dyn CasProgress,
) -> Result<u64, CasError> {
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        if let Some(task) = applier {
            task.check()?;
        }
        let paused = operator_paused(client, plan.run)
            .await
            .map_err(CasError::Record)?;
        if !paused {
            if said {
                progress.throttled("open", "", elapsed_ms(started));
            }
            return Ok(elapsed_ms(started));
        }
        if !said {
            progress.throttled(
                "paused",
                "an operator paused the run: the swap waits for `pgshift throttle TABLE --resume`",
                0,
            );
            said = true;
        }
        tokio::time::sleep(PAUSE_POLL).await;
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
