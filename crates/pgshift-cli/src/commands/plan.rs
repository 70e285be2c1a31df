//! `pgshift plan`: how each statement would run against a live database.

use crate::cli::PlanArgs;
use crate::exit;

/// Runs `pgshift plan` and returns the exit code.
pub fn run(args: &PlanArgs) -> u8 {
    let _ = args;
    eprintln!("pgshift plan: not built yet");
    exit::INPUT_ERROR
}
