//! `pgshift migrate`: a migrations directory applied in order, each file through the
//! engine, with a history table in the engine-owned schema `pgshift`.
//!
//! Rules (see `docs/EXECUTION.md`): files are named in one of the layouts of
//! [`crate::layout`], ordered by version; a duplicate version, a gap in sequential
//! numbers (unless allowed) or a pending file older than an applied
//! one (unless allowed) stops the run before anything happens; an applied file whose
//! checksum changed is refused; one runner at a time (a session advisory lock, not
//! waited for); a failed file stops the run and is resumed from its first unit that
//! did not commit when the run is repeated. A database another runner migrated, with no
//! pgshift history, is refused once, naming the runner and `--baseline RUNNER`
//! ([`adopt`]).

pub mod adopt;
pub mod baseline;
pub mod directory;
pub mod error;
pub mod history;
mod pending;
pub mod runner;
pub mod sqlx;

pub use baseline::{baseline, BaselineSource, BaselineStatus, BaselineVerdict};
pub use directory::{scan, MigrationFile};
pub use error::MigrateError;
pub use runner::{
    applied_paths, migrate, FileRun, FileStatus, MigrateOptions, MigrateOutcome, MigrateVerdict,
};
