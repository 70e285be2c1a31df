//! Flags and commands.

use clap::{Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "\
Exit codes:
  0  lint: no error-severity finding; plan: every statement can run online
  1  the command line, an input file, or the connection could not be used
  2  lint: at least one error-severity finding; plan: a statement would be refused";

/// pgshift: run any schema change on a live PostgreSQL table the safest way that
/// exists, or refuse with a reason.
#[derive(Debug, Parser)]
#[command(name = "pgshift", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// Versioned JSON for machines (`format_version`).
    Json,
}

/// How the migration runner runs each file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransactionModeArg {
    /// The whole file in one transaction (sqlx, refinery, Flyway, Rails default).
    File,
    /// Each statement on its own, except inside explicit BEGIN … COMMIT.
    Statement,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Judge migration files offline (no connection): locks, rewrites, scans, and the
    /// safer SQL to use instead.
    #[command(after_help = EXIT_CODES)]
    Lint(LintArgs),
    /// Plan migration files against a live database (read-only): how each statement
    /// would run, with live facts about the tables it touches.
    #[command(after_help = EXIT_CODES)]
    Plan(PlanArgs),
    /// Start a throwaway local PostgreSQL, load a relay-like schema, and show `plan`
    /// and `lint` on a few changes; then remove it.
    Demo(DemoArgs),
}

/// `pgshift lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Files, directories (their .sql files in migration order), or `-` for stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How the runner runs each file; a first-line `-- no-transaction` comment
    /// switches a file to `statement`.
    #[arg(long, value_enum, default_value_t = TransactionModeArg::File)]
    pub transaction_mode: TransactionModeArg,
    /// A schema file (repeatable) declaring the existing tables, so lint knows which
    /// are partitioned and what type each column has. Earlier migration files inform
    /// later ones too.
    #[arg(long, value_name = "FILE")]
    pub schema: Vec<String>,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}

/// `pgshift plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// libpq connection URL or key=value string; PG* environment variables fill in
    /// what it leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// Files or directories to plan.
    #[arg(value_name = "PATH", conflicts_with = "sql")]
    pub paths: Vec<String>,
    /// SQL to plan, instead of files.
    #[arg(long, value_name = "SQL")]
    pub sql: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// How the runner runs each file.
    #[arg(long, value_enum, default_value_t = TransactionModeArg::File)]
    pub transaction_mode: TransactionModeArg,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}

/// `pgshift demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the cluster running afterwards and print how to connect.
    #[arg(long)]
    pub keep: bool,
}
