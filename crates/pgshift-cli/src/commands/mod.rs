//! One module per command; each returns its exit code.

pub(crate) mod apply;
mod audit;
mod baseline;
mod capabilities;
mod connection;
mod demo;
mod demo_front_door;
pub(crate) mod diff;
mod explain;
mod inputs;
mod lint;
mod lint_trace;
mod migrate;
pub(crate) mod plan;
mod pull;
mod runs;
mod shell;

use std::process::ExitCode;

use crate::cli::{Cli, Command, TransactionModeArg};
use crate::errors::{self, CliError};
use pgshift::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift::script::TransactionMode;

/// Runs the command the user asked for.
pub fn run(cli: Cli) -> ExitCode {
    let code = match cli.command {
        Command::Lint(args) => lint::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Apply(args) => apply::run(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Status(args) => runs::status(&args),
        Command::Resume(args) => runs::resume(&args),
        Command::Abort(args) => runs::abort(&args),
        Command::Cutover(args) => runs::cutover(&args),
        Command::Throttle(args) => runs::throttle(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::Capabilities(args) => capabilities::run(&args),
        Command::Completions(args) => shell::completions(&args),
        Command::Man => shell::man(),
        Command::Audit(args) => audit::run(&args),
        Command::Pull(args) => pull::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Fmt(args) => pull::fmt(&args),
    };
    ExitCode::from(code)
}

/// The async runtime of commands that talk to a server: two worker threads, so a
/// copy-and-swap run's copy sessions, applier and progress do not wait on each other.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| errors::no_runtime(&err))
}

/// The connection spec of `--url` (PG* variables fill in what it leaves out).
pub(crate) fn spec(url: Option<&str>) -> Result<ConnectionSpec, CliError> {
    ConnectionSpec::parse(&connection::connection_text(url))
        .map_err(|err| errors::invalid_url(&err))
}

/// The `--standby-url` standbys, each proven a standby of the primary behind
/// `session` before any work (a refusal, exit 2, otherwise).
pub(crate) async fn standbys(
    args: &crate::cli::StandbyArgs,
    session: &Session,
) -> Result<Vec<ConnectionSpec>, CliError> {
    let specs = args.specs()?;
    pgshift::cas::standby::prove_all(session.client(), &specs)
        .await
        .map_err(|err| runs::cas_error(&err, "TABLE"))?;
    Ok(specs)
}

/// A session with `budgets`.
pub(crate) async fn session(
    spec: &ConnectionSpec,
    budgets: &SessionBudgets,
) -> Result<Session, CliError> {
    connect(spec, budgets)
        .await
        .map_err(|err| match err.refusal() {
            Some(refusal) => errors::connection_refused(&spec.redacted(), &err, refusal),
            None => errors::connect_failed(&spec.redacted(), &err),
        })
}

impl From<TransactionModeArg> for TransactionMode {
    fn from(arg: TransactionModeArg) -> Self {
        match arg {
            TransactionModeArg::File => TransactionMode::File,
            TransactionModeArg::Statement => TransactionMode::Statement,
        }
    }
}

/// Procedural code traced on a clone of the `--url` target, with the statements the
/// operator accepts as written.
pub(crate) fn procedural(
    url: Option<&str>,
    allow: &[pgshift::procedural::AllowProcedural],
) -> pgshift::procedural::ProceduralOptions {
    pgshift::procedural::ProceduralOptions {
        conninfo: connection::connection_text(url),
        allow: allow.to_vec(),
    }
}

/// Refuses `--allow-procedural` values that name no procedural statement.
pub(crate) fn check_allow_procedural(
    allow: &[pgshift::procedural::AllowProcedural],
    files: &[(&str, &[pgshift_sql::Statement])],
) -> Result<(), CliError> {
    match pgshift::procedural::unmatched(allow, files).first() {
        None => Ok(()),
        Some(entry) => Err(CliError::new(
            "allow-procedural-unused",
            format!(
                "--allow-procedural {}: no procedural statement (DO, CALL, SELECT of a function) is there, so it accepts nothing; nothing was run",
                entry.command_line()
            ),
        )
        .hint("name a file of the input (`FILE`) or the line a procedural statement starts on (`FILE:LINE`), or drop the flag")),
    }
}
