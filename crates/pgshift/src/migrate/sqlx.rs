//! Reading sqlx's history table, `_sqlx_migrations`, to adopt pgshift on a database
//! whose migrations sqlx applied.
//!
//! sqlx (0.7, 0.8) creates it as `version BIGINT PRIMARY KEY, description TEXT,
//! installed_on TIMESTAMPTZ, success BOOLEAN, checksum BYTEA, execution_time BIGINT`
//! in the first schema of the connection's `search_path`, and stores in `checksum` the
//! SHA-384 of the migration's SQL text (the `.up.sql` file of a reversible pair).

use tokio_postgres::Client;

use super::error::MigrateError;

/// One row of `_sqlx_migrations`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlxRow {
    /// The version.
    pub version: i64,
    /// sqlx's description of it.
    pub description: String,
    /// Whether sqlx recorded it as successful (`false`: partly applied, "dirty").
    pub success: bool,
    /// The SHA-384 sqlx recorded.
    pub checksum: Vec<u8>,
}

/// The schema holding `_sqlx_migrations`: the first of the user's `search_path`
/// (with `$user` as the session's role) that has one, else the only schema that has
/// one; `None` when no schema has one.
pub async fn find_table(
    client: &Client,
    search_path: &[String],
    current_user: &str,
) -> Result<Option<String>, MigrateError> {
    super::adopt::table_schema(client, "_sqlx_migrations", search_path, current_user).await
}

/// Every row of `schema._sqlx_migrations`, by version.
pub async fn rows(client: &Client, schema: &str) -> Result<Vec<SqlxRow>, MigrateError> {
    let sql = format!(
        "SELECT version, description, success, checksum FROM {}.\"_sqlx_migrations\" ORDER BY version",
        pgshift_sql::quote_ident(schema)
    );
    let rows = client
        .query(&sql, &[])
        .await
        .map_err(|source| MigrateError::Database {
            what: "reading sqlx's _sqlx_migrations table",
            source,
        })?;
    Ok(rows
        .iter()
        .map(|row| SqlxRow {
            version: row.get(0),
            description: row.get(1),
            success: row.get(2),
            checksum: row.get(3),
        })
        .collect())
}

/// The SHA-384 of `bytes`, computed by the server (sqlx's checksum).
pub async fn checksum(client: &Client, bytes: &[u8]) -> Result<Vec<u8>, MigrateError> {
    let row = client
        .query_one("SELECT pg_catalog.sha384($1::pg_catalog.bytea)", &[&bytes])
        .await
        .map_err(|source| MigrateError::Database {
            what: "computing a SHA-384 checksum",
            source,
        })?;
    Ok(row.get(0))
}

/// Bytes as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
