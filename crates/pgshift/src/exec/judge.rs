//! The verdict on a judged file before anything runs, shared by `plan` and `apply`.
//!
//! [`judge`] schedules the file (the rules of [`mod@super::schedule`], the blocking-work
//! rule LK-6 among them), then checks what only the live database can tell about the
//! units, in the order they would run:
//! - a concurrent index build whose name is held by an invalid index (a failed or
//!   interrupted build) is refused (`invalid-index-exists`, ST-2), never dropped;
//! - a unit routed to copy-and-swap gets the checks a run makes before it records
//!   anything (privileges, a stopped or running run on the table, what the swap cannot
//!   carry), through `copy_and_swap_preflight`.
//!
//! `plan` reports this verdict and `apply` runs only what it lets through, so the two
//! give the same verdict on the same catalog. The checks read the catalog without a
//! relation lock (`to_regclass`, `pg_index`, the run table), so a lock held elsewhere
//! cannot stop them; `apply` then meets that lock within its budget.

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use super::index_guard::{regclass_under, IndexGuard};
use super::schedule::{build, finish, Schedule, ScheduleOptions, Scheduled, StatementRefusal};
use super::unit::Unit;
use crate::cas::{self, CasError};
use crate::catalog::read::access_exclusive_elsewhere;
use crate::refusal::{Refusal, RefusalCause};
use crate::script::Script;
use pgshift_sql::{QualifiedName, Statement};

/// Why the pre-run checks could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// A catalog read of a check failed.
    #[error("checking {what} before running: {message}")]
    Read {
        /// What was being checked.
        what: &'static str,
        /// The server's (or driver's) message.
        message: String,
    },
}

/// Schedules `script` and checks its units against the live database behind `client`
/// (run outside any transaction block); a refusal found clears the items, as in
/// [`super::schedule::schedule`].
pub async fn judge(
    client: &Client,
    script: &Script,
    options: &ScheduleOptions,
    user_search_path: &[String],
) -> Result<Schedule, JudgeError> {
    let mut planned = build(script, options);
    let mut search_path = user_search_path.to_vec();
    let mut found = Vec::new();
    let mut deferred = Vec::new();
    for item in &planned.items {
        match item {
            Scheduled::SearchPath { schemas } => {
                search_path = if schemas.is_empty() {
                    user_search_path.to_vec()
                } else {
                    schemas.clone()
                };
            }
            Scheduled::Unit { unit }
                if unit.copy_and_swap.is_some() && changed_before(script, unit) =>
            {
                // The live catalog is not what this unit will meet: copy-and-swap
                // checks it when the unit starts, after the statements before it.
                deferred.push(unit.statements.first().copied().unwrap_or(0));
            }
            Scheduled::Unit { unit } => {
                if let Some(refusal) =
                    check_unit(client, script, unit, &search_path, options).await?
                {
                    let statement = unit.statements.first().copied().unwrap_or(0);
                    found.push(StatementRefusal {
                        statement,
                        line: script
                            .statements
                            .get(statement)
                            .map_or(0, |s| s.statement.position.line),
                        refusal,
                    });
                }
            }
            Scheduled::Setting { .. } => {}
        }
    }
    planned.refusals.extend(found);
    for statement in deferred {
        let line = script
            .statements
            .get(statement)
            .map_or(0, |s| s.statement.position.line);
        planned.notes.push(format!(
            "line {line}: copy-and-swap's checks of its table run when its unit starts: earlier statements of the file drop, rename or retype what they would read"
        ));
    }
    finish(&mut planned);
    Ok(planned)
}

/// Whether a statement of the file before `unit` drops, renames or retypes a relation,
/// column or constraint that existed before the input: what copy-and-swap's checks
/// read on live (dependent views, columns, keys) is then not what the unit meets.
fn changed_before(script: &Script, unit: &Unit) -> bool {
    use crate::classify::OperationKind as K;
    let Some(&first) = unit.statements.first() else {
        return false;
    };
    script.statements[..first.min(script.statements.len())]
        .iter()
        .any(|item| {
            item.classification.operations.iter().any(|op| {
                matches!(
                    op.kind,
                    K::DropTable
                        | K::DropView
                        | K::DropIndex
                        | K::DropColumn
                        | K::DropConstraint
                        | K::RenameTable
                        | K::RenameColumn
                        | K::RenameConstraint
                        | K::RenameIndex
                        | K::AlterColumnType
                ) && !op
                    .table
                    .as_ref()
                    .is_some_and(|t| item.new_relations.iter().any(|n| n.matches(t)))
            })
        })
}

/// The refusal a unit meets before it runs, if any.
async fn check_unit(
    client: &Client,
    script: &Script,
    unit: &Unit,
    search_path: &[String],
    options: &ScheduleOptions,
) -> Result<Option<Refusal>, JudgeError> {
    if let Some(table) = &unit.copy_and_swap {
        // A copy-and-swap unit runs one statement of the script, as written.
        let Some(statement) = unit
            .statements
            .first()
            .and_then(|&i| script.statements.get(i))
        else {
            return Ok(None);
        };
        return copy_and_swap_preflight(
            client,
            &statement.statement,
            table,
            search_path,
            options.disk_room,
        )
        .await;
    }
    for step in unit.steps.iter().filter(|step| !step.transactional) {
        let guard = IndexGuard::for_step(client, &step.sql, search_path)
            .await
            .map_err(|failure| JudgeError::Read {
                what: "the name of a concurrent index build",
                message: failure.describe(),
            })?;
        let Some(guard) = guard else { continue };
        let existing = guard
            .find(client)
            .await
            .map_err(|failure| JudgeError::Read {
                what: "an index in the way of a concurrent build",
                message: failure.describe(),
            })?;
        // INV: ST-2 — an invalid index already there is reported before anything runs.
        if let Some(existing) = existing.filter(|found| !found.valid) {
            return Ok(Some(Refusal::new(
                RefusalCause::InvalidIndexExists,
                guard.in_the_way(existing.oid),
            )));
        }
    }
    Ok(None)
}

/// The copy-and-swap checks of a run on `table` that come before it records
/// anything ([`cas::preflight_read_only`]): the role's privileges, an active (stopped
/// or running) run on the table, what the swap cannot carry, row security, ownership
/// of what the swap alters, the key's equality operator and free disk.
///
/// This is the one place where `plan` and `apply` ask copy-and-swap whether a run
/// would start: checks added to copy-and-swap's own preflight belong here too.
async fn copy_and_swap_preflight(
    client: &Client,
    statement: &Statement,
    table: &QualifiedName,
    search_path: &[String],
    disk_room: Option<u64>,
) -> Result<Option<Refusal>, JudgeError> {
    let Some(oid) = resolve(client, table, search_path).await? else {
        // A table created earlier in the same input: nothing to check yet.
        return Ok(None);
    };
    let read_source = !locked_elsewhere(client, oid).await?;
    let mut checked =
        cas::preflight_read_only(client, oid, statement, read_source, disk_room).await;
    if matches!(&checked, Err(CasError::Database { sqlstate: Some(code), .. })
        if code == SqlState::LOCK_NOT_AVAILABLE.code())
    {
        // Locked in the meantime: the run itself meets that lock within its budget.
        checked = cas::preflight_read_only(client, oid, statement, false, disk_room).await;
    }
    match checked {
        Ok(()) => Ok(None),
        Err(CasError::Refused(refusal)) => Ok(Some(refusal)),
        Err(error) => Err(JudgeError::Read {
            what: "what copy-and-swap checks before a run",
            message: error.to_string(),
        }),
    }
}

/// Whether another session holds or awaits ACCESS EXCLUSIVE on the table or a member
/// (partition, index, TOAST table): reading the source's facts would then wait, so that
/// part of the preflight is left to the run itself (which meets the lock within its
/// budget). The catalog read's own probe, so the two agree on what "locked" means.
async fn locked_elsewhere(client: &Client, oid: u32) -> Result<bool, JudgeError> {
    access_exclusive_elsewhere(client, oid)
        .await
        .map_err(|error| JudgeError::Read {
            what: "locks held on a copy-and-swap table",
            message: error.to_string(),
        })
}

/// The OID of the table a name denotes with `search_path`, without locking it.
async fn resolve(
    client: &Client,
    table: &QualifiedName,
    search_path: &[String],
) -> Result<Option<u32>, JudgeError> {
    regclass_under(client, &table.to_string(), search_path)
        .await
        .map_err(|error| JudgeError::Read {
            what: "the table a copy-and-swap unit rewrites",
            message: error.to_string(),
        })
}
