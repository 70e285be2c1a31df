//! `pgshift migrate`: the pending files of a migrations directory, in order.

use std::path::Path;

use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::exec::{ApplyOptions, CasSettings, TokioSleeper};
use pgshift::migrate::{migrate, MigrateError, MigrateOptions, MigrateOutcome, MigrateVerdict};
use pgshift::report;
use serde::Serialize;

use super::apply::{table_name, APPLY_SESSION};
use crate::cli::{Format, MigrateArgs};
use crate::exit;
use crate::render;

/// The `pgshift migrate` JSON report.
#[derive(Serialize)]
struct MigrateReport<'a> {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    directory: &'a str,
    exit_code: u8,
    verdict: &'a MigrateVerdict,
}

/// Runs `pgshift migrate` and returns the exit code.
pub fn run(args: &MigrateArgs) -> u8 {
    match super::runtime() {
        Some(runtime) => runtime.block_on(run_async(args)),
        None => exit::INPUT_ERROR,
    }
}

async fn run_async(args: &MigrateArgs) -> u8 {
    let budgets = args.budgets.budgets();
    if let Err(err) = budgets.validate() {
        eprintln!("pgshift migrate: {err}");
        return exit::INPUT_ERROR;
    }
    let spec = match ConnectionSpec::parse(&super::connection::connection_text(args.url.as_deref()))
    {
        Ok(spec) => spec,
        Err(err) => {
            eprintln!("pgshift migrate: the connection string is not valid: {err}");
            return exit::INPUT_ERROR;
        }
    };
    let session = match connect(&spec, &APPLY_SESSION).await {
        Ok(session) => session,
        Err(err) => {
            eprintln!(
                "pgshift migrate: cannot connect to {}: {err}",
                spec.redacted()
            );
            return exit::INPUT_ERROR;
        }
    };
    if let Some(source) = &args.baseline {
        return super::baseline::run(&session, args, source).await;
    }
    let monitor = connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await.ok();
    let options = MigrateOptions {
        apply: ApplyOptions {
            budgets,
            allow_blocking: args.allow_blocking.iter().map(|t| table_name(t)).collect(),
            copy_and_swap: Some(CasSettings {
                spec: spec.clone(),
                options: args.cas.options(),
            }),
        },
        allow_gaps: args.allow_gaps,
        allow_out_of_order: args.allow_out_of_order,
        dry_run: args.dry_run,
        max_file_bytes: args.max_file_bytes,
    };
    let mut progress = render::ProgressDisplay::new(args.format == Format::Json);
    let result = migrate(
        &session,
        monitor.as_ref(),
        Path::new(&args.dir),
        &options,
        &TokioSleeper,
        &mut progress,
    )
    .await;
    let verdict = match result {
        Ok(verdict) => verdict,
        Err(err) => {
            eprintln!("pgshift migrate: {err}");
            return error_code(&err);
        }
    };
    let code = match verdict.outcome {
        MigrateOutcome::Done | MigrateOutcome::Planned => exit::OK,
        MigrateOutcome::DoneWithBlocking => exit::DONE_BLOCKING,
        MigrateOutcome::Refused => exit::FINDINGS,
        MigrateOutcome::Failed => exit::INPUT_ERROR,
    };
    match args.format {
        Format::Json => render::print_json(&MigrateReport {
            format_version: report::FORMAT_VERSION,
            tool: report::TOOL,
            tool_version: report::TOOL_VERSION,
            command: "migrate",
            directory: &args.dir,
            exit_code: code,
            verdict: &verdict,
        }),
        Format::Text => print!("{}", render::migrate(&verdict)),
    }
    code
}

/// The exit code of an error that stopped the run before any file.
pub(super) fn error_code(err: &MigrateError) -> u8 {
    match err {
        MigrateError::ChangedAfterApply { .. }
        | MigrateError::AnotherRunner { .. }
        | MigrateError::BaselineConflict { .. }
        | MigrateError::SqlxMismatch { .. } => exit::FINDINGS,
        _ => exit::INPUT_ERROR,
    }
}
