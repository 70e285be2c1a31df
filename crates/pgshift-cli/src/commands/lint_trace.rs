//! `pgshift lint --trace`: the judged files run on a throwaway cluster
//! (`pgshift::trace`), each statement's trace set against its static classification.

use pgshift::catalog::read_snapshot;
use pgshift::catalog::volume::live_volume;
use pgshift::classify::Classification;
use pgshift::connect::SessionBudgets;
use pgshift::lint::{Code, Finding, Help};
use pgshift::lock::LockMode;
use pgshift::report::{FindingReport, LintTrace, TracedStatementReport};
use pgshift::script::Script;
use pgshift::trace::{compare, trace, Outcome, TraceInput, TraceTarget};
use pgshift_sql::{QualifiedName, Statement};

/// The files to trace, with lint's classification of each statement.
#[derive(Default)]
pub struct Traced {
    files: Vec<(String, Vec<Statement>, Vec<Classification>)>,
}

/// What the trace says about the run's exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanting {
    /// Nothing the static findings do not already say.
    No,
    /// A statement failed on the clone, or the server did more than lint stated.
    Yes,
    /// The trace could not be made.
    Untraced,
}

impl Traced {
    /// Adds a judged file.
    pub fn add(&mut self, path: &str, script: &Script) {
        self.files.push((
            path.to_owned(),
            script
                .statements
                .iter()
                .map(|s| s.statement.clone())
                .collect(),
            script
                .statements
                .iter()
                .map(|s| s.classification.clone())
                .collect(),
        ));
    }

    /// Traces the files (against `url`'s schema, else replayed from the first) and
    /// compares. With inputs that could not be read, nothing is traced: a replay
    /// without them would not be the directory's history.
    pub fn run(&self, url: Option<&str>, input_errors: usize) -> LintTrace {
        let mut out = LintTrace {
            server_version: None,
            schema: None,
            nested_statements: None,
            error: None,
            statements: Vec::new(),
            live_sizes_error: None,
        };
        if input_errors > 0 {
            out.error = Some("not traced: an input could not be read or parsed".to_owned());
            return out;
        }
        let target = match url {
            Some(conninfo) => TraceTarget::Live {
                conninfo: conninfo.to_owned(),
            },
            None => TraceTarget::Replay,
        };
        let inputs: Vec<TraceInput<'_>> = self
            .files
            .iter()
            .map(|(path, statements, _)| TraceInput {
                path,
                statements,
                instrumented: &[],
            })
            .collect();
        let runtime = match super::runtime() {
            Ok(runtime) => runtime,
            Err(err) => {
                out.error = Some(err.message);
                return out;
            }
        };
        let run = match runtime.block_on(trace(&inputs, &target)) {
            Ok(run) => run,
            Err(err) => {
                out.error = Some(err.to_string());
                return out;
            }
        };
        for ((path, statements, classifications), file) in self.files.iter().zip(&run.files) {
            for ((statement, classification), traced) in
                statements.iter().zip(classifications).zip(&file.statements)
            {
                out.statements.push(TracedStatementReport::new(
                    path,
                    statement.position,
                    traced,
                    compare(classification, traced),
                ));
            }
        }
        out.server_version = Some(run.server_version);
        out.schema = Some(run.schema);
        out.nested_statements = Some(run.nested_statements);
        if let Some(conninfo) = url {
            if let Err(error) = runtime.block_on(live_sizes(conninfo, &mut out.statements)) {
                out.live_sizes_error = Some(error);
            }
        }
        out
    }
}

impl Traced {
    /// The findings the trace adds: a statement that rewrote a table no earlier
    /// statement of its file created, where lint's reading of the SQL saw no rewrite
    /// (procedural code, a function it calls) gets `table-rewrite`, the code the
    /// written form gets; `(path, finding, statement text)`, in the files' order.
    pub fn hidden_rewrites(
        &self,
        trace: &LintTrace,
        reported: &[FindingReport],
    ) -> Vec<(String, Finding, String)> {
        let mut out = Vec::new();
        for (path, statements, classifications) in &self.files {
            // New to lint are the tables created earlier in the same file (those of
            // earlier files are judged as existing, as the static findings judge them).
            let mut created: Vec<&QualifiedName> = Vec::new();
            for (index, (statement, classification)) in
                statements.iter().zip(classifications).enumerate()
            {
                let traced = trace
                    .statements
                    .iter()
                    .find(|t| t.path == *path && t.statement_index == index);
                let already = reported.iter().any(|f| {
                    f.path == *path && f.statement_index == index && f.code == Code::TableRewrite
                });
                if let (Some(traced), false) = (traced, already) {
                    let mut tables: Vec<String> = Vec::new();
                    for rewrite in &traced.trace.rewrites {
                        let new = created.iter().any(|c| c.matches(&rewrite.table));
                        let name = rewrite.table.to_string();
                        if !new && !tables.contains(&name) {
                            tables.push(name);
                        }
                    }
                    if !tables.is_empty() {
                        out.push((
                            path.clone(),
                            hidden_rewrite(index, statement, &tables),
                            statement.text.clone(),
                        ));
                    }
                }
                created.extend(classification.created_relations());
            }
        }
        out
    }
}

fn hidden_rewrite(index: usize, statement: &Statement, tables: &[String]) -> Finding {
    Finding {
        code: Code::TableRewrite,
        severity: Code::TableRewrite.severity(),
        statement: index,
        position: statement.position,
        span: statement.span,
        message: format!(
            "traced on a clone, this statement rewrote every row of {} under ACCESS EXCLUSIVE: it blocks all reads and writes for as long as the copy takes; reading the SQL does not show it (the rewrite runs inside procedural code). The clone holds the schema only, so its tables are empty: where the code's branches read the data, the target may take another path",
            tables.join(", ")
        ),
        help: Some(Help {
            text: "write the rewrite as its own statement, so that `pgshift apply` and `pgshift migrate` can run it online (copy-and-swap); `pgshift plan --url` says how each statement runs".to_owned(),
            sql: Vec::new(),
        }),
    }
}

/// The tables a traced statement rewrote, or locked ACCESS EXCLUSIVE, that existed
/// before it: what the blocking form holds writers behind, for as long as its work on
/// them takes.
fn heavy_tables(statement: &TracedStatementReport) -> Vec<QualifiedName> {
    let mut names: Vec<QualifiedName> = statement
        .trace
        .rewrites
        .iter()
        .map(|r| r.table.clone())
        .collect();
    for lock in statement.trace.locks.iter().flatten() {
        let table = matches!(
            lock.kind,
            "table" | "partitioned-table" | "materialized-view"
        );
        if table && !lock.created && lock.mode == LockMode::AccessExclusive {
            names.push(lock.relation.clone());
        }
    }
    let mut unique: Vec<QualifiedName> = Vec::new();
    for name in names {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    unique
}

/// Reads the live size of every statement's [`heavy_tables`] on the target, in one
/// read-only catalog snapshot.
async fn live_sizes(
    conninfo: &str,
    statements: &mut [TracedStatementReport],
) -> Result<(), String> {
    let wanted: Vec<Vec<QualifiedName>> = statements.iter().map(heavy_tables).collect();
    let mut names: Vec<QualifiedName> = wanted.iter().flatten().cloned().collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        return Ok(());
    }
    let spec = super::spec(Some(conninfo)).map_err(|e| e.message)?;
    let session = super::session(&spec, &SessionBudgets::READ_ONLY_PLAN)
        .await
        .map_err(|e| e.message)?;
    let snapshot = read_snapshot(session.client(), &names, session.user_search_path())
        .await
        .map_err(|e| format!("reading the live sizes: {e}"))?;
    for (statement, names) in statements.iter_mut().zip(wanted) {
        statement.live = names
            .iter()
            .filter_map(|name| live_volume(Some(&snapshot), name))
            .collect();
    }
    Ok(())
}

/// Whether the trace makes the run fail.
pub fn found_wanting(trace: &LintTrace) -> Wanting {
    if trace.error.is_some() {
        return Wanting::Untraced;
    }
    let wanting = trace.statements.iter().any(|s| {
        matches!(s.outcome, Outcome::Failed { .. }) || s.differences.iter().any(|d| d.understated)
    });
    if wanting {
        Wanting::Yes
    } else {
        Wanting::No
    }
}
