//! Trace: the truth about any statement, by running it where it cannot hurt.
//!
//! [`trace`] starts a throwaway embedded cluster (`pgshift-embedded`) holding the
//! target's schema — `pg_dump --schema-only` of a live database, made with the
//! `pg_dump` of the target's own major version and restored into a server of that
//! major, or, offline, an empty database on which the files are replayed from the
//! first — and runs each top-level statement of the files in order, recording from
//! the server itself ([`StatementTrace`]):
//!
//! * every relation lock the statement's transaction holds, from `pg_locks` before
//!   `COMMIT` (`observe` says how);
//! * every table rewrite, from a `table_rewrite` event trigger (table and reason) and
//!   a file-node comparison (which also sees `VACUUM FULL`, `CLUSTER`, `TRUNCATE`);
//! * the DDL it executed, from `ddl_command_end` (`pg_event_trigger_ddl_commands()`)
//!   and `sql_drop`, nested commands of `DO` blocks and functions included;
//! * the texts of the statements it ran below the top level (`EXECUTE` in a `DO`
//!   block, a function's SQL), from `pg_stat_statements` with `track = all`, preloaded
//!   in the clone when the installation ships it: unordered, with call counts.
//!
//! A live target's tablespaces and roles are made in the clone before its schema is
//! restored, and an extension the clone's installation lacks is named (`globals`).
//!
//! [`compare`] sets a statement's static classification against its trace. The clone
//! is removed when the trace ends, whatever the outcome (`clone`).

pub(crate) mod clone;
mod compare;
pub(crate) mod error;
mod functions;
pub(crate) mod globals;
pub(crate) mod install;
mod observe;
mod probes;
pub(crate) mod schema;
mod types;

pub use compare::{compare, Difference, DifferenceKind};
pub use error::TraceError;
pub use types::{
    CalledFunction, FileTrace, NestedAvailability, NestedStatement, Outcome, SchemaOrigin,
    StatementTrace, TraceRun, TracedDdl, TracedLock, TracedRewrite,
};

use pgshift_sql::{NodeEnum, Statement};

use crate::classify::{classify, Context, TransactionUse};
use crate::connect::{connect, ConnectionSpec, SessionBudgets};
use observe::{Placement, Recording};

/// What the clone's schema is taken from.
#[derive(Clone, Debug)]
pub enum TraceTarget {
    /// A live database (libpq URL or key=value string): its schema, dumped with the
    /// `pg_dump` of its major version, into a server of that major.
    Live {
        /// The connection string, as `pg_dump` and pgshift read it.
        conninfo: String,
    },
    /// No database: the files are replayed from the first, on an empty database of the
    /// server the harness discovers (`PGSHIFT_PG_BIN`, `pg_config`, …).
    Replay,
}

/// One file to trace.
#[derive(Clone, Copy, Debug)]
pub struct TraceInput<'a> {
    /// Its path, as reported.
    pub path: &'a str,
    /// Its statements, in order.
    pub statements: &'a [Statement],
    /// Statements run as another text on the clone, by index: `DO` blocks
    /// instrumented to log what they execute ([`instrumented`]); their
    /// [`StatementTrace::executed`] is recorded.
    pub instrumented: &'a [(usize, String)],
}

/// The instrumented text of a `DO` block in PL/pgSQL whose every executed statement
/// can be logged, or why not.
pub fn instrumented(statement: &Statement) -> Result<String, pgshift_sql::PlpgsqlError> {
    let block = pgshift_sql::DoBlock::of(statement)?;
    if let Some(construct) = block.opaque.first() {
        return Err(pgshift_sql::PlpgsqlError(format!(
            "its {construct} runs statements that cannot be logged"
        )));
    }
    block.instrument(probes::LOG_FUNCTION)
}

/// Traces every statement of `inputs`, in order, on a throwaway clone of `target`.
///
/// Each file runs in a session of its own (a migration runner's connection). The
/// trace stops at the first statement the server rejects: the statements after it
/// are [`Outcome::NotRun`].
pub async fn trace(
    inputs: &[TraceInput<'_>],
    target: &TraceTarget,
) -> Result<TraceRun, TraceError> {
    let (install, dump, schema) = match target {
        TraceTarget::Live { conninfo } => {
            let (version_num, globals) = read_target(conninfo).await?;
            let install = install::for_major(version_num / 10_000)?;
            let dump = schema::dump(&install, conninfo)?;
            let origin = SchemaOrigin::Dump {
                target_version_num: version_num,
                pg_dump: install.bin("pg_dump").display().to_string(),
            };
            (install, Some((globals, dump)), origin)
        }
        TraceTarget::Replay => (install::default_install()?, None, SchemaOrigin::Replay),
    };
    let clone = clone::Clone::start(&install)?;
    if let Some((globals, dump)) = &dump {
        clone.provide(globals).await?;
        clone.restore(dump)?;
    }
    let setup = clone.session().await?;
    let recording = matches!(clone.nested(), NestedAvailability::Recorded);
    let nested_schema = probes::install(&setup, recording).await?;
    drop(setup);
    let mut functions = functions::Instrumented::default();
    let mut files = Vec::new();
    let mut stopped = false;
    for input in inputs {
        let client = clone.session().await?;
        client
            .batch_execute("SET track_functions = 'all'")
            .await
            .map_err(error::probe)?;
        let mut statements = Vec::new();
        for statement in input.statements {
            let traced = if stopped {
                StatementTrace::not_run(statement.index, Outcome::NotRun)
            } else {
                match placement(statement) {
                    None => StatementTrace::not_run(statement.index, Outcome::Skipped),
                    Some(placement) => {
                        let replaced = input
                            .instrumented
                            .iter()
                            .find(|(index, _)| *index == statement.index)
                            .map(|(_, text)| {
                                let mut run_as = statement.clone();
                                run_as.text.clone_from(text);
                                run_as
                            });
                        functions.refresh(&client).await?;
                        let recording = Recording {
                            nested: nested_schema.as_deref(),
                            executed: replaced.is_some() || calls(statement),
                            functions: &functions,
                        };
                        observe::trace_statement(
                            &client,
                            replaced.as_ref().unwrap_or(statement),
                            placement,
                            recording,
                        )
                        .await?
                    }
                }
            };
            stopped |= matches!(traced.outcome, Outcome::Failed { .. });
            statements.push(traced);
        }
        files.push(FileTrace {
            path: input.path.to_owned(),
            statements,
        });
    }
    Ok(TraceRun {
        server_version: clone.server_version(),
        schema,
        nested_statements: clone.nested().clone(),
        files,
    })
}

/// A `SELECT` or `CALL`: what it executed is reported, empty or not.
fn calls(statement: &Statement) -> bool {
    matches!(
        statement.node,
        NodeEnum::SelectStmt(_) | NodeEnum::CallStmt(_)
    )
}

/// How a statement runs on the clone; `None` for transaction control, which is not
/// run (every statement gets a transaction of its own).
fn placement(statement: &Statement) -> Option<Placement> {
    if matches!(statement.node, NodeEnum::TransactionStmt(_)) {
        return None;
    }
    let context = Context {
        facts: None,
        server_version_num: None,
        created_earlier: None,
        in_transaction: false,
        added_columns: None,
    };
    match classify(statement, &context).transaction {
        TransactionUse::Control => None,
        TransactionUse::OutsideOnly => Some(Placement::Outside),
        TransactionUse::Any | TransactionUse::InsideOnly => Some(Placement::Transaction),
    }
}

/// The target's `server_version_num` and the cluster-wide objects its schema names.
pub(crate) async fn read_target(conninfo: &str) -> Result<(u32, globals::Globals), TraceError> {
    let spec = ConnectionSpec::parse(conninfo)?;
    let session = connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await?;
    let version = session.server_version_num();
    if version < 140_000 {
        return Err(TraceError::TargetVersion(format!(
            "server_version_num {version}: pgshift traces PostgreSQL 14 or newer"
        )));
    }
    let globals = globals::Globals::read(session.client()).await?;
    Ok((version, globals))
}
