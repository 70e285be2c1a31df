//! pgshift: online schema changes for PostgreSQL 14–18.
//!
//! # Migrating from a Rust application
//!
//! [`Migrator`] migrates a database at startup (or from an admin command) through the
//! engine of `pgshift migrate`: each pending file is classified and run the safest way
//! that exists (the statement as written under a bounded lock, a safer native sequence
//! such as `CREATE INDEX CONCURRENTLY`, a verified copy-and-swap rewrite, or a refusal
//! with a typed reason), recorded in `pgshift.migrations`, resumed where it stopped
//! after a failure, one runner at a time. The migrations are embedded in the binary with
//! [`embed_migrations!`] (every layout `pgshift migrate` reads: sqlx, Flyway, diesel,
//! dbmate, goose, golang-migrate, numbered files) or read from a path with
//! [`Migrator::from_path`].
//!
//! ```no_run
//! use pgshift::migrate::adopt::Runner;
//! use pgshift::{EmbeddedMigrations, MigrateOutcome, Migrator};
//!
//! // The directory, relative to the crate's Cargo.toml (often "migrations").
//! static MIGRATIONS: EmbeddedMigrations =
//!     pgshift::embed_migrations!("examples/startup_migrations");
//!
//! # async fn startup() -> Result<(), Box<dyn std::error::Error>> {
//! let url = std::env::var("DATABASE_URL")?;
//! let report = Migrator::new(&MIGRATIONS)
//!     // A database sqlx migrated: record what `_sqlx_migrations` applied, once.
//!     .adopt(Runner::Sqlx)
//!     // Another instance of the service migrating: wait for it.
//!     .wait_for_other_runner(std::time::Duration::from_secs(600))
//!     .run(&url)
//!     .await?;
//! for file in report.applied() {
//!     println!("applied {} {}", file.version.as_deref().unwrap_or("R"), file.name);
//! }
//! match report.outcome() {
//!     MigrateOutcome::Done | MigrateOutcome::DoneWithBlocking => Ok(()),
//!     outcome => Err(format!("migrations stopped: {outcome:?}").into()),
//! }
//! # }
//! ```
//!
//! [`Migrator::plan`] is the dry run (`pgshift migrate --dry-run`). A refused or failed
//! file is the report's outcome ([`MigrateOutcome::Refused`],
//! [`MigrateOutcome::Failed`]), with the refusal's cause and next step in the file's
//! verdict; an error ([`MigratorError`]) means the run gave no verdict (the connection,
//! the directory, another runner's history). Progress is reported as `tracing` events
//! (target `pgshift::migrator`). The defaults are the command line's; `Migrator`'s
//! builder methods set budgets, copy-and-swap's options and the `--allow-*` flags.
//!
//! # The engine
//! The modules below are the engine the command line and [`Migrator`] run, public for
//! tools that need one part of it:
//! - [`classify`] says, for one parsed statement, which locks PostgreSQL takes, how
//!   heavy the work is, and how pgshift would run it ([`route::Route`]). It is pure:
//!   no connection, optionally informed by live [`catalog`] facts.
//! - [`lock::LockMode`] is PostgreSQL's lock-mode lattice and conflict table.
//! - [`refusal`] is the closed list of reasons pgshift declines a statement.
//! - [`connect`] opens budgeted, search-path-safe sessions.
//! - [`plan`], [`exec`] and [`migrate`] plan a file, run it, and run a directory.
//! - [`audit`] reads the live database's triggers and says which writes get past them.
//! - [`trace`] runs statements on a throwaway clone and records what the server did.
//! - [`pages`] explains every lint code and refusal cause (`pgshift explain`, the docs).
#![deny(missing_docs)]

pub mod audit;
pub mod capabilities;
pub mod cas;
pub mod catalog;
pub mod classify;
pub mod connect;
pub mod desired;
pub mod embed;
pub mod exec;
pub mod layout;
pub mod lint;
pub mod lock;
pub mod migrate;
pub mod migrator;
pub mod pages;
pub mod plan;
pub mod procedural;
pub mod refusal;
pub mod report;
pub mod route;
pub mod script;
pub mod source;
pub mod trace;

pub use embed::EmbeddedMigrations;
pub use migrate::MigrateOutcome;
pub use migrator::{MigrationReport, Migrations, Migrator, MigratorError};
/// Embeds a migrations directory in the binary at compile time:
/// `pgshift::embed_migrations!("migrations")`, the path relative to the crate's
/// `Cargo.toml`, gives an [`EmbeddedMigrations`] holding every file and folder of the
/// tree (with `include_bytes!`, so cargo rebuilds when a file changes). Cargo does not
/// see a file *added* to the directory; a build script with
/// `println!("cargo:rerun-if-changed=migrations");` makes it rebuild then too.
pub use pgshift_macros::embed_migrations;
