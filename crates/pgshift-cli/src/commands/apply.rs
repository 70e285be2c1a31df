//! `pgshift apply`: run a migration file (or SQL) the safest way that exists.

use pgshift::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift::exec::{apply, ApplyOptions, CasSettings, Outcome, Sessions, TokioSleeper};
use pgshift::plan::{plan, PlanInput};
use pgshift::report::{self, ApplyReport, ApplySummary};
use pgshift::script::TransactionMode;
use pgshift_sql::QualifiedName;

use super::inputs;
use crate::cli::{ApplyArgs, Format};
use crate::exit;
use crate::render;

/// Session budgets of an apply: the session defaults, which every step overrides with
/// its own (`SET LOCAL`).
pub(crate) const APPLY_SESSION: SessionBudgets = SessionBudgets {
    lock_timeout_ms: 1_000,
    statement_timeout_ms: 60_000,
    idle_in_transaction_timeout_ms: 60_000,
};

/// Runs `pgshift apply` and returns the exit code.
pub fn run(args: &ApplyArgs) -> u8 {
    match super::runtime() {
        Some(runtime) => runtime.block_on(run_async(args)),
        None => exit::INPUT_ERROR,
    }
}

/// A table name from the command line: `table`, `schema.table`, with optional double
/// quotes around either part.
pub fn table_name(text: &str) -> QualifiedName {
    let unquote = |part: &str| {
        part.strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .map_or_else(|| part.to_lowercase(), |p| p.replace("\"\"", "\""))
    };
    match text.split_once('.') {
        Some((schema, name)) => QualifiedName::qualified(unquote(schema), unquote(name)),
        None => QualifiedName::bare(unquote(text)),
    }
}

async fn run_async(args: &ApplyArgs) -> u8 {
    let budgets = args.budgets.budgets();
    if let Err(err) = budgets.validate() {
        eprintln!("pgshift apply: {err}");
        return exit::INPUT_ERROR;
    }
    let parsed = match (&args.sql, &args.file) {
        (Some(sql), _) => inputs::from_sql(sql),
        (None, Some(file)) => {
            match inputs::load(std::slice::from_ref(file), args.max_file_bytes).pop() {
                Some(loaded) => loaded,
                None => {
                    eprintln!("pgshift apply: {file}: nothing to read");
                    return exit::INPUT_ERROR;
                }
            }
        }
        (None, None) => {
            eprintln!("pgshift apply: give a migration file or --sql");
            return exit::INPUT_ERROR;
        }
    };
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(failure) => {
            eprintln!("{}", failure.render());
            eprintln!("pgshift apply: nothing was run");
            return exit::INPUT_ERROR;
        }
    };
    let spec = match ConnectionSpec::parse(&super::connection::connection_text(args.url.as_deref()))
    {
        Ok(spec) => spec,
        Err(err) => {
            eprintln!("pgshift apply: the connection string is not valid: {err}");
            return exit::INPUT_ERROR;
        }
    };
    let (session, monitor) = match (
        connect(&spec, &APPLY_SESSION).await,
        connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await,
    ) {
        (Ok(session), Ok(monitor)) => (session, Some(monitor)),
        (Ok(session), Err(_)) => (session, None),
        (Err(err), _) => {
            eprintln!(
                "pgshift apply: cannot connect to {}: {err}",
                spec.redacted()
            );
            return exit::INPUT_ERROR;
        }
    };
    let path = parsed.path.clone();
    let planned = match plan(
        &session,
        vec![PlanInput {
            path: parsed.path,
            statements: parsed.statements,
        }],
        TransactionMode::Statement,
    )
    .await
    {
        Ok(planned) => planned,
        Err(err) => {
            eprintln!("pgshift apply: {err}");
            return exit::INPUT_ERROR;
        }
    };
    let Some(file) = planned.files.first() else {
        return exit::INPUT_ERROR;
    };
    let options = ApplyOptions {
        budgets,
        allow_blocking: args.allow_blocking.iter().map(|t| table_name(t)).collect(),
        copy_and_swap: Some(CasSettings {
            spec: spec.clone(),
            options: args.cas.options(),
        }),
    };
    let verdict = run_apply(
        &session,
        monitor.as_ref(),
        &file.script,
        &options,
        args.format == Format::Json,
    )
    .await;
    let code = exit_code(verdict.outcome);
    let report = ApplyReport {
        format_version: report::FORMAT_VERSION,
        tool: report::TOOL,
        tool_version: report::TOOL_VERSION,
        command: "apply",
        server: Some(planned.snapshot.server.clone()),
        path,
        outcome: verdict.outcome,
        exit_code: code,
        summary: ApplySummary::of(&verdict),
        verdict,
    };
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::apply(&report, &file.script)),
    }
    code
}

async fn run_apply(
    session: &Session,
    monitor: Option<&Session>,
    script: &pgshift::script::Script,
    options: &ApplyOptions,
    json: bool,
) -> pgshift::exec::ApplyVerdict {
    let sessions = Sessions {
        main: session.client(),
        monitor: monitor.map(Session::client),
        user_search_path: session.user_search_path(),
    };
    let mut progress = render::ProgressDisplay::new(json);
    apply(&sessions, script, options, &TokioSleeper, &mut progress).await
}

/// The exit code of an apply outcome.
pub fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Done => exit::OK,
        Outcome::DoneWithBlocking => exit::DONE_BLOCKING,
        Outcome::Refused => exit::FINDINGS,
        Outcome::Failed => exit::INPUT_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::table_name;
    use pgshift_sql::QualifiedName;

    #[test]
    fn table_names_fold_case_unless_quoted() {
        assert_eq!(table_name("Events"), QualifiedName::bare("events"));
        assert_eq!(
            table_name("app.events"),
            QualifiedName::qualified("app", "events")
        );
        assert_eq!(
            table_name("\"My\".\"Tab\"\"le\""),
            QualifiedName::qualified("My", "Tab\"le")
        );
    }
}
