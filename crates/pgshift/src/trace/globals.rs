//! What a live database's schema names that lives outside the database: tablespaces,
//! roles, and the extensions its `CREATE EXTENSION` lines need installed. A schema
//! dump carries none of the first two and only the name of the third, so a throwaway
//! cluster restores it only once they are there ([`Globals::provide`]).
//!
//! Tablespaces are created in the clone under its own directory (the traced
//! statements' `TABLESPACE` clauses then work as they do live), roles as plain
//! `NOLOGIN` roles (policies and grants that name them restore, and `GRANT`, `ALTER
//! … OWNER TO` and `CREATE POLICY … TO` in the traced files run), and an extension the
//! clone's installation does not ship stops the trace with its name and what to
//! install, instead of a restore error at its first use.

use std::collections::BTreeSet;

use pgshift_sql::{quote_ident, quote_literal};
use tokio_postgres::Client;

use super::error::{probe, TraceError};

/// Tablespaces other than the two every cluster has.
const TABLESPACES: &str = "SELECT t.spcname::pg_catalog.text FROM pg_catalog.pg_tablespace t \
     WHERE t.spcname OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_default', 'pg_global']) ORDER BY 1";
/// Roles other than the predefined ones.
const ROLES: &str = "SELECT r.rolname::pg_catalog.text FROM pg_catalog.pg_roles r \
     WHERE r.rolname OPERATOR(pg_catalog.!~) '^pg_' ORDER BY 1";
/// The extensions installed in the database.
const EXTENSIONS: &str =
    "SELECT e.extname::pg_catalog.text FROM pg_catalog.pg_extension e ORDER BY 1";
/// The extensions the clone's installation can create.
const AVAILABLE: &str = "SELECT a.name::pg_catalog.text FROM pg_catalog.pg_available_extensions a";

/// The target's cluster-wide objects its schema may name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Globals {
    /// Tablespace names.
    pub(crate) tablespaces: Vec<String>,
    /// Role names.
    pub(crate) roles: Vec<String>,
    /// Installed extensions.
    pub(crate) extensions: Vec<String>,
}

impl Globals {
    /// Reads them from the live database.
    pub(crate) async fn read(client: &Client) -> Result<Self, TraceError> {
        let names = |sql: &'static str| async move {
            let rows = client
                .query(sql, &[])
                .await
                .map_err(|e| TraceError::TargetGlobals(super::error::server_words(&e).0))?;
            Ok::<_, TraceError>(rows.iter().map(|row| row.get(0)).collect::<Vec<String>>())
        };
        Ok(Globals {
            tablespaces: names(TABLESPACES).await?,
            roles: names(ROLES).await?,
            extensions: names(EXTENSIONS).await?,
        })
    }

    /// Makes them exist in the clone (a superuser session `clone` to `cluster`), or
    /// says which extension it lacks.
    pub(crate) async fn provide(
        &self,
        clone: &Client,
        cluster: &pgshift_embedded::Cluster,
    ) -> Result<(), TraceError> {
        let available: BTreeSet<String> = clone
            .query(AVAILABLE, &[])
            .await
            .map_err(probe)?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let missing = missing(&self.extensions, &available);
        if !missing.is_empty() {
            return Err(TraceError::MissingExtensions(missing.join(", ")));
        }
        for role in self
            .roles
            .iter()
            .filter(|role| role.as_str() != cluster.superuser())
        {
            clone
                .batch_execute(&format!("CREATE ROLE {} NOLOGIN", quote_ident(role)))
                .await
                .map_err(probe)?;
        }
        for (i, tablespace) in self.tablespaces.iter().enumerate() {
            // CREATE TABLESPACE wants an empty directory the server owns.
            let location = cluster.server_directory(&format!("tablespace-{i}"))?;
            let location = location
                .to_str()
                .ok_or_else(|| TraceError::Probe(format!("{} is not UTF-8", location.display())))?;
            clone
                .batch_execute(&format!(
                    "CREATE TABLESPACE {} LOCATION {}",
                    quote_ident(tablespace),
                    quote_literal(location)
                ))
                .await
                .map_err(probe)?;
        }
        Ok(())
    }
}

/// The extensions of `installed` that `available` lacks, in order.
fn missing(installed: &[String], available: &BTreeSet<String>) -> Vec<String> {
    installed
        .iter()
        .filter(|name| !available.contains(name.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_the_clone_does_not_ship_is_named() {
        let available: BTreeSet<String> = ["plpgsql", "citext"].map(String::from).into();
        let installed = ["plpgsql", "postgis", "citext", "timescaledb"].map(String::from);
        assert_eq!(
            missing(&installed, &available),
            vec!["postgis".to_owned(), "timescaledb".to_owned()]
        );
        assert!(missing(&installed[..1], &available).is_empty());
    }
}
