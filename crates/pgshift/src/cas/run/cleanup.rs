//! After the swap: validating the re-pointed foreign keys and dropping the old tree
//! without forming a lock cycle with the new table's writers.
//!
//! `DROP TABLE` of a tree with foreign keys takes ACCESS EXCLUSIVE on every referenced
//! table, one after the other, in one transaction; writers of the new table take ROW
//! SHARE on the same tables for their foreign-key checks, in their own order — a
//! deadlock, or writers queued behind a request held for the whole wait. So the old
//! tree's foreign keys to other tables go first, one constraint per transaction (the
//! old tree, which nobody else uses any more, and that one partner with its
//! partitions), and the tree is dropped only once none is left: it then locks only
//! itself, its indexes and its owned sequences. Every step runs as a unit of the
//! executor (`exec::run_unit`: `lock_timeout`, retries of lock timeouts and
//! deadlocks with jittered backoff) under the cutover's budget. A step that does not
//! get its lock within its attempts leaves its object behind, reported with the
//! statement that drops it; the swap stays done.

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::{CasProgress, RunReport};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;
use crate::classify::WorkClass;
use crate::exec::jitter::Jitter;
use crate::exec::{run_unit, StepBudgets, TokioSleeper, Unit, UnitContext};
use crate::lock::LockMode;
use crate::route::{Step, StepLock};
use pgshift_sql::{quote_ident, QualifiedName};

/// How long a `VALIDATE CONSTRAINT` waits for its lock per attempt. It takes SHARE
/// UPDATE EXCLUSIVE on the referencing table and ROW SHARE on the new table: no writer
/// queues behind it, and waiting past `deadlock_timeout` is what cancels an autovacuum
/// worker holding the referencing table.
const VALIDATE_LOCK_WAIT_MS: u64 = 5_000;

/// `statement_timeout` of a clean-up step (a validation scans the referencing table).
const STEP_STATEMENT_TIMEOUT_MS: u64 = 3_600_000;

/// One step of the clean-up, as it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CleanupStep {
    /// The statement.
    pub statement: String,
    /// Attempts made.
    pub attempts: u32,
    /// Whether it committed.
    pub committed: bool,
    /// Why it did not, when it did not.
    #[serde(default)]
    pub failure: Option<String>,
}

/// An object of the old tree the clean-up could not drop.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LeftBehind {
    /// What remains (`foreign key … on …`, `table …`).
    pub object: String,
    /// Why it remains.
    pub reason: String,
    /// The statement that drops it later; run the statements of a report in order, each
    /// in a transaction of its own.
    pub statement: String,
}

/// The budgets of the clean-up's steps: the cutover's lock budget and attempts (the
/// longest a writer queues behind one of the run's lock requests), a longer wait for
/// validations, which block no writer.
fn budgets(plan: &RunPlan) -> StepBudgets {
    let cutover = plan.options.cutover;
    StepBudgets {
        lock_timeout_ms: cutover.lock_timeout_ms,
        weak_lock_timeout_ms: VALIDATE_LOCK_WAIT_MS.max(cutover.lock_timeout_ms),
        statement_timeout_ms: STEP_STATEMENT_TIMEOUT_MS,
        build_timeout_ms: STEP_STATEMENT_TIMEOUT_MS,
        max_attempts: cutover.attempts.max(1),
        backoff_initial_ms: cutover.backoff_initial_ms,
        backoff_max_ms: cutover.backoff_max_ms.max(cutover.backoff_initial_ms),
    }
}

/// Runs `sql` as one retried unit taking `mode` on `relation`; records it.
async fn step(
    client: &Client,
    budgets: &StepBudgets,
    sql: String,
    relation: &QualifiedName,
    mode: LockMode,
    work: WorkClass,
    report: &mut RunReport,
) -> Option<String> {
    let unit = Unit {
        steps: vec![Step {
            sql: sql.clone(),
            purpose: "copy-and-swap clean-up".to_owned(),
            lock: Some(StepLock {
                relation: relation.clone(),
                mode,
            }),
            work,
            transactional: true,
        }],
        transactional: true,
        statements: Vec::new(),
        accepted_blocking: false,
        copy_and_swap: None,
        guard: None,
        whole_on_empty: false,
        empty_at_start: Vec::new(),
    };
    let mut jitter = Jitter::from_clock();
    let done = run_unit(
        client,
        &unit,
        budgets,
        UnitContext::default(),
        &TokioSleeper,
        &mut jitter,
    )
    .await;
    let failure = if done.committed {
        None
    } else {
        Some(done.failure.unwrap_or_else(|| "not committed".to_owned()))
    };
    report.cleanup.push(CleanupStep {
        statement: sql,
        attempts: u32::try_from(done.attempts.len()).unwrap_or(u32::MAX),
        committed: done.committed,
        failure: failure.clone(),
    });
    failure
}

/// Validates the foreign keys the swap re-pointed at the new table (left `NOT VALID`
/// and reported when a validation does not commit).
pub(super) async fn validate_incoming(client: &Client, plan: &RunPlan, report: &mut RunReport) {
    let budgets = budgets(plan);
    for fk in &plan.source.incoming {
        let sql = format!(
            "ALTER TABLE {} VALIDATE CONSTRAINT {}",
            fk.table,
            quote_ident(&fk.name)
        );
        let failure = step(
            client,
            &budgets,
            sql.clone(),
            &fk.table,
            LockMode::ShareUpdateExclusive,
            WorkClass::ConcurrentBuild,
            report,
        )
        .await;
        if let Some(failure) = failure {
            report.unvalidated_foreign_keys.push(format!(
                "{}.{}: {failure}; validate it later with: {sql}",
                fk.table,
                quote_ident(&fk.name)
            ));
        }
    }
}

/// A foreign key of the old tree to a table outside it.
struct OutgoingKey {
    /// The old relation it is defined on (the parent, or a partition's own).
    relation: QualifiedName,
    name: String,
    partner: QualifiedName,
}

impl OutgoingKey {
    fn drop_sql(&self) -> String {
        format!(
            "ALTER TABLE {} DROP CONSTRAINT {}",
            self.relation,
            quote_ident(&self.name)
        )
    }
}

/// The old tree (by its name after the swap) and its foreign keys to tables outside
/// it: those defined on the parent or on a partition itself (a partition's clone of
/// its parent's goes with the parent's).
async fn outgoing_keys(
    client: &Client,
    old: &QualifiedName,
) -> Result<Option<Vec<OutgoingKey>>, CasError> {
    let exists = client
        .query_one(
            "SELECT pg_catalog.to_regclass($1) IS NOT NULL",
            &[&old.to_string()],
        )
        .await
        .map_err(|e| CasError::db("finding the old table", e))?;
    if !exists.get::<_, bool>(0) {
        return Ok(None);
    }
    let rows = client
        .query(
            "WITH tree AS (SELECT relid FROM pg_catalog.pg_partition_tree(pg_catalog.to_regclass($1))) \
             SELECT rn.nspname::pg_catalog.text, r.relname::pg_catalog.text, c.conname::pg_catalog.text, \
                    pn.nspname::pg_catalog.text, p.relname::pg_catalog.text \
               FROM pg_catalog.pg_constraint c \
               JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) c.conrelid \
               JOIN pg_catalog.pg_namespace rn ON rn.oid OPERATOR(pg_catalog.=) r.relnamespace \
               JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) c.confrelid \
               JOIN pg_catalog.pg_namespace pn ON pn.oid OPERATOR(pg_catalog.=) p.relnamespace \
              WHERE c.contype OPERATOR(pg_catalog.=) 'f' \
                AND c.conparentid OPERATOR(pg_catalog.=) 0 \
                AND c.conrelid IN (SELECT relid FROM tree) \
                AND c.confrelid NOT IN (SELECT relid FROM tree) \
              ORDER BY r.relname, c.conname",
            &[&old.to_string()],
        )
        .await
        .map_err(|e| CasError::db("reading the old table's foreign keys", e))?;
    Ok(Some(
        rows.iter()
            .map(|row| OutgoingKey {
                relation: QualifiedName {
                    schema: Some(row.get(0)),
                    name: row.get(1),
                },
                name: row.get(2),
                partner: QualifiedName {
                    schema: Some(row.get(3)),
                    name: row.get(4),
                },
            })
            .collect(),
    ))
}

/// Drops the old tree: its foreign keys to other tables one per transaction, then the
/// tree once none is left. What does not go is reported in `report.left_behind`.
pub(super) async fn drop_old(
    client: &Client,
    plan: &RunPlan,
    old: &QualifiedName,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let budgets = budgets(plan);
    let Some(keys) = outgoing_keys(client, old).await? else {
        return Ok(());
    };
    for key in &keys {
        progress.note(&format!(
            "clean-up: dropping foreign key {} of {} (ACCESS EXCLUSIVE on {} for this transaction only)",
            quote_ident(&key.name),
            key.relation,
            key.partner
        ));
        // INV: LK-8 — one foreign key (one partner) per transaction, under the cutover's
        // lock budget, retried like a step; never the whole tree with its partners.
        step(
            client,
            &budgets,
            key.drop_sql(),
            &key.partner,
            LockMode::AccessExclusive,
            WorkClass::CatalogOnly,
            report,
        )
        .await;
    }
    // Read again: the tree is dropped only with no partner left to lock.
    let remaining = outgoing_keys(client, old).await?.unwrap_or_default();
    if !remaining.is_empty() {
        let why = report
            .cleanup
            .iter()
            .rev()
            .find_map(|s| s.failure.clone())
            .unwrap_or_else(|| "its foreign keys to other tables remain".to_owned());
        for key in &remaining {
            report.left_behind.push(LeftBehind {
                object: format!(
                    "foreign key {} on {} (to {})",
                    quote_ident(&key.name),
                    key.relation,
                    key.partner
                ),
                reason: why.clone(),
                statement: key.drop_sql(),
            });
        }
        report.left_behind.push(LeftBehind {
            object: format!("table {old}"),
            reason: "kept while it still has foreign keys to other tables: dropping it would lock them all at once".to_owned(),
            statement: format!("DROP TABLE {old}"),
        });
        return Ok(());
    }
    progress.note(&format!("clean-up: dropping the old table {old}"));
    let sql = format!("DROP TABLE IF EXISTS {old}");
    if let Some(why) = step(
        client,
        &budgets,
        sql,
        old,
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
        report,
    )
    .await
    {
        report.left_behind.push(LeftBehind {
            object: format!("table {old}"),
            reason: why,
            statement: format!("DROP TABLE {old}"),
        });
    }
    Ok(())
}
