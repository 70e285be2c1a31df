//! Databases another migration runner migrated, recognised by the history table that
//! runner keeps, so that `migrate` says so once instead of re-running every file, and
//! `--baseline RUNNER` can record what that runner applied.
//!
//! Each runner's table, as the runner creates it on PostgreSQL (from its source):
//! - sqlx: `_sqlx_migrations (version BIGINT PRIMARY KEY, description, installed_on,
//!   success BOOLEAN, checksum BYTEA, execution_time)`;
//! - Flyway: `flyway_schema_history (installed_rank INT PRIMARY KEY, version
//!   VARCHAR(50), description, type, script, checksum INT, installed_by, installed_on,
//!   execution_time, success BOOLEAN)`; a repeatable's row has no version;
//! - golang-migrate: `schema_migrations (version BIGINT PRIMARY KEY, dirty BOOLEAN)`,
//!   one row: the current version;
//! - dbmate: `schema_migrations (version VARCHAR(128) PRIMARY KEY)`, one row per version;
//! - Rails: `schema_migrations (version VARCHAR PRIMARY KEY)` next to
//!   `ar_internal_metadata`;
//! - pop: `schema_migration (version VARCHAR(14) NOT NULL)` with a unique index
//!   `schema_migration_version_idx` (newer pop: a wider `version`), one row per version;
//! - diesel: `__diesel_schema_migrations (version VARCHAR(50) PRIMARY KEY, run_on
//!   TIMESTAMP)`, the version without its dashes;
//! - refinery: `refinery_schema_history (version INT4 PRIMARY KEY, name, applied_on,
//!   checksum)`;
//! - goose: `goose_db_version (id SERIAL PRIMARY KEY, version_id BIGINT, is_applied
//!   BOOLEAN, tstamp)`, a row per apply and per rollback (the newest row of a version
//!   says), with a version 0 row of its own.
//!
//! The table is looked up in the user's `search_path` (`$user` as the session's role),
//! else in the one schema that has it.

use std::fmt;
use std::path::Path;

use serde::Serialize;
use tokio_postgres::Client;

use super::error::MigrateError;
use crate::connect::Session;

/// A migration runner whose history pgshift reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runner {
    /// sqlx.
    Sqlx,
    /// Flyway.
    Flyway,
    /// golang-migrate.
    GolangMigrate,
    /// dbmate.
    Dbmate,
    /// Ruby on Rails (Active Record).
    Rails,
    /// pop (soda).
    Pop,
    /// diesel.
    Diesel,
    /// refinery.
    Refinery,
    /// goose.
    Goose,
}

impl Runner {
    /// Every runner, in the order their tables are looked for (Rails before dbmate and
    /// golang-migrate: all three name the table `schema_migrations`).
    pub const ALL: [Runner; 9] = [
        Runner::Sqlx,
        Runner::Flyway,
        Runner::Rails,
        Runner::GolangMigrate,
        Runner::Dbmate,
        Runner::Pop,
        Runner::Diesel,
        Runner::Refinery,
        Runner::Goose,
    ];

    /// The name `--baseline` takes.
    pub fn name(self) -> &'static str {
        match self {
            Runner::Sqlx => "sqlx",
            Runner::Flyway => "flyway",
            Runner::GolangMigrate => "golang-migrate",
            Runner::Dbmate => "dbmate",
            Runner::Rails => "rails",
            Runner::Pop => "pop",
            Runner::Diesel => "diesel",
            Runner::Refinery => "refinery",
            Runner::Goose => "goose",
        }
    }

    /// The runner `--baseline` names (case-insensitive).
    pub fn parse(name: &str) -> Option<Runner> {
        Runner::ALL
            .into_iter()
            .find(|r| r.name().eq_ignore_ascii_case(name))
    }

    /// Its history table.
    pub fn table(self) -> &'static str {
        match self {
            Runner::Sqlx => "_sqlx_migrations",
            Runner::Flyway => "flyway_schema_history",
            Runner::GolangMigrate | Runner::Dbmate | Runner::Rails => "schema_migrations",
            Runner::Pop => "schema_migration",
            Runner::Diesel => "__diesel_schema_migrations",
            Runner::Refinery => "refinery_schema_history",
            Runner::Goose => "goose_db_version",
        }
    }

    /// The versions it records as applied and those it records as failed (dirty):
    /// text, in its order. `{t}` is the quoted table.
    fn query(self) -> &'static str {
        match self {
            Runner::Sqlx => "SELECT version::pg_catalog.text, NOT success FROM {t} ORDER BY version",
            Runner::Flyway => "SELECT version, NOT success FROM {t} WHERE version IS NOT NULL ORDER BY installed_rank",
            Runner::GolangMigrate => "SELECT version::pg_catalog.text, dirty FROM {t} ORDER BY version",
            Runner::Dbmate | Runner::Rails | Runner::Pop | Runner::Diesel => {
                "SELECT version::pg_catalog.text, false FROM {t} ORDER BY version"
            }
            Runner::Refinery => "SELECT version::pg_catalog.text, false FROM {t} ORDER BY version",
            Runner::Goose => "SELECT version_id::pg_catalog.text, false FROM \
                 (SELECT DISTINCT ON (version_id) version_id, is_applied FROM {t} ORDER BY version_id, id DESC) newest \
                 WHERE is_applied AND version_id OPERATOR(pg_catalog.>) 0 ORDER BY version_id",
        }
    }

    /// Whether its one row is the current version, every version up to it applied
    /// (golang-migrate), rather than one row per applied version.
    pub fn records_current_only(self) -> bool {
        self == Runner::GolangMigrate
    }
}

impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What another runner recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForeignHistory {
    /// The runner.
    pub runner: Runner,
    /// The schema of its table.
    pub schema: String,
    /// The versions it records as applied, in its order.
    pub applied: Vec<String>,
    /// The versions it records as failed (sqlx's `success = false`, Flyway's, or
    /// golang-migrate's `dirty`).
    pub failed: Vec<String>,
}

impl ForeignHistory {
    /// The newest applied version, as the runner wrote it.
    pub fn newest(&self) -> Option<&str> {
        self.applied.last().map(String::as_str)
    }
}

/// The columns that tell the runners sharing a table name apart.
async fn columns(
    client: &Client,
    schema: &str,
    table: &str,
) -> Result<Vec<(String, String)>, MigrateError> {
    let rows = client
        .query(
            "SELECT a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, NULL) \
               FROM pg_catalog.pg_attribute a \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND c.relname OPERATOR(pg_catalog.=) $2 \
                AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
            &[&schema, &table],
        )
        .await
        .map_err(|source| MigrateError::Database {
            what: "reading a migration runner's history table",
            source,
        })?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The schema of each table named `table`, by name.
async fn schemas_with(client: &Client, table: &str) -> Result<Vec<String>, MigrateError> {
    let rows = client
        .query(
            "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_class c \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE c.relname OPERATOR(pg_catalog.=) $1 \
                AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p']::pg_catalog.\"char\"[]) \
              ORDER BY 1",
            &[&table],
        )
        .await
        .map_err(|source| MigrateError::Database {
            what: "looking for a migration runner's history table",
            source,
        })?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// The schema holding a runner's history table `table`: the first of the user's
/// `search_path` (with `$user` as the session's role) that has one, else the only
/// schema that has one; `None` when no schema (or several, none in the path) has one.
pub async fn table_schema(
    client: &Client,
    table: &str,
    search_path: &[String],
    current_user: &str,
) -> Result<Option<String>, MigrateError> {
    let schemas = schemas_with(client, table).await?;
    Ok(pick(&schemas, search_path, current_user))
}

/// The schema to read a table in: the first of the search path that has it, else the
/// only one.
fn pick(schemas: &[String], search_path: &[String], current_user: &str) -> Option<String> {
    let in_path = search_path
        .iter()
        .map(|s| {
            if s == "$user" {
                current_user
            } else {
                s.as_str()
            }
        })
        .find(|s| schemas.iter().any(|found| found == s));
    match (in_path, schemas) {
        (Some(schema), _) => Some(schema.to_owned()),
        (None, [only]) => Some(only.clone()),
        _ => None,
    }
}

/// Whether the table in `schema` is `runner`'s (the runners sharing
/// `schema_migrations` differ by columns and by Rails' metadata table).
async fn is_runners(client: &Client, runner: Runner, schema: &str) -> Result<bool, MigrateError> {
    let cols = columns(client, schema, runner.table()).await?;
    let has = |name: &str| cols.iter().any(|(n, _)| n == name);
    let version_type = cols
        .iter()
        .find(|(n, _)| n == "version")
        .map(|(_, t)| t.as_str());
    Ok(match runner {
        Runner::Rails => schemas_with(client, "ar_internal_metadata")
            .await?
            .iter()
            .any(|s| s == schema),
        Runner::GolangMigrate => has("dirty") && version_type == Some("bigint"),
        Runner::Dbmate => {
            !has("dirty")
                && version_type.is_some_and(|t| t.starts_with("character varying"))
                && !schemas_with(client, "ar_internal_metadata")
                    .await?
                    .iter()
                    .any(|s| s == schema)
        }
        Runner::Goose => has("version_id") && has("is_applied"),
        Runner::Flyway => has("installed_rank") && has("success"),
        _ => has("version"),
    })
}

/// The history of `runner` in this database, when it has its table.
pub async fn read(
    client: &Client,
    runner: Runner,
    search_path: &[String],
    current_user: &str,
) -> Result<Option<ForeignHistory>, MigrateError> {
    let Some(schema) = table_schema(client, runner.table(), search_path, current_user).await?
    else {
        return Ok(None);
    };
    if !is_runners(client, runner, &schema).await? {
        return Ok(None);
    }
    let table = format!(
        "{}.{}",
        pgshift_sql::quote_ident(&schema),
        pgshift_sql::quote_ident(runner.table())
    );
    let rows = client
        .query(&runner.query().replace("{t}", &table), &[])
        .await
        .map_err(|source| MigrateError::Database {
            what: "reading a migration runner's history table",
            source,
        })?;
    let mut history = ForeignHistory {
        runner,
        schema,
        applied: Vec::new(),
        failed: Vec::new(),
    };
    for row in rows {
        let version: String = row.get(0);
        if row.get::<_, bool>(1) {
            history.failed.push(version);
        } else {
            history.applied.push(version);
        }
    }
    Ok(Some(history))
}

/// The first runner whose table records something in this database.
pub async fn find(
    client: &Client,
    search_path: &[String],
    current_user: &str,
) -> Result<Option<ForeignHistory>, MigrateError> {
    for runner in Runner::ALL {
        if let Some(history) = read(client, runner, search_path, current_user).await? {
            if !history.applied.is_empty() || !history.failed.is_empty() {
                return Ok(Some(history));
            }
        }
    }
    Ok(None)
}

/// Refuses a database another runner migrated while pgshift has no history of it
/// (`migrate`, its dry run, `plan DIR`): running the directory would apply every file
/// again. Reads only.
pub async fn refuse_unadopted(session: &Session, dir: &Path) -> Result<(), MigrateError> {
    let ours = super::history::rows(session.client())
        .await
        .unwrap_or_default();
    if !ours.is_empty() {
        return Ok(());
    }
    let found = find(
        session.client(),
        session.user_search_path(),
        session.current_user(),
    )
    .await?;
    match found {
        Some(foreign) => Err(MigrateError::ForeignHistory {
            runner: foreign.runner,
            schema: foreign.schema.clone(),
            table: foreign.runner.table(),
            count: foreign.applied.len(),
            newest: foreign.newest().unwrap_or("none").to_owned(),
            failed: foreign.failed.clone(),
            dir: dir.display().to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runners_parse_by_their_baseline_names() {
        for runner in Runner::ALL {
            assert_eq!(Runner::parse(runner.name()), Some(runner));
        }
        assert_eq!(Runner::parse("Flyway"), Some(Runner::Flyway));
        assert_eq!(Runner::parse("liquibase"), None);
    }

    #[test]
    fn the_table_is_read_in_the_search_path_first() {
        let schemas = vec!["app".to_owned(), "public".to_owned()];
        let path = vec!["$user".to_owned(), "public".to_owned()];
        assert_eq!(pick(&schemas, &path, "app"), Some("app".to_owned()));
        assert_eq!(pick(&schemas, &path, "bob"), Some("public".to_owned()));
        assert_eq!(pick(&schemas, &["x".to_owned()], "bob"), None);
        assert_eq!(
            pick(&["only".to_owned()], &["x".to_owned()], "bob"),
            Some("only".to_owned())
        );
    }
}
