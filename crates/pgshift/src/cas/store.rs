//! The run record (checkpoint) in `pgshift.runs`: committed before any artifact is
//! created, so every artifact has an owner on record; updated at every phase change
//! and whenever the copied prefix advances, so a run resumes from what committed.

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::error::CasError;
use super::keys::KeyValue;
use super::plan::RunPlan;

/// A run's phase, in the order a run goes through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Recorded; artifacts being created.
    Prepared,
    /// Copying chunks (and applying the change log behind them).
    Copying,
    /// Building the shadow's indexes and constraints.
    Indexing,
    /// Verifying chunk by chunk.
    Verifying,
    /// Verified; kept in step, waiting for `pgshift cutover` (deferred cutover).
    Ready,
    /// Swapping.
    Cutover,
    /// Swapped; cleaning up.
    Done,
    /// Stopped by an error; resumable or abortable.
    Failed,
    /// Aborted; every artifact removed.
    Aborted,
}

impl Phase {
    /// The stored name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prepared => "prepared",
            Phase::Copying => "copying",
            Phase::Indexing => "indexing",
            Phase::Verifying => "verifying",
            Phase::Ready => "ready",
            Phase::Cutover => "cutover",
            Phase::Done => "done",
            Phase::Failed => "failed",
            Phase::Aborted => "aborted",
        }
    }

    fn parse(name: &str) -> Option<Phase> {
        [
            Phase::Prepared,
            Phase::Copying,
            Phase::Indexing,
            Phase::Verifying,
            Phase::Ready,
            Phase::Cutover,
            Phase::Done,
            Phase::Failed,
            Phase::Aborted,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }
}

/// Creates the engine schema and the runs table when missing.
const ENSURE: &str = "
CREATE SCHEMA IF NOT EXISTS pgshift;
CREATE TABLE IF NOT EXISTS pgshift.runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_oid oid NOT NULL,
    source_schema text NOT NULL,
    source_name text NOT NULL,
    statement text NOT NULL,
    phase text NOT NULL,
    resume_phase text,
    plan jsonb NOT NULL,
    landed_prefix jsonb,
    copy_finished boolean NOT NULL DEFAULT false,
    rows_copied bigint NOT NULL DEFAULT 0,
    verified boolean NOT NULL DEFAULT false,
    defer_cutover boolean NOT NULL DEFAULT false,
    cutover_requested boolean NOT NULL DEFAULT false,
    error text,
    report jsonb,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_one_active_per_table ON pgshift.runs (source_oid)
    WHERE phase NOT IN ('done', 'aborted');
ALTER TABLE pgshift.runs ADD COLUMN IF NOT EXISTS label text;
ALTER TABLE pgshift.runs ADD COLUMN IF NOT EXISTS throttle_paused boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS throttle text;
CREATE TABLE IF NOT EXISTS pgshift.throttle_probe (run bigint PRIMARY KEY, at timestamptz NOT NULL);";

/// A run as recorded.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// Run number.
    pub id: i64,
    /// The source table's OID.
    pub source_oid: u32,
    /// The statement being run.
    pub statement: String,
    /// Phase.
    pub phase: Phase,
    /// The phase to resume from, when `Failed`.
    pub resume_phase: Option<Phase>,
    /// Everything planned.
    pub plan: RunPlan,
    /// Every key below this has landed in the shadow (`None`: nothing yet).
    pub landed_prefix: Option<KeyValue>,
    /// Whether the whole key range has landed.
    pub copy_finished: bool,
    /// Rows copied so far.
    pub rows_copied: i64,
    /// Whether a clean verification pass completed.
    pub verified: bool,
    /// Whether the swap waits for `pgshift cutover`.
    pub defer_cutover: bool,
    /// Whether `pgshift cutover` was run.
    pub cutover_requested: bool,
    /// The last error.
    pub error: Option<String>,
    /// The source as recorded (`schema.table`, quoted).
    pub source: String,
    /// Who started it (`migrate:<version>:<unit>` for a migration's unit), if recorded.
    pub label: Option<String>,
    /// When it was recorded and last updated (ISO 8601, UTC).
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// The final report, once done.
    pub report: Option<serde_json::Value>,
    /// Whether an operator paused it (`pgshift throttle TABLE --pause`).
    pub throttle_paused: bool,
    /// The throttle's state as the running process last recorded it.
    pub throttle: Option<String>,
}

impl RunRecord {
    /// The phase the run goes on from: its phase, or the recorded phase to resume from
    /// when it failed (the copy when none was recorded).
    pub fn resume_point(&self) -> Phase {
        match self.phase {
            Phase::Failed => self.resume_phase.unwrap_or(Phase::Copying),
            phase => phase,
        }
    }
}

fn db(what: &'static str) -> impl FnOnce(tokio_postgres::Error) -> CasError {
    move |e| CasError::db(what, e)
}

/// Creates the runs table when missing. Runs starting at once on different tables of
/// a fresh database would race `CREATE … IF NOT EXISTS` (which is not atomic: the
/// loser fails on the catalog's unique index), so they take turns on a transaction
/// advisory lock.
pub async fn ensure(client: &Client) -> Result<(), CasError> {
    let result = client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL lock_timeout = 2000; \
             SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('pgshift.ensure', 0)); \
             {ENSURE} COMMIT;"
        ))
        .await;
    if result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result.map_err(db("creating pgshift.runs"))
}

/// Records a new run and returns its number. Fails (unique index) when the table has
/// an active run.
pub async fn insert(
    client: &Client,
    source_oid: u32,
    schema: &str,
    name: &str,
    statement: &str,
    plan: &RunPlan,
    label: Option<&str>,
) -> Result<i64, CasError> {
    let defer_cutover = plan.options.defer_cutover;
    let plan = serde_json::to_string(plan).map_err(|e| CasError::Record(e.to_string()))?;
    let row = client
        .query_one(
            "INSERT INTO pgshift.runs (source_oid, source_schema, source_name, statement, phase, plan, defer_cutover, label) \
             VALUES ($1, $2, $3, $4, 'prepared', $5::pg_catalog.text::pg_catalog.jsonb, $6, $7) RETURNING id",
            &[&source_oid, &schema, &name, &statement, &plan, &defer_cutover, &label],
        )
        .await
        .map_err(|e| {
            if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
                CasError::Busy { run: None, pid: None }
            } else {
                CasError::db("recording the run", e)
            }
        })?;
    Ok(row.get(0))
}

/// Replaces the recorded plan (artifacts are added as they are created).
pub async fn save_plan(client: &Client, id: i64, plan: &RunPlan) -> Result<(), CasError> {
    let plan = serde_json::to_string(plan).map_err(|e| CasError::Record(e.to_string()))?;
    client
        .execute(
            "UPDATE pgshift.runs SET plan = $2::pg_catalog.text::pg_catalog.jsonb, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id, &plan],
        )
        .await
        .map_err(db("saving the run plan"))?;
    Ok(())
}

/// Moves the run to `phase`.
pub async fn set_phase(client: &Client, id: i64, phase: Phase) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET phase = $2, resume_phase = NULL, error = NULL, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id, &phase.name()],
        )
        .await
        .map_err(db("recording the run's phase"))?;
    Ok(())
}

/// Records that the run was stopped and removed, with why (its artifacts are gone; the
/// record stays for `status` and the history).
pub async fn aborted(client: &Client, id: i64, error: &str) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET phase = 'aborted', resume_phase = NULL, error = $2, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id, &error],
        )
        .await
        .map_err(db("recording the run's removal"))?;
    Ok(())
}

/// Records a failure; the run resumes at `resume`.
pub async fn fail(client: &Client, id: i64, resume: Phase, error: &str) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET phase = 'failed', resume_phase = $2, error = $3, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id, &resume.name(), &error],
        )
        .await
        .map_err(db("recording the run's failure"))?;
    Ok(())
}

/// The SQL recording a landed prefix (and the rows copied so far), run right after
/// the chunk that moved it commits. Copy workers record on their own sessions, so
/// their updates can arrive out of order: once the copy is recorded as finished, a
/// later-arriving landing leaves it (and its prefix) as they are, and the row count
/// only grows.
pub const LANDED_SQL: &str =
    "UPDATE pgshift.runs SET \
       landed_prefix = CASE WHEN copy_finished THEN landed_prefix ELSE $2::pg_catalog.text::pg_catalog.jsonb END, \
       rows_copied = GREATEST(rows_copied, $3::pg_catalog.int8), copy_finished = copy_finished OR $4, \
       updated_at = pg_catalog.now() WHERE id = $1";

/// Records that the copy finished.
pub async fn set_verified(client: &Client, id: i64, verified: bool) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET verified = $2, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id, &verified],
        )
        .await
        .map_err(db("recording verification"))?;
    Ok(())
}

/// Marks that `pgshift cutover` was asked for.
pub async fn request_cutover(client: &Client, id: i64) -> Result<(), CasError> {
    client
        .execute(
            "UPDATE pgshift.runs SET cutover_requested = true, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id],
        )
        .await
        .map_err(db("requesting the cutover"))?;
    Ok(())
}

/// Deletes a run's record (after `abort` removed its artifacts).
pub async fn delete(client: &Client, id: i64) -> Result<(), CasError> {
    client
        .execute("DELETE FROM pgshift.runs WHERE id = $1", &[&id])
        .await
        .map_err(db("removing the run's record"))?;
    Ok(())
}

/// Stores the final report.
pub async fn save_report(
    client: &Client,
    id: i64,
    report: &serde_json::Value,
) -> Result<(), CasError> {
    let text = report.to_string();
    client
        .execute(
            "UPDATE pgshift.runs SET report = $2::pg_catalog.text::pg_catalog.jsonb, updated_at = pg_catalog.now() WHERE id = $1",
            &[&id, &text],
        )
        .await
        .map_err(db("saving the run report"))?;
    Ok(())
}

/// Every column of a run. The columns later versions added (`label`, `throttle_paused`,
/// `throttle`) are read through `to_jsonb` of the row, so that the read-only commands
/// (`status`) work on a runs table an earlier version made, which only a command that
/// records runs brings up to date ([`ENSURE`]); the row's JSON is made once.
const SELECT: &str = "SELECT id, source_oid, statement, phase, resume_phase, plan::pg_catalog.text, \
     landed_prefix::pg_catalog.text, copy_finished, rows_copied, verified, defer_cutover, cutover_requested, error, \
     pg_catalog.quote_ident(source_schema) || '.' || pg_catalog.quote_ident(source_name), \
     x.j ->> 'label', \
     pg_catalog.to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
     pg_catalog.to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), report::pg_catalog.text, \
     COALESCE(CAST(x.j ->> 'throttle_paused' AS boolean), false), \
     x.j ->> 'throttle' \
     FROM pgshift.runs r CROSS JOIN LATERAL (SELECT pg_catalog.to_jsonb(r) AS j) x";

fn record(row: &tokio_postgres::Row) -> Result<RunRecord, CasError> {
    let phase: String = row.get(3);
    let resume: Option<String> = row.get(4);
    let plan: String = row.get(5);
    let prefix: Option<String> = row.get(6);
    Ok(RunRecord {
        id: row.get(0),
        source_oid: row.get(1),
        statement: row.get(2),
        phase: Phase::parse(&phase)
            .ok_or_else(|| CasError::Record(format!("unknown phase {phase:?}")))?,
        resume_phase: resume.as_deref().and_then(Phase::parse),
        plan: serde_json::from_str(&plan).map_err(|e| CasError::Record(e.to_string()))?,
        landed_prefix: match prefix {
            Some(text) => {
                serde_json::from_str(&text).map_err(|e| CasError::Record(e.to_string()))?
            }
            None => None,
        },
        copy_finished: row.get(7),
        rows_copied: row.get(8),
        verified: row.get(9),
        defer_cutover: row.get(10),
        cutover_requested: row.get(11),
        error: row.get(12),
        source: row.get(13),
        label: row.get(14),
        created_at: row.get(15),
        updated_at: row.get(16),
        report: row
            .get::<_, Option<String>>(17)
            .and_then(|text| serde_json::from_str(&text).ok()),
        throttle_paused: row.get(18),
        throttle: row.get(19),
    })
}

/// The newest run recorded with `label`, if any.
pub async fn by_label(client: &Client, label: &str) -> Result<Option<RunRecord>, CasError> {
    let row = client
        .query_opt(
            &format!("{SELECT} WHERE label = $1 AND phase <> 'aborted' ORDER BY id DESC LIMIT 1"),
            &[&label],
        )
        .await
        .map_err(db("reading the run"))?;
    row.as_ref().map(record).transpose()
}

/// A run by number.
pub async fn by_id(client: &Client, id: i64) -> Result<RunRecord, CasError> {
    let row = client
        .query_opt(&format!("{SELECT} WHERE id = $1"), &[&id])
        .await
        .map_err(db("reading the run"))?
        .ok_or_else(|| CasError::NoSuchRun(id.to_string()))?;
    record(&row)
}

/// The active run of a table (not done, not aborted), if any.
pub async fn active_for(client: &Client, source_oid: u32) -> Result<Option<RunRecord>, CasError> {
    let row = client
        .query_opt(
            &format!("{SELECT} WHERE source_oid = $1 AND phase NOT IN ('done', 'aborted')"),
            &[&source_oid],
        )
        .await
        .map_err(db("reading the run"))?;
    row.as_ref().map(record).transpose()
}

/// The number and phase of the active run of a table, read without creating anything
/// (no run table yet: no run).
pub async fn active_id(
    client: &Client,
    source_oid: u32,
) -> Result<Option<(i64, String)>, CasError> {
    if !runs_table_exists(client).await? {
        return Ok(None);
    }
    Ok(active_for(client, source_oid)
        .await?
        .map(|run| (run.id, run.phase.name().to_owned())))
}

/// Whether `pgshift.runs` exists, read without creating it.
async fn runs_table_exists(client: &Client) -> Result<bool, CasError> {
    let row = client
        .query_one(
            "SELECT pg_catalog.to_regclass('pgshift.runs') IS NOT NULL",
            &[],
        )
        .await
        .map_err(db("looking for pgshift.runs"))?;
    Ok(row.get(0))
}

/// Every run, newest first (at most `limit`).
pub async fn all(client: &Client, limit: i64) -> Result<Vec<RunRecord>, CasError> {
    if !runs_table_exists(client).await? {
        return Ok(Vec::new());
    }
    let rows = client
        .query(&format!("{SELECT} ORDER BY id DESC LIMIT $1"), &[&limit])
        .await
        .map_err(db("listing runs"))?;
    rows.iter().map(record).collect()
}
