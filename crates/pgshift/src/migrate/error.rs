//! Why a migrations run could not proceed.

use thiserror::Error;

/// An error of `migrate`, before or between files.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The directory cannot be read.
    #[error("{path}: cannot read the migrations directory: {source}")]
    Directory {
        /// The directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `.sql` file without a leading version number.
    #[error("{file}: a migration file name must start with its version number (NNNN_name.sql, V1__name.sql)")]
    Unnumbered {
        /// The file.
        file: String,
    },
    /// The directory's layout is mixed or ambiguous.
    #[error(transparent)]
    Layout(crate::layout::LayoutError),
    /// A directory with no migration file that any layout reads.
    #[error("{dir}: no migration file that a known layout reads (numbered, sqlx, golang-migrate, pop, dbmate, goose, Flyway, diesel folders): {found}; nothing was run")]
    NothingToRead {
        /// The directory.
        dir: String,
        /// What it holds.
        found: String,
    },
    /// `--baseline VERSION` names a version no file has.
    #[error("--baseline {version}: no migration file has version {version}; nothing was recorded")]
    BaselineVersionUnknown {
        /// The version asked for.
        version: String,
    },
    /// A file to baseline has a history row that is not done.
    #[error("{version} is in pgshift.migrations as {outcome}: a run of it has not ended (another migrate runs it, or one was stopped mid-file); run migrate to finish it before baselining; nothing was recorded")]
    BaselineConflict {
        /// The version.
        version: String,
        /// Its recorded outcome.
        outcome: String,
    },
    /// `--baseline sqlx` without sqlx's table.
    #[error("--baseline sqlx: no _sqlx_migrations table in this database (sqlx creates it in the first schema of its search_path); use --baseline VERSION instead; nothing was recorded")]
    SqlxTableMissing,
    /// sqlx's record and the directory disagree.
    #[error("--baseline sqlx: _sqlx_migrations and the directory disagree, so nothing was recorded:{}", mismatches.iter().map(|m| format!("\n  {}", m.problem)).collect::<String>())]
    SqlxMismatch {
        /// Each disagreement.
        mismatches: Vec<super::baseline::SqlxMismatch>,
    },
    /// A database another runner migrated, with no pgshift history: its files would
    /// all run again.
    #[error("this database was migrated by {runner}: {schema}.{table} records {count} applied version{plural}, the newest {newest}{failed}; pgshift has no history here, so migrate would run those files again. Adopt it first: pgshift migrate --baseline {runner} {dir} (records them as applied without running them); nothing was run", plural = if *count == 1 { "" } else { "s" }, failed = if failed.is_empty() { String::new() } else { format!(", and {} as failed ({})", failed.len(), failed.join(", ")) })]
    ForeignHistory {
        /// The runner.
        runner: super::adopt::Runner,
        /// The schema of its table.
        schema: String,
        /// Its table.
        table: &'static str,
        /// How many versions it records as applied.
        count: usize,
        /// The newest of them.
        newest: String,
        /// The versions it records as failed.
        failed: Vec<String>,
        /// The directory as given.
        dir: String,
    },
    /// `--baseline RUNNER` without the runner's table.
    #[error("--baseline {runner}: no {table} table of {runner} in this database; use --baseline VERSION instead; nothing was recorded")]
    RunnerTableMissing {
        /// The runner.
        runner: super::adopt::Runner,
        /// Its table.
        table: &'static str,
    },
    /// A runner's record and the directory disagree.
    #[error("--baseline {runner}: {runner}'s history and the directory disagree, so nothing was recorded:{}", problems.iter().map(|p| format!("\n  {p}")).collect::<String>())]
    RunnerMismatch {
        /// The runner.
        runner: super::adopt::Runner,
        /// Each disagreement.
        problems: Vec<String>,
    },
    /// Two files with one version.
    #[error("version {version} is used twice: {first} and {second}")]
    DuplicateVersion {
        /// The version.
        version: String,
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
    /// A missing version between two files.
    #[error("no migration between versions {after} and {next}: a file may be missing (pass --allow-gaps if the numbering has gaps on purpose)")]
    Gap {
        /// The version before the gap.
        after: String,
        /// The version after it.
        next: String,
    },
    /// A pending file older than an applied one.
    #[error("version {version} is pending but version {applied} is already applied: applying it now would change the order (pass --allow-out-of-order to apply it anyway)")]
    OutOfOrder {
        /// The pending version.
        version: String,
        /// The newest applied version.
        applied: String,
    },
    /// An applied file changed afterwards.
    #[error("{version} ({name}) was applied with checksum {recorded}, but the file now has checksum {current}: an applied migration must not change; write a new one")]
    ChangedAfterApply {
        /// The version.
        version: String,
        /// Its name.
        name: String,
        /// The checksum recorded when it was applied.
        recorded: String,
        /// The file's checksum now.
        current: String,
    },
    /// Another runner holds the lock.
    #[error("another pgshift migrate is running on this database{}", holder.map_or_else(String::new, |pid| format!(" (backend pid {pid})")))]
    AnotherRunner {
        /// The holder's backend pid, when visible.
        holder: Option<i32>,
    },
    /// A history row cannot be read back.
    #[error("the history row of {version} is not readable: {reason}")]
    CorruptHistory {
        /// The version.
        version: String,
        /// What is wrong.
        reason: String,
    },
    /// Planning a file failed (reading the catalog).
    #[error("planning: {0}")]
    Plan(#[from] crate::plan::PlanError),
    /// An `--allow-blocking` name that no statement of the pending files touches.
    #[error("--allow-blocking {table}: no statement of the pending files touches this table, so it accepts nothing; nothing was run")]
    AllowBlockingUnused {
        /// The name as given.
        table: String,
    },
    /// An `--allow-procedural` value that names no procedural statement of the
    /// pending files.
    #[error("--allow-procedural {value}: no procedural statement of the pending files is there, so it accepts nothing; nothing was run")]
    AllowProceduralUnused {
        /// The value as given.
        value: String,
    },
    /// A statement of the runner itself failed.
    #[error("{what}: {source}")]
    Database {
        /// What the runner was doing.
        what: &'static str,
        /// The driver error.
        source: tokio_postgres::Error,
    },
}
