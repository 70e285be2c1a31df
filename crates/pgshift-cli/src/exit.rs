//! Exit codes, one meaning each, documented in the README and in `--help`.

use std::process::ExitCode;

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

/// Prints a command-line error (or help/version) and returns its exit code.
pub fn usage_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let code = match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => OK,
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => INPUT_ERROR,
        _ => INPUT_ERROR,
    };
    let _ = err.print();
    ExitCode::from(code)
}
