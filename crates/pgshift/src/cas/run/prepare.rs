//! Everything before the copy: the shadow and the change capture (or fence), and the
//! proof that the capture is intact when a run resumes.
use std::time::Duration;

use tokio_postgres::Client;

use super::CasProgress;
use crate::cas::capture;
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;
use crate::cas::shadow;
use crate::cas::store::{self, Phase};
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::Statement;

/// Shadow, capture (or fence): everything before the copy.
pub(super) async fn prepare(
    client: &Client,
    plan: &mut RunPlan,
    statement: &Statement,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    progress.phase(Phase::Prepared);
    shadow::create(client, plan, statement).await?;
    store::save_plan(client, plan.run, plan).await?;
    install_capture(client, plan).await?;
    store::set_phase(client, plan.run, Phase::Copying).await?;
    Ok(())
}

/// Installs the capture (or fence) in one transaction under a short lock budget,
/// retried, then proves it intact.
pub(super) async fn install_capture(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let sql = capture::install_sql(plan)?;
    let budgets = plan.options.cutover;
    for attempt in 1..=budgets.attempts {
        let statement = format!(
            "BEGIN; SET LOCAL lock_timeout = {}; {sql}; COMMIT",
            budgets.lock_timeout_ms
        );
        match client.batch_execute(&statement).await {
            Ok(()) => {
                let breaches = capture::check(client, plan).await?;
                if breaches.is_empty() {
                    return Ok(());
                }
                return Err(CasError::Record(format!(
                    "the capture installed is not intact: {}",
                    breaches
                        .iter()
                        .map(|b| b.problem.clone())
                        .collect::<Vec<_>>()
                        .join("; ")
                )));
            }
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                if e.code() != Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
                    || attempt == budgets.attempts
                {
                    return Err(CasError::db("installing the change capture", e));
                }
                tokio::time::sleep(Duration::from_millis(
                    budgets
                        .backoff_initial_ms
                        .saturating_mul(u64::from(attempt)),
                ))
                .await;
            }
        }
    }
    Err(CasError::CutoverRefused(Refusal::new(
        RefusalCause::LockBudgetExhausted,
        "could not take the lock to install the change capture",
    )))
}

/// Installs the capture if the run died before it was, and proves it intact.
pub(super) async fn ensure_capture(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let breaches = capture::check(client, plan).await?;
    if breaches.is_empty() {
        return Ok(());
    }
    let exists = client
        .query_one(
            "SELECT pg_catalog.to_regclass($1) IS NOT NULL",
            &[&plan.names().log_table().to_string()],
        )
        .await
        .map_err(|e| CasError::db("looking for the change log", e))?;
    if exists.get::<_, bool>(0) {
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::CutoverUnfenced,
            format!(
                "the change capture was tampered with while the run was stopped ({}); writes may have been missed — abort the run",
                breaches.iter().map(|b| b.problem.clone()).collect::<Vec<_>>().join("; ")
            ),
        )));
    }
    install_capture(client, plan).await
}
