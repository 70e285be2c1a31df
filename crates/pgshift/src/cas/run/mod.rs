//! A copy-and-swap run from start to end, as a state machine over recorded phases:
//! `prepared → copying → indexing → verifying → [ready →] cutover → done` (and
//! `failed`, `aborted`). Every phase can be resumed by a new process from the record.
//!
//! One process runs a table at a time: a session advisory lock per table, taken with
//! `pg_try_advisory_lock` on the runner's session and never waited for (INV: OC-2).

mod applier_task;
mod beside;
mod build_pool;
mod cleanup;
mod copy;
mod drive;
mod finish;
mod indexes;
mod prepare;
mod sessions;
mod swap;
mod table_lock;
mod verify_all;

pub use cleanup::{CleanupStep, LeftBehind};
use drive::drive;
use finish::remove_artifacts;
use prepare::prepare;
use sessions::terminate_copiers;
use table_lock::{lock_table, lock_table_after_stop, unlock_table};

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::cutover::{self, SwapReport};
use super::error::CasError;
use super::liveness;
use super::plan::{RunOptions, RunPlan};
use super::preflight::{preflight, Preflight};
use super::session;
use super::shadow;
use super::standby::{self as standby_urls, StandbyEndpoint};
use super::store::{self, Phase, RunRecord};
use super::throttle::{self, standby::StandbyReport, ThrottleEvent};
use crate::connect::{ConnectionSpec, Session};
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::{QualifiedName, Statement};

/// Progress of a run, for whoever shows it.
pub trait CasProgress: Send {
    /// A new phase starts.
    fn phase(&mut self, phase: Phase);
    /// Rows copied so far, of an estimate, and the largest change-log backlog seen so
    /// far (the figure that ends as [`RunReport::backlog_max`]).
    fn copied(&mut self, rows: i64, estimate: i64, backlog_max: i64);
    /// Verification progress.
    fn verified(&mut self, rows: i64, estimate: i64);
    /// A note.
    fn note(&mut self, text: &str);
    /// The throttle's decision changed: `pace` is `open`, `slow` or `paused`, `why`
    /// says which signal (empty when open), `paused_ms` the time paused so far (for
    /// an ETA that leaves it out).
    fn throttled(&mut self, _pace: &str, _why: &str, _paused_ms: u64) {}
    /// An index of the shadow is being built (at its start, then at each reading of
    /// the server's progress of it).
    fn index_build(&mut self, _build: &crate::cas::index_watch::IndexBuild) {}
}

/// Progress that goes nowhere.
pub struct Silent;

impl CasProgress for Silent {
    fn phase(&mut self, _phase: Phase) {}
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, _text: &str) {}
}

/// What a run did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    /// The run's number.
    pub run: i64,
    /// The table.
    pub table: String,
    /// How it ended.
    pub phase: String,
    /// Rows copied (by this process).
    pub rows_copied: i64,
    /// Rows verified.
    pub rows_verified: i64,
    /// Verification passes run.
    pub verification_passes: u32,
    /// The largest change-log backlog seen.
    pub backlog_max: i64,
    /// Duration of each phase run by this process (`phase`, milliseconds). With
    /// [`Self::verified_beside_builds`], `verifying` ran inside `indexing`.
    pub phases_ms: Vec<(String, u64)>,
    /// Whether verification ran beside the index builds (from when the key was
    /// built), rather than after them.
    #[serde(default)]
    pub verified_beside_builds: bool,
    /// The swap, when it happened.
    pub swap: Option<SwapReport>,
    /// Foreign keys that could not be validated after the swap (left NOT VALID).
    pub unvalidated_foreign_keys: Vec<String>,
    /// Whether the old table was kept.
    pub kept_old: Option<String>,
    /// Whether this process found the swap already committed by an earlier one (read
    /// from which table holds the name) and only finished the run.
    pub settled_from_catalog: bool,
    /// What the preflight found of free disk: `free disk checked: …`, or `free disk
    /// not checked: <why>`.
    #[serde(default)]
    pub disk: String,
    /// The throttle's decisions, with the signals each was made from.
    #[serde(default)]
    pub throttle: Vec<ThrottleEvent>,
    /// Time the throttle kept the work paused (ms).
    #[serde(default)]
    pub throttled_ms: u64,
    /// The standbys before and at the swap.
    #[serde(default)]
    pub standbys: Option<StandbyReport>,
    /// The clean-up's steps after the swap (validations, the old tree's foreign keys
    /// one per transaction, the old tree), with their attempts.
    #[serde(default)]
    pub cleanup: Vec<CleanupStep>,
    /// What the clean-up could not drop within its budget, with the statements that
    /// drop it later (the swap is done all the same).
    #[serde(default)]
    pub left_behind: Vec<LeftBehind>,
}

/// What a run is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The statement (an `ALTER TABLE`, or a rebuild: `VACUUM FULL`, `CLUSTER`).
    pub statement: &'a Statement,
    /// The table, as written.
    pub table: &'a QualifiedName,
    /// The `search_path` the statement was written for (empty: the role's own). The
    /// table is resolved with it and the statement runs on the shadow with it (after
    /// `pg_catalog`, so built-in names cannot be shadowed).
    pub search_path: &'a [String],
    /// A label recorded with the run (a migration's unit), so that its caller can find
    /// the run again after a crash.
    pub label: Option<&'a str>,
    /// Standbys of the primary to read at the cutover (`--standby-url`): each proven a
    /// standby of it before anything is recorded; the record keeps them redacted.
    pub standbys: &'a [ConnectionSpec],
}

/// Starts a run for `statement` on the table `table` (as written, resolved with the
/// role's `search_path`), and carries it to its end (or to `ready`, with a deferred
/// cutover).
pub async fn start(
    spec: &ConnectionSpec,
    statement: &Statement,
    table: &QualifiedName,
    options: RunOptions,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let request = Request {
        statement,
        table,
        search_path: &[],
        label: None,
        standbys: &[],
    };
    start_request(spec, request, options, progress).await
}

/// Starts a run as `request` describes and carries it to its end.
pub async fn start_request(
    spec: &ConnectionSpec,
    request: Request<'_>,
    options: RunOptions,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    // Before any work: every --standby-url is a standby of this primary.
    standby_urls::prove_all(runner.client(), request.standbys).await?;
    let search_path = if request.search_path.is_empty() {
        runner.user_search_path().to_vec()
    } else {
        request.search_path.to_vec()
    };
    let oid = resolve(&runner, request.table, &search_path).await?;
    lock_table(runner.client(), oid).await?;
    let result = start_locked(spec, &runner, oid, request, &search_path, options, progress).await;
    unlock_table(runner.client(), oid).await;
    result
}

async fn start_locked(
    spec: &ConnectionSpec,
    runner: &Session,
    oid: u32,
    request: Request<'_>,
    search_path: &[String],
    options: RunOptions,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let statement = request.statement;
    let client = runner.client();
    let Preflight { facts, disk } = preflight(client, oid, statement, options.disk_room).await?;
    // Said either way: a check that could not be made is never skipped silently.
    progress.note(&disk.line());
    store::ensure(client).await?;
    let key = facts.key.clone().ok_or_else(|| {
        CasError::Refused(Refusal::new(
            RefusalCause::NoUsableKey,
            "the table has no primary key",
        ))
    })?;
    let mut plan = RunPlan {
        run: 0,
        options,
        shadow_statement: None,
        key,
        shadow: facts.table.name.clone(),
        shadow_partitions: Vec::new(),
        columns: Vec::new(),
        shadow_key_name: String::new(),
        key_build: None,
        indexes: Vec::new(),
        constraints: Vec::new(),
        search_path: search_path.to_vec(),
        source: facts,
        disk: disk.line(),
        disk_watch: Some(disk.watch.clone()),
        standbys: request.standbys.iter().map(StandbyEndpoint::of).collect(),
    };
    let name = &plan.source.table.name;
    plan.run = store::insert(
        client,
        oid,
        name.schema.as_deref().unwrap_or_default(),
        &name.name,
        &statement.text,
        &plan,
        request.label,
    )
    .await?;
    let names = plan.names();
    plan.shadow = names.shadow(&plan.source.table.name);
    plan.shadow_partitions = plan
        .source
        .partitions
        .iter()
        .map(|p| names.shadow(&p.relation.name))
        .collect();
    plan.shadow_key_name = names.shadow_index(0);
    plan.shadow_statement = shadow::retarget(statement, &plan.shadow)?;
    store::save_plan(client, plan.run, &plan).await?;
    let result = prepare(client, &mut plan, statement, progress).await;
    if let Err(err) = result {
        let _ = store::fail(client, plan.run, Phase::Prepared, &err.to_string()).await;
        return Err(err);
    }
    let record = store::by_id(client, plan.run).await?;
    drive(spec, runner, record, request.standbys, progress).await
}

/// Continues the active run of `table` from its record (naming no standby: refused
/// for a run started with `--standby-url`).
pub async fn resume(
    spec: &ConnectionSpec,
    table: &QualifiedName,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    resume_with(spec, table, &[], progress).await
}

/// Continues the active run of `table` from its record, reading `standbys` at the
/// cutover; they must include every standby the run was recorded with.
pub async fn resume_with(
    spec: &ConnectionSpec,
    table: &QualifiedName,
    standbys: &[ConnectionSpec],
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    standby_urls::prove_all(runner.client(), standbys).await?;
    let oid = resolve_any(&runner, table).await?;
    resume_oid(spec, &runner, oid, &table.to_string(), standbys, progress).await
}

/// Continues run `id` (which must be the active run of its table).
pub async fn resume_id(
    spec: &ConnectionSpec,
    id: i64,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    resume_id_with(spec, id, &[], progress).await
}

/// Continues run `id`, reading `standbys` at the cutover (as [`resume_with`]).
pub async fn resume_id_with(
    spec: &ConnectionSpec,
    id: i64,
    standbys: &[ConnectionSpec],
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    standby_urls::prove_all(runner.client(), standbys).await?;
    store::ensure(runner.client()).await?;
    let record = store::by_id(runner.client(), id).await?;
    let (oid, source) = (record.source_oid, record.source);
    resume_oid(spec, &runner, oid, &source, standbys, progress).await
}

async fn resume_oid(
    spec: &ConnectionSpec,
    runner: &Session,
    oid: u32,
    table: &str,
    standbys: &[ConnectionSpec],
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    lock_table_after_stop(runner.client(), oid).await?;
    let result = resume_locked(spec, runner, oid, table, standbys, progress).await;
    unlock_table(runner.client(), oid).await;
    result
}

async fn resume_locked(
    spec: &ConnectionSpec,
    runner: &Session,
    oid: u32,
    table: &str,
    standbys: &[ConnectionSpec],
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let client = runner.client();
    store::ensure(client).await?;
    let mut record = store::active_for(client, oid)
        .await?
        .ok_or_else(|| CasError::NoSuchRun(format!("active run for {table}")))?;
    // Fail closed: a run started with standby URLs is continued only with them, unless
    // its swap has committed (no swap lies ahead, and only its finish is left).
    let swapped =
        record.resume_point() == Phase::Cutover && cutover::settled(client, &record.plan).await?;
    if !swapped {
        standby_urls::require_recorded(&record.plan.standbys, standbys)?;
    }
    let endpoints = standby_urls::union(&record.plan.standbys, standbys);
    if endpoints != record.plan.standbys {
        record.plan.standbys = endpoints;
        store::save_plan(client, record.id, &record.plan).await?;
    }
    if record.phase == Phase::Prepared || record.resume_phase == Some(Phase::Prepared) {
        // Nothing was copied: start the shadow again from the recorded statement.
        let mut plan = record.plan.clone();
        remove_artifacts(client, &plan).await?;
        let statements =
            pgshift_sql::parse(&record.statement).map_err(|e| CasError::Record(e.to_string()))?;
        let statement = statements
            .first()
            .ok_or_else(|| CasError::Record("empty statement".to_owned()))?;
        prepare(client, &mut plan, statement, progress).await?;
    }
    let record = store::by_id(client, record.id).await?;
    drive(spec, runner, record, standbys, progress).await
}

/// The answer to a cutover request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CutoverRequest {
    /// The run asked to swap.
    pub run: i64,
    /// Whether a process is running it now (it swaps within a second); if not, the
    /// swap happens when the run is resumed.
    pub running: bool,
    /// The backend pid of the process running it, when one does.
    pub holder_pid: Option<i32>,
}

/// Asks the active run of `table` (started with a deferred cutover) to swap.
pub async fn request_cutover(
    spec: &ConnectionSpec,
    table: &QualifiedName,
) -> Result<CutoverRequest, CasError> {
    let (runner, oid, record) = active_run(spec, table).await?;
    if !record.defer_cutover {
        return Err(CasError::WrongState {
            run: record.id,
            state: record.phase.name().to_owned(),
            what: "it was not started with --defer-cutover; it swaps on its own".to_owned(),
        });
    }
    store::request_cutover(runner.client(), record.id).await?;
    // Seen from this session, without taking the lock (which would make a resume
    // started at this moment find the table busy).
    let holder_pid = liveness::holder(runner.client(), oid).await?;
    Ok(CutoverRequest {
        run: record.id,
        running: holder_pid.is_some(),
        holder_pid,
    })
}

/// A session, and the table's OID and active run, for a request to that run.
async fn active_run(
    spec: &ConnectionSpec,
    table: &QualifiedName,
) -> Result<(Session, u32, RunRecord), CasError> {
    let runner = session::open(spec, "pgshift").await?;
    let oid = resolve_any(&runner, table).await?;
    let record = store::active_for(runner.client(), oid)
        .await?
        .ok_or_else(|| CasError::NoSuchRun(format!("active run for {table}")))?;
    Ok((runner, oid, record))
}

/// The answer to a pause or resume request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ThrottleRequest {
    /// The run.
    pub run: i64,
    /// Whether it is now asked to pause (`false`: to resume).
    pub paused: bool,
    /// Whether a process is running it now (it follows within a tick of its
    /// throttle); if not, the request stands for when it is resumed.
    pub running: bool,
    /// The backend pid of that process.
    pub holder_pid: Option<i32>,
}

/// Asks the active run of `table` to pause (`true`) or resume its work: recorded in
/// the run record, which the running process reads on every tick of its throttle.
pub async fn request_throttle(
    spec: &ConnectionSpec,
    table: &QualifiedName,
    pause: bool,
) -> Result<ThrottleRequest, CasError> {
    let (runner, oid, record) = active_run(spec, table).await?;
    throttle::record::set_paused(runner.client(), record.id, pause).await?;
    let holder_pid = liveness::holder(runner.client(), oid).await?;
    Ok(ThrottleRequest {
        run: record.id,
        paused: pause,
        running: holder_pid.is_some(),
        holder_pid,
    })
}

/// Removes every artifact of the active run of `table`, its checkpoint row included.
/// Refused once the swap has committed.
pub async fn abort(spec: &ConnectionSpec, table: &QualifiedName) -> Result<i64, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    let client = runner.client();
    let oid = resolve_any(&runner, table).await?;
    store::ensure(client).await?;
    let record = store::active_for(client, oid)
        .await?
        .ok_or_else(|| CasError::NoSuchRun(format!("active run for {table}")))?;
    lock_table_after_stop(client, oid).await?;
    let result = abort_locked(client, &record).await;
    unlock_table(client, oid).await;
    result
}

async fn abort_locked(client: &Client, record: &RunRecord) -> Result<i64, CasError> {
    if cutover::settled(client, &record.plan).await? {
        return Err(CasError::WrongState {
            run: record.id,
            state: "swapped".to_owned(),
            what: "the swap has committed; resume the run to finish it".to_owned(),
        });
    }
    terminate_copiers(client, &record.plan).await?;
    remove_artifacts(client, &record.plan).await?;
    // The checkpoint goes too: nothing of an aborted run stays behind.
    store::delete(client, record.id).await?;
    Ok(record.id)
}

/// Every recorded run, newest first.
pub async fn status(spec: &ConnectionSpec) -> Result<Vec<RunRecord>, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    store::all(runner.client(), 100).await
}

/// The OID of the table a name denotes with `search_path` (a table or partitioned
/// table).
async fn resolve(
    session: &Session,
    table: &QualifiedName,
    search_path: &[String],
) -> Result<u32, CasError> {
    let found = crate::catalog::resolve_relation(session.client(), table, search_path)
        .await
        .map_err(|e| CasError::Record(e.to_string()))?;
    match found {
        Some(facts) if facts.kind.is_table() => Ok(facts.oid),
        Some(facts) => Err(CasError::Refused(Refusal::new(
            RefusalCause::WrongRelationKind,
            format!("{} is not a table", facts.name),
        ))),
        _ => Err(CasError::Refused(Refusal::new(
            RefusalCause::TableMissing,
            format!("table {table} does not exist in the search path"),
        ))),
    }
}

/// Like [`resolve`], but also finds a table that a swap already renamed away (the run
/// record names the source by OID).
async fn resolve_any(session: &Session, table: &QualifiedName) -> Result<u32, CasError> {
    store::ensure(session.client()).await?;
    let schema = table.schema.clone();
    let row = session
        .client()
        .query_opt(
            "SELECT source_oid FROM pgshift.runs WHERE source_name = $1 AND ($2::pg_catalog.text IS NULL OR source_schema = $2) \
               AND phase NOT IN ('done', 'aborted') ORDER BY id DESC LIMIT 1",
            &[&table.name, &schema],
        )
        .await
        .map_err(|e| CasError::db("finding the run", e))?;
    match row {
        Some(row) => Ok(row.get(0)),
        None => resolve(session, table, session.user_search_path()).await,
    }
}
