//! One module per command; each returns its exit code.

pub(crate) mod apply;
mod demo;
mod inputs;
mod lint;
mod migrate;
pub(crate) mod plan;

use std::process::ExitCode;

use crate::cli::{Cli, Command, TransactionModeArg};
use pgshift::script::TransactionMode;

/// Runs the command the user asked for.
pub fn run(cli: Cli) -> ExitCode {
    let code = match cli.command {
        Command::Lint(args) => lint::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Apply(args) => apply::run(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Demo(args) => demo::run(&args),
    };
    ExitCode::from(code)
}

impl From<TransactionModeArg> for TransactionMode {
    fn from(arg: TransactionModeArg) -> Self {
        match arg {
            TransactionModeArg::File => TransactionMode::File,
            TransactionModeArg::Statement => TransactionMode::Statement,
        }
    }
}
