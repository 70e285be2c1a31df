//! `pgshift migrate`: the pending files of a migrations directory, in order.

use std::path::Path;

use pgshift::connect::SessionBudgets;
use pgshift::exec::{ApplyOptions, CasSettings, TokioSleeper};
use pgshift::migrate::{migrate, MigrateError, MigrateOptions, MigrateOutcome, MigrateVerdict};
use pgshift::report;
use serde::Serialize;

use super::apply::APPLY_SESSION;
use crate::cli::{Format, MigrateArgs};
use crate::errors::CliError;
use crate::exit;
use crate::render;
use crate::signals;

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
    let result = super::runtime().and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|err| err.report("migrate", args.format))
}

async fn run_async(args: &MigrateArgs) -> Result<u8, CliError> {
    let budgets = args.budgets.budgets();
    budgets
        .validate()
        .map_err(|err| CliError::new("invalid-budget", err.to_string()))?;
    let spec = super::spec(args.url.as_deref())?;
    let session = super::session(&spec, &APPLY_SESSION).await?;
    if let Some(source) = &args.baseline {
        return Ok(super::baseline::run(&session, args, source).await);
    }
    let standbys = super::standbys(&args.standby, &session).await?;
    let monitor = super::session(&spec, &SessionBudgets::READ_ONLY_PLAN)
        .await
        .ok();
    let options = MigrateOptions {
        apply: ApplyOptions {
            max_table_size: args.max_table_size,
            budgets,
            allow_blocking: args.allow_blocking.clone(),
            copy_and_swap: Some(CasSettings {
                spec: spec.clone(),
                options: args.cas.options(),
                standbys: standbys.clone(),
            }),
        },
        allow_gaps: args.allow_gaps,
        allow_out_of_order: args.allow_out_of_order,
        dry_run: args.dry_run,
        max_file_bytes: args.max_file_bytes,
        procedural: Some(super::procedural(
            args.url.as_deref(),
            &args.allow_procedural,
        )),
    };
    if !args.dry_run {
        signals::install();
    }
    let mut progress = render::ProgressDisplay::new(args.format == Format::Json);
    let verdict = migrate(
        &session,
        monitor.as_ref(),
        Path::new(&args.dir),
        &options,
        &TokioSleeper,
        &mut progress,
    )
    .await
    .map_err(|err| error(&err))?;
    let code = exit_code(verdict.outcome);
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
    Ok(code)
}

/// The exit code of a run's outcome (a dry run's too: a file that would be refused
/// exits 2, as `plan` does on the same SQL).
fn exit_code(outcome: MigrateOutcome) -> u8 {
    match outcome {
        MigrateOutcome::Done | MigrateOutcome::Planned => exit::OK,
        MigrateOutcome::DoneWithBlocking => exit::DONE_BLOCKING,
        MigrateOutcome::Refused => exit::FINDINGS,
        MigrateOutcome::Failed => exit::INPUT_ERROR,
    }
}

/// The error document of a run that stopped before any file.
pub(super) fn error(err: &MigrateError) -> CliError {
    let message = err.to_string();
    match err {
        MigrateError::ChangedAfterApply { .. } => CliError::new("changed-after-apply", message)
            .exit(exit::FINDINGS)
            .hint("an applied migration must not change: restore it, and write a new migration for the change"),
        MigrateError::AnotherRunner { .. } => CliError::new("another-runner", message)
            .exit(exit::FINDINGS)
            .hint("wait for the other pgshift migrate to finish, then run again"),
        MigrateError::AllowProceduralUnused { .. } => CliError::new("allow-procedural-unused", message)
            .hint("name a pending file (`FILE`) or the line a procedural statement starts on (`FILE:LINE`), or drop the flag"),
        MigrateError::AllowBlockingUnused { .. } => CliError::new("allow-blocking-unused", message)
            .hint("name a table the pending files lock (`table` or `schema.table`), or drop the flag"),
        MigrateError::Directory { .. } => CliError::new("input-unreadable", message),
        MigrateError::BaselineConflict { .. } => CliError::new("baseline-conflict", message)
            .exit(exit::FINDINGS)
            .hint("the history already records that version differently: check pgshift.migrations before baselining"),
        MigrateError::SqlxMismatch { .. } => CliError::new("sqlx-mismatch", message)
            .exit(exit::FINDINGS)
            .hint("make the files match what sqlx applied (or baseline up to a version with --baseline VERSION), then run again"),
        MigrateError::ForeignHistory { runner, dir, .. } => CliError::new("another-runners-history", message)
            .exit(exit::FINDINGS)
            .hint(format!("pgshift migrate --url URL --baseline {runner} {dir}")),
        MigrateError::RunnerMismatch { .. } => CliError::new("runner-mismatch", message)
            .exit(exit::FINDINGS)
            .hint("make the directory match what the runner applied (or baseline up to a version with --baseline VERSION), then run again"),
        MigrateError::Layout(_)
        | MigrateError::RunnerTableMissing { .. }
        | MigrateError::NothingToRead { .. }
        | MigrateError::BaselineVersionUnknown { .. }
        | MigrateError::Unnumbered { .. }
        | MigrateError::DuplicateVersion { .. }
        | MigrateError::Gap { .. }
        | MigrateError::OutOfOrder { .. } => CliError::new("migrations-directory", message),
        MigrateError::Plan(_) => CliError::new("plan-failed", message),
        _ => CliError::new("database", message),
    }
}
