//! One module per command; each returns its exit code.

mod inputs;
mod lint;
mod plan;

use std::process::ExitCode;

use crate::cli::{Cli, Command, TransactionModeArg};
use pgshift::script::TransactionMode;

/// Runs the command the user asked for.
pub fn run(cli: Cli) -> ExitCode {
    let code = match cli.command {
        Command::Lint(args) => lint::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Demo(args) => crate::commands::demo_unavailable(&args),
    };
    ExitCode::from(code)
}

fn demo_unavailable(_args: &crate::cli::DemoArgs) -> u8 {
    eprintln!("pgshift demo: not built yet");
    crate::exit::INPUT_ERROR
}

impl From<TransactionModeArg> for TransactionMode {
    fn from(arg: TransactionModeArg) -> Self {
        match arg {
            TransactionModeArg::File => TransactionMode::File,
            TransactionModeArg::Statement => TransactionMode::Statement,
        }
    }
}
