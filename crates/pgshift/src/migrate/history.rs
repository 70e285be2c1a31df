//! The history table in the engine-owned schema `pgshift`: one row per migration
//! file, recording its checksum, the exact units planned for it, how many committed,
//! and how it ended.
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
    version bigint PRIMARY KEY,
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
COMMENT ON TABLE pgshift.migrations IS 'pgshift migrate history: one row per migration file';
ALTER TABLE pgshift.migrations ADD COLUMN IF NOT EXISTS baselined text;
COMMENT ON COLUMN pgshift.migrations.baselined IS 'set when the file was recorded as applied without being run (migrate --baseline): how';";

/// One history row.
#[derive(Clone, Debug)]
pub struct HistoryRow {
    /// The file's version.
    pub version: i64,
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

/// Creates the history table when missing.
pub async fn ensure(client: &Client) -> Result<(), MigrateError> {
    client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL lock_timeout = 2000; {ENSURE} COMMIT;"
        ))
        .await
        .map_err(db("creating the history table pgshift.migrations"))
}

/// Every history row, by version.
pub async fn rows(client: &Client) -> Result<Vec<HistoryRow>, MigrateError> {
    let rows = client
        .query(
            // `baselined` is read through to_jsonb so that a history table created by
            // an older pgshift (without the column) still reads, as in `--dry-run`.
            "SELECT version, name, checksum, units::pg_catalog.text, units_total, units_committed, outcome, error, \
                    pg_catalog.to_jsonb(m) OPERATOR(pg_catalog.->>) 'baselined' \
               FROM pgshift.migrations m ORDER BY version",
            &[],
        )
        .await
        .map_err(db("reading pgshift.migrations"))?;
    rows.into_iter()
        .map(|row| {
            let version: i64 = row.get(0);
            let units: String = row.get(3);
            let items =
                serde_json::from_str(&units).map_err(|err| MigrateError::CorruptHistory {
                    version,
                    reason: err.to_string(),
                })?;
            Ok(HistoryRow {
                version,
                name: row.get(1),
                checksum: row.get(2),
                items,
                units_total: row.get(4),
                units_committed: row.get(5),
                outcome: row.get(6),
                error: row.get(7),
                baselined: row.get(8),
            })
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
    version: i64,
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

/// Records that a file starts, with its planned units.
pub async fn start(
    client: &Client,
    version: i64,
    name: &str,
    checksum: &str,
    items: &[Scheduled],
) -> Result<(), MigrateError> {
    let units_total = items
        .iter()
        .filter(|item| matches!(item, Scheduled::Unit { .. }))
        .count();
    let units = serde_json::to_string(items).map_err(|err| MigrateError::CorruptHistory {
        version,
        reason: err.to_string(),
    })?;
    client
        .execute(
            "INSERT INTO pgshift.migrations (version, name, checksum, units, units_total, outcome, pgshift_version) \
             VALUES ($1, $2, $3, $4::pg_catalog.text::pg_catalog.jsonb, $5, 'running', $6)",
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
    Ok(())
}

/// The SQL recording that `committed` units of `version` have committed; only
/// integers are formatted into it.
pub fn record_sql(version: i64, committed: usize) -> String {
    format!("UPDATE pgshift.migrations SET units_committed = {committed} WHERE version = {version}")
}

/// Marks a file running again (a resumed run).
pub async fn resume(client: &Client, version: i64) -> Result<(), MigrateError> {
    client
        .execute(
            "UPDATE pgshift.migrations SET outcome = 'running', error = NULL, finished_at = NULL WHERE version = $1",
            &[&version],
        )
        .await
        .map_err(db("recording a resumed migration"))?;
    Ok(())
}

/// Records how a file ended.
pub async fn finish(
    client: &Client,
    version: i64,
    done: bool,
    error: Option<&str>,
) -> Result<(), MigrateError> {
    let outcome = if done { "done" } else { "failed" };
    client
        .execute(
            "UPDATE pgshift.migrations SET outcome = $2, error = $3, finished_at = pg_catalog.now() WHERE version = $1",
            &[&version, &outcome, &error],
        )
        .await
        .map_err(db("recording the end of a migration"))?;
    Ok(())
}
