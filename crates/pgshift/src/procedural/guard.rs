//! PC-5, the run-time guard of data-dependent procedural code: where PC-3 would
//! refuse a logged `DO` block because a table it locks strongly or rewrites holds
//! rows, the block runs first on the live database in a `READ ONLY` transaction, as
//! a copy that raises a notice before every statement it executes and in every
//! exception handler it enters ([`pgshift_sql::DoBlock::instrument_guard`]).
//!
//! [`judge`] reads what came back: nothing reported and no error is a block that
//! changes nothing here (the unit is done); a statement reported, a handler that
//! caught a read-only error (25006), or an uncaught 25006 is a block that would
//! change something (nothing of it was done: refused); any other error is the
//! block failing (a data check that raised), as it would fail natively.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use pgshift_sql::{GuardNotice, NodeEnum, Statement};

/// SQLSTATE of "cannot execute … in a read-only transaction".
pub const READ_ONLY_SQLSTATE: &str = "25006";

/// The guard's copy of a block, and the marker of its notices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    /// What each of its notices starts with (made for this plan).
    pub marker: String,
    /// The instrumented `DO` statement.
    pub sql: String,
    /// What PC-3 alone says of the block (the start of a refusal's message).
    pub otherwise: String,
}

impl Guard {
    /// The guard of a `DO` block in PL/pgSQL that executes statements (an `EXECUTE`,
    /// static DDL or a data change), or why there is none.
    pub fn of(statement: &Statement) -> Result<Guard, String> {
        let block = pgshift_sql::DoBlock::of(statement).map_err(|e| e.0)?;
        if !block.executes_statements() {
            return Err("the block executes no statement".to_owned());
        }
        let marker = marker();
        let sql = block.instrument_guard(&marker).map_err(|e| e.0)?;
        Ok(Guard {
            marker,
            sql,
            otherwise: String::new(),
        })
    }
}

/// A marker no other run of this process uses, and that the block cannot know
/// before it runs.
fn marker() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "pgshift-guard-{:x}-{:x}-{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a guarded run says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuardOutcome {
    /// It ran to the end and executed nothing: it changes nothing here.
    NoOp,
    /// It would have changed something; nothing of it was done.
    WouldChange {
        /// The statements it was about to execute, in order (reads left out).
        statements: Vec<String>,
        /// The read-only errors its exception handlers caught.
        caught: usize,
    },
    /// It failed for a reason of its own (a data check), with the server's words.
    Failed,
}

impl GuardOutcome {
    /// For people: what the guarded run found.
    pub fn describe(&self) -> String {
        match self {
            GuardOutcome::NoOp => "ran read-only on live: a no-op here".to_owned(),
            GuardOutcome::WouldChange { statements, caught } => {
                let mut out = "run read-only on live, it would have changed the database, so nothing of it was done".to_owned();
                if !statements.is_empty() {
                    out.push_str(&format!(
                        "; it would have executed: {}",
                        statements.join("; ")
                    ));
                }
                if *caught > 0 {
                    out.push_str(&format!(
                        "; its exception handlers caught {caught} read-only error(s) ({READ_ONLY_SQLSTATE}), so it only looked like a no-op"
                    ));
                }
                out
            }
            GuardOutcome::Failed => "it failed when run read-only on live".to_owned(),
        }
    }
}

/// Judges a guarded run from its notices (the messages that start with `marker`)
/// and the SQLSTATE of the error that ended it, if one did.
// INV: PC-5 — only a run that reported nothing, caught no read-only error and did not end in one is a no-op.
pub fn judge(marker: &str, notices: &[String], error: Option<&str>) -> GuardOutcome {
    let mut statements = Vec::new();
    let mut caught = 0;
    for notice in notices {
        match GuardNotice::read(marker, notice) {
            Some(GuardNotice::Statement(sql)) if !reads_only(&sql) => statements.push(sql),
            Some(GuardNotice::Handler(state)) if state == READ_ONLY_SQLSTATE => caught += 1,
            _ => {}
        }
    }
    if !statements.is_empty() || caught > 0 || error == Some(READ_ONLY_SQLSTATE) {
        return GuardOutcome::WouldChange { statements, caught };
    }
    match error {
        Some(_) => GuardOutcome::Failed,
        None => GuardOutcome::NoOp,
    }
}

/// Whether an executed string is only plain `SELECT`s (no `INTO`, no row locks, no
/// data-changing `WITH`): what such a query changes, if anything, a read-only
/// transaction refuses (25006), which the run reports.
fn reads_only(sql: &str) -> bool {
    pgshift_sql::parse(sql).is_ok_and(|statements| {
        !statements.is_empty()
            && statements.iter().all(|s| match &s.node {
                NodeEnum::SelectStmt(select) => {
                    select.into_clause.is_none()
                        && select.locking_clause.is_empty()
                        && select.with_clause.is_none()
                }
                _ => false,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "pgshift-guard-test";

    #[test]
    fn nothing_reported_and_no_error_is_a_no_op() {
        assert_eq!(judge(M, &[], None), GuardOutcome::NoOp);
        assert_eq!(
            judge(M, &[format!("{M} statement SELECT count(*) FROM t")], None),
            GuardOutcome::NoOp
        );
    }

    #[test]
    fn a_reported_statement_or_a_caught_read_only_error_would_change() {
        let out = judge(M, &[format!("{M} statement ALTER TABLE t ADD c int")], None);
        assert!(
            matches!(out, GuardOutcome::WouldChange { ref statements, caught: 0 } if statements == &["ALTER TABLE t ADD c int"])
        );
        let out = judge(M, &[format!("{M} handler 25006")], None);
        assert_eq!(
            out,
            GuardOutcome::WouldChange {
                statements: vec![],
                caught: 1
            }
        );
        assert!(matches!(
            judge(M, &[], Some("25006")),
            GuardOutcome::WouldChange { .. }
        ));
    }

    #[test]
    fn another_error_is_the_block_failing() {
        assert_eq!(judge(M, &[], Some("P0001")), GuardOutcome::Failed);
        assert_eq!(
            judge(M, &[format!("{M} handler 22012")], Some("P0001")),
            GuardOutcome::Failed
        );
    }
}
