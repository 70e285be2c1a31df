//! The rules that decide, from a statement's trace on the clone and live facts, how a
//! procedural statement runs (`docs/EXECUTION.md`, "Procedural code"). Pure: the
//! trace, the block's own queries and the live sizes come in as data.

use pgshift_sql::{parse, QualifiedName};

use crate::lock::LockMode;
use crate::refusal::{Refusal, RefusalCause};
use crate::trace::{Outcome, StatementTrace, TracedLock};

use super::guard::Guard;

/// How a procedural statement runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// As written, natively, under the usual budgets: it reads, or changes only
    /// catalog-only things under weak or brief locks, or the tables it locks strongly
    /// or rewrites are empty in the live database.
    Native,
    /// As the statements it executed on the clone, each by its own route.
    Expanded(Vec<String>),
    /// As written, because the operator named it (`--allow-procedural`).
    Accepted,
    /// First read-only on live, as its guard's copy (PC-5): done when that changes
    /// nothing, refused with `refusal`'s cause otherwise.
    Guarded {
        /// The instrumented copy and its marker.
        guard: Guard,
        /// What PC-3 alone would refuse it with.
        refusal: Refusal,
    },
    /// Not at all.
    Refused(Refusal),
}

/// What the rules look at besides the trace.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The user tables the block's control flow reads data from (its conditions,
    /// queries and the expressions of its `EXECUTE`s), found in its body.
    pub body_reads: Vec<QualifiedName>,
    /// Why the block's executed statements were not logged, when they were not
    /// (`None` for a logged `DO` block).
    pub not_logged: Option<String>,
    /// Tables (of those it locks strongly or rewrites) that hold rows in the live
    /// database.
    pub populated: Vec<QualifiedName>,
    /// Of the tables the block's control flow reads, those that hold rows in the live
    /// database (its path there may differ from the clone's).
    pub reads_populated: Vec<QualifiedName>,
    /// The guard's copy of the block (PC-5), when one could be made.
    pub guard: Option<Guard>,
    /// The statement that failed on the clone before this one, as `file:line: error`,
    /// when one did (this one was then not traced).
    pub earlier_failure: Option<String>,
}

/// Pre-existing user tables the trace locked in a mode that blocks writes, or
/// rewrote: what the live sizes are read for.
pub fn heavy_tables(trace: &StatementTrace) -> Vec<QualifiedName> {
    let mut out: Vec<QualifiedName> = Vec::new();
    let locked = trace
        .locks
        .iter()
        .flatten()
        .filter(|lock| user_table(lock) && lock.mode.blocks_writes())
        .map(|lock| lock.relation.clone());
    let rewritten = trace.rewrites.iter().map(|r| r.table.clone());
    for name in locked.chain(rewritten) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

fn user_table(lock: &TracedLock) -> bool {
    !lock.created
        && matches!(
            lock.kind,
            "table" | "partitioned-table" | "materialized-view"
        )
}

/// The user tables the statement read data from, as the trace shows it: tables held
/// only in ACCESS SHARE or ROW SHARE (a query's modes), which no DDL of it names.
fn traced_reads(trace: &StatementTrace) -> Vec<QualifiedName> {
    trace
        .locks
        .iter()
        .flatten()
        .filter(|lock| user_table(lock) && lock.mode <= LockMode::RowShare)
        .map(|lock| lock.relation.clone())
        .collect()
}

/// The relations the queries of a block read, leaving out the system catalogs
/// (`pg_catalog`, `information_schema`, unqualified `pg_*` names).
pub fn user_relations_read(queries: &[String]) -> Result<Vec<QualifiedName>, String> {
    let mut out: Vec<QualifiedName> = Vec::new();
    for query in queries {
        let statements = parse(query).map_err(|err| format!("{query}: {err}"))?;
        for statement in &statements {
            for relation in crate::classify::dml::relations_of(&statement.node) {
                let catalog = match relation.schema.as_deref() {
                    Some(schema) => matches!(schema, "pg_catalog" | "information_schema"),
                    None => relation.name.starts_with("pg_"),
                };
                if !catalog && !out.contains(&relation) {
                    out.push(relation);
                }
            }
        }
    }
    Ok(out)
}

/// Decides how the statement runs. `accepted`: the operator named it.
pub fn decide(trace: &StatementTrace, facts: &Facts, accepted: bool) -> Decision {
    if accepted {
        return Decision::Accepted;
    }
    match &trace.outcome {
        Outcome::Ran => {}
        Outcome::Failed { message, .. } => {
            return Decision::Refused(Refusal::new(
                RefusalCause::ProceduralFailedOnClone,
                format!(
                    "on a throwaway clone of the target's schema this statement failed: {message}; it would fail (or do something else) on the target too"
                ),
            ))
        }
        Outcome::Skipped | Outcome::NotRun => {
            let which = match &facts.earlier_failure {
                Some(failure) => format!("an earlier statement failed there ({failure})"),
                None => "an earlier statement failed there".to_owned(),
            };
            return Decision::Refused(Refusal::new(
                RefusalCause::ProceduralFailedOnClone,
                format!(
                    "this statement was not traced on the throwaway clone of the target's schema: {which}; fix or run that one first"
                ),
            ));
        }
    }
    let heavy = heavy_tables(trace);
    // INV: PC-5 — a block whose control flow reads rows here may take a path the clone did not.
    if heavy.is_empty() && !facts.reads_populated.is_empty() && facts.not_logged.is_none() {
        if let Some(guard) = &facts.guard {
            let refusal = Refusal::new(
                RefusalCause::ProceduralBlocking,
                format!(
                    "traced on a clone, this procedural code executed nothing that blocks writes, but its control flow reads {} which hold rows here, so on the target it may execute statements it did not execute on the clone (whose tables are empty)",
                    names(&facts.reads_populated).join(", ")
                ),
            );
            return Decision::Guarded {
                guard: Guard {
                    otherwise: refusal.message.clone(),
                    ..guard.clone()
                },
                refusal,
            };
        }
    }
    // INV: PC-1 — weak locks only, or brief catalog-only DDL: the usual budgets bound it.
    if heavy.is_empty() || catalog_only(trace) {
        return Decision::Native;
    }
    let mut reads = facts.body_reads.clone();
    for read in traced_reads(trace) {
        if !reads.contains(&read) {
            reads.push(read);
        }
    }
    let executed = trace
        .executed
        .as_ref()
        .filter(|_| facts.not_logged.is_none());
    let data_statement = executed.and_then(|executed| {
        executed
            .iter()
            .find(|sql| is_data(sql))
            .map(|sql| sql.to_owned())
    });
    let expandable = match (executed, &data_statement) {
        (Some(executed), None) if reads.is_empty() && !executed.is_empty() => {
            unlogged_ddl(trace, executed)
        }
        _ => Some("not expandable".to_owned()),
    };
    // INV: PC-2 — catalog-only control flow and logged DDL: expanded, each statement by its route.
    if let (None, Some(executed)) = (&expandable, executed) {
        return match super::combine::combine(executed) {
            Ok(statements) => Decision::Expanded(statements),
            Err(why) => Decision::Refused(blocking_refusal(trace, facts, &why)),
        };
    }
    // INV: PC-3 — data-dependent or not expandable: natively only on empty tables.
    if facts.populated.is_empty() {
        return Decision::Native;
    }
    let why = if let Some(sql) = data_statement {
        format!("its control flow depends on table data (it ran `{sql}`)")
    } else if !reads.is_empty() {
        format!(
            "its control flow reads table data ({})",
            names(&reads).join(", ")
        )
    } else if let Some(why) = &facts.not_logged {
        format!("pgshift cannot expand it: {why}")
    } else {
        expandable.unwrap_or_default()
    };
    let refusal = blocking_refusal(trace, facts, &why);
    // INV: PC-5 — a logged block PC-3 would refuse runs read-only on live first.
    match (&facts.guard, &facts.not_logged) {
        (Some(guard), None) => Decision::Guarded {
            guard: Guard {
                otherwise: refusal.message.clone(),
                ..guard.clone()
            },
            refusal,
        },
        _ => Decision::Refused(refusal),
    }
}

/// Commands that change only the catalog, whatever the table holds, so that their
/// locks (even ACCESS EXCLUSIVE) are held briefly; `ALTER TABLE` is not among them (a
/// subcommand may scan or rewrite), nor `CREATE INDEX` (it builds).
const BRIEF_COMMANDS: &[&str] = &[
    "CREATE TRIGGER",
    "DROP TRIGGER",
    "ALTER TRIGGER",
    "CREATE FUNCTION",
    "ALTER FUNCTION",
    "DROP FUNCTION",
    "CREATE PROCEDURE",
    "COMMENT",
    "GRANT",
    "REVOKE",
    "CREATE VIEW",
    "CREATE POLICY",
    "ALTER POLICY",
    "DROP POLICY",
    "CREATE SEQUENCE",
    "ALTER SEQUENCE",
    "CREATE TYPE",
    "ALTER TYPE",
    "CREATE SCHEMA",
    "CREATE DOMAIN",
];

fn brief(ddl: &crate::trace::TracedDdl) -> bool {
    BRIEF_COMMANDS.contains(&ddl.command_tag.as_str())
}

/// Whether the statement rewrote nothing and ran only `BRIEF_COMMANDS`: its strong
/// locks, if any, are held briefly (PC-1).
pub fn catalog_only(trace: &StatementTrace) -> bool {
    trace.rewrites.is_empty() && trace.ddl.iter().all(brief)
}

/// Why the trace saw DDL that the block's log does not account for (a function it
/// called ran DDL), if it did: every traced command's verb must be one a logged
/// statement starts with.
fn unlogged_ddl(trace: &StatementTrace, executed: &[String]) -> Option<String> {
    let verbs: Vec<String> = executed.iter().map(|sql| first_word(sql)).collect();
    trace
        .ddl
        .iter()
        .filter(|ddl| !ddl.dropped)
        .find(|ddl| !verbs.contains(&first_word(&ddl.command_tag)))
        .map(|ddl| {
            format!(
                "the trace saw {} {} that no statement the block logged runs (a function it called ran DDL)",
                ddl.command_tag, ddl.object_identity
            )
        })
}

fn first_word(sql: &str) -> String {
    sql.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase()
}

fn is_data(sql: &str) -> bool {
    parse(sql).map_or(true, |statements| {
        statements
            .iter()
            .any(|s| pgshift_sql::is_data_statement(&s.node))
    })
}

fn names(tables: &[QualifiedName]) -> Vec<String> {
    tables.iter().map(ToString::to_string).collect()
}

fn blocking_refusal(trace: &StatementTrace, facts: &Facts, why: &str) -> Refusal {
    let statements = match &trace.executed {
        Some(executed) if !executed.is_empty() => executed.join("; "),
        _ => trace
            .ddl
            .iter()
            .map(|ddl| format!("{} {}", ddl.command_tag, ddl.object_identity))
            .collect::<Vec<_>>()
            .join("; "),
    };
    let rewrites = trace
        .rewrites
        .iter()
        .map(|r| r.table.to_string())
        .collect::<Vec<_>>();
    Refusal::new(
        RefusalCause::ProceduralBlocking,
        format!(
            "traced on a clone, this procedural code takes a lock that blocks writes{} on {} which hold rows here, and {why}; on the clone it ran: {statements}",
            if rewrites.is_empty() {
                String::new()
            } else {
                format!(" (and rewrites {})", rewrites.join(", "))
            },
            names(&facts.populated).join(", "),
        ),
    )
}
