//! Flags and commands.

use clap::{Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "\
Exit codes:
  0  lint: no error-severity finding; plan: every statement can run online;
     apply/migrate: done, online (migrate --dry-run: planned)
  1  the command line, an input file, the directory or the connection could not be
     used; apply/migrate: failed after starting (the committed prefix is reported)
  2  lint: at least one error-severity finding; plan: a statement would be refused;
     apply: refused, nothing committed; migrate: stopped at a refused file, or an
     applied file changed, or another runner holds the lock
  3  apply/migrate: done, through a blocking form accepted with --allow-blocking";

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
    /// Run a migration file (or SQL) against a live database, each statement the
    /// safest way that exists, under bounded lock budgets with retries.
    #[command(after_help = EXIT_CODES)]
    Apply(ApplyArgs),
    /// Apply the pending files of a migrations directory (NNNN_name.sql) in order, each
    /// through the engine, with a history table in the schema `pgshift`.
    #[command(after_help = EXIT_CODES)]
    Migrate(MigrateArgs),
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

/// Step budgets, overridable per run.
#[derive(Debug, clap::Args)]
pub struct BudgetArgs {
    /// lock_timeout of steps that block reads or writes (ms): the longest a writer
    /// queues behind one of pgshift's lock requests.
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.lock_timeout_ms, value_name = "MS")]
    pub lock_timeout_ms: u64,
    /// lock_timeout of steps that block neither (concurrent builds, validations) (ms).
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.weak_lock_timeout_ms, value_name = "MS")]
    pub weak_lock_timeout_ms: u64,
    /// statement_timeout of catalog and data steps (ms).
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.statement_timeout_ms, value_name = "MS")]
    pub statement_timeout_ms: u64,
    /// statement_timeout of concurrent builds and validations (ms).
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.build_timeout_ms, value_name = "MS")]
    pub build_timeout_ms: u64,
    /// Attempts per step when a lock times out or a deadlock is detected.
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.max_attempts, value_name = "N")]
    pub max_attempts: u32,
    /// First backoff between attempts (ms); it doubles up to --backoff-max-ms.
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.backoff_initial_ms, value_name = "MS")]
    pub backoff_initial_ms: u64,
    /// Longest backoff between attempts (ms).
    #[arg(long, default_value_t = pgshift::exec::StepBudgets::HOT_TABLE.backoff_max_ms, value_name = "MS")]
    pub backoff_max_ms: u64,
}

impl BudgetArgs {
    /// The budgets these flags state.
    pub fn budgets(&self) -> pgshift::exec::StepBudgets {
        pgshift::exec::StepBudgets {
            lock_timeout_ms: self.lock_timeout_ms,
            weak_lock_timeout_ms: self.weak_lock_timeout_ms,
            statement_timeout_ms: self.statement_timeout_ms,
            build_timeout_ms: self.build_timeout_ms,
            max_attempts: self.max_attempts,
            backoff_initial_ms: self.backoff_initial_ms,
            backoff_max_ms: self.backoff_max_ms,
        }
    }
}

/// `pgshift apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// libpq connection URL or key=value string; PG* environment variables fill in
    /// what it leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The migration file to apply.
    #[arg(value_name = "FILE", conflicts_with = "sql")]
    pub file: Option<String>,
    /// SQL to apply, instead of a file.
    #[arg(long, value_name = "SQL")]
    pub sql: Option<String>,
    /// Run the blocking form of a rewrite on this table (repeatable; `table` or
    /// `schema.table`): it holds ACCESS EXCLUSIVE for the whole rewrite.
    #[arg(long, value_name = "TABLE")]
    pub allow_blocking: Vec<String>,
    /// Output format (progress goes to stderr either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Budgets.
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}

/// `pgshift migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// libpq connection URL or key=value string; PG* environment variables fill in
    /// what it leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The migrations directory.
    #[arg(value_name = "DIR")]
    pub dir: String,
    /// Plan the pending files and print the plan; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Accept gaps in the version numbers (for example timestamp versions).
    #[arg(long)]
    pub allow_gaps: bool,
    /// Apply a pending file even if a newer version is already applied.
    #[arg(long)]
    pub allow_out_of_order: bool,
    /// Run the blocking form of a rewrite on this table (repeatable).
    #[arg(long, value_name = "TABLE")]
    pub allow_blocking: Vec<String>,
    /// Output format (progress goes to stderr either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Budgets.
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}
