//! The swap, in one transaction under one short, bounded ACCESS EXCLUSIVE window:
//! lock source and shadow, drain the change log, prove the capture (or fence) intact
//! by OID and the source's shape unchanged, then exchange names — tables, partitions,
//! indexes — and carry over what must follow the name: triggers with their enable
//! states, foreign keys pointing at the table, dependent views, sequences, publication
//! membership, replica identity. The catalog is read back before `COMMIT`. A lost
//! connection at `COMMIT` is settled by reading which OID holds the name (INV: ST-3).
//!
//! Under the lock the swap makes three round trips when the table has no dependent
//! view: `LOCK TABLE` with every read behind it (`locked`); the last batch of the
//! change log, every statement of the exchange (`renames`, `carry`) and the read
//! back (`read_back`) sent together; `COMMIT`. A view adds its own few
//! (`views`).

mod carry;
mod locked;
mod read_back;
mod renames;
mod view_ties;
mod views;

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_postgres::Client;

use super::applier::Applier;
use super::error::CasError;
use super::plan::RunPlan;
use super::session;
use super::statements::Statements;
use crate::exec::jitter::Jitter;
use crate::refusal::{Refusal, RefusalCause};
use locked::{LockedReads, NameReads, SwapQueries};
use pgshift_sql::quote_ident;

/// What the swap did.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct SwapReport {
    /// Attempts to take the lock.
    pub attempts: u32,
    /// Change-log entries applied under the lock.
    pub drained: i64,
    /// How long ACCESS EXCLUSIVE was held: from the granted `LOCK TABLE` to the end
    /// of `COMMIT`, in microseconds.
    pub lock_held_us: u64,
    /// Foreign keys re-pointed (validated after the swap).
    pub foreign_keys: Vec<String>,
    /// Views recreated on the new table.
    pub views: Vec<String>,
}

/// Why one attempt did not swap.
enum AttemptEnd {
    /// Swapped.
    Swapped(SwapReport),
    /// The lock was not granted in time: try again.
    LockTimeout,
    /// Too many changes were waiting: catch up first.
    Backlog,
}

async fn exec(client: &Client, what: &str, sql: &str) -> Result<(), CasError> {
    client
        .batch_execute(sql)
        .await
        .map_err(|e| CasError::db(what.to_owned(), e))
}

/// Runs `statements` in order in one round trip (the swap's lock is held meanwhile:
/// every round trip saved shortens it). They run inside the swap's transaction, so
/// one failing undoes nothing less than the whole swap.
async fn exec_all(client: &Client, what: &str, statements: &[String]) -> Result<(), CasError> {
    if statements.is_empty() {
        return Ok(());
    }
    exec(client, what, &statements.join(";\n")).await
}

/// Swaps, retrying the lock within the plan's budget. `catch_up` runs between
/// attempts when the backlog was too large.
pub async fn swap<F, Fut>(
    client: &Client,
    plan: &RunPlan,
    mut catch_up: F,
) -> Result<SwapReport, CasError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), CasError>>,
{
    let budgets = plan.options.cutover;
    let mut jitter = Jitter::from_clock();
    let applier = Applier::new(Statements::new(plan));
    let queries = SwapQueries::prepare(client, &applier).await?;
    queries.plan(client, plan).await?;
    for attempt in 1..=budgets.attempts {
        // INV: OC-3 — a safe point: between attempts, never inside one (it holds the lock).
        CasError::check_interrupt()?;
        match attempt_swap(client, plan, &queries, attempt).await? {
            AttemptEnd::Swapped(report) => return Ok(report),
            AttemptEnd::LockTimeout => {}
            AttemptEnd::Backlog => catch_up().await?,
        }
        if attempt < budgets.attempts {
            let base = budgets.backoff_ms(attempt);
            tokio::time::sleep(Duration::from_millis(
                (base as f64 * jitter.next_unit()) as u64,
            ))
            .await;
        }
    }
    Err(CasError::CutoverRefused(Refusal::new(
        RefusalCause::LockBudgetExhausted,
        format!(
            "ACCESS EXCLUSIVE on {} was not granted within {} ms on any of {} attempts; the source is untouched",
            plan.source.table.name, budgets.lock_timeout_ms, budgets.attempts
        ),
    )))
}

async fn attempt_swap(
    client: &Client,
    plan: &RunPlan,
    queries: &SwapQueries,
    attempt: u32,
) -> Result<AttemptEnd, CasError> {
    // The shadow first, waited for as long as it takes an autovacuum worker on it to be
    // cancelled (past `deadlock_timeout`): nobody but the engine uses the shadow, so
    // that wait holds up no user. Then the source, under the cutover's budget.
    let begin = format!(
        "BEGIN; SET LOCAL statement_timeout = 600000; {}; {}",
        locked::GENERIC_PLANS,
        session::lock_shadow(&plan.shadow, plan.options.cutover.lock_timeout_ms)
    );
    if let Err(e) = exec(client, "locking the shadow for the swap", &begin).await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(e);
    }
    // INV: LK-5 — ACCESS EXCLUSIVE is waited for at most `lock_timeout_ms` per attempt.
    let lock = format!(
        "LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
        plan.source.table.name
    );
    // The reads go out behind the `LOCK TABLE`, in the same round trip: the server
    // runs them as soon as it grants the lock, with no turn of the engine's in
    // between (each such turn lengthens the hold, the more so when the machine's
    // cores are busy). When the lock is not granted they fail unread, in an aborted
    // transaction, and the lock's own error is the one that counts.
    let locked = async {
        let result = client.batch_execute(&lock).await;
        (result, Instant::now())
    };
    let ((locked, held_since), reads) =
        tokio::join!(biased; locked, queries.read(client, plan, locked::DRAIN_LIMIT));
    if let Err(e) = locked {
        let _ = client.batch_execute("ROLLBACK").await;
        if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
            return Ok(AttemptEnd::LockTimeout);
        }
        return Err(CasError::db("locking source and shadow", e));
    }
    match swap_under_lock(client, plan, queries, reads).await {
        Ok(Some(mut report)) => {
            report.attempts = attempt;
            let commit = client.batch_execute("COMMIT").await;
            report.lock_held_us =
                u64::try_from(held_since.elapsed().as_micros()).unwrap_or(u64::MAX);
            match commit {
                Ok(()) => Ok(AttemptEnd::Swapped(report)),
                Err(e) if e.is_closed() => Err(CasError::Database {
                    what: "committing the swap (the outcome is read from the catalog on resume)"
                        .to_owned(),
                    message: e.to_string(),
                    sqlstate: None,
                }),
                Err(e) => Err(CasError::db("committing the swap", e)),
            }
        }
        Ok(None) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Ok(AttemptEnd::Backlog)
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

/// The exchange's statements, in order: sequences (they name the shadow by its own
/// name), renames, triggers (their definitions name the table), foreign keys, then
/// what is set by the final names. Also the foreign keys re-pointed.
fn exchange(plan: &RunPlan, names: &NameReads) -> Result<(Vec<String>, Vec<String>), CasError> {
    let mut sql = carry::sequences(plan);
    match names {
        NameReads::Complete {
            source_indexes,
            holders,
            children,
        } => sql.extend(renames::complete(plan, source_indexes, holders, children)?),
        NameReads::Tree { source, shadow } => sql.extend(renames::tree(plan, source, shadow)),
    }
    sql.extend(carry::triggers(plan));
    let (foreign_keys, re_pointed) = carry::incoming_foreign_keys(plan);
    sql.extend(foreign_keys);
    if plan.source.carry.complete {
        // Comments, clustered and replica-identity indexes, publication membership,
        // by the final names.
        sql.extend(plan.source.carry.after_swap.iter().cloned());
    } else {
        sql.extend(carry::publications_and_identity(plan));
    }
    Ok((sql, re_pointed))
}

const EXCHANGING: &str =
    "exchanging names and carrying sequences, triggers, foreign keys and settings to the new table";

/// The exchange; a name it gives that another relation holds (42P07, 42710) is a
/// refusal that names it, the transaction rolled back by the caller.
async fn exchange_all(client: &Client, sql: &[String]) -> Result<(), CasError> {
    match exec_all(client, EXCHANGING, sql).await {
        Err(CasError::Database {
            message,
            sqlstate: Some(code),
            ..
        }) if code == "42P07" || code == "42710" => Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::SwapNameTaken,
            format!(
                "a name the swap gives is taken: {message} ({code}); the swap was rolled back and the source stays in place"
            ),
        ))),
        other => other,
    }
}

/// Everything under the lock, from what was read when it was granted. `Ok(None)`:
/// the backlog is over the bound.
async fn swap_under_lock(
    client: &Client,
    plan: &RunPlan,
    queries: &SwapQueries,
    reads: Result<LockedReads, CasError>,
) -> Result<Option<SwapReport>, CasError> {
    let mut reads = reads?;
    if reads.backlog > plan.options.cutover.max_drain {
        return Ok(None);
    }
    // INV: CO-4 — the swap happens only with the capture (or fence) proven intact.
    if !reads.breaches.is_empty() {
        let problems: Vec<String> = reads
            .breaches
            .iter()
            .map(|b| format!("relation {}: {}", b.relation, b.problem))
            .collect();
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::CutoverUnfenced,
            format!(
                "writes could have bypassed the run: {}; the source stays in place",
                problems.join("; ")
            ),
        )));
    }
    // INV: CO-14 — only a shadow whose every index is valid and ready is swapped in.
    if !reads.invalid_shadow_indexes.is_empty() {
        let names: Vec<String> = reads
            .invalid_shadow_indexes
            .iter()
            .map(
                |index| match plan.indexes.iter().find(|i| i.temp_name == index.name) {
                    Some(planned) => {
                        format!("{index} (to become {})", quote_ident(&planned.source_name))
                    }
                    None => index.to_string(),
                },
            )
            .collect();
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::ShadowIndexInvalid,
            format!(
                "under the swap's lock, the shadow's index{} {} {} not valid and ready; the source stays in place",
                if names.len() == 1 { "" } else { "es" },
                names.join(", "),
                if names.len() == 1 { "is" } else { "are" }
            ),
        )));
    }
    if reads.fingerprint != plan.source.fingerprint {
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::SchemaChanged,
            format!(
                "the shape of {} changed since the run started (columns, indexes, constraints, triggers or partitions); abort the run and start again",
                plan.source.table.name
            ),
        )));
    }
    let (sql, foreign_keys) = exchange(plan, &reads.names)?;
    // Nothing is added to the log under the lock: a read that was not full was the
    // last, and is applied with the exchange below.
    let mut drained = 0;
    while reads.drained.full() {
        drained += queries.drain.apply(client, &reads.drained).await?;
        reads.drained = queries
            .drain
            .read(client, reads.drained.last(), locked::DRAIN_LIMIT)
            .await?;
    }
    let read_back_params = read_back::params(plan);
    let read_back = || async {
        let [schema, name, old] = &read_back_params;
        client
            .query_one(&queries.read_back, &[schema, name, old])
            .await
            .map_err(|e| CasError::db("reading the swap back", e))
    };
    // `biased`: sent in this order, and the server runs them in it.
    let (last, view_names, row) = if reads.views.is_empty() {
        let (last, (), row) = tokio::try_join!(
            biased;
            queries.drain.apply(client, &reads.drained),
            exchange_all(client, &sql),
            read_back(),
        )?;
        (last, Vec::new(), row)
    } else {
        let (last, ()) = tokio::try_join!(
            biased;
            queries.drain.apply(client, &reads.drained),
            exchange_all(client, &sql),
        )?;
        let view_names = views::recreate(client, &reads.views).await?;
        (last, view_names, read_back().await?)
    };
    read_back::check(plan, &row)?;
    Ok(Some(SwapReport {
        attempts: 0,
        drained: drained + last,
        lock_held_us: 0,
        foreign_keys,
        views: view_names,
    }))
}

/// After a lost connection at `COMMIT`: whether the swap committed, read from which
/// OID holds the name (never guessed).
pub async fn settled(client: &Client, plan: &RunPlan) -> Result<bool, CasError> {
    let schema = plan.source.table.name.schema.clone().unwrap_or_default();
    let row = client
        .query_opt(
            "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            &[&schema, &plan.source.table.name.name],
        )
        .await
        .map_err(|e| CasError::db("reading which table holds the name", e))?;
    // INV: ST-3 — the name's OID says whether the swap committed.
    Ok(row.is_some_and(|r| r.get::<_, u32>(0) != plan.source.table.oid))
}
