//! The indexing phase: the shadow's primary key, then its other indexes and
//! constraints, each built once, then its planner statistics.
use crate::cas::throttle::{Pace, Pacer, Throttle};
use std::sync::atomic::Ordering;

use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::build_pool::{costliest_first, pooled, Pool};
use super::CasProgress;
use crate::cas::copier::CopyState;
use crate::cas::error::CasError;
use crate::cas::index_watch::{Builder, Watcher};
use crate::cas::plan::RunPlan;
use crate::cas::session::{self, ShadowLock};
use crate::connect::ConnectionSpec;
use pgshift_sql::{quote_ident, QualifiedName};

/// `ddl` in one transaction that first takes the shadow tree for itself
/// ([`session::lock_shadow`]: autovacuum on it is waited out), then runs `ddl` under the
/// session's own lock budget — so that a lock `ddl` needs on another table (a foreign
/// key's referenced table) is still waited for briefly. Run it through
/// [`session::settle`].
pub(super) fn on_shadow(plan: &RunPlan, ddl: &str) -> String {
    on_shadow_at(plan, ddl, Pace::Open, ShadowLock::Exclusive)
}

/// [`on_shadow`] for work the throttle admitted at `pace`: while the work is slowed an
/// index is built by its session alone (`max_parallel_maintenance_workers = 0`). A
/// build cannot be paused once started, and a parallel one takes every core of a
/// small machine for its length, the writers' share included. `lock`: the shadow's
/// mode ([`ShadowLock::Share`] beside verification, so that its reads go on).
pub(super) fn on_shadow_at(plan: &RunPlan, ddl: &str, pace: Pace, lock: ShadowLock) -> String {
    format!(
        "BEGIN; {}; {}; {ddl}; COMMIT",
        session::lock_shadow_in(&plan.shadow, session::RUN_SESSION.lock_timeout_ms, lock),
        build_settings(pace)
    )
}

/// Whether verification can run beside this plan's index builds once the key is
/// built: there are builds to run beside, no constraint is added after the copy
/// (adding one locks reads out), and every other index is a plain `CREATE [UNIQUE]
/// INDEX`, which takes SHARE and lets reads go on (an index backing a constraint is
/// added with `ALTER TABLE`).
pub(super) fn verifies_beside_builds(plan: &RunPlan) -> bool {
    !plan.indexes.is_empty()
        && plan.constraints.is_empty()
        && plan
            .indexes
            .iter()
            .all(|i| !i.constraint && i.sql.starts_with("CREATE "))
}

/// The shadow's lock for a build: SHARE where other work goes on beside it
/// (verification's reads, or other builds), ACCESS EXCLUSIVE otherwise (INV: CO-11).
fn shadow_lock(shared: bool) -> ShadowLock {
    if shared {
        ShadowLock::Share
    } else {
        ShadowLock::Exclusive
    }
}

/// The applier held for an index build: the gate, and the flag verification reads.
pub(super) struct HeldForBuild<'a> {
    _gate: tokio::sync::MutexGuard<'a, ()>,
    flag: &'a std::sync::atomic::AtomicBool,
}

impl Drop for HeldForBuild<'_> {
    fn drop(&mut self) {
        self.flag.store(false, Ordering::Release);
    }
}

/// Holds the applier (when there is one) for a build: it would wait for the build's
/// lock on the shadow, within its `lock_timeout`.
pub(super) async fn hold_applier(applier: Option<&ApplierTask>) -> Option<HeldForBuild<'_>> {
    let task = applier?;
    let gate = task.gate.lock().await;
    task.held_for_build.store(true, Ordering::Release);
    Some(HeldForBuild {
        _gate: gate,
        flag: &task.held_for_build,
    })
}

/// The settings of a build admitted at `pace`.
fn build_settings(pace: Pace) -> String {
    const MEMORY: &str = "SET LOCAL maintenance_work_mem = '256MB'";
    match pace {
        Pace::Open => MEMORY.to_owned(),
        Pace::Slow { .. } | Pace::Paused => {
            format!("{MEMORY}; SET LOCAL max_parallel_maintenance_workers = 0")
        }
    }
}

/// Whether the shadow has its primary key, valid, under the plan's temporary name (a
/// run recorded before the key was built after the copy always has it).
pub(super) async fn key_exists(client: &Client, plan: &RunPlan) -> Result<bool, CasError> {
    if plan.key_build.is_none() {
        return Ok(true);
    }
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
              WHERE i.indrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) AND ic.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND i.indisprimary AND i.indisvalid AND i.indisready)",
            &[&plan.shadow.to_string(), &plan.shadow_key_name],
        )
        .await
        .map_err(|e| CasError::db("looking for the shadow's primary key", e))?;
    Ok(row.get(0))
}

/// Builds the shadow's primary key unless it has it (idempotent: a build is one
/// transaction, so a stopped one left nothing; an index of its name that is not a
/// valid key is removed first). Rows the copy inserted twice for one key — which the
/// copy never does — fail the build with a unique violation, and the run stops with
/// nothing swapped (INV: CO-5).
pub(super) async fn ensure_key(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    ensure_key_watched(client, plan, None, Pace::Open).await
}

/// [`ensure_key`], with the build run on `builder` (whose client is `client`) and
/// reported on `watcher` (when there are these).
async fn ensure_key_watched(
    client: &Client,
    plan: &RunPlan,
    watched: Option<(&mut Watcher<'_>, &Builder)>,
    pace: Pace,
) -> Result<(), CasError> {
    let Some(build) = &plan.key_build else {
        return Ok(());
    };
    if key_exists(client, plan).await? {
        if let Some((watcher, _)) = watched {
            watcher.skip();
        }
        return Ok(());
    }
    let index = QualifiedName {
        schema: plan.shadow.schema.clone(),
        name: plan.shadow_key_name.clone(),
    };
    let sql = on_shadow_at(
        plan,
        &format!(
            "ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}; DROP INDEX IF EXISTS {index}; {build}",
            plan.shadow,
            quote_ident(&plan.shadow_key_name)
        ),
        pace,
        ShadowLock::Exclusive,
    );
    let result = match watched {
        Some((watcher, builder)) => watcher.run(builder, "primary key", &sql).await,
        None => client.batch_execute(&sql).await,
    };
    session::settle(client, "building the shadow's primary key", result).await
}

/// Whether the shadow's schema has a relation named `name` (an index an earlier
/// process built).
async fn shadow_has(client: &Client, plan: &RunPlan, name: &str) -> Result<bool, CasError> {
    let schema = plan.shadow.schema.clone().unwrap_or_default();
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text)",
            &[&schema, &name],
        )
        .await
        .map_err(|e| CasError::db("looking for a shadow index", e))?;
    Ok(row.get(0))
}

/// Builds the shadow's primary key (first: the applier waits for it, and foreign keys
/// to the table itself reference it), then its other indexes and constraints (nobody
/// else uses the shadow, so plain builds), skipping any already built by an earlier
/// process. The plain indexes of the table are built up to the run's workers at once
/// while the throttle leaves the work open ([`super::build_pool`]), the others one at
/// a time after them. The applier is paused during builds (it would wait for a
/// build's lock on the shadow, within its `lock_timeout`) and catches up between them.
///
/// With `readable` (the plan [`verifies_beside_builds`]), `readable` is set once the
/// key is built, and the other indexes are built one at a time in SHARE mode, so that
/// verification reads the shadow beside them.
#[allow(clippy::too_many_arguments)]
pub(super) async fn build_indexes(
    spec: &ConnectionSpec,
    monitor: &Client,
    plan: &RunPlan,
    state: &CopyState,
    applier: Option<&ApplierTask>,
    throttle: &Throttle,
    readable: Option<&tokio::sync::watch::Sender<bool>>,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let application = plan.names().index_application();
    let mut builders = vec![Builder::open(spec, &application).await?];
    let client = builders[0].client();
    // The key first, alone, at the throttle's word (INV: OC-5).
    let pace = Pacer::new(throttle.clone(), 0);
    let admitted = pace.admit().await;
    let builds = usize::from(plan.key_build.is_some()) + plan.indexes.len();
    let mut watcher = Watcher::new(monitor, progress, builds);
    ensure_key_watched(client, plan, Some((&mut watcher, &builders[0])), admitted).await?;
    state.key_ready.store(true, Ordering::Release);
    let pause = || hold_applier(applier);
    if let Some(readable) = readable {
        // Verification reads by the key's index from here on, statistics or not (each
        // chunk turns sequential scans off: see `verify::check_chunk`); the shadow is
        // analyzed once every index is built, beside it.
        readable.send_replace(true);
    }
    let mut todo = Vec::new();
    for index in &plan.indexes {
        if shadow_has(client, plan, &index.temp_name).await? {
            watcher.skip();
        } else {
            todo.push(index);
        }
    }
    let (together, alone): (Vec<_>, Vec<_>) = todo.into_iter().partition(|i| pooled(i));
    let together = costliest_first(together);
    // Several at once unless verification runs beside them: it takes the cores a
    // single build leaves idle (`beside.rs`).
    let at_once = if readable.is_some() {
        1
    } else {
        plan.options.workers.clamp(1, together.len().max(1))
    };
    while builders.len() < at_once {
        builders.push(Builder::open(spec, &application).await?);
    }
    // INV: CO-11 — beside verification, only what lets its reads go on; builds at
    // once share the shadow in SHARE mode.
    let lock = shadow_lock(readable.is_some() || at_once > 1);
    let pool = Pool {
        builders: &builders,
        monitor,
        plan,
        pacer: &pace,
        lock,
    };
    pool.build(&together, &mut watcher, applier).await?;
    // The others one at a time, on the first session: a pool of one.
    let one = Pool {
        builders: &builders[..1],
        lock: shadow_lock(readable.is_some()),
        ..pool
    };
    one.build(&alone, &mut watcher, applier).await?;
    let client = builders[0].client();
    for constraint in &plan.constraints {
        let exists = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint con WHERE con.conrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) \
                  AND con.conname OPERATOR(pg_catalog.=) $2::pg_catalog.text)",
                &[&plan.shadow.to_string(), &constraint.name],
            )
            .await
            .map_err(|e| CasError::db("looking for a shadow constraint", e))?;
        if exists.get::<_, bool>(0) {
            continue;
        }
        pace.admit().await;
        let _paused = pause().await;
        let add = format!(
            "ALTER TABLE {} ADD CONSTRAINT {} {}{}",
            plan.shadow,
            quote_ident(&constraint.name),
            constraint.definition,
            if constraint.validated && plan.source.partition_key.is_none() {
                " NOT VALID"
            } else if constraint.validated {
                ""
            } else {
                " NOT VALID"
            }
        );
        let result = client.batch_execute(&on_shadow(plan, &add)).await;
        session::settle(
            client,
            &format!("adding constraint {} to the shadow", constraint.name),
            result,
        )
        .await?;
        if constraint.validated && plan.source.partition_key.is_none() {
            let validate = format!(
                "ALTER TABLE {} VALIDATE CONSTRAINT {}",
                plan.shadow,
                quote_ident(&constraint.name)
            );
            let result = client.batch_execute(&on_shadow(plan, &validate)).await;
            session::settle(
                client,
                &format!("validating constraint {} on the shadow", constraint.name),
                result,
            )
            .await?;
        }
    }
    Ok(())
}

/// Gives the shadow (and its partitions) planner statistics, once its indexes are
/// built: the table the swap puts in the source's place has the statistics a query
/// planned right after needs, rather than waiting for autovacuum. Run on a session of
/// its own at the throttle's word, beside verification (whose chunks read by the
/// key's index, statistics or not: see `verify::check_chunk`) and the applier: it
/// takes the shadow in SHARE UPDATE EXCLUSIVE mode, what `ANALYZE` takes, which lets
/// their reads and writes go on. A sample of every partition on one core, it left the
/// other idle for seconds when it ran alone (`docs/COPY-AND-SWAP.md`, "Index builds
/// at once"). Run again by a process that resumes the phase: it is idempotent.
pub(super) async fn analyze_shadow(
    spec: &ConnectionSpec,
    plan: &RunPlan,
    throttle: &Throttle,
) -> Result<(), CasError> {
    let session = session::open(spec, &plan.names().index_application()).await?;
    let client = session.client();
    let admitted = Pacer::new(throttle.clone(), 0).admit().await;
    let analyze = format!("ANALYZE {}", plan.shadow);
    let sql = on_shadow_at(plan, &analyze, admitted, ShadowLock::Analyze);
    let result = client.batch_execute(&sql).await;
    session::settle(client, "analyzing the shadow", result).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_admitted_while_slowed_has_no_parallel_workers() {
        assert!(!build_settings(Pace::Open).contains("max_parallel_maintenance_workers"));
        let slowed = build_settings(Pace::Slow {
            pause_ms: 0,
            workers: 2,
        });
        assert!(
            slowed.ends_with("SET LOCAL max_parallel_maintenance_workers = 0"),
            "{slowed}"
        );
        assert!(slowed.starts_with(&build_settings(Pace::Open)), "{slowed}");
    }
}
