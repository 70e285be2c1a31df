//! After the swap, and on abort: what is validated, dropped and removed.

use crate::cas::throttle;
use tokio_postgres::Client;

use super::cleanup::{self, LeftBehind};
use super::{CasProgress, RunReport};
use crate::cas::error::CasError;
use crate::cas::names::RunNames;
use crate::cas::plan::RunPlan;
use crate::cas::store::{self, Phase};
use pgshift_sql::{quote_ident, QualifiedName};

/// After the swap: validate re-pointed foreign keys, drop the old table (unless kept)
/// and every artifact, mark the run done. A clean-up step that does not get its lock
/// within its budget leaves its object behind (reported with the statement that drops
/// it): the swap is done either way.
pub(super) async fn finish(
    client: &Client,
    plan: &RunPlan,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    cleanup::validate_incoming(client, plan, report).await;
    let names = plan.names();
    let old = names.old(&plan.source.table.name);
    if plan.options.keep_old {
        drop_capture(client, plan, &old).await?;
        report.kept_old = Some(old.to_string());
    } else {
        cleanup::drop_old(client, plan, &old, report, progress).await?;
    }
    if let Err(e) = drop_engine_objects(client, &names).await {
        report.left_behind.push(LeftBehind {
            object: "the run's change log and functions".to_owned(),
            reason: e.to_string(),
            statement: engine_objects_sql(&names),
        });
    }
    store::set_phase(client, plan.run, Phase::Done).await?;
    progress.phase(Phase::Done);
    report.phase = "done".to_owned();
    if let Ok(value) = serde_json::to_value(&*report) {
        let _ = store::save_report(client, plan.run, &value).await;
    }
    Ok(())
}

/// Runs `sql` in a transaction of its own with `lock_timeout` set locally (the
/// session's budget is back in force afterwards, whatever happens).
pub(super) async fn bounded(
    client: &Client,
    lock_timeout_ms: u64,
    sql: &str,
) -> Result<(), tokio_postgres::Error> {
    let result = client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL lock_timeout = {lock_timeout_ms}; {sql}; COMMIT"
        ))
        .await;
    if result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result
}

/// Drops the run's triggers from the (kept) old tree.
pub(super) async fn drop_capture(
    client: &Client,
    plan: &RunPlan,
    old: &QualifiedName,
) -> Result<(), CasError> {
    let names = plan.names();
    let mut relations = vec![old.clone()];
    relations.extend(
        plan.source
            .partitions
            .iter()
            .map(|p| names.old(&p.relation.name)),
    );
    for relation in relations {
        for trigger in [
            names.capture_trigger(),
            names.truncate_trigger(),
            names.fence_trigger(),
        ] {
            client
                .batch_execute(&format!(
                    "DROP TRIGGER IF EXISTS {} ON {relation}",
                    quote_ident(&trigger)
                ))
                .await
                .map_err(|e| CasError::db("removing the run's triggers from the old table", e))?;
        }
    }
    Ok(())
}

fn engine_objects_sql(names: &RunNames) -> String {
    format!(
        "DROP TABLE IF EXISTS {}; DROP FUNCTION IF EXISTS {}() CASCADE; DROP FUNCTION IF EXISTS {}() CASCADE",
        names.log_table(),
        names.capture_function(),
        names.refuse_function()
    )
}

pub(super) async fn drop_engine_objects(client: &Client, names: &RunNames) -> Result<(), CasError> {
    throttle::record::forget_probe(client, names.run()).await?;
    client
        .batch_execute(&engine_objects_sql(names))
        .await
        .map_err(|e| CasError::db("removing the run's engine objects", e))
}

/// Removes every artifact of a run that has not swapped: the triggers on the source
/// tree, the shadow tree, the change log, the functions.
pub(super) async fn remove_artifacts(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let names = plan.names();
    for relation in plan.source_relations() {
        for trigger in [
            names.capture_trigger(),
            names.truncate_trigger(),
            names.fence_trigger(),
        ] {
            let sql = format!(
                "DROP TRIGGER IF EXISTS {} ON {relation}",
                quote_ident(&trigger)
            );
            if let Err(e) = bounded(client, 2_000, &sql).await {
                if e.code() != Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) {
                    return Err(CasError::db("removing the run's triggers", e));
                }
            }
        }
    }
    let shadow = names.shadow(&plan.source.table.name);
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {shadow}"))
        .await
        .map_err(|e| CasError::db("dropping the shadow", e))?;
    drop_engine_objects(client, &names).await
}
