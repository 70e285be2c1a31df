//! `pgshift pull`: the live schema into a new folder of reviewable SQL files.

use pgshift::desired::{pull, PullError};
use pgshift::report::PullReport;
use pgshift::trace::TraceError;

use crate::cli::{FmtArgs, Format, PullArgs};
use crate::errors::CliError;
use crate::exit;
use crate::render;

/// Runs `pgshift pull` and returns the exit code.
pub fn run(args: &PullArgs) -> u8 {
    let result = super::runtime().and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|err| err.report("pull", args.format))
}

async fn run_async(args: &PullArgs) -> Result<u8, CliError> {
    // The URL is checked as pgshift reads it before `pg_dump` is given it.
    let spec = super::spec(args.url.as_deref())?;
    let conninfo = super::connection::connection_text(args.url.as_deref());
    if args.format == Format::Text {
        eprintln!(
            "pgshift pull: reading {} and proving the files on a throwaway cluster …",
            spec.redacted()
        );
    }
    let pulled = pull(&conninfo, &args.out)
        .await
        .map_err(|err| failure(&err))?;
    let report = PullReport::of(&pulled, exit::OK);
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::pull(&report)),
    }
    Ok(exit::OK)
}

/// Runs `pgshift fmt` and returns the exit code.
pub fn fmt(args: &FmtArgs) -> u8 {
    let result = super::runtime().and_then(|runtime| runtime.block_on(fmt_async(args)));
    result.unwrap_or_else(|err| err.report("fmt", args.format))
}

async fn fmt_async(args: &FmtArgs) -> Result<u8, CliError> {
    let desired = super::diff::read_desired(&args.desired)?;
    let like = match &args.like {
        Some(url) => {
            super::spec(Some(url))?;
            Some(super::connection::connection_text(Some(url)))
        }
        None => None,
    };
    let pulled = pgshift::desired::fmt(&desired, &args.out, like.as_deref())
        .await
        .map_err(|err| failure(&err))?;
    let mut report = PullReport::of(&pulled, exit::OK);
    report.command = "fmt";
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::pull(&report)),
    }
    Ok(exit::OK)
}

fn failure(err: &PullError) -> CliError {
    let code = match err {
        PullError::OutputExists(_) => "output-exists",
        PullError::Layout(_) => "not-covered",
        PullError::NotReproduced { .. } | PullError::DidNotRun(_) => "not-reproduced",
        PullError::DesiredDidNotRun(_) => "desired-did-not-run",
        PullError::Trace(TraceError::Connect(_)) => "connect-failed",
        PullError::Trace(_) => "read-failed",
        PullError::Write { .. } => "write-failed",
        _ => "pull-failed",
    };
    let mut failure = CliError::new(code, err.to_string());
    if let PullError::DesiredDidNotRun(_) = err {
        failure = failure.hint(
            "a role or tablespace the files name may be missing on the throwaway cluster: give --like URL of a database that has them",
        );
    }
    if err.is_refusal() {
        failure.exit(exit::FINDINGS)
    } else {
        failure
    }
}
