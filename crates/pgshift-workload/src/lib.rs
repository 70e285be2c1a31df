//! The relay workload that `pgshift demo` and the `pgshift-bench` benchmarks
//! share: load it, put a paced write and read load on it, keep a ledger of
//! every write the server acknowledged, prove afterwards that none was lost,
//! and say what the writers saw (statistics, an SVG chart).
//!
//! It is a crate of its own so that the product (`pgshift-cli`, for its demo)
//! depends on the workload and not on the benchmark crate, whose harness
//! (scenarios, result files, the engine in a child process, the standby
//! reader) the product never runs. The CLI's end-to-end tests under load use it
//! too.
//!
//! # Brief overview
//!
//! * [`schema`] loads `workloads/relay/schema.sql` and seeds it
//!   (`seed.sql`, server-side, `rows_per_partition` per partition). Both
//!   scripts are built into the library and run by the `psql` program that
//!   comes with the server ([`schema::Psql`]).
//! * [`load`] runs writers (inserts, soft deletes, hard deletes, optionally
//!   stale inserts and exact replays; some as
//!   `session_replication_role = replica`) at a fixed total rate
//!   ([`pacing`]), and keyset readers. Latencies go into per-second
//!   HdrHistograms ([`timeline`]).
//! * [`ledger`] records every write with what the client saw: acknowledged
//!   (committed, expected row count), skipped, refused (with SQLSTATE), or
//!   unknown (connection lost during COMMIT).
//! * [`oracle`] compares a ledger with a table (by name, or a specific
//!   relation such as `pgshift.shadow_x`) on the server and reports lost,
//!   resurrected, wrong-content, phantom and duplicated rows.
//! * [`stats`] turns a run's timeline and ledger into per-second and
//!   per-window figures, and [`chart`] draws them (and sampled series such as
//!   a backlog or a replay lag) as SVG.
//!
//! The load only ever connects with the connection string it is given.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use pgshift_workload::schema::{self, Psql};
//! use pgshift_workload::{load, oracle, TableRef};
//!
//! # async fn run(conninfo: &str) -> Result<(), Box<dyn std::error::Error>> {
//! let psql = Psql::new("psql", conninfo);
//! schema::load_schema(&psql, Duration::from_secs(60)).await?;
//! schema::seed(&psql, 1000, Duration::from_secs(300)).await?;
//!
//! let (mut client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls).await?;
//! tokio::spawn(connection);
//!
//! let config = load::LoadConfig::new(conninfo, Duration::from_secs(10));
//! let report = load::start(config).await?.wait().await;
//! let verdict = oracle::check(
//!     &mut client,
//!     &report.ledger,
//!     &TableRef::events(),
//!     &oracle::OracleOptions::DEFAULT,
//! )
//! .await?;
//! assert!(verdict.is_clean(), "{verdict:?}");
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod chart;
pub mod content;
mod errlog;
mod error;
pub mod event;
pub mod key;
pub mod ledger;
pub mod load;
pub mod oracle;
pub mod pacing;
mod psql;
mod rng;
pub mod schema;
pub mod stats;
mod table;
pub mod timeline;

pub use errlog::{ErrorLog, ErrorSample};
pub use error::{Error, Result};
pub use table::TableRef;
