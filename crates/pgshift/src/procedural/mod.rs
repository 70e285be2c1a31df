//! Procedural code through the engine, decided by its trace.
//!
//! A statement whose effects the classifier cannot know — a `DO` block, a `CALL`, a
//! `SELECT` of a function (which may run DDL), an unclassified statement — is run on
//! a throwaway clone of the target's schema ([`crate::trace`]); `DO` blocks in
//! PL/pgSQL run instrumented so that the clone logs each statement they execute,
//! exact text and in order. [`decide`] then says how it runs on the target (the rules
//! of `docs/EXECUTION.md`, "Procedural code": PC-1 … PC-4): natively, **expanded**
//! into the statements it executed (each by its own route: copy-and-swap for a
//! rewrite), natively because the operator named it (`--allow-procedural`), or
//! refused with the traced statements.
//!
//! [`prepare`] is what `plan` (and so `apply` and `migrate`) calls: it traces, decides
//! and gives back the inputs with every expanded statement replaced by its expansion,
//! and a [`ProceduralVerdict`] per procedural statement for the reports.

mod calls;
mod combine;
mod decide;
mod guard;
mod live;

pub use decide::{catalog_only, decide, heavy_tables, user_relations_read, Decision, Facts};
pub use guard::{judge as judge_guarded, Guard, GuardOutcome, READ_ONLY_SQLSTATE};

use serde::Serialize;

use pgshift_sql::{NodeEnum, QualifiedName, Statement};

use crate::classify::{classify, Context};
use crate::connect::Session;
use crate::plan::PlanInput;
use crate::refusal::{Refusal, RefusalCause};
use crate::trace::{
    instrumented, trace, CalledFunction, FileTrace, Outcome, StatementTrace, TraceError,
    TraceInput, TraceTarget, TracedDdl, TracedLock, TracedRewrite,
};

/// How `plan`, `apply` and `migrate` treat procedural code.
#[derive(Clone, Debug)]
pub struct ProceduralOptions {
    /// The target, as `pg_dump` reads it (libpq URL or key=value string): the clone
    /// holds its schema.
    pub conninfo: String,
    /// Statements the operator accepts as written (`--allow-procedural`).
    pub allow: Vec<AllowProcedural>,
}

/// `--allow-procedural FILE[:LINE]`: a file's procedural statements (or the one that
/// starts on `LINE`) run as written, reported as accepted (exit 3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllowProcedural {
    /// The file, as given: the path, or a path suffix of it (`0007_x.sql`).
    pub file: String,
    /// The line the statement starts on, when one is named.
    pub line: Option<u32>,
}

impl AllowProcedural {
    /// Reads `FILE` or `FILE:LINE`.
    pub fn parse(value: &str) -> Result<Self, String> {
        if let Some((file, line)) = value.rsplit_once(':') {
            if let Ok(line) = line.parse::<u32>() {
                if file.is_empty() || line == 0 {
                    return Err(format!(
                        "{value}: give FILE or FILE:LINE (lines count from 1)"
                    ));
                }
                return Ok(AllowProcedural {
                    file: file.to_owned(),
                    line: Some(line),
                });
            }
        }
        if value.is_empty() {
            return Err("give FILE or FILE:LINE".to_owned());
        }
        Ok(AllowProcedural {
            file: value.to_owned(),
            line: None,
        })
    }

    /// Whether it names the statement at `line` of `path`.
    pub fn matches(&self, path: &str, line: u32) -> bool {
        let file = std::path::Path::new(path).ends_with(&self.file) || path == self.file;
        file && self.line.is_none_or(|l| l == line)
    }

    /// As given on the command line.
    pub fn command_line(&self) -> String {
        match self.line {
            Some(line) => format!("{}:{line}", self.file),
            None => self.file.clone(),
        }
    }
}

/// The `--allow-procedural` values that name no procedural statement of the files.
pub fn unmatched<'a>(
    allow: &'a [AllowProcedural],
    files: &[(&str, &[Statement])],
) -> Vec<&'a AllowProcedural> {
    allow
        .iter()
        .filter(|entry| {
            !files.iter().any(|(path, statements)| {
                statements
                    .iter()
                    .any(|s| needs_trace(s) && entry.matches(path, s.position.line))
            })
        })
        .collect()
}

/// Whether the classifier cannot know the statement's effects, so that it is traced:
/// `DO`, `CALL`, a `SELECT` without `FROM` that calls a function not in `pg_catalog`
/// (a function may run DDL), and an unclassified statement.
pub fn needs_trace(statement: &Statement) -> bool {
    match &statement.node {
        NodeEnum::DoStmt(_) | NodeEnum::CallStmt(_) => true,
        NodeEnum::SelectStmt(select) => {
            select.from_clause.is_empty()
                && select.target_list.iter().any(|target| {
                    target.node.as_ref().is_some_and(|node| {
                        node.nodes().iter().any(|(node, _, _, _)| match node {
                            pgshift_sql::NodeRef::FuncCall(call) => !builtin(call),
                            _ => false,
                        })
                    })
                })
        }
        _ => {
            let context = Context {
                facts: None,
                server_version_num: None,
                created_earlier: None,
                in_transaction: false,
                added_columns: None,
            };
            classify(statement, &context).statement == "unclassified"
        }
    }
}

/// A call qualified with `pg_catalog`, or of one of the settings and sequence
/// functions migrations call (`set_config`, `setval`, `nextval`, …).
fn builtin(call: &pgshift_sql::ast::FuncCall) -> bool {
    let parts: Vec<&str> = call
        .funcname
        .iter()
        .filter_map(|n| match &n.node {
            Some(NodeEnum::String(s)) => Some(s.sval.as_str()),
            _ => None,
        })
        .collect();
    match parts.as_slice() {
        ["pg_catalog", _] => true,
        [name] => matches!(
            *name,
            "set_config"
                | "setval"
                | "nextval"
                | "currval"
                | "now"
                | "current_setting"
                | "pg_sleep"
                | "version"
                | "pg_advisory_lock"
                | "pg_advisory_unlock"
                | "pg_advisory_xact_lock"
                | "pg_try_advisory_lock"
        ),
        _ => false,
    }
}

/// What happened to one procedural statement: its trace, and how it runs.
#[derive(Clone, Debug, Serialize)]
pub struct ProceduralVerdict {
    /// The line it starts on.
    pub line: u32,
    /// Its text.
    pub sql: String,
    /// `native`, `expanded`, `accepted` (`--allow-procedural`), `guarded` (PC-5:
    /// read-only on live first) or `refused`.
    pub decision: &'static str,
    /// Why, in words.
    pub why: String,
    /// The refusal, when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// The statements it runs as, when expanded (combined per table), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expanded: Vec<String>,
    /// Its indexes in the planned file (the expansion's, when expanded).
    pub statements: Vec<usize>,
    /// The relation locks its transaction held on the clone (`null` when not read).
    pub locks: Option<Vec<TracedLock>>,
    /// The tables it rewrote on the clone.
    pub rewrites: Vec<TracedRewrite>,
    /// The DDL the server reported on the clone.
    pub ddl: Vec<TracedDdl>,
    /// The statements it executed, exact text, in order (a logged `DO` block and the
    /// PL/pgSQL functions it called).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed: Option<Vec<String>>,
    /// User tables its control flow reads data from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<QualifiedName>,
    /// Of the tables it locks strongly or rewrites, those that hold rows here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub populated: Vec<QualifiedName>,
    /// Why its executed statements were not logged, when they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_logged: Option<String>,
    /// When guarded: the copy that runs read-only on live, and its marker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<Guard>,
    /// The user functions and procedures it called on the clone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<CalledFunction>>,
}

/// The inputs with expansions in place, and the verdicts per file (same order).
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The inputs to plan.
    pub inputs: Vec<PlanInput>,
    /// Per file, its procedural statements' verdicts.
    pub verdicts: Vec<Vec<ProceduralVerdict>>,
}

/// Why procedural code could not be traced.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProceduralError {
    /// The trace failed (no matching server, the dump, the clone).
    #[error("tracing procedural code on a throwaway clone: {0}")]
    Trace(#[from] TraceError),
    /// A read of the live database failed.
    #[error("reading what procedural code would touch on the target: {0}")]
    Live(String),
}

fn live(err: tokio_postgres::Error) -> ProceduralError {
    ProceduralError::Live(err.to_string())
}

/// Traces `inputs` on a clone of the target when any statement needs it, decides
/// each procedural statement, and puts expansions in place. Inputs without
/// procedural code are returned as they are, without a clone.
pub async fn prepare(
    session: &Session,
    inputs: Vec<PlanInput>,
    options: &ProceduralOptions,
) -> Result<Prepared, ProceduralError> {
    let empty = || vec![Vec::new(); inputs.len()];
    if !inputs.iter().any(|i| i.statements.iter().any(needs_trace)) {
        let verdicts = empty();
        return Ok(Prepared { inputs, verdicts });
    }
    let client = session.client();
    let before = live::fingerprint(client).await.map_err(live)?;
    let logged: Vec<Vec<(usize, Result<String, String>)>> = inputs
        .iter()
        .map(|input| {
            input
                .statements
                .iter()
                .filter(|s| matches!(s.node, NodeEnum::DoStmt(_)))
                .map(|s| (s.index, instrumented(s).map_err(|e| e.0)))
                .collect()
        })
        .collect();
    let instrumented_texts: Vec<Vec<(usize, String)>> = logged
        .iter()
        .map(|file| {
            file.iter()
                .filter_map(|(i, r)| r.as_ref().ok().map(|t| (*i, t.clone())))
                .collect()
        })
        .collect();
    let trace_inputs: Vec<TraceInput<'_>> = inputs
        .iter()
        .zip(&instrumented_texts)
        .map(|(input, texts)| TraceInput {
            path: &input.path,
            statements: &input.statements,
            instrumented: texts,
        })
        .collect();
    let run = trace(
        &trace_inputs,
        &TraceTarget::Live {
            conninfo: options.conninfo.clone(),
        },
    )
    .await?;
    let after = live::fingerprint(client).await.map_err(live)?;
    let changed = before != after;
    let earlier_failure = first_failure(&inputs, &run.files);
    let mut prepared = Prepared {
        inputs: Vec::with_capacity(inputs.len()),
        verdicts: Vec::with_capacity(inputs.len()),
    };
    for ((input, file_trace), logged) in inputs.into_iter().zip(&run.files).zip(&logged) {
        let mut statements = Vec::with_capacity(input.statements.len());
        let mut verdicts = Vec::new();
        for statement in input.statements {
            let traced = file_trace.statements.get(statement.index);
            let (true, Some(traced)) = (needs_trace(&statement), traced) else {
                statements.push(statement);
                continue;
            };
            let own = match logged.iter().find(|(i, _)| *i == statement.index) {
                Some((_, Err(why))) => Some(why.clone()),
                Some((_, Ok(_))) => None,
                None => calls::constant_call(&statement).err(),
            };
            let not_logged = own.or_else(|| calls::functions_not_logged(traced));
            let mut queries = match pgshift_sql::DoBlock::of(&statement) {
                Ok(block) => block.queries,
                Err(_) => Vec::new(),
            };
            queries.extend(calls::function_queries(traced));
            let body_reads = user_relations_read(&queries).unwrap_or_else(|why| {
                vec![QualifiedName::bare(format!("(unreadable query: {why})"))]
            });
            let populated = live::populated(client, &heavy_tables(traced))
                .await
                .map_err(live)?;
            let reads_populated = match &not_logged {
                None => live::populated(client, &on_path(&body_reads, session))
                    .await
                    .map_err(live)?,
                Some(_) => Vec::new(),
            };
            let guard = match &not_logged {
                None if !populated.is_empty() || !reads_populated.is_empty() => {
                    Guard::of(&statement).ok()
                }
                _ => None,
            };
            let facts = Facts {
                body_reads,
                not_logged,
                populated,
                reads_populated,
                guard,
                earlier_failure: earlier_failure.clone(),
            };
            let accepted = options
                .allow
                .iter()
                .any(|a| a.matches(&input.path, statement.position.line));
            let mut decision = decide(traced, &facts, accepted);
            if changed && matches!(decision, Decision::Expanded(_)) {
                decision = Decision::Refused(Refusal::new(
                    RefusalCause::ProceduralSchemaChanged,
                    "the target's schema changed while this block was traced on a clone of it, so what it executed there may not be what it would execute here",
                ));
            }
            let first = statements.len();
            let verdict = verdict(&statement, traced, &facts, &decision);
            match decision {
                Decision::Expanded(texts) => {
                    let mut expanded = Vec::new();
                    for text in &texts {
                        match pgshift_sql::parse(text) {
                            Ok(parsed) => expanded.extend(parsed),
                            Err(err) => {
                                return Err(ProceduralError::Live(format!(
                                    "the expansion `{text}` does not parse: {err}"
                                )))
                            }
                        }
                    }
                    for mut piece in expanded {
                        piece.span = statement.span;
                        piece.position = statement.position;
                        piece.leading_comments = Vec::new();
                        statements.push(piece);
                    }
                }
                _ => statements.push(statement),
            }
            let mut verdict = verdict;
            verdict.statements = (first..statements.len()).collect();
            verdicts.push(verdict);
        }
        for (index, statement) in statements.iter_mut().enumerate() {
            statement.index = index;
        }
        prepared.inputs.push(PlanInput {
            path: input.path,
            statements,
        });
        prepared.verdicts.push(verdicts);
    }
    Ok(prepared)
}

/// Each bare name of `names` in every schema of the user's `search_path` (pgshift's
/// own session resolves names in `pg_catalog` only), qualified names as they are: a
/// name found with rows in any of them counts as holding rows.
/// The first statement that failed on the clone, as `file:line: error (SQLSTATE)`:
/// every statement traced after it was not run, and their refusals name it.
fn first_failure(inputs: &[PlanInput], files: &[FileTrace]) -> Option<String> {
    inputs.iter().zip(files).find_map(|(input, file)| {
        file.statements.iter().find_map(|traced| {
            let Outcome::Failed { message, sqlstate } = &traced.outcome else {
                return None;
            };
            let line = input
                .statements
                .iter()
                .find(|s| s.index == traced.index)
                .map_or(0, |s| s.position.line);
            let code = sqlstate
                .as_deref()
                .map(|code| format!(" ({code})"))
                .unwrap_or_default();
            Some(format!("{}:{line}: {message}{code}", input.path))
        })
    })
}

fn on_path(names: &[QualifiedName], session: &Session) -> Vec<QualifiedName> {
    let mut out = Vec::new();
    for name in names {
        if name.schema.is_some() {
            out.push(name.clone());
            continue;
        }
        for schema in session.user_search_path() {
            let schema = match schema.as_str() {
                "$user" => session.current_user(),
                other => other,
            };
            out.push(QualifiedName::qualified(schema, name.name.clone()));
        }
    }
    out
}

fn verdict(
    statement: &Statement,
    traced: &StatementTrace,
    facts: &Facts,
    decision: &Decision,
) -> ProceduralVerdict {
    let (name, why, refusal, expanded) = match decision {
        Decision::Native => (
            "native",
            if heavy_tables(traced).is_empty() {
                "traced: it takes no lock that blocks writes and rewrites nothing, so it runs as written under the usual budgets".to_owned()
            } else if catalog_only(traced) {
                "traced: it changes only the catalog, under brief locks, so it runs as written under the usual budgets".to_owned()
            } else {
                "traced: the tables it locks strongly or rewrites are empty here, so it runs as written under the usual budgets".to_owned()
            },
            None,
            Vec::new(),
        ),
        Decision::Expanded(texts) => (
            "expanded",
            "traced: its control flow reads only the catalog and every statement it executed was logged, so it runs as those statements, each by its own route".to_owned(),
            None,
            texts.clone(),
        ),
        Decision::Accepted => (
            "accepted",
            "runs as written, whatever it locks: it is named with --allow-procedural".to_owned(),
            None,
            Vec::new(),
        ),
        Decision::Guarded { refusal, .. } => (
            "guarded",
            format!(
                "traced: {}; so it runs first on live in a READ ONLY transaction, as a copy that reports every statement it executes and every exception handler it enters: if it executes nothing there, it changes nothing here and is done; otherwise nothing of it is done and it is refused (procedural-blocking)",
                refusal.message.trim_start_matches("traced on a clone, ")
            ),
            None,
            Vec::new(),
        ),
        Decision::Refused(refusal) => (
            "refused",
            refusal.message.clone(),
            Some(refusal.clone()),
            Vec::new(),
        ),
    };
    let guard = match decision {
        Decision::Guarded { guard, .. } => Some(guard.clone()),
        _ => None,
    };
    ProceduralVerdict {
        line: statement.position.line,
        sql: statement.text.clone(),
        decision: name,
        why,
        refusal,
        expanded,
        statements: Vec::new(),
        locks: traced.locks.clone(),
        rewrites: traced.rewrites.clone(),
        ddl: traced.ddl.clone(),
        executed: traced.executed.clone(),
        reads: facts.body_reads.clone(),
        populated: facts.populated.clone(),
        not_logged: facts.not_logged.clone(),
        guard,
        functions: traced.functions.clone(),
    }
}
