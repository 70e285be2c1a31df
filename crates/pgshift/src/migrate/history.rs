//! The history table in the engine-owned schema `pgshift`: one row per run of a
//! migration file, recording its checksum, the exact units planned for it, how many
//! committed, and how it ended.
//!
//! Rows are keyed so that every layout fits: `version` is the version's canonical text
//! ([`crate::layout::Version::key`]: `7`, `1.1`, `20230101000000`), unique; a Flyway
//! repeatable has no version (`NULL`) and is found by its name, its newest row
//! (`id`) saying which checksum last ran. A table of the first format (`version
//! bigint PRIMARY KEY`) is upgraded in place, in one transaction: each version becomes
//! its text (which is its key), and every other column keeps its value.
//!
//! A unit's record is written in the unit's own transaction (see
//! [`crate::exec::Ledger`]), so the history says exactly which units committed, even
//! when the connection is lost at `COMMIT`.

use tokio_postgres::Client;

use super::error::MigrateError;
use crate::exec::Scheduled;

/// Creates the schema and table when missing (idempotent).
const ENSURE: &str = "
CREATE SCHEMA IF NOT EXISTS pgshift;
CREATE TABLE IF NOT EXISTS pgshift.migrations (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version text,
    name text NOT NULL,
    checksum text NOT NULL,
    units jsonb NOT NULL,
    units_total integer NOT NULL,
    units_committed integer NOT NULL DEFAULT 0,
    outcome text NOT NULL CHECK (outcome IN ('running', 'done', 'failed')),
    error text,
    started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    finished_at timestamptz,
    pgshift_version text NOT NULL
);
COMMENT ON TABLE pgshift.migrations IS 'pgshift migrate history: one row per run of a migration file';
ALTER TABLE pgshift.migrations ADD COLUMN IF NOT EXISTS baselined text;
COMMENT ON COLUMN pgshift.migrations.baselined IS 'set when the file was recorded as applied without being run (migrate --baseline): how';";

/// Upgrades a table of the first format (`version bigint PRIMARY KEY`); `{pkey}` is
/// replaced by the quoted name of its primary key.
const UPGRADE: &str = "
ALTER TABLE pgshift.migrations DROP CONSTRAINT {pkey};
ALTER TABLE pgshift.migrations ALTER COLUMN version DROP NOT NULL,
    ALTER COLUMN version TYPE text USING version::pg_catalog.text;
ALTER TABLE pgshift.migrations ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;";

/// The one row per version, and the comment saying what a missing version means.
const KEYS: &str = "
CREATE UNIQUE INDEX IF NOT EXISTS migrations_version_key ON pgshift.migrations (version);
COMMENT ON COLUMN pgshift.migrations.version IS 'the version as pgshift keys it (7, 1.1, 20230101000000); NULL: a repeatable migration (R__name), one row per run';";

/// One history row.
#[derive(Clone, Debug)]
pub struct HistoryRow {
    /// The row's id (`None` only when read from a table of the first format, which a
    /// dry run does not upgrade).
    pub id: Option<i64>,
    /// The file's version key; `None` for a repeatable migration.
    pub version: Option<String>,
    /// The file's name.
    pub name: String,
    /// The sha-256 of the file's bytes, in hex.
    pub checksum: String,
    /// The schedule planned when the file was first run.
    pub items: Vec<Scheduled>,
    /// Units in the schedule.
    pub units_total: i32,
    /// Units committed so far.
    pub units_committed: i32,
    /// `running`, `done` or `failed`.
    pub outcome: String,
    /// The failure, when it failed.
    pub error: Option<String>,
    /// How the file was recorded as applied without pgshift running it
    /// (`--baseline`), when it was.
    pub baselined: Option<String>,
}

impl HistoryRow {
    /// How people name the row's file: `version 7`, `repeatable R__views`.
    pub fn describe(&self) -> String {
        match &self.version {
            Some(version) => format!("version {version}"),
            None => format!("repeatable R__{}", self.name),
        }
    }

    /// Its id, which every row of an upgraded table has.
    pub fn id(&self) -> Result<i64, MigrateError> {
        self.id.ok_or_else(|| MigrateError::CorruptHistory {
            version: self.describe(),
            reason: "the row has no id: the history table was not upgraded".to_owned(),
        })
    }
}

fn db(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> MigrateError {
    move |source| MigrateError::Database { what, source }
}

/// Takes the runner's session advisory lock, without waiting.
// INV: OC-1 — one runner per database: a session advisory lock, tried, never waited for.
pub async fn lock(client: &Client) -> Result<(), MigrateError> {
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended('pgshift.migrate', 0))",
            &[],
        )
        .await
        .map_err(db("taking the migrate lock"))?;
    if row.get::<_, bool>(0) {
        return Ok(());
    }
    let holder = client
        .query_opt(
            "SELECT l.pid FROM pg_catalog.pg_locks l \
              WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted \
                AND l.objsubid OPERATOR(pg_catalog.=) 1 \
                AND ((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8) \
                    OPERATOR(pg_catalog.=) pg_catalog.hashtextextended('pgshift.migrate', 0) \
                AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d \
                      WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) \
                AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() LIMIT 1",
            &[],
        )
        .await
        .ok()
        .flatten()
        .map(|row| row.get::<_, i32>(0));
    Err(MigrateError::AnotherRunner { holder })
}

/// Releases the runner's advisory lock (for a session that goes on after its work,
/// such as a baseline's).
pub async fn unlock(client: &Client) -> Result<(), MigrateError> {
    client
        .execute(
            "SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended('pgshift.migrate', 0))",
            &[],
        )
        .await
        .map_err(db("releasing the migrate lock"))?;
    Ok(())
}

/// Creates the history table when missing, and upgrades one of the first format, in
/// one transaction.
pub async fn ensure(client: &Client) -> Result<(), MigrateError> {
    let what = "creating the history table pgshift.migrations";
    client
        .batch_execute(&format!("BEGIN; SET LOCAL lock_timeout = 2000; {ENSURE}"))
        .await
        .map_err(db(what))?;
    let result = async {
        if let Some(pkey) = first_format_key(client).await? {
            let upgrade = UPGRADE.replace("{pkey}", &pgshift_sql::quote_ident(&pkey));
            client
                .batch_execute(&upgrade)
                .await
                .map_err(db("upgrading pgshift.migrations to text versions"))?;
        }
        client.batch_execute(KEYS).await.map_err(db(what))?;
        client.batch_execute("COMMIT").await.map_err(db(what))
    }
    .await;
    if result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result
}

/// The name of the primary key of a history table of the first format (`version
/// bigint`), `None` for a table of the current one.
async fn first_format_key(client: &Client) -> Result<Option<String>, MigrateError> {
    let row = client
        .query_opt(
            "SELECT c.conname::pg_catalog.text FROM pg_catalog.pg_attribute a \
               JOIN pg_catalog.pg_constraint c ON c.conrelid OPERATOR(pg_catalog.=) a.attrelid \
                AND c.contype OPERATOR(pg_catalog.=) 'p' \
              WHERE a.attrelid OPERATOR(pg_catalog.=) 'pgshift.migrations'::pg_catalog.regclass \
                AND a.attname OPERATOR(pg_catalog.=) 'version' \
                AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype \
                AND c.conkey OPERATOR(pg_catalog.=) ARRAY[a.attnum]::pg_catalog.int2[]",
            &[],
        )
        .await
        .map_err(db("reading the format of pgshift.migrations"))?;
    Ok(row.map(|row| row.get(0)))
}

/// Every history row, or none when pgshift's history does not exist yet (a database
/// pgshift never migrated): what a read-only command (a dry run, `plan DIR`) sees.
pub async fn rows_if_any(client: &Client) -> Result<Vec<HistoryRow>, MigrateError> {
    let exists: bool = client
        .query_one(
            "SELECT pg_catalog.to_regclass('pgshift.migrations') IS NOT NULL",
            &[],
        )
        .await
        .map_err(db("looking for pgshift.migrations"))?
        .get(0);
    if exists {
        rows(client).await
    } else {
        Ok(Vec::new())
    }
}

/// Every history row, in the order they were written.
pub async fn rows(client: &Client) -> Result<Vec<HistoryRow>, MigrateError> {
    let rows = client
        .query(
            // `id` and `baselined` are read through to_jsonb and `version` as text, so
            // that a history table of an older format (which a dry run does not
            // upgrade) still reads.
            "SELECT (pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'id')::pg_catalog.int8, \
                    version::pg_catalog.text, name, checksum, units::pg_catalog.text, units_total, units_committed, outcome, error, \
                    pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'baselined' \
               FROM pgshift.migrations m \
              ORDER BY (pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'id')::pg_catalog.int8, version",
            &[],
        )
        .await
        .map_err(db("reading pgshift.migrations"))?;
    rows.into_iter()
        .map(|row| {
            let mut history = HistoryRow {
                id: row.get(0),
                version: row.get(1),
                name: row.get(2),
                checksum: row.get(3),
                items: Vec::new(),
                units_total: row.get(5),
                units_committed: row.get(6),
                outcome: row.get(7),
                error: row.get(8),
                baselined: row.get(9),
            };
            let units: String = row.get(4);
            history.items =
                serde_json::from_str(&units).map_err(|err| MigrateError::CorruptHistory {
                    version: history.describe(),
                    reason: err.to_string(),
                })?;
            Ok(history)
        })
        .collect()
}

/// The sha-256 of `bytes`, computed by the server, in hex.
pub async fn checksum(client: &Client, bytes: &[u8]) -> Result<String, MigrateError> {
    let row = client
        .query_one(
            "SELECT pg_catalog.encode(pg_catalog.sha256($1::pg_catalog.bytea), 'hex')",
            &[&bytes],
        )
        .await
        .map_err(db("computing a checksum"))?;
    Ok(row.get(0))
}

/// Records a file as applied without running it (`--baseline`): no units, outcome
/// `done`, and how it was baselined.
pub async fn record_baselined(
    client: &Client,
    version: &str,
    name: &str,
    checksum: &str,
    how: &str,
) -> Result<(), MigrateError> {
    client
        .execute(
            "INSERT INTO pgshift.migrations (version, name, checksum, units, units_total, outcome, finished_at, pgshift_version, baselined) \
             VALUES ($1, $2, $3, '[]'::pg_catalog.jsonb, 0, 'done', pg_catalog.now(), $4, $5)",
            &[&version, &name, &checksum, &crate::report::TOOL_VERSION, &how],
        )
        .await
        .map_err(db("recording a baselined migration"))?;
    Ok(())
}

/// Records that a file starts, with its planned units; returns the row's id.
pub async fn start(
    client: &Client,
    version: Option<&str>,
    name: &str,
    checksum: &str,
    items: &[Scheduled],
) -> Result<i64, MigrateError> {
    let units_total = items
        .iter()
        .filter(|item| matches!(item, Scheduled::Unit { .. }))
        .count();
    let units = serde_json::to_string(items).map_err(|err| MigrateError::CorruptHistory {
        version: version.map_or_else(
            || format!("repeatable R__{name}"),
            |v| format!("version {v}"),
        ),
        reason: err.to_string(),
    })?;
    let row = client
        .query_one(
            "INSERT INTO pgshift.migrations (version, name, checksum, units, units_total, outcome, pgshift_version) \
             VALUES ($1, $2, $3, $4::pg_catalog.text::pg_catalog.jsonb, $5, 'running', $6) RETURNING id",
            &[
                &version,
                &name,
                &checksum,
                &units,
                &(i32::try_from(units_total).unwrap_or(i32::MAX)),
                &crate::report::TOOL_VERSION,
            ],
        )
        .await
        .map_err(db("recording the start of a migration"))?;
    Ok(row.get(0))
}

/// The SQL recording that `committed` units of row `id` have committed; only integers
/// are formatted into it.
pub fn record_sql(id: i64, committed: usize) -> String {
    format!("UPDATE pgshift.migrations SET units_committed = {committed} WHERE id = {id}")
}

/// Marks a row running again (a resumed run).
pub async fn resume(client: &Client, id: i64) -> Result<(), MigrateError> {
    client
        .execute(
            "UPDATE pgshift.migrations SET outcome = 'running', error = NULL, finished_at = NULL WHERE id = $1",
            &[&id],
        )
        .await
        .map_err(db("recording a resumed migration"))?;
    Ok(())
}

/// Records how a row's run ended.
pub async fn finish(
    client: &Client,
    id: i64,
    done: bool,
    error: Option<&str>,
) -> Result<(), MigrateError> {
    let outcome = if done { "done" } else { "failed" };
    client
        .execute(
            "UPDATE pgshift.migrations SET outcome = $2, error = $3, finished_at = pg_catalog.now() WHERE id = $1",
            &[&id, &outcome, &error],
        )
        .await
        .map_err(db("recording the end of a migration"))?;
    Ok(())
}

/// Deletes row `id`.
pub async fn forget(client: &Client, id: i64, what: &'static str) -> Result<(), MigrateError> {
    client
        .execute("DELETE FROM pgshift.migrations WHERE id = $1", &[&id])
        .await
        .map_err(db(what))?;
    Ok(())
}
