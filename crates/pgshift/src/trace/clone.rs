//! The throwaway clone: an embedded cluster (`pgshift-embedded`, the tests' harness)
//! with one database holding the schema to trace against. Dropping the [`Clone`] stops
//! the server and removes its directory, on success, on error and on unwinding alike;
//! a killed process's server gets the kernel's parent-death signal and its directory
//! is swept by the next cluster start.

use pgshift_embedded::{Cluster, ClusterOptions, PgInstall};
use tokio_postgres::{Client, NoTls};

use super::error::{probe, TraceError};
use super::globals::Globals;
use super::install::{has_nested_library, nested_library};
use super::types::NestedAvailability;

/// A running throwaway cluster and the database traced in it.
pub(crate) struct Clone {
    cluster: Cluster,
    database: String,
    nested: NestedAvailability,
}

impl Clone {
    /// Starts a cluster of `install` (with `pg_stat_statements` preloaded when the
    /// installation ships it, and without it when it does not or the server will not
    /// start with it) and creates an empty database.
    pub(crate) fn start(install: &PgInstall) -> Result<Self, TraceError> {
        let plain = ClusterOptions::new().install(install.clone());
        let (cluster, nested) = if has_nested_library(install) {
            let preload = plain
                .clone()
                .setting("shared_preload_libraries", nested_library())
                .setting("pg_stat_statements.track", "all")
                .setting("pg_stat_statements.track_utility", "on");
            match Cluster::start(&preload) {
                Ok(cluster) => (cluster, NestedAvailability::Recorded),
                Err(err) => (
                    Cluster::start(&plain)?,
                    NestedAvailability::Unavailable {
                        reason: format!("the server did not start with pg_stat_statements: {err}"),
                    },
                ),
            }
        } else {
            (
                Cluster::start(&plain)?,
                NestedAvailability::Unavailable {
                    reason: format!(
                        "{} has no pg_stat_statements library (install the server's contrib \
                         modules)",
                        install.bindir().display()
                    ),
                },
            )
        };
        let database = cluster.fresh_database("trace")?;
        Ok(Clone {
            cluster,
            database,
            nested,
        })
    }

    /// Creates the target's tablespaces and roles in the clone, or says which of its
    /// extensions the clone's installation lacks.
    pub(crate) async fn provide(&self, globals: &Globals) -> Result<(), TraceError> {
        let session = self.session().await?;
        globals.provide(&session, &self.cluster).await
    }

    /// Loads SQL (a schema dump) into the database with the installation's `psql`,
    /// stopping at the first error.
    pub(crate) fn restore(&self, sql: &str) -> Result<(), TraceError> {
        self.cluster
            .psql(&self.database, sql)
            .map(|_| ())
            .map_err(|err| TraceError::Restore(err.to_string()))
    }

    /// Runs a SQL file with the installation's `psql` (its `\ir` includes resolved
    /// from the file's folder), stopping at the first error.
    pub(crate) fn run_file(&self, path: &std::path::Path) -> Result<(), TraceError> {
        self.cluster
            .psql_file(&self.database, path)
            .map(|_| ())
            .map_err(|err| TraceError::Restore(err.to_string()))
    }

    /// The throwaway cluster itself (another database in it, say).
    pub(crate) fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The database's connection string (for the installation's `pg_dump`).
    pub(crate) fn conninfo(&self) -> String {
        self.cluster.connection_string(&self.database)
    }

    /// Whether nested statements can be recorded.
    pub(crate) fn nested(&self) -> &NestedAvailability {
        &self.nested
    }

    /// A new session to the database (superuser, the cluster's defaults).
    pub(crate) async fn session(&self) -> Result<Client, TraceError> {
        let conninfo = self.cluster.connection_string(&self.database);
        let (client, connection) = tokio_postgres::connect(&conninfo, NoTls)
            .await
            .map_err(probe)?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// The server's `server_version`.
    pub(crate) fn server_version(&self) -> String {
        self.cluster.version().to_string()
    }
}
