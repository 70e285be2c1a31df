//! Lint: findings about a migration file, offline, from its analysed [`Script`].
//!
//! Each finding has one [`Code`] from a closed vocabulary, the code's [`Severity`], the
//! statement it is about, a message that names the lock and what it blocks, and, where
//! one exists, help with the safer SQL. A statement preceded by a comment
//! `-- pgshift:allow <code>[, <code>…]` is exempt from those codes.

mod codes;
mod recipes;
mod statement_rules;
mod transaction_rules;

use serde::Serialize;

use crate::route::Route;
use crate::script::{AnalyzedStatement, Script};
use pgshift_sql::{Position, Span};

pub use codes::{Code, Severity};

/// Help attached to a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Help {
    /// What to do, in words.
    pub text: String,
    /// SQL to run instead (each entry one statement), when there is some.
    pub sql: Vec<String>,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub code: Code,
    /// How bad it is (always `code.severity()`).
    pub severity: Severity,
    /// The statement (index in the file) it is about.
    pub statement: usize,
    /// Where that statement starts.
    pub position: Position,
    /// The statement's bytes in the file.
    pub span: Span,
    /// The message: names the table, the lock, and what it blocks.
    pub message: String,
    /// How to do it safely, when pgshift knows.
    pub help: Option<Help>,
}

/// Collects findings for one statement, honouring its allow comments.
pub(crate) struct Sink<'a> {
    findings: &'a mut Vec<Finding>,
}

impl Sink<'_> {
    pub(crate) fn push(
        &mut self,
        item: &AnalyzedStatement,
        index: usize,
        code: Code,
        message: String,
        help: Option<Help>,
    ) {
        if allowed(item, code) {
            return;
        }
        self.findings.push(Finding {
            code,
            severity: code.severity(),
            statement: index,
            position: item.statement.position,
            span: item.statement.span,
            message,
            help,
        });
    }
}

/// Whether a `-- pgshift:allow …` comment before the statement names `code`.
fn allowed(item: &AnalyzedStatement, code: Code) -> bool {
    item.statement.leading_comments.iter().any(|comment| {
        comment.strip_prefix("pgshift:allow").is_some_and(|rest| {
            rest.split([',', ' '])
                .any(|name| name.trim() == code.name())
        })
    })
}

/// Lints an analysed file. Findings are ordered by statement, then code.
pub fn lint(script: &Script) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut sink = Sink {
        findings: &mut findings,
    };
    statement_rules::check(script, &mut sink);
    transaction_rules::check(script, &mut sink);
    findings.sort_by_key(|finding| (finding.statement, finding.code));
    findings
}

/// Help from a statement's route: its safer steps, or copy-and-swap (with the recipe
/// for other runners), or the refusal's next step.
pub(crate) fn route_help(item: &AnalyzedStatement) -> Option<Help> {
    match &item.classification.route {
        Route::NativeSequence { steps } => {
            let mut text = "run these steps instead, each committed on its own (`pgshift apply` does this for you)".to_owned();
            if steps.iter().any(|step| !step.transactional) {
                text.push_str("; CONCURRENTLY cannot run inside a transaction block, so with another runner put those steps in a file whose first line is `-- no-transaction` (or the runner's equivalent)");
            }
            Some(Help {
                text,
                sql: steps.iter().map(|step| step.sql.clone()).collect(),
            })
        }
        Route::CopyAndSwap => Some(Help {
            text: "with any runner: expand and contract — add a new column, keep it in step with a trigger, backfill it in batches, then swap the names in one short transaction (`pgshift explain table-rewrite` prints the SQL); `pgshift apply` instead runs it online through copy-and-swap: a shadow table, a chunked copy kept in step with live writes, a verification pass, then a swap under a short lock".to_owned(),
            sql: Vec::new(),
        }),
        Route::Refused { refusal } => Some(Help {
            text: format!("{}; do this: {}", refusal.message, refusal.next_step),
            sql: Vec::new(),
        }),
        Route::Native => None,
    }
}

/// Help with a plain sentence and no SQL.
pub(crate) fn text_help(text: impl Into<String>) -> Option<Help> {
    Some(Help {
        text: text.into(),
        sql: Vec::new(),
    })
}
