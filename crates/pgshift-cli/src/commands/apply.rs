//! `pgshift apply`: run a migration file (or SQL) the safest way that exists.

use pgshift::connect::{Session, SessionBudgets};
use pgshift::exec::{
    allow_blocking, apply, ApplyOptions, CasSettings, Outcome, Sessions, TokioSleeper,
};
use pgshift::plan::{plan_with, PlanInput, PlanOptions};
use pgshift::report::{self, ApplyReport, ApplySummary};
use pgshift::script::TransactionMode;
use pgshift_sql::QualifiedName;

use super::inputs::{self, ParsedInput};
use crate::cli::{ApplyArgs, Format};
use crate::errors::CliError;
use crate::exit;
use crate::render;
use crate::signals;

/// Session budgets of an apply: the session defaults, which every step overrides with
/// its own (`SET LOCAL`).
/// The library's preset, so that the CLI and [`pgshift::Migrator`] agree.
pub(crate) const APPLY_SESSION: SessionBudgets = SessionBudgets::APPLY;

/// Runs `pgshift apply` and returns the exit code.
pub fn run(args: &ApplyArgs) -> u8 {
    let result = super::runtime().and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|err| err.report("apply", args.format))
}

/// The one input of an apply: `--sql`, or one file. A directory is refused: `apply`
/// keeps no history, so a directory applied twice would run every file twice, and
/// running its files in order with a record of each is what `migrate` does.
fn input(args: &ApplyArgs) -> Result<ParsedInput, CliError> {
    match (&args.sql, &args.file) {
        (Some(sql), _) => inputs::from_sql(sql).map_err(|failure| failure.error()),
        (None, Some(file)) if std::path::Path::new(file).is_dir() => Err(CliError::new(
            "directory-not-accepted",
            format!("{file} is a directory; apply runs one file (or --sql), and nothing was run"),
        )
        .hint(format!(
            "pgshift migrate --url … {file} applies a directory's pending NNNN_name.sql files in order, with a history; pgshift plan {file} shows what each would do"
        ))),
        (None, Some(file)) => {
            match inputs::load(std::slice::from_ref(file), args.max_file_bytes).pop() {
                Some(loaded) => loaded.map_err(|failure| failure.error()),
                None => Err(CliError::new(
                    "input-unreadable",
                    format!("{file}: nothing to read"),
                )),
            }
        }
        (None, None) => Err(CliError::new("usage", "give a migration file, --sql or --desired")
            .hint("see pgshift apply --help")),
    }
}

/// Refuses `--allow-blocking` names that no statement touches.
pub fn check_allow_blocking<'s>(
    allowed: &[QualifiedName],
    scripts: impl IntoIterator<Item = &'s pgshift::script::Script>,
) -> Result<(), CliError> {
    match allow_blocking::untouched(allowed, scripts).first() {
        None => Ok(()),
        Some(name) => Err(CliError::new(
            "allow-blocking-unused",
            format!(
                "--allow-blocking {}: no statement touches this table, so it accepts nothing; nothing was run",
                allow_blocking::command_line_name(name)
            ),
        )
        .hint("name a table the statements lock (`table` or `schema.table`), or drop the flag")),
    }
}

async fn run_async(args: &ApplyArgs) -> Result<u8, CliError> {
    let budgets = args.budgets.budgets();
    budgets
        .validate()
        .map_err(|err| CliError::new("invalid-budget", err.to_string()))?;
    let parsed = match &args.desired {
        Some(desired) => match super::diff::desired_input(args, desired).await? {
            Some(parsed) => parsed,
            None => return Ok(exit::OK),
        },
        None => input(args)?,
    };
    let spec = super::spec(args.url.as_deref())?;
    let session = super::session(&spec, &APPLY_SESSION).await?;
    let standbys = super::standbys(&args.standby, &session).await?;
    let monitor = super::session(&spec, &SessionBudgets::READ_ONLY_PLAN)
        .await
        .ok();
    let path = parsed.path.clone();
    super::check_allow_procedural(
        &args.allow_procedural,
        &[(parsed.path.as_str(), parsed.statements.as_slice())],
    )?;
    // Installed before the trace: a first SIGINT lets the clone be removed, and stops
    // the apply before its first unit.
    signals::install();
    let planned = plan_with(
        &session,
        vec![PlanInput {
            path: parsed.path,
            statements: parsed.statements,
        }],
        TransactionMode::Statement,
        &PlanOptions {
            max_table_size: None,
            allow_blocking: Vec::new(),
            procedural: Some(super::procedural(
                args.url.as_deref(),
                &args.allow_procedural,
            )),
            disk_room: args.cas.disk_room,
        },
    )
    .await
    .map_err(|err| CliError::new("plan-failed", err.to_string()))?;
    let Some(file) = planned.files.first() else {
        return Err(CliError::new(
            "input-unreadable",
            format!("{path}: nothing to plan"),
        ));
    };
    check_allow_blocking(&args.allow_blocking, [&file.script])?;
    let options = ApplyOptions {
        max_table_size: args.max_table_size,
        budgets,
        allow_blocking: args.allow_blocking.clone(),
        copy_and_swap: Some(CasSettings {
            spec: spec.clone(),
            options: args.cas.options(),
            standbys: standbys.clone(),
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
        procedural: file.procedural.clone(),
    };
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::apply(&report, &file.script)),
    }
    Ok(code)
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
