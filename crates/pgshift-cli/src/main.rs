//! The `pgshift` command line tool: parses flags, calls the library, renders results
//! for people (text) or machines (versioned JSON), and maps outcomes to exit codes.

mod cli;
mod commands;
mod errors;
mod exit;
mod render;
mod signals;
mod table_arg;
mod throttle_arg;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return exit::usage_error(err),
    };
    render::output_flags::init(&cli.output);
    if cli.command.reads_only() {
        signals::default_sigpipe();
    }
    commands::run(cli)
}
