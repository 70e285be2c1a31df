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
  3  apply/migrate: done, through a blocking form accepted with --allow-blocking
status/resume/abort/cutover: 0 done; 1 failed or could not connect; 2 refused
(nothing swapped: a busy table, a run in the wrong state, a refusal)";

/// `--version`: the crate version and the git commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PGSHIFT_GIT_COMMIT"),
    ")"
);

/// pgshift: run any schema change on a live PostgreSQL table the safest way that
/// exists, or refuse with a reason.
#[derive(Debug, Parser)]
#[command(name = "pgshift", version = VERSION, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
    /// Output settings shared by every command.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// When to colour text output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    /// On a terminal, unless `NO_COLOR` is set (or `TERM=dumb`).
    Auto,
    /// Always, even when piped.
    Always,
    /// Never.
    Never,
}

/// Flags of every command: colour and how much to say.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Colour severities and verdicts in text output (never in JSON, GitHub or SARIF
    /// output).
    #[arg(long, global = true, value_enum, default_value_t = ColorArg::Auto, value_name = "WHEN")]
    pub color: ColorArg,
    /// Say only the verdict and errors (no progress, no help texts).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say more: whole statements, every attempt, each finding's next step.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// Output format of `pgshift lint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// For people: compiler-style diagnostics.
    Text,
    /// Versioned JSON for machines (`format_version`).
    Json,
    /// GitHub Actions workflow commands: an annotation on each finding's lines.
    Github,
    /// SARIF 2.1.0, for code-scanning interfaces.
    Sarif,
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
    /// List copy-and-swap runs recorded in the database (`pgshift.runs`), newest first.
    #[command(after_help = EXIT_CODES)]
    Status(StatusArgs),
    /// Continue the stopped copy-and-swap run of a table from its checkpoint.
    #[command(after_help = EXIT_CODES)]
    Resume(RunTableArgs),
    /// Remove every artifact of a table's copy-and-swap run (shadow, triggers, change
    /// log, functions) and mark it aborted; refused once the swap has committed.
    #[command(after_help = EXIT_CODES)]
    Abort(RunTableArgs),
    /// Let a run started with --defer-cutover swap now (it re-checks everything first).
    #[command(after_help = EXIT_CODES)]
    Cutover(RunTableArgs),
    /// Start a throwaway local PostgreSQL, load the relay workload, and rewrite its
    /// partitioned `events` table online under live writers; then remove it.
    Demo(DemoArgs),
    /// Explain a lint code or refusal cause: what it means, why it matters, the safer
    /// SQL, and how pgshift runs it (the text of docs/LINTS.md and docs/REFUSALS.md).
    Explain(ExplainArgs),
    /// Print a shell completion script (for example
    /// `pgshift completions bash > /etc/bash_completion.d/pgshift`).
    Completions(CompletionsArgs),
    /// Print the manual page, in roff (`pgshift man | man -l -`).
    Man,
}

/// `pgshift explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// A lint code (`table-rewrite`) or refusal cause (`no-usable-key`); `--list` for
    /// all of them.
    #[arg(value_name = "CODE", required_unless_present = "list")]
    pub code: Option<String>,
    /// List every code and cause with its one-line summary.
    #[arg(long)]
    pub list: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `pgshift completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `pgshift status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `pgshift resume|abort|cutover TABLE`.
#[derive(Debug, clap::Args)]
pub struct RunTableArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The table of the run (`table` or `schema.table`).
    #[arg(value_name = "TABLE")]
    pub table: String,
    /// Output format (progress goes to stderr either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// How copy-and-swap handles writes during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Writes continue; a capture trigger logs every changed key.
    Live,
    /// The application has stopped writing; any write is refused (SQLSTATE 55006).
    Quiesced,
}

/// What to do when verification finds the shadow different from the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DivergenceArg {
    /// Stop the run (resume or abort it later).
    Abort,
    /// Copy the diverged chunks again and verify everything again.
    Repair,
}

/// Options of copy-and-swap runs.
#[derive(Debug, clap::Args)]
pub struct CasArgs {
    /// live: writes continue during the rewrite; quiesced: writes are refused.
    #[arg(long, value_enum, default_value_t = ModeArg::Live)]
    pub mode: ModeArg,
    /// Parallel copy sessions.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=32))]
    pub workers: u16,
    /// Target duration of one copy chunk (ms); chunk sizes adapt toward it.
    #[arg(long, default_value_t = 500, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub chunk_target_ms: u64,
    /// lock_timeout of the swap's ACCESS EXCLUSIVE request (ms): the longest writers
    /// queue behind it per attempt.
    #[arg(long, default_value_t = 1_000, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub cutover_lock_timeout_ms: u64,
    /// Attempts to take the swap's lock before giving up (the source stays).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub cutover_attempts: u32,
    /// Keep the old table after the swap, renamed `_pgshift_old_<run>_<name>`.
    #[arg(long)]
    pub keep_old: bool,
    /// On a verification divergence: stop, or repair and verify again.
    #[arg(long, value_enum, default_value_t = DivergenceArg::Abort)]
    pub on_divergence: DivergenceArg,
    /// After a clean verification, keep the shadow in step and wait for
    /// `pgshift cutover TABLE` before swapping.
    #[arg(long)]
    pub defer_cutover: bool,
}

impl CasArgs {
    /// The run options these flags state.
    pub fn options(&self) -> pgshift::cas::RunOptions {
        pgshift::cas::RunOptions {
            mode: match self.mode {
                ModeArg::Live => pgshift::cas::Mode::Live,
                ModeArg::Quiesced => pgshift::cas::Mode::Quiesced,
            },
            workers: usize::from(self.workers),
            chunk_target_ms: self.chunk_target_ms,
            first_chunk_rows: 5_000,
            cutover: pgshift::cas::CutoverBudgets {
                lock_timeout_ms: self.cutover_lock_timeout_ms,
                attempts: self.cutover_attempts,
                backoff_initial_ms: 100,
                backoff_max_ms: 5_000,
                max_drain: 50_000,
            },
            keep_old: self.keep_old,
            repair: self.on_divergence == DivergenceArg::Repair,
            defer_cutover: self.defer_cutover,
        }
    }
}

/// `pgshift lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Files, directories (their .sql files in migration order), or `-` for stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub format: LintFormat,
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
    /// Where docs/LINTS.md is published, for the SARIF rules' `helpUri` (default: the
    /// package's repository, else this build's own docs directory as a file:// URI).
    #[arg(long, value_name = "URL")]
    pub docs_url: Option<String>,
    /// Also run the files on a throwaway PostgreSQL cluster and report, per statement,
    /// the locks, rewrites and DDL the server really produced (and where lint's static
    /// judgement differs). Without --url the files are replayed from the first on an
    /// empty database.
    #[arg(long)]
    pub trace: bool,
    /// With --trace: the live database whose schema (`pg_dump --schema-only`, by the
    /// pg_dump of its own major version) the throwaway cluster gets. It is only read.
    #[arg(long, value_name = "URL", requires = "trace", hide_env_values = true)]
    pub url: Option<String>,
}

/// `pgshift plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
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
    /// How the runner runs each file (`--sql` is judged statement by statement, as
    /// `apply --sql` runs it).
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
    /// Events seeded into each of the 8 partitions of `events`.
    #[arg(long, default_value_t = 25_000, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub rows_per_partition: u32,
    /// Writes per second of the load, in all.
    #[arg(long, default_value_t = 200.0, value_name = "N")]
    pub rate: f64,
    /// Where the report (JSON) and the chart (SVG) go; default `pgshift-demo-<time>`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<String>,
    /// Copy-and-swap.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub cas: CasArgs,
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
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
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
    /// Copy-and-swap.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub cas: CasArgs,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}

/// `pgshift migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
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
    /// Copy-and-swap.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub cas: CasArgs,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}
