//! Flags and commands.

use clap::{Parser, Subcommand, ValueEnum};
use pgshift_sql::QualifiedName;

const EXIT_CODES: &str = "\
Exit codes:
  0  lint: no error-severity finding; plan: every statement can run online;
     apply/migrate: done, online; migrate --dry-run: every pending file can run
  1  the command line, an input file, the directory or the connection could not be
     used (nothing ran); apply/migrate: failed after starting (the committed prefix
     is reported), or stopped at a safe point by SIGINT/SIGTERM (a copy-and-swap run
     stays resumable; the resume and abort commands are printed)
  2  lint: at least one error-severity finding; plan, migrate --dry-run: a statement
     would be refused; apply: refused, nothing committed (a refused statement, the
     lock budget, a table busy with another run); migrate: stopped at a refused file,
     an applied file changed, or another runner holds the lock
  3  apply/migrate: done, through a blocking form accepted with --allow-blocking
     or procedural code accepted with --allow-procedural
  130, 143  a second SIGINT (130) or SIGTERM (143) ended the process at once, with
     no verdict; a copy-and-swap run it was running stays resumable
status/resume/abort: 0 done; 1 failed, interrupted or could not connect; 2 refused
(nothing changed: a busy table, a run in the wrong state, a refusal, a divergence)
cutover: 0 swapped; 1 the run failed, no live process runs it, or no outcome within
--wait-timeout-s; 2 refused (the run's reason; or no deferred run to swap)
cutover --no-wait: 0 requested, and a live process runs the run; 1 requested, but no
process runs it (pgshift resume swaps it); 2 refused
throttle --pause|--resume: 0 requested, and a live process runs the run (it follows
within a second); 1 requested, but no process runs it (it holds when the run resumes)
With --format json, stdout holds one JSON document, errors included (kind \"error\",
code, message, hint, exit_code).";

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
    Resume(ResumeArgs),
    /// Remove every artifact of a table's copy-and-swap run (shadow, triggers, change
    /// log, functions) and mark it aborted; refused once the swap has committed.
    #[command(after_help = EXIT_CODES)]
    Abort(RunTableArgs),
    /// Pause or resume the work of a table's running copy-and-swap run (recorded in its
    /// run record; the running process follows within a second).
    #[command(after_help = EXIT_CODES)]
    Throttle(ThrottleArgs),
    /// Let a run started with --defer-cutover swap now (it re-checks everything first),
    /// and wait for the outcome.
    #[command(after_help = EXIT_CODES)]
    Cutover(CutoverArgs),
    /// Start a throwaway local PostgreSQL, load the relay workload, and rewrite its
    /// partitioned `events` table online under live writers; then remove it.
    Demo(DemoArgs),
    /// Explain a lint code or refusal cause: what it means, why it matters, the safer
    /// SQL, and how pgshift runs it (the text of docs/LINTS.md and docs/REFUSALS.md).
    Explain(ExplainArgs),
    /// List every statement form pgshift classifies with its route, work class, lock
    /// and transaction use on each PostgreSQL major 14-18, as the classifier answers
    /// offline (docs/CAPABILITIES.md).
    Capabilities(CapabilitiesArgs),
    /// Print a shell completion script (for example
    /// `pgshift completions bash > /etc/bash_completion.d/pgshift`).
    Completions(CompletionsArgs),
    /// Print the manual page, in roff (`pgshift man | man -l -`).
    Man,
    /// Audit a live database's triggers (read-only): which writes skip each one
    /// (replica sessions, partitions lacking a clone, disabled or REPLICA-only
    /// states, partitions attached later), grouped by table, with what to do.
    #[command(after_help = AUDIT_EXIT_CODES)]
    Audit(AuditArgs),
    /// Pull the live schema into a new folder of SQL files people review (one per
    /// table with everything that belongs to it, one per view, function, type,
    /// sequence and schema, and a manifest in dependency order), proven first on a
    /// throwaway cluster of the server's major version to rebuild the schema exactly.
    #[command(after_help = PULL_EXIT_CODES)]
    Pull(PullArgs),
    /// Compare desired schema files (a folder `pull` wrote, a SQL file, or -) with the
    /// live database: both built on a throwaway cluster, the changes written from
    /// syntax trees, proven there to converge, and planned as `plan` plans them.
    #[command(after_help = DIFF_EXIT_CODES)]
    Diff(DiffArgs),
    /// Rewrite desired schema files (a folder, a SQL file, or -) into a new folder in
    /// the canonical layout `pull` writes: run on a throwaway cluster and pulled back,
    /// with pull's proof.
    #[command(after_help = PULL_EXIT_CODES)]
    Fmt(FmtArgs),
}

impl Command {
    /// Whether the command only reads and prints (nothing it runs must outlive a
    /// closed stdout).
    pub fn reads_only(&self) -> bool {
        matches!(
            self,
            Command::Lint(_)
                | Command::Plan(_)
                | Command::Status(_)
                | Command::Audit(_)
                | Command::Diff(_)
                | Command::Explain(_)
                | Command::Capabilities(_)
                | Command::Completions(_)
                | Command::Man
        )
    }
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

/// `pgshift capabilities`.
#[derive(Debug, clap::Args)]
pub struct CapabilitiesArgs {
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
    #[arg(value_name = "TABLE", value_parser = crate::table_arg::parse)]
    pub table: QualifiedName,
    /// Output format (progress goes to stderr either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `pgshift resume TABLE`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunTableArgs,
    /// The standbys read at the cutover.
    #[command(flatten)]
    pub standby: StandbyArgs,
}

/// Standbys read on their own connections at the cutover.
#[derive(Debug, clap::Args)]
pub struct StandbyArgs {
    /// A standby of this primary (libpq URL or key=value string; repeatable). Before
    /// the swap takes its lock, pgshift reads there the queries holding or waiting for
    /// a lock on the table, waits for them within the cutover's budget, and refuses the
    /// swap while any is left or the standby cannot be read; it reports how many
    /// queries the swap's replay cancelled there. Each must be a standby of this
    /// primary (in recovery, the same system identifier), checked before any work. A
    /// run started with it is resumed only with it (the record keeps host, port and
    /// database, never a password).
    #[arg(long = "standby-url", value_name = "URL")]
    pub standby_url: Vec<String>,
}

impl StandbyArgs {
    /// The connection specs of the standbys.
    pub fn specs(&self) -> Result<Vec<pgshift::connect::ConnectionSpec>, crate::errors::CliError> {
        self.standby_url
            .iter()
            .map(|text| {
                pgshift::connect::ConnectionSpec::parse(text)
                    .map_err(|err| crate::errors::invalid_url(&err))
            })
            .collect()
    }
}

/// `pgshift throttle TABLE --pause|--resume`.
#[derive(Debug, clap::Args)]
#[group(id = "action", required = true, multiple = false, args = ["pause", "resume"])]
pub struct ThrottleArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunTableArgs,
    /// Pause the copy, index builds and verification (the change capture and the
    /// applier go on, so the shadow stays in step).
    #[arg(long)]
    pub pause: bool,
    /// Resume them (the throttle's own signals still pace them).
    #[arg(long)]
    pub resume: bool,
}

/// `pgshift cutover TABLE`.
#[derive(Debug, clap::Args)]
pub struct CutoverArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunTableArgs,
    /// Only record the request and return (exit 0 when a live process runs the run,
    /// 1 when none does); without it, wait for the swap and exit by its outcome.
    #[arg(long)]
    pub no_wait: bool,
    /// The longest wait for the outcome, in seconds (progress on stderr meanwhile).
    #[arg(long, default_value_t = 600, value_name = "S", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub wait_timeout_s: u64,
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

/// How verification compares the shadow with the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VerifyArg {
    /// Per chunk, a digest of each side (count, sum and XOR of 64-bit row hashes) in
    /// one snapshot; chunks whose digests differ are compared row by row.
    Digest,
    /// Every chunk compared row by row, joined on the key.
    Exact,
}

/// Options of copy-and-swap runs.
#[derive(Debug, clap::Args)]
pub struct CasArgs {
    /// live: writes continue during the rewrite; quiesced: writes are refused.
    #[arg(long, value_enum, default_value_t = ModeArg::Live)]
    pub mode: ModeArg,
    /// Parallel sessions of the copy and of verification; also the index builds run at
    /// once when verification waits for them (each with maintenance_work_mem = 256MB).
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
    /// Throttle: pause the copy, index builds and verification while any standby's
    /// replay lag is over this (slowed from half of it), and refuse the swap while a
    /// standby does not replay within it (`500ms`, `10s`, `off`).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::throttle_arg::duration_ms)]
    pub max_replica_lag: crate::throttle_arg::Limit,
    /// Throttle: pause the work while the 99th-percentile commit latency of pgshift's
    /// own probe transaction is over this (slowed from half of it; `off` to ignore).
    #[arg(long, default_value = "50ms", value_name = "DURATION", value_parser = crate::throttle_arg::duration_ms)]
    pub max_writer_p99: crate::throttle_arg::Limit,
    /// Throttle: pause the work while pgshift's probe commits this many times slower
    /// (its 95th percentile) than in a baseline measured before the work starts, a
    /// baseline under 1 ms counted as 1 ms, while any session of the application is at
    /// work (slowed from half of the way; `1.5x`, `off` to ignore).
    #[arg(long, default_value = "2", value_name = "RATIO", value_parser = crate::throttle_arg::ratio)]
    pub max_writer_slowdown: crate::throttle_arg::RatioLimit,
    /// Throttle: pause the work while the server writes WAL faster than this
    /// (`64MB`, `512kB/s`; default off).
    #[arg(long, default_value = "off", value_name = "RATE", value_parser = crate::throttle_arg::bytes_per_s)]
    pub max_wal_rate: crate::throttle_arg::Limit,
    /// How verification compares the shadow with the source.
    #[arg(long, value_enum, default_value_t = VerifyArg::Digest)]
    pub verify: VerifyArg,
    /// The room the run has on the database's volumes (`40GB`): required where free
    /// disk cannot be measured (a remote server, a role that may not read
    /// data_directory); the run is refused if it needs more, and stops and removes
    /// itself before it writes more.
    #[arg(long, value_name = "SIZE", value_parser = crate::throttle_arg::bytes)]
    pub disk_room: Option<u64>,
}

impl CasArgs {
    /// The run options these flags state.
    pub fn options(&self) -> pgshift::cas::RunOptions {
        pgshift::cas::RunOptions {
            disk_room: self.disk_room,
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
            throttle: pgshift::cas::ThrottleLimits {
                max_replica_lag_ms: self.max_replica_lag.0,
                max_writer_p99_ms: self.max_writer_p99.0,
                max_writer_slowdown: self.max_writer_slowdown.0,
                max_wal_bytes_per_s: self.max_wal_rate.0,
                ..pgshift::cas::ThrottleLimits::default()
            },
            verify: match self.verify {
                VerifyArg::Digest => pgshift::cas::VerifyMethod::Digest,
                VerifyArg::Exact => pgshift::cas::VerifyMethod::Exact,
            },
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
    /// Run this procedural statement as written, whatever its trace shows it locks
    /// (repeatable; `FILE` for every procedural statement of a file, `FILE:LINE` for
    /// the one starting on LINE; FILE is the path or its final components). Reported
    /// as accepted, exit 3. Refused when it names no procedural statement.
    #[arg(long, value_name = "FILE[:LINE]", value_parser = pgshift::procedural::AllowProcedural::parse)]
    pub allow_procedural: Vec<pgshift::procedural::AllowProcedural>,
    /// Copy-and-swap options, as `apply` would be given them: the budgets the plan
    /// states for the locks a copy-and-swap run takes.
    #[command(flatten, next_help_heading = "Copy-and-swap (as apply would run it)")]
    pub cas: CasArgs,
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
    #[arg(value_name = "FILE", conflicts_with_all = ["sql", "desired"])]
    pub file: Option<String>,
    /// Converge onto desired schema files (a folder `pull` wrote, a SQL file, or -)
    /// instead: the plan `pgshift diff` shows, proven there to converge, run through
    /// the engine like a file.
    #[arg(long, value_name = "DESIRED", conflicts_with = "sql")]
    pub desired: Option<String>,
    /// With --desired: run only if the database and the plan are what `pgshift diff`
    /// showed (its `fingerprint`); refused with nothing run otherwise.
    #[arg(long, value_name = "FINGERPRINT", requires = "desired")]
    pub expect_fingerprint: Option<String>,
    /// With --desired: accept the plan's destructive changes (drops, type changes):
    /// all of them, or only the objects named as `diff` names them (`table app.t`,
    /// `column app.t.c`). Without it a plan with any is refused with nothing run.
    #[arg(long, value_name = "OBJECT", num_args = 0.., requires = "desired")]
    pub allow_destructive: Option<Vec<String>>,
    /// With --desired: the access review's fingerprint `pgshift diff` printed for the
    /// plan's changes of row-level security, policies and grants; a plan with any runs
    /// only when it matches.
    #[arg(long, value_name = "FINGERPRINT", requires = "desired")]
    pub expect_rls_review: Option<String>,
    /// With --desired: manage only this schema (repeatable), as `pgshift diff --schema`.
    #[arg(long, value_name = "SCHEMA", requires = "desired")]
    pub schema: Vec<String>,
    /// SQL to apply, instead of a file.
    #[arg(long, value_name = "SQL")]
    pub sql: Option<String>,
    /// Run the blocking form of a rewrite on this table (repeatable; `table` or
    /// `schema.table`): it holds ACCESS EXCLUSIVE for the whole rewrite. Refused
    /// when no statement touches the table.
    #[arg(long, value_name = "TABLE", value_parser = crate::table_arg::parse)]
    pub allow_blocking: Vec<QualifiedName>,
    /// Refuse a blocking form accepted with --allow-blocking on a table larger than
    /// SIZE (`10GB`, `500MB`; heap bytes over its partitions, read before anything
    /// runs): it would block writes for as long as the work takes. Online forms are not
    /// affected.
    #[arg(long, value_name = "SIZE", value_parser = crate::throttle_arg::bytes)]
    pub max_table_size: Option<u64>,
    /// Run this procedural statement as written, whatever its trace shows it locks
    /// (repeatable; `FILE` for every procedural statement of a file, `FILE:LINE` for
    /// the one starting on LINE; FILE is the path or its final components). Reported
    /// as accepted, exit 3. Refused when it names no procedural statement.
    #[arg(long, value_name = "FILE[:LINE]", value_parser = pgshift::procedural::AllowProcedural::parse)]
    pub allow_procedural: Vec<pgshift::procedural::AllowProcedural>,
    /// Output format (progress goes to stderr either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Budgets.
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// Copy-and-swap.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub cas: CasArgs,
    /// Standbys read at the cutover of copy-and-swap runs.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub standby: StandbyArgs,
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
    /// Accept gaps in sequential version numbers (timestamp and Flyway versions are
    /// never checked for gaps).
    #[arg(long)]
    pub allow_gaps: bool,
    /// Apply a pending file even if a newer version is already applied.
    #[arg(long)]
    pub allow_out_of_order: bool,
    /// Adopt pgshift on a database another runner migrated: record files as applied
    /// without running them, with their checksums. `VERSION`: every file up to it;
    /// `sqlx`: the versions sqlx's `_sqlx_migrations` records as successful, each
    /// checked against its file's SHA-384; `flyway`, `golang-migrate`, `dbmate`,
    /// `rails`, `pop`, `diesel`, `refinery`, `goose`: the versions that runner's
    /// history table records, each of which must have its file. Nothing else runs;
    /// `migrate` then continues with the files after them. With `--dry-run`, says what
    /// it would record.
    #[arg(long, value_name = "VERSION|RUNNER", value_parser = parse_baseline)]
    pub baseline: Option<pgshift::migrate::BaselineSource>,
    /// Run the blocking form of a rewrite on this table (repeatable). Refused when
    /// no pending file touches the table.
    #[arg(long, value_name = "TABLE", value_parser = crate::table_arg::parse)]
    pub allow_blocking: Vec<QualifiedName>,
    /// Refuse a blocking form accepted with --allow-blocking on a table larger than
    /// SIZE (`10GB`, `500MB`; heap bytes over its partitions, read before anything
    /// runs): it would block writes for as long as the work takes. Online forms are not
    /// affected.
    #[arg(long, value_name = "SIZE", value_parser = crate::throttle_arg::bytes)]
    pub max_table_size: Option<u64>,
    /// Run this procedural statement as written, whatever its trace shows it locks
    /// (repeatable; `FILE` for every procedural statement of a file, `FILE:LINE` for
    /// the one starting on LINE; FILE is the path or its final components). Reported
    /// as accepted, exit 3. Refused when it names no procedural statement.
    #[arg(long, value_name = "FILE[:LINE]", value_parser = pgshift::procedural::AllowProcedural::parse)]
    pub allow_procedural: Vec<pgshift::procedural::AllowProcedural>,
    /// Output format (progress goes to stderr either way).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Budgets.
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// Copy-and-swap.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub cas: CasArgs,
    /// Standbys read at the cutover of copy-and-swap runs.
    #[command(flatten, next_help_heading = "Copy-and-swap")]
    pub standby: StandbyArgs,
    /// The largest file read, in bytes.
    #[arg(long, default_value_t = pgshift::source::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
}

/// `--baseline VERSION` or `--baseline RUNNER`.
fn parse_baseline(value: &str) -> Result<pgshift::migrate::BaselineSource, String> {
    if value.eq_ignore_ascii_case("sqlx") {
        return Ok(pgshift::migrate::BaselineSource::Sqlx);
    }
    if let Some(runner) = pgshift::migrate::adopt::Runner::parse(value) {
        return Ok(pgshift::migrate::BaselineSource::Runner(runner));
    }
    let version_like = value.starts_with(|c: char| c.is_ascii_digit())
        && value
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if version_like {
        Ok(pgshift::migrate::BaselineSource::UpTo(value.to_owned()))
    } else {
        Err(format!(
            "{value:?} is neither a version (7, 1.1, 2023-01-01-000000) nor `sqlx`"
        ))
    }
}

const AUDIT_EXIT_CODES: &str = "\
Findings that let a write bypass a trigger (exit 2):
  missing-clone         a partition lacks the clone of a parent's row trigger
  disabled              a trigger (or a partition's clone) is disabled
  skipped-in-replica    ORIGIN-enabled (the default): session_replication_role =
                        replica sessions skip it
  replica-only          REPLICA-enabled: ordinary sessions skip it
  parent-state-differs  a partitioned table's own entry is ORIGIN, REPLICA or
                        disabled: partitions created or attached later copy it
Notes (exit 0): clone-renamed, partition-only-trigger, statement-trigger-on-parent,
deferrable-constraint-trigger, truncate-skips-delete-triggers,
foreign-keys-skipped-in-replica. See docs/AUDIT.md.

Exit codes:
  0  no finding lets a write bypass a trigger
  1  the command line or the connection could not be used, or the catalog could
     not be read
  2  some finding lets a write bypass a trigger";

const PULL_EXIT_CODES: &str = "\
Exit codes:
  0  the files were written, and rebuild the live schema exactly
  1  the command line or the connection could not be used, or reading the schema,
     running the throwaway cluster or writing the files failed
  2  refused, nothing written: the folder is not empty, the schema holds an object
     kind desired state does not cover, or the files would not rebuild it exactly";

const DIFF_EXIT_CODES: &str = "\
Exit codes:
  0  no difference, or every change can run online
  1  the command line, the connection or the desired files could not be used, or the
     throwaway cluster failed
  2  refused or found wanting: a difference desired state does not cover, a plan that
     does not converge, or a change the plan would refuse";

/// `pgshift diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The desired schema: a folder with manifest.sql (as `pull` writes), a SQL file
    /// run by psql, or - for standard input.
    #[arg(value_name = "DESIRED")]
    pub desired: String,
    /// Also write the plan's SQL to this file (it must not exist), for `pgshift apply`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
    /// Manage only this schema (repeatable); by default, every schema the desired
    /// files name. Nothing outside the managed schemas is changed.
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Vec<String>,
    #[command(flatten)]
    pub cas: CasArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `pgshift fmt`.
#[derive(Debug, clap::Args)]
pub struct FmtArgs {
    /// The desired schema: a folder with manifest.sql, a SQL file, or - for stdin.
    #[arg(value_name = "DESIRED")]
    pub desired: String,
    /// The folder to write: it must not exist, or be empty.
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// A live database whose major version, roles and tablespaces the files run
    /// with (read only); without it, the PostgreSQL installation pgshift finds and no
    /// roles.
    #[arg(long, value_name = "URL")]
    pub like: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `pgshift pull`.
#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The folder to write: it must not exist, or be empty (pull never overwrites).
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `pgshift audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// libpq connection URL or key=value string. Without it (or PGSHIFT_URL),
    /// DATABASE_URL; without that, the PG* variables. PG* variables fill in what a
    /// URL leaves out.
    #[arg(long, env = "PGSHIFT_URL", value_name = "URL", hide_env_values = true)]
    pub url: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Cas {
        #[command(flatten)]
        cas: super::CasArgs,
    }

    #[test]
    fn the_throttle_flags_default_to_the_engines_limits() {
        let cas = Cas::try_parse_from(["pgshift"]).expect("the defaults parse");
        assert_eq!(
            cas.cas.options().throttle,
            pgshift::cas::throttle::DEFAULT_LIMITS
        );
        let cas = Cas::try_parse_from(["pgshift", "--max-writer-slowdown", "1.5x"])
            .expect("a ratio parses");
        assert_eq!(cas.cas.options().throttle.max_writer_slowdown, Some(1.5));
        let cas =
            Cas::try_parse_from(["pgshift", "--max-writer-slowdown", "off"]).expect("off parses");
        assert_eq!(cas.cas.options().throttle.max_writer_slowdown, None);
        assert!(Cas::try_parse_from(["pgshift", "--max-writer-slowdown", "1"]).is_err());
    }

    #[derive(Parser)]
    struct Budgets {
        #[command(flatten)]
        budgets: super::BudgetArgs,
    }

    /// `pgshift::Migrator` runs with the library's presets: they must be what
    /// `pgshift migrate` runs with when no flag is given.
    #[test]
    fn the_flags_default_to_the_library_presets() {
        let cas = Cas::try_parse_from(["pgshift"]).expect("the defaults parse");
        assert_eq!(cas.cas.options(), pgshift::cas::RunOptions::STANDARD);
        let budgets = Budgets::try_parse_from(["pgshift"]).expect("the defaults parse");
        assert_eq!(
            budgets.budgets.budgets(),
            pgshift::exec::StepBudgets::HOT_TABLE
        );
    }
}
