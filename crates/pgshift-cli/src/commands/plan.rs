//! `pgshift plan`: how each statement would run against a live database.

use pgshift::cas::RunOptions;
use pgshift::connect::{Session, SessionBudgets};
use pgshift::exec::cas_locks::cas_locks;
use pgshift::exec::split::Split;
use pgshift::plan::{plan_with, PlanError, PlanInput, PlanOptions};
use pgshift::report::{self, PlanReport, PlanSummary, PlannedFile, PlannedStatement};
use pgshift::script::TransactionMode;

use super::inputs;
use crate::cli::{Format, PlanArgs};
use crate::errors::{self, CliError};
use crate::exit;
use crate::render;

/// Runs `pgshift plan` and returns the exit code.
pub fn run(args: &PlanArgs) -> u8 {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| errors::no_runtime(&err))
        .and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|err| err.report("plan", args.format))
}

async fn run_async(args: &PlanArgs) -> Result<u8, CliError> {
    let loaded = match (&args.sql, args.paths.is_empty()) {
        (Some(sql), _) => vec![inputs::from_sql(sql)],
        (None, false) => inputs::load(&args.paths, args.max_file_bytes),
        (None, true) => {
            return Err(
                CliError::new("usage", "give migration files or directories, or --sql")
                    .hint("see pgshift plan --help"),
            );
        }
    };
    let mut failures = Vec::new();
    let mut plan_inputs = Vec::new();
    for input in loaded {
        match input {
            Ok(parsed) => plan_inputs.push(PlanInput {
                path: parsed.path,
                statements: parsed.statements,
            }),
            Err(failure) => failures.push(failure),
        }
    }
    if let Some((last, others)) = failures.split_last() {
        for failure in others {
            eprintln!("{}", failure.render());
        }
        let mut error = last.error();
        error.message = format!(
            "{}; nothing was planned because {} could not be read or parsed",
            error.message,
            if others.is_empty() {
                "an input".to_owned()
            } else {
                format!("{} inputs", failures.len())
            }
        );
        return Err(error);
    }
    let spec = super::spec(args.url.as_deref())?;
    let session = super::session(&spec, &SessionBudgets::READ_ONLY_PLAN).await?;
    // A directory another runner migrated, with no pgshift history: planning every
    // file as pending would be wrong; say so once, as `migrate` does. Of a directory
    // pgshift migrated, only the pending files are planned, as `migrate` runs them.
    let mut applied = Vec::new();
    for dir in args
        .paths
        .iter()
        .map(std::path::Path::new)
        .filter(|p| p.is_dir())
    {
        pgshift::migrate::adopt::refuse_unadopted(&session, dir)
            .await
            .map_err(|err| super::migrate::error(&err))?;
        applied.extend(
            pgshift::migrate::applied_paths(&session, dir)
                .await
                .map_err(|err| super::migrate::error(&err))?,
        );
    }
    let (done, plan_inputs): (Vec<PlanInput>, Vec<PlanInput>) =
        plan_inputs.into_iter().partition(|input| {
            applied
                .iter()
                .any(|a| a.as_path() == std::path::Path::new(&input.path))
        });
    // `--sql` is run by `apply --sql` statement by statement, with no migration runner
    // around it; `--transaction-mode` describes the runner of files.
    let mode = if args.sql.is_some() {
        TransactionMode::Statement
    } else {
        args.transaction_mode.into()
    };
    let files: Vec<(&str, &[pgshift_sql::Statement])> = plan_inputs
        .iter()
        .map(|input| (input.path.as_str(), input.statements.as_slice()))
        .collect();
    super::check_allow_procedural(&args.allow_procedural, &files)?;
    let options = PlanOptions {
        max_table_size: None,
        allow_blocking: Vec::new(),
        procedural: Some(super::procedural(
            args.url.as_deref(),
            &args.allow_procedural,
        )),
        disk_room: args.cas.disk_room,
    };
    let mut report = plan_report(&session, plan_inputs, mode, &args.cas.options(), &options)
        .await
        .map_err(|err| CliError::new("plan-failed", err.to_string()))?;
    report.layouts = pgshift::layout::InputLayout::of_inputs(&args.paths);
    report.applied = done.into_iter().map(|input| input.path).collect();
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::plan(&report, &spec.redacted())),
    }
    Ok(if report.summary.refused > 0 {
        exit::FINDINGS
    } else {
        exit::OK
    })
}

/// Plans `inputs` on `session` and builds the versioned report.
pub async fn plan_report(
    session: &Session,
    inputs: Vec<PlanInput>,
    mode: TransactionMode,
    cas: &RunOptions,
    options: &PlanOptions,
) -> Result<PlanReport, PlanError> {
    let planned = plan_with(session, inputs, mode, options).await?;
    let mut summary = PlanSummary::default();
    let files: Vec<PlannedFile> = planned
        .files
        .iter()
        .map(|file| {
            summary.files += 1;
            PlannedFile {
                path: file.path.clone(),
                transaction_mode: Some(file.script.mode),
                statements: file
                    .script
                    .statements
                    .iter()
                    .enumerate()
                    .map(|(index, item)| {
                        summary.count(&item.classification.route);
                        let facts = item.classification.locks.first().and_then(|lock| {
                            planned
                                .snapshot
                                .relations
                                .iter()
                                .find(|r| r.name.matches(&lock.relation) && r.kind.is_table())
                        });
                        PlannedStatement {
                            index,
                            line: item.statement.position.line,
                            column: item.statement.position.column,
                            sql: item.statement.text.clone(),
                            classification: item.classification.clone(),
                            copy_and_swap: cas_locks(&item.classification, facts, cas),
                        }
                    })
                    .collect(),
                error: None,
                split: Split::of(&file.script, &file.schedule),
                procedural: file.procedural.clone(),
            }
        })
        .collect();
    Ok(PlanReport {
        format_version: report::FORMAT_VERSION,
        tool: report::TOOL,
        tool_version: report::TOOL_VERSION,
        command: "plan",
        layouts: Vec::new(),
        applied: Vec::new(),
        server: Some(planned.snapshot.server.clone()),
        files,
        relations: planned.snapshot.relations.clone(),
        summary,
    })
}
