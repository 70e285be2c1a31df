//! Exit codes, one meaning each, documented in the README and in `--help`.

use std::process::ExitCode;

use crate::cli::Format;
use crate::errors::{CliError, RawCommandLine};

/// Success: no error-severity finding (`lint`); everything can run online (`plan`).
pub const OK: u8 = 0;
/// The command line, an input, or the connection could not be used (nothing was
/// judged, or not everything); `apply`: failed after starting.
pub const INPUT_ERROR: u8 = 1;
/// Judged, and found wanting: an error-severity finding (`lint`), a statement that
/// would be refused (`plan`), or refused with nothing committed (`apply`).
pub const FINDINGS: u8 = 2;

/// `apply`: done, but through a blocking form the operator accepted.
pub const DONE_BLOCKING: u8 = 3;

/// The exit code of a process that a second SIGINT or SIGTERM ended at once, without
/// a verdict: 128 + the signal's number, as a shell reports a process the signal
/// killed.
pub fn killed_by(signal: i32) -> i32 {
    128 + signal
}

/// Prints a command-line error (or help/version) and returns its exit code; under
/// `--format json` the error is also one JSON error document on stdout.
pub fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = err.print();
        return ExitCode::from(OK);
    }
    let raw = RawCommandLine::read(std::env::args().skip(1));
    if !raw.json {
        let _ = err.print();
        return ExitCode::from(INPUT_ERROR);
    }
    let rendered = err.render().to_string();
    eprint!("{rendered}");
    let message = rendered
        .lines()
        .next()
        .unwrap_or("the command line is not valid")
        .trim_start_matches("error: ")
        .to_owned();
    let command = raw.command.unwrap_or_default();
    let hint = if command.is_empty() {
        "see pgshift --help".to_owned()
    } else {
        format!("see pgshift {command} --help")
    };
    let failure = CliError::new("usage", message).hint(hint);
    ExitCode::from(failure.report_json_only(&command, Format::Json))
}
