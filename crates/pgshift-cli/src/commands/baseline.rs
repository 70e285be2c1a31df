//! `pgshift migrate --baseline VERSION|RUNNER`: record files as applied without running
//! them, for a database another runner migrated.

use std::path::Path;

use pgshift::connect::Session;
use pgshift::migrate::{baseline, BaselineSource, BaselineVerdict};
use pgshift::report;
use serde::Serialize;

use crate::cli::{Format, MigrateArgs};
use crate::exit;
use crate::render;

/// The `pgshift migrate --baseline` JSON report.
#[derive(Serialize)]
struct BaselineReport<'a> {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    directory: &'a str,
    exit_code: u8,
    baseline: &'a BaselineVerdict,
}

/// Runs the baseline and returns the exit code.
pub(super) async fn run(session: &Session, args: &MigrateArgs, source: &BaselineSource) -> u8 {
    let verdict = match baseline(session, Path::new(&args.dir), source, args.dry_run).await {
        Ok(verdict) => verdict,
        Err(err) => return super::migrate::error(&err).report("migrate", args.format),
    };
    match args.format {
        Format::Json => render::print_json(&BaselineReport {
            format_version: report::FORMAT_VERSION,
            tool: report::TOOL,
            tool_version: report::TOOL_VERSION,
            command: "migrate",
            directory: &args.dir,
            exit_code: exit::OK,
            baseline: &verdict,
        }),
        Format::Text => print!("{}", render::baseline(&verdict)),
    }
    exit::OK
}
