//! Runs one top-level statement on the clone and records what the server did.
//!
//! The statement runs as `BEGIN; <statement>`; then, in the same session and the same
//! transaction, the tracer reads `pg_locks` for its own backend (every relation lock
//! the transaction holds at its end: PostgreSQL releases relation locks only at
//! commit, so this is every lock the statement took, nested code included), the
//! recorders' rows and the relations' file nodes, and commits. Reading in the same
//! session (rather than from a second one) resolves the names of relations the
//! statement created, which no other session can see before the commit. The tracer's
//! own reads lock only system catalogs and its own schema, which are left out.
//!
//! A statement PostgreSQL runs only outside a transaction block (`CONCURRENTLY`,
//! `VACUUM`, a procedure that commits) runs on its own: its DDL and rewrites are
//! recorded, its locks are not (they are gone when it returns).

use std::collections::BTreeMap;

use pgshift_sql::{QualifiedName, Statement};
use tokio_postgres::Client;

use super::error::{server_words, TraceError};
use super::functions::Instrumented;
use super::probes::{self, Stored};
use super::types::{Outcome, StatementTrace, TracedRewrite};

/// SQLSTATEs of "cannot run inside a transaction block" (`25001`) and of a
/// procedure's `COMMIT` in an atomic context (`2D000`).
const OUTSIDE_ONLY: [&str; 2] = ["25001", "2D000"];

/// How a statement is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In a transaction block of its own, locks read before `COMMIT`.
    Transaction,
    /// On its own (autocommit).
    Outside,
}

/// How one statement is recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recording<'a> {
    /// The schema of `pg_stat_statements`, when nested statements are recorded.
    pub nested: Option<&'a str>,
    /// Whether its `executed` log is reported even when empty (an instrumented `DO`
    /// block, a `SELECT`, a `CALL`).
    pub executed: bool,
    /// The clone's functions as the tracer instrumented them.
    pub functions: &'a Instrumented,
}

/// Traces `statement` on `client`. Errors are the tracer's own; the statement's
/// failure is an [`Outcome::Failed`].
pub(crate) async fn trace_statement(
    client: &Client,
    statement: &Statement,
    placement: Placement,
    recording: Recording<'_>,
) -> Result<StatementTrace, TraceError> {
    if placement == Placement::Transaction {
        let traced = in_transaction(client, statement, recording).await?;
        let retry = matches!(
            &traced.outcome,
            Outcome::Failed { sqlstate: Some(code), .. } if OUTSIDE_ONLY.contains(&code.as_str())
        );
        if !retry {
            return Ok(traced);
        }
    }
    outside(client, statement, recording).await
}

async fn in_transaction(
    client: &Client,
    statement: &Statement,
    recording: Recording<'_>,
) -> Result<StatementTrace, TraceError> {
    reset(client, recording.nested).await?;
    client
        .batch_execute("BEGIN")
        .await
        .map_err(super::error::probe)?;
    let before = probes::storage(client).await?;
    if let Err(err) = client.batch_execute(&statement.text).await {
        rollback(client).await?;
        return Ok(failed(statement.index, &err));
    }
    let locks = probes::locks(client, &before).await?;
    let functions = recording.functions.called(client).await?;
    let mut traced = record(client, statement.index, &before, recording).await?;
    traced.in_transaction = true;
    traced.locks = Some(locks);
    traced.functions = Some(functions);
    if let Err(err) = client.batch_execute("COMMIT").await {
        // A deferred constraint or trigger can fail at commit.
        return Ok(failed(statement.index, &err));
    }
    Ok(traced)
}

async fn outside(
    client: &Client,
    statement: &Statement,
    recording: Recording<'_>,
) -> Result<StatementTrace, TraceError> {
    reset(client, recording.nested).await?;
    let before = probes::storage(client).await?;
    if let Err(err) = client.batch_execute(&statement.text).await {
        return Ok(failed(statement.index, &err));
    }
    record(client, statement.index, &before, recording).await
}

/// The recorders' rows, the rewrites and the nested statements after a statement.
async fn record(
    client: &Client,
    index: usize,
    before: &BTreeMap<u32, Stored>,
    recording: Recording<'_>,
) -> Result<StatementTrace, TraceError> {
    let (ddl, reported) = probes::drain(client).await?;
    // Always drained: any statement may call an instrumented function.
    let logged = probes::drain_executed(client).await?;
    let executed = (recording.executed || !logged.is_empty()).then_some(logged);
    let after = probes::storage(client).await?;
    let nested = match recording.nested {
        Some(schema) => Some(probes::nested(client, schema).await?),
        None => None,
    };
    Ok(StatementTrace {
        index,
        outcome: Outcome::Ran,
        in_transaction: false,
        locks: None,
        rewrites: rewrites(&reported, before, &after),
        ddl,
        nested,
        executed,
        functions: None,
    })
}

/// The `table_rewrite` events, merged per table, plus every pre-existing table or
/// materialized view whose file node changed without an event.
fn rewrites(
    reported: &[(QualifiedName, i32)],
    before: &BTreeMap<u32, Stored>,
    after: &BTreeMap<u32, Stored>,
) -> Vec<TracedRewrite> {
    let mut out: Vec<TracedRewrite> = Vec::new();
    for (table, bits) in reported {
        let reasons = probes::rewrite_reasons(*bits);
        match out.iter_mut().find(|r| &r.table == table) {
            Some(existing) => {
                for reason in reasons {
                    if !existing.reasons.contains(&reason) {
                        existing.reasons.push(reason);
                    }
                }
            }
            None => out.push(TracedRewrite {
                table: table.clone(),
                reasons,
            }),
        }
    }
    for (oid, old) in before {
        let Some(new) = after.get(oid) else { continue };
        let stored = matches!(old.relkind.as_str(), "r" | "m");
        if stored
            && old.filenode.is_some()
            && old.filenode != new.filenode
            && !out.iter().any(|r| r.table == new.name)
        {
            out.push(TracedRewrite {
                table: new.name.clone(),
                reasons: vec!["new-storage"],
            });
        }
    }
    out
}

/// Forgets the nested statements counted so far, when they are recorded.
async fn reset(client: &Client, nested: Option<&str>) -> Result<(), TraceError> {
    match nested {
        Some(schema) => probes::reset_nested(client, schema).await,
        None => Ok(()),
    }
}

async fn rollback(client: &Client) -> Result<(), TraceError> {
    client
        .batch_execute("ROLLBACK")
        .await
        .map_err(super::error::probe)
}

fn failed(index: usize, err: &tokio_postgres::Error) -> StatementTrace {
    let (message, sqlstate) = server_words(err);
    StatementTrace::not_run(index, Outcome::Failed { message, sqlstate })
}
