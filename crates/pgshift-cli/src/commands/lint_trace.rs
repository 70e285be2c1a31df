//! `pgshift lint --trace`: the judged files run on a throwaway cluster
//! (`pgshift::trace`), each statement's trace set against its static classification.

use pgshift::classify::Classification;
use pgshift::report::{LintTrace, TracedStatementReport};
use pgshift::script::Script;
use pgshift::trace::{compare, trace, Outcome, TraceInput, TraceTarget};
use pgshift_sql::Statement;

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
    pub fn run(self, url: Option<&str>, input_errors: usize) -> LintTrace {
        let mut out = LintTrace {
            server_version: None,
            schema: None,
            nested_statements: None,
            error: None,
            statements: Vec::new(),
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
        out
    }
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
