//! `pgshift plan`: how each statement would run against a live database.

use pgshift::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift::exec::split::Split;
use pgshift::plan::{plan, PlanError, PlanInput};
use pgshift::report::{self, PlanReport, PlanSummary, PlannedFile, PlannedStatement};
use pgshift::script::TransactionMode;

use super::inputs;
use crate::cli::{Format, PlanArgs};
use crate::exit;
use crate::render;

/// Runs `pgshift plan` and returns the exit code.
pub fn run(args: &PlanArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("pgshift: cannot start the async runtime: {err}");
            return exit::INPUT_ERROR;
        }
    };
    runtime.block_on(run_async(args))
}

async fn run_async(args: &PlanArgs) -> u8 {
    let loaded = match (&args.sql, args.paths.is_empty()) {
        (Some(sql), _) => vec![inputs::from_sql(sql)],
        (None, false) => inputs::load(&args.paths, args.max_file_bytes),
        (None, true) => {
            eprintln!("pgshift plan: give migration files or directories, or --sql");
            return exit::INPUT_ERROR;
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
    if !failures.is_empty() {
        for failure in &failures {
            eprintln!("{}", failure.render());
        }
        eprintln!("pgshift plan: nothing was planned because an input could not be read or parsed");
        return exit::INPUT_ERROR;
    }
    let spec = match ConnectionSpec::parse(&super::connection::connection_text(args.url.as_deref()))
    {
        Ok(spec) => spec,
        Err(err) => {
            eprintln!("pgshift plan: the connection string is not valid: {err}");
            return exit::INPUT_ERROR;
        }
    };
    let session = match connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await {
        Ok(session) => session,
        Err(err) => {
            eprintln!("pgshift plan: cannot connect to {}: {err}", spec.redacted());
            return exit::INPUT_ERROR;
        }
    };
    // `--sql` is run by `apply --sql` statement by statement, with no migration runner
    // around it; `--transaction-mode` describes the runner of files.
    let mode = if args.sql.is_some() {
        TransactionMode::Statement
    } else {
        args.transaction_mode.into()
    };
    let report = match plan_report(&session, plan_inputs, mode).await {
        Ok(mut report) => {
            report.layouts = pgshift::layout::InputLayout::of_inputs(&args.paths);
            report
        }
        Err(err) => {
            eprintln!("pgshift plan: {err}");
            return exit::INPUT_ERROR;
        }
    };
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::plan(&report, &spec.redacted())),
    }
    if report.summary.refused > 0 {
        exit::FINDINGS
    } else {
        exit::OK
    }
}

/// Plans `inputs` on `session` and builds the versioned report.
pub async fn plan_report(
    session: &Session,
    inputs: Vec<PlanInput>,
    mode: TransactionMode,
) -> Result<PlanReport, PlanError> {
    let planned = plan(session, inputs, mode).await?;
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
                        PlannedStatement {
                            index,
                            line: item.statement.position.line,
                            column: item.statement.position.column,
                            sql: item.statement.text.clone(),
                            classification: item.classification.clone(),
                        }
                    })
                    .collect(),
                error: None,
                split: Split::of(&file.script, &file.schedule),
            }
        })
        .collect();
    Ok(PlanReport {
        format_version: report::FORMAT_VERSION,
        tool: report::TOOL,
        tool_version: report::TOOL_VERSION,
        command: "plan",
        layouts: Vec::new(),
        server: Some(planned.snapshot.server.clone()),
        files,
        relations: planned.snapshot.relations.clone(),
        summary,
    })
}
