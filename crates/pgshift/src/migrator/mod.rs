//! The front door for applications: [`Migrator`] migrates a database at startup (or
//! from an admin command) through the engine of `pgshift migrate`
//! ([`crate::migrate::migrate`]): the same routes, budgets, history table
//! (`pgshift.migrations`), resume of a failed file, and one runner at a time (the
//! migrate advisory lock). It adds no rule of its own; it chooses the CLI's defaults,
//! writes an embedded directory to disk for the run ([`crate::embed`]), can adopt
//! another runner's history on first run ([`Migrator::adopt`]) and wait for another
//! runner to finish ([`Migrator::wait_for_other_runner`]), and reports progress as
//! `tracing` events (target `pgshift::migrator`).

mod progress;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;
use tracing::Instrument;

use crate::cas::RunOptions;
use crate::connect::{connect, ConnectError, ConnectionSpec, Session, SessionBudgets};
use crate::embed::EmbeddedMigrations;
use crate::exec::{ApplyOptions, BudgetError, CasSettings, StepBudgets, TokioSleeper};
use crate::layout::LayoutError;
use crate::migrate::adopt::{self, Runner};
use crate::migrate::{
    baseline, history, migrate, BaselineSource, BaselineVerdict, FileRun, FileStatus, MigrateError,
    MigrateOptions, MigrateOutcome, MigrateVerdict,
};
use crate::procedural::{AllowProcedural, ProceduralOptions};
use pgshift_sql::QualifiedName;

pub use progress::TracingProgress;

/// Where the migrations are.
#[derive(Clone, Debug)]
pub enum Migrations {
    /// A directory read at run time (every layout `pgshift migrate` reads).
    Path(PathBuf),
    /// A directory embedded at compile time with
    /// [`embed_migrations!`](crate::embed_migrations).
    Embedded(&'static EmbeddedMigrations),
}

impl Migrations {
    /// How reports and errors name it.
    pub fn name(&self) -> String {
        match self {
            Migrations::Path(path) => path.display().to_string(),
            Migrations::Embedded(tree) => tree.directory().to_owned(),
        }
    }
}

impl From<&'static EmbeddedMigrations> for Migrations {
    fn from(tree: &'static EmbeddedMigrations) -> Self {
        Migrations::Embedded(tree)
    }
}

/// Migrates a database through the engine of `pgshift migrate`. Built with
/// [`Migrator::new`] (or [`Migrator::from_path`]), set with its builder methods, run with
/// [`Migrator::run`], or planned only with [`Migrator::plan`].
///
/// Defaults are `pgshift migrate`'s without flags: [`StepBudgets::HOT_TABLE`],
/// copy-and-swap with [`RunOptions::STANDARD`], no blocking form accepted, procedural
/// code traced on a clone, gaps and out-of-order files refused, another runner's
/// history refused, another pgshift runner not waited for.
#[derive(Clone, Debug)]
pub struct Migrator {
    migrations: Migrations,
    budgets: StepBudgets,
    copy_and_swap: Option<RunOptions>,
    allow_blocking: Vec<QualifiedName>,
    max_table_size: Option<u64>,
    allow_procedural: Vec<AllowProcedural>,
    allow_gaps: bool,
    allow_out_of_order: bool,
    max_file_bytes: u64,
    adopt: Option<Runner>,
    wait_for_other_runner: Duration,
}

/// What a run (or a plan) did: the engine's verdict, and what was adopted first.
#[derive(Clone, Debug, Serialize)]
pub struct MigrationReport {
    /// The migrations, as [`Migrations::name`] names them.
    pub migrations: String,
    /// The other runner's history recorded as applied before the run
    /// ([`Migrator::adopt`]), when this run adopted it.
    pub adopted: Option<BaselineVerdict>,
    /// The engine's verdict, as `pgshift migrate --format json` reports it.
    pub verdict: MigrateVerdict,
}

impl MigrationReport {
    /// How the run ended.
    pub fn outcome(&self) -> MigrateOutcome {
        self.verdict.outcome
    }

    /// Whether every pending file was applied (or, for a plan, planned without a
    /// refusal): the outcome is neither refused nor failed.
    pub fn succeeded(&self) -> bool {
        matches!(
            self.verdict.outcome,
            MigrateOutcome::Done | MigrateOutcome::DoneWithBlocking | MigrateOutcome::Planned
        )
    }

    /// The files this run applied.
    pub fn applied(&self) -> impl Iterator<Item = &FileRun> {
        self.verdict.files.iter().filter(|file| {
            matches!(
                file.status,
                FileStatus::Applied | FileStatus::AppliedBlocking
            )
        })
    }

    /// The file that stopped the run (refused or failed), if one did.
    pub fn stopped_at(&self) -> Option<&FileRun> {
        self.verdict
            .files
            .iter()
            .find(|file| matches!(file.status, FileStatus::Refused | FileStatus::Failed))
    }
}

/// Why a run could not give a verdict. A refused or failed file is not an error: it is
/// the report's outcome.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MigratorError {
    /// A step budget out of its range.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The connection string is unusable, or connecting failed (a pooler without
    /// session affinity is refused here).
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The embedded directory could not be written to a temporary directory.
    #[error(
        "{directory}: cannot write the embedded migrations to a temporary directory: {source}"
    )]
    Embedded {
        /// The embedded directory.
        directory: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The engine stopped before any file: the directory, the history, another runner.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
}

impl Migrator {
    /// A migrator of `migrations` with `pgshift migrate`'s defaults.
    pub fn new(migrations: impl Into<Migrations>) -> Self {
        Migrator {
            migrations: migrations.into(),
            budgets: StepBudgets::HOT_TABLE,
            copy_and_swap: Some(RunOptions::STANDARD),
            allow_blocking: Vec::new(),
            max_table_size: None,
            allow_procedural: Vec::new(),
            allow_gaps: false,
            allow_out_of_order: false,
            max_file_bytes: crate::source::DEFAULT_MAX_FILE_BYTES,
            adopt: None,
            wait_for_other_runner: Duration::ZERO,
        }
    }

    /// A migrator of the directory at `path`, read at run time.
    pub fn from_path(path: impl Into<PathBuf>) -> Self {
        Migrator::new(Migrations::Path(path.into()))
    }

    /// The step budgets (`--lock-timeout-ms` and the others).
    #[must_use]
    pub fn budgets(mut self, budgets: StepBudgets) -> Self {
        self.budgets = budgets;
        self
    }

    /// Copy-and-swap's options; `None` refuses every rewrite pgshift would run through
    /// copy-and-swap instead.
    #[must_use]
    pub fn copy_and_swap(mut self, options: Option<RunOptions>) -> Self {
        self.copy_and_swap = options;
        self
    }

    /// Runs the blocking form of a rewrite on `table` (`--allow-blocking`); a table no
    /// pending file touches is an error, as on the command line.
    #[must_use]
    pub fn allow_blocking(mut self, table: QualifiedName) -> Self {
        self.allow_blocking.push(table);
        self
    }

    /// Refuses an accepted blocking form on a table larger than `bytes`
    /// (`--max-table-size`).
    #[must_use]
    pub fn max_table_size(mut self, bytes: Option<u64>) -> Self {
        self.max_table_size = bytes;
        self
    }

    /// Runs a procedural statement as written whatever its trace shows
    /// (`--allow-procedural`).
    #[must_use]
    pub fn allow_procedural(mut self, allow: AllowProcedural) -> Self {
        self.allow_procedural.push(allow);
        self
    }

    /// Accepts gaps in sequential version numbers (`--allow-gaps`).
    #[must_use]
    pub fn allow_gaps(mut self, allow: bool) -> Self {
        self.allow_gaps = allow;
        self
    }

    /// Applies a pending file older than an applied one (`--allow-out-of-order`).
    #[must_use]
    pub fn allow_out_of_order(mut self, allow: bool) -> Self {
        self.allow_out_of_order = allow;
        self
    }

    /// The largest file read, in bytes (`--max-file-bytes`).
    #[must_use]
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// On a database `runner` migrated and pgshift never did, records what `runner`'s
    /// history says is applied (checked against the files: sqlx's SHA-384 of each) as
    /// applied without running it, then migrates: `pgshift migrate --baseline RUNNER`
    /// followed by `pgshift migrate`, in one call. A service that ran sqlx's
    /// migrator switches with `.adopt(Runner::Sqlx)`. Once pgshift has a history, it
    /// does nothing. Without it, such a database is refused
    /// ([`MigrateError::ForeignHistory`]).
    #[must_use]
    pub fn adopt(mut self, runner: Runner) -> Self {
        self.adopt = Some(runner);
        self
    }

    /// When another process holds the migrate lock (another instance of the service
    /// starting), tries again every second for up to `wait` instead of returning
    /// [`MigrateError::AnotherRunner`] at once; that process's files are then already
    /// applied. Zero (the default) does not wait, as `pgshift migrate` does not.
    #[must_use]
    pub fn wait_for_other_runner(mut self, wait: Duration) -> Self {
        self.wait_for_other_runner = wait;
        self
    }

    /// The migrations.
    pub fn migrations(&self) -> &Migrations {
        &self.migrations
    }

    /// Migrates the database at `url` (a libpq URL or `key=value` string; the `PG*`
    /// variables fill in what it leaves out): applies every pending file in order and
    /// stops at the first refused or failed one.
    pub async fn run(&self, url: &str) -> Result<MigrationReport, MigratorError> {
        self.execute(url, false).await
    }

    /// Plans the pending files against the database at `url` and writes nothing
    /// (`pgshift migrate --dry-run`). A database that [`Migrator::adopt`] would adopt
    /// is not adopted by a plan, so it is refused as `--dry-run` refuses it.
    pub async fn plan(&self, url: &str) -> Result<MigrationReport, MigratorError> {
        self.execute(url, true).await
    }

    async fn execute(&self, url: &str, dry_run: bool) -> Result<MigrationReport, MigratorError> {
        let name = self.migrations.name();
        let span = tracing::info_span!(target: "pgshift::migrator", "migrate", migrations = %name, dry_run);
        async {
            self.budgets.validate()?;
            let spec = ConnectionSpec::parse(url)?;
            // An embedded tree is on disk for the length of the run.
            let (dir, materialized) = match &self.migrations {
                Migrations::Path(path) => (path.clone(), None),
                Migrations::Embedded(tree) => {
                    let written =
                        tree.materialize()
                            .map_err(|source| MigratorError::Embedded {
                                directory: tree.directory().to_owned(),
                                source,
                            })?;
                    (written.path().to_path_buf(), Some(written))
                }
            };
            let relabel = Relabel {
                from: materialized.as_ref().map(|tree| tree.path().to_path_buf()),
                to: name.clone(),
            };
            let session = connect(&spec, &SessionBudgets::APPLY).await?;
            let monitor = connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await.ok();
            let options = self.options(url, &spec, dry_run);
            let deadline = Instant::now() + self.wait_for_other_runner;
            let mut report = loop {
                let attempt = self
                    .once(&session, monitor.as_ref(), &dir, &options)
                    .await;
                match attempt {
                    Err(MigrateError::AnotherRunner { holder }) if Instant::now() < deadline => {
                        tracing::info!(target: "pgshift::migrator", holder, "another pgshift migrate is running; waiting for it");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    other => break other.map_err(|err| relabel.error(err))?,
                }
            };
            relabel.report(&mut report);
            report.migrations = name;
            progress::files(&report);
            Ok(report)
        }
        .instrument(span)
        .await
    }

    /// The engine's options, as `pgshift migrate` builds them from its flags.
    fn options(&self, url: &str, spec: &ConnectionSpec, dry_run: bool) -> MigrateOptions {
        MigrateOptions {
            apply: ApplyOptions {
                max_table_size: self.max_table_size,
                budgets: self.budgets,
                allow_blocking: self.allow_blocking.clone(),
                copy_and_swap: self.copy_and_swap.clone().map(|options| CasSettings {
                    spec: spec.clone(),
                    options,
                    standbys: Vec::new(),
                }),
            },
            allow_gaps: self.allow_gaps,
            allow_out_of_order: self.allow_out_of_order,
            dry_run,
            max_file_bytes: self.max_file_bytes,
            procedural: Some(ProceduralOptions {
                conninfo: url.to_owned(),
                allow: self.allow_procedural.clone(),
            }),
        }
    }

    /// One try: the adoption when asked and due, then the engine's run.
    async fn once(
        &self,
        session: &Session,
        monitor: Option<&Session>,
        dir: &Path,
        options: &MigrateOptions,
    ) -> Result<MigrationReport, MigrateError> {
        let adopted = match self.adopt {
            Some(runner) if !options.dry_run => adopt_if_due(session, dir, runner).await?,
            _ => None,
        };
        let mut progress = TracingProgress;
        let verdict = migrate(session, monitor, dir, options, &TokioSleeper, &mut progress).await?;
        Ok(MigrationReport {
            migrations: String::new(),
            adopted,
            verdict,
        })
    }
}

/// `--baseline RUNNER` when pgshift has no history and `runner`'s table records
/// something; nothing otherwise.
async fn adopt_if_due(
    session: &Session,
    dir: &Path,
    runner: Runner,
) -> Result<Option<BaselineVerdict>, MigrateError> {
    let client = session.client();
    if !history::rows_if_any(client).await?.is_empty() {
        return Ok(None);
    }
    let found = adopt::find(client, session.user_search_path(), session.current_user()).await?;
    if found.is_none_or(|found| found.runner != runner) {
        return Ok(None);
    }
    let source = match runner {
        Runner::Sqlx => BaselineSource::Sqlx,
        other => BaselineSource::Runner(other),
    };
    tracing::info!(target: "pgshift::migrator", runner = runner.name(), "adopting the runner's history");
    baseline(session, dir, &source, false).await.map(Some)
}

/// Puts the embedded directory's name where the engine saw its temporary copy.
struct Relabel {
    from: Option<PathBuf>,
    to: String,
}

impl Relabel {
    fn text(&self, text: &mut String) {
        if let Some(from) = &self.from {
            let from = from.display().to_string();
            if let Some(rest) = text.strip_prefix(&from) {
                *text = format!("{}{rest}", self.to);
            }
        }
    }

    fn path(&self, path: &mut PathBuf) {
        if let Some(rest) = self
            .from
            .as_ref()
            .and_then(|from| path.strip_prefix(from).ok())
        {
            *path = Path::new(&self.to).join(rest);
        }
    }

    fn report(&self, report: &mut MigrationReport) {
        for file in &mut report.verdict.files {
            self.text(&mut file.path);
        }
        for file in report.adopted.iter_mut().flat_map(|v| v.files.iter_mut()) {
            self.path(&mut file.path);
        }
    }

    fn error(&self, mut err: MigrateError) -> MigrateError {
        match &mut err {
            MigrateError::Directory { path: text, .. }
            | MigrateError::NothingToRead { dir: text, .. }
            | MigrateError::ForeignHistory { dir: text, .. }
            | MigrateError::Layout(LayoutError::Mixed { dir: text, .. }) => self.text(text),
            MigrateError::DuplicateVersion { first, second, .. } => {
                self.text(first);
                self.text(second);
            }
            _ => {}
        }
        err
    }
}
