//! A copy-and-swap run from start to end, as a state machine over recorded phases:
//! `prepared → copying → indexing → verifying → [ready →] cutover → done` (and
//! `failed`, `aborted`). Every phase can be resumed by a new process from the record.
//!
//! One process runs a table at a time: a session advisory lock per table, taken with
//! `pg_try_advisory_lock` on the runner's session and never waited for (INV: OC-2).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use tokio_postgres::Client;

use super::applier::{self, Applier};
use super::capture;
use super::copier::{self, CopyState, Sizing};
use super::cutover::{self, SwapReport};
use super::error::CasError;
use super::index_watch::{IndexBuild, Watcher};
use super::ledger::Ledger;
use super::liveness;
use super::names::RunNames;
use super::plan::{Mode, RunOptions, RunPlan};
use super::preflight::{preflight, Preflight};
use super::session;
use super::shadow;
use super::statements::Statements;
use super::store::{self, Phase, RunRecord};
use super::verify;
use crate::connect::{ConnectionSpec, Session};
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::{quote_ident, QualifiedName, Statement};

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
    /// An index of the shadow is being built (at its start, then at each reading of
    /// the server's progress of it).
    fn index_build(&mut self, _build: &IndexBuild) {}
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
    /// Duration of each phase run by this process (`phase`, milliseconds).
    pub phases_ms: Vec<(String, u64)>,
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
    let Preflight { facts, disk } = preflight(client, oid, statement).await?;
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
    drive(spec, runner, record, progress).await
}

/// Continues the active run of `table` from its record.
pub async fn resume(
    spec: &ConnectionSpec,
    table: &QualifiedName,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    let oid = resolve_any(&runner, table).await?;
    resume_oid(spec, &runner, oid, &table.to_string(), progress).await
}

/// Continues run `id` (which must be the active run of its table).
pub async fn resume_id(
    spec: &ConnectionSpec,
    id: i64,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    store::ensure(runner.client()).await?;
    let record = store::by_id(runner.client(), id).await?;
    resume_oid(spec, &runner, record.source_oid, &record.source, progress).await
}

async fn resume_oid(
    spec: &ConnectionSpec,
    runner: &Session,
    oid: u32,
    table: &str,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    lock_table_after_stop(runner.client(), oid).await?;
    let result = resume_locked(spec, runner, oid, table, progress).await;
    unlock_table(runner.client(), oid).await;
    result
}

async fn resume_locked(
    spec: &ConnectionSpec,
    runner: &Session,
    oid: u32,
    table: &str,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let client = runner.client();
    store::ensure(client).await?;
    let record = store::active_for(client, oid)
        .await?
        .ok_or_else(|| CasError::NoSuchRun(format!("active run for {table}")))?;
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
    drive(spec, runner, record, progress).await
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
    let runner = session::open(spec, "pgshift").await?;
    let oid = resolve_any(&runner, table).await?;
    let record = store::active_for(runner.client(), oid)
        .await?
        .ok_or_else(|| CasError::NoSuchRun(format!("active run for {table}")))?;
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
    let snapshot =
        crate::catalog::read_snapshot(session.client(), std::slice::from_ref(table), search_path)
            .await
            .map_err(|e| CasError::Record(e.to_string()))?;
    match snapshot.lookup(table) {
        crate::catalog::Lookup::Found(facts) if facts.kind.is_table() => Ok(facts.oid),
        crate::catalog::Lookup::Found(facts) => Err(CasError::Refused(Refusal::new(
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

/// Takes the per-table session advisory lock, never waiting (INV: OC-2).
async fn lock_table(client: &Client, oid: u32) -> Result<(), CasError> {
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended($1, 0))",
            &[&liveness::lock_key(oid)],
        )
        .await
        .map_err(|e| CasError::db("taking the run lock", e))?;
    // INV: OC-2 — a second run on the same table is refused at once, naming the holder.
    if row.get::<_, bool>(0) {
        return Ok(());
    }
    let holder = liveness::holder(client, oid).await.ok().flatten();
    Err(CasError::Busy {
        run: None,
        pid: holder,
    })
}

/// Takes the per-table lock for `resume` or `abort`, which often follow a process that
/// was just killed: its backend holds the lock until it notices the client is gone
/// (within about a second, `client_connection_check_interval`, or when its current
/// statement ends). Waits for that at most [`AFTER_STOP_WAIT`], then refuses like
/// [`lock_table`], naming the holder.
async fn lock_table_after_stop(client: &Client, oid: u32) -> Result<(), CasError> {
    let deadline = Instant::now() + AFTER_STOP_WAIT;
    loop {
        match lock_table(client, oid).await {
            Err(CasError::Busy { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

/// How long `resume` and `abort` wait for the backend of a stopped process to let go
/// of the table.
pub const AFTER_STOP_WAIT: Duration = Duration::from_secs(15);

/// Releases the per-table lock before the session closes, so that a command run right
/// after this one returns never finds the lock still held by a closing backend.
async fn unlock_table(client: &Client, oid: u32) {
    let _ = client
        .query_one(
            "SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended($1, 0))",
            &[&liveness::lock_key(oid)],
        )
        .await;
}

/// Shadow, capture (or fence): everything before the copy.
async fn prepare(
    client: &Client,
    plan: &mut RunPlan,
    statement: &Statement,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    progress.phase(Phase::Prepared);
    shadow::create(client, plan, statement).await?;
    store::save_plan(client, plan.run, plan).await?;
    install_capture(client, plan).await?;
    store::set_phase(client, plan.run, Phase::Copying).await?;
    Ok(())
}

/// Installs the capture (or fence) in one transaction under a short lock budget,
/// retried, then proves it intact.
async fn install_capture(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let sql = capture::install_sql(plan)?;
    let budgets = plan.options.cutover;
    for attempt in 1..=budgets.attempts {
        let statement = format!(
            "BEGIN; SET LOCAL lock_timeout = {}; {sql}; COMMIT",
            budgets.lock_timeout_ms
        );
        match client.batch_execute(&statement).await {
            Ok(()) => {
                let breaches = capture::check(client, plan).await?;
                if breaches.is_empty() {
                    return Ok(());
                }
                return Err(CasError::Record(format!(
                    "the capture installed is not intact: {}",
                    breaches
                        .iter()
                        .map(|b| b.problem.clone())
                        .collect::<Vec<_>>()
                        .join("; ")
                )));
            }
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                if e.code() != Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
                    || attempt == budgets.attempts
                {
                    return Err(CasError::db("installing the change capture", e));
                }
                tokio::time::sleep(Duration::from_millis(
                    budgets
                        .backoff_initial_ms
                        .saturating_mul(u64::from(attempt)),
                ))
                .await;
            }
        }
    }
    Err(CasError::CutoverRefused(Refusal::new(
        RefusalCause::LockBudgetExhausted,
        "could not take the lock to install the change capture",
    )))
}

/// How often the background applier, when caught up, reads the change log from its
/// start again (see [`Applier::rewind`]).
const REWIND_EVERY: Duration = Duration::from_secs(2);

/// Samples the change log's backlog into the run's largest.
async fn note_backlog(applier: &Applier, client: &Client, max: &AtomicI64) -> Result<(), CasError> {
    max.fetch_max(applier.backlog(client).await?, Ordering::Relaxed);
    Ok(())
}

/// How often the background applier looks again whether the shadow has its key.
const KEY_WAIT: Duration = Duration::from_millis(100);

/// The background applier: runs until stopped, pausable for the swap (and for each
/// index build). It applies nothing until the shadow has its primary key
/// ([`CopyState::key_ready`]). It applies in
/// batches of [`applier::BATCH_MIN`] entries, larger while batches come back full,
/// and pauses for [`applier::PAUSE`] after a batch that was not.
struct ApplierTask {
    stop: Arc<AtomicBool>,
    gate: Arc<Mutex<()>>,
    backlog_max: Arc<AtomicI64>,
    handle: tokio::task::JoinHandle<Result<(), CasError>>,
}

impl ApplierTask {
    fn spawn(session: Session, statements: Statements, state: Arc<CopyState>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(Mutex::new(()));
        let backlog_max = Arc::new(AtomicI64::new(0));
        let (stop_flag, gate_lock, max) = (stop.clone(), gate.clone(), backlog_max.clone());
        let handle = tokio::spawn(async move {
            let mut applier = Applier::new(statements);
            let client = session.client();
            let mut ticks: u32 = 0;
            let mut limit = applier::BATCH_MIN;
            let mut rewound = Instant::now();
            let mut waits: u32 = 0;
            while !stop_flag.load(Ordering::Relaxed) {
                if !state.key_ready.load(Ordering::Acquire) {
                    // No key yet (the copy writes a bare heap): the entries wait in
                    // the log; once the key is built every chunk has landed, so
                    // every entry is applied then.
                    waits = waits.wrapping_add(1);
                    // Sampled at once and then twice a second, so that the copy's
                    // progress shows the backlog growing (it is the run's largest
                    // once the key is built) rather than a stale 0.
                    if waits % 5 == 1 {
                        note_backlog(&applier, client, &max).await?;
                    }
                    tokio::time::sleep(KEY_WAIT).await;
                    continue;
                }
                if waits > 0 {
                    // The key is there: the backlog that gathered meanwhile is at its
                    // largest now, before the first batch (reported as the run's
                    // largest backlog).
                    waits = 0;
                    note_backlog(&applier, client, &max).await?;
                }
                let batch = {
                    let _open = gate_lock.lock().await;
                    applier.step(client, &state.ledger, limit).await?
                };
                ticks = ticks.wrapping_add(1);
                if ticks % 50 == 0 {
                    note_backlog(&applier, client, &max).await?;
                }
                let pause;
                (limit, pause) = applier::next_limit(limit, batch.read);
                if pause {
                    // Caught up: now and then, read the log from its start again for
                    // entries committed after a later one was read, so that they do
                    // not wait for the swap's drain.
                    if rewound.elapsed() >= REWIND_EVERY {
                        applier.rewind();
                        rewound = Instant::now();
                    }
                    tokio::time::sleep(applier::PAUSE).await;
                }
            }
            Ok(())
        });
        ApplierTask {
            stop,
            gate,
            backlog_max,
            handle,
        }
    }

    /// Fails if the applier stopped with an error.
    fn check(&self) -> Result<(), CasError> {
        if self.handle.is_finished() && !self.stop.load(Ordering::Relaxed) {
            return Err(CasError::ApplierStopped);
        }
        Ok(())
    }

    async fn stop(self) -> Result<i64, CasError> {
        self.stop.store(true, Ordering::Relaxed);
        let max = self.backlog_max.load(Ordering::Relaxed);
        match self.handle.await {
            Ok(result) => result.map(|()| max),
            Err(e) => Err(CasError::Record(format!("the applier task failed: {e}"))),
        }
    }
}

/// Drives a recorded run from its phase to its end.
async fn drive(
    spec: &ConnectionSpec,
    runner: &Session,
    record: RunRecord,
    progress: &mut dyn CasProgress,
) -> Result<RunReport, CasError> {
    let client = runner.client();
    let plan = record.plan.clone();
    let mut report = RunReport {
        run: record.id,
        table: plan.source.table.name.to_string(),
        phase: "running".to_owned(),
        rows_copied: 0,
        rows_verified: 0,
        verification_passes: 0,
        backlog_max: 0,
        phases_ms: Vec::new(),
        swap: None,
        unvalidated_foreign_keys: Vec::new(),
        kept_old: None,
        settled_from_catalog: false,
        disk: plan.disk.clone(),
    };
    let phase = match record.phase {
        Phase::Failed => record.resume_phase.unwrap_or(Phase::Copying),
        phase => phase,
    };
    if matches!(phase, Phase::Done | Phase::Aborted) {
        return Err(CasError::WrongState {
            run: record.id,
            state: phase.name().to_owned(),
            what: "nothing to resume".to_owned(),
        });
    }
    if phase == Phase::Cutover && cutover::settled(client, &plan).await? {
        report.settled_from_catalog = true;
        finish(client, &plan, &mut report, progress).await?;
        return Ok(report);
    }
    // A process that stopped may have left statements running (a chunk, an index
    // build, an apply): they end before this one starts its own.
    terminate_earlier_sessions(client, &plan).await?;
    ensure_capture(client, &plan).await?;
    let statements = Statements::new(&plan);
    // A phase past copying is recorded only once every chunk has landed. The recorded
    // flag alone may say otherwise: copy workers record their landings on sessions of
    // their own, so a landing that did not finish the copy can commit its record after
    // the one that did. An unfinished ledger past copying (nothing copies any more)
    // would discard entries above its prefix as uncut (INV: CO-5).
    let copy_done = record.copy_finished || phase > Phase::Copying;
    let state = Arc::new(CopyState {
        ledger: Mutex::new((Ledger::resume(record.landed_prefix.clone(), copy_done), 0)),
        rows: AtomicI64::new(0),
        key_ready: AtomicBool::new(key_exists(client, &plan).await?),
    });
    let applier = match plan.options.mode {
        Mode::Live => Some(ApplierTask::spawn(
            session::open(spec, &format!("pgshift-apply-{}", plan.run)).await?,
            statements.clone(),
            state.clone(),
        )),
        Mode::Quiesced => None,
    };
    let outcome = run_phases(
        spec,
        runner,
        &record,
        &plan,
        &statements,
        &state,
        applier.as_ref(),
        phase,
        &mut report,
        progress,
    )
    .await;
    let (backlog_max, outcome) = match applier {
        Some(task) => match (task.stop().await, outcome) {
            (Ok(max), outcome) => (max, outcome),
            // The applier's own error says why it stopped.
            (Err(stopped), Err(CasError::ApplierStopped)) => (0, Err(stopped)),
            (Err(_), outcome) => (0, outcome),
        },
        None => (0, outcome),
    };
    report.backlog_max = report.backlog_max.max(backlog_max);
    report.rows_copied = state.rows.load(Ordering::Relaxed);
    match outcome {
        Ok(()) => Ok(report),
        Err(err) => {
            if matches!(err, CasError::Interrupted { .. }) {
                // Stopped on request: no statement of this run is left running on the
                // server (a chunk, an index build, a verification) once it is recorded.
                let _ = terminate_earlier_sessions(client, &plan).await;
            }
            let resume = match &err {
                CasError::CutoverRefused(_) | CasError::Divergence(_) => Phase::Verifying,
                _ => current_phase(client, record.id)
                    .await
                    .unwrap_or(Phase::Copying),
            };
            let _ = store::fail(client, record.id, resume, &err.to_string()).await;
            Err(err)
        }
    }
}

async fn current_phase(client: &Client, id: i64) -> Option<Phase> {
    store::by_id(client, id).await.ok().map(|r| match r.phase {
        Phase::Failed => r.resume_phase.unwrap_or(Phase::Copying),
        p => p,
    })
}

/// Installs the capture if the run died before it was, and proves it intact.
async fn ensure_capture(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let breaches = capture::check(client, plan).await?;
    if breaches.is_empty() {
        return Ok(());
    }
    let exists = client
        .query_one(
            "SELECT pg_catalog.to_regclass($1) IS NOT NULL",
            &[&plan.names().log_table().to_string()],
        )
        .await
        .map_err(|e| CasError::db("looking for the change log", e))?;
    if exists.get::<_, bool>(0) {
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::CutoverUnfenced,
            format!(
                "the change capture was tampered with while the run was stopped ({}); writes may have been missed — abort the run",
                breaches.iter().map(|b| b.problem.clone()).collect::<Vec<_>>().join("; ")
            ),
        )));
    }
    install_capture(client, plan).await
}

#[allow(clippy::too_many_arguments)]
async fn run_phases(
    spec: &ConnectionSpec,
    runner: &Session,
    record: &RunRecord,
    plan: &RunPlan,
    statements: &Statements,
    state: &Arc<CopyState>,
    applier: Option<&ApplierTask>,
    from: Phase,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let client = runner.client();
    let estimate = estimate_rows(client, plan).await;
    if from <= Phase::Copying {
        CasError::check_interrupt()?;
        let started = Instant::now();
        progress.phase(Phase::Copying);
        store::set_phase(client, plan.run, Phase::Copying).await?;
        resume_copy(client, plan, statements, record, state).await?;
        stoppable(copy(
            spec, plan, statements, state, applier, estimate, progress,
        ))
        .await?;
        report
            .phases_ms
            .push(("copying".to_owned(), elapsed_ms(started)));
    }
    if from <= Phase::Indexing {
        CasError::check_interrupt()?;
        let started = Instant::now();
        progress.phase(Phase::Indexing);
        store::set_phase(client, plan.run, Phase::Indexing).await?;
        stoppable(build_indexes(spec, client, plan, state, applier, progress)).await?;
        report
            .phases_ms
            .push(("indexing".to_owned(), elapsed_ms(started)));
    }
    if !state.key_ready.load(Ordering::Acquire) {
        // Resumed past indexing: the key was built then; made sure of all the same.
        ensure_key(client, plan).await?;
        state.key_ready.store(true, Ordering::Release);
    }
    CasError::check_interrupt()?;
    let started = Instant::now();
    progress.phase(Phase::Verifying);
    store::set_phase(client, plan.run, Phase::Verifying).await?;
    stoppable(verify_all(
        spec, client, plan, statements, applier, estimate, report, progress,
    ))
    .await?;
    report
        .phases_ms
        .push(("verifying".to_owned(), elapsed_ms(started)));
    if plan.options.defer_cutover {
        CasError::check_interrupt()?;
        progress.phase(Phase::Ready);
        store::set_phase(client, plan.run, Phase::Ready).await?;
        stoppable(wait_for_cutover(client, plan, applier)).await?;
    }
    // The swap checks for a stop between its attempts, never inside its transaction.
    CasError::check_interrupt()?;
    let started = Instant::now();
    progress.phase(Phase::Cutover);
    store::set_phase(client, plan.run, Phase::Cutover).await?;
    let swap = match applier {
        Some(task) => {
            let _paused = task.gate.lock().await;
            cutover::swap(client, plan, || catch_up(client, plan, statements)).await
        }
        None => cutover::swap(client, plan, || catch_up(client, plan, statements)).await,
    }?;
    report.swap = Some(swap);
    report
        .phases_ms
        .push(("cutover".to_owned(), elapsed_ms(started)));
    finish(client, plan, report, progress).await
}

/// Runs a phase's work until it ends or a stop is asked for, whichever comes first.
/// Dropping the work there is safe: every phase before the swap resumes from its
/// record (a chunk that did not commit is copied again; a build that did not finish
/// is built again), exactly as after a killed process.
// INV: OC-3 — a stop asked by a signal ends a phase's work; the record resumes it.
async fn stoppable<T>(
    work: impl std::future::Future<Output = Result<T, CasError>>,
) -> Result<T, CasError> {
    tokio::select! {
        result = work => result,
        () = crate::exec::interrupt::wait() => Err(CasError::interrupted(
            crate::exec::interrupt::requested().unwrap_or_default(),
        )),
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

async fn estimate_rows(client: &Client, plan: &RunPlan) -> i64 {
    let mut oids = vec![plan.source.table.oid];
    oids.extend(plan.source.partitions.iter().map(|p| p.relation.oid));
    client
        .query_one(
            // Rows live in leaf tables only (a partitioned parent's reltuples is the
            // sum of its partitions').
            "SELECT coalesce(pg_catalog.sum(GREATEST(c.reltuples, 0)), 0)::pg_catalog.int8 FROM pg_catalog.pg_class c \
              WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND c.relkind OPERATOR(pg_catalog.<>) 'p'",
            &[&oids],
        )
        .await
        .map(|r| r.get(0))
        .unwrap_or(0)
}

/// Before copying again after a stop: wait for any chunk transaction of the dead
/// process (its backend may still be running), then remove shadow rows above the
/// landed prefix — their change-log entries may have been discarded as uncut, and the
/// copy (which never overwrites) would keep them stale.
///
/// The shadow has no index during the copy, so this is a sequential scan of it, once
/// per resume. Only where that `DELETE` is refused for want of a replica identity (the
/// shadow is in a publication `FOR ALL TABLES` that publishes deletes, and its replica
/// identity is the missing key) is the key built first — over rows copied once each —
/// and the copy goes on with it.
async fn resume_copy(
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
    record: &RunRecord,
    state: &CopyState,
) -> Result<(), CasError> {
    if record.copy_finished {
        return Ok(());
    }
    terminate_copiers(client, plan).await?;
    let lo = record.landed_prefix.clone();
    let sql = statements.delete_range(lo.is_some(), false);
    let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = lo
        .iter()
        .flat_map(|v| {
            v.iter()
                .map(|s| s as &(dyn tokio_postgres::types::ToSql + Sync))
        })
        .collect();
    match client.execute(&sql, &params).await {
        Ok(_) => Ok(()),
        Err(e)
            if e.code()
                == Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE)
                && !state.key_ready.load(Ordering::Acquire) =>
        {
            ensure_key(client, plan).await?;
            state.key_ready.store(true, Ordering::Release);
            client
                .execute(&sql, &params)
                .await
                .map_err(|e| CasError::db("removing rows above the landed prefix", e))?;
            Ok(())
        }
        Err(e) => Err(CasError::db("removing rows above the landed prefix", e)),
    }
}

/// Ends (and waits out) the sessions of an earlier process of this run — copy, index
/// and applier sessions, whose statements a killed process leaves running until they
/// end (run numbers are per database: only this database's sessions).
async fn terminate_earlier_sessions(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let names = plan.names();
    let applications = vec![
        names.copy_application(),
        format!("pgshift-index-{}", plan.run),
        format!("pgshift-apply-{}", plan.run),
        format!("pgshift-verify-{}", plan.run),
    ];
    terminate_sessions(client, &applications).await
}

/// Ends (and waits out) the copy sessions of an earlier process (its chunk
/// transactions).
async fn terminate_copiers(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    terminate_sessions(client, &[plan.names().copy_application()]).await
}

async fn terminate_sessions(client: &Client, applications: &[String]) -> Result<(), CasError> {
    for _ in 0..600 {
        let row = client
            .query_one(
                "SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid)) FROM pg_catalog.pg_stat_activity a \
                  WHERE a.application_name OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]) \
                    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() \
                    AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()",
                &[&applications.to_vec()],
            )
            .await
            .map_err(|e| CasError::db("ending earlier sessions of the run", e))?;
        if row.get::<_, i64>(0) == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(CasError::Record(
        "sessions of an earlier process of the run would not end".to_owned(),
    ))
}

/// The copy, by `workers` sessions.
async fn copy(
    spec: &ConnectionSpec,
    plan: &RunPlan,
    statements: &Statements,
    state: &Arc<CopyState>,
    applier: Option<&ApplierTask>,
    estimate: i64,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let sizing = Sizing {
        first_rows: plan.options.first_chunk_rows,
        target: Duration::from_millis(plan.options.chunk_target_ms),
    };
    let mut workers = Workers(Vec::new());
    for _ in 0..plan.options.workers.max(1) {
        let session = session::open(spec, &plan.names().copy_application()).await?;
        let (statements, state, run) = (statements.clone(), state.clone(), plan.run);
        workers.0.push(tokio::spawn(async move {
            copier::worker(session.client(), run, &statements, &state, sizing).await
        }));
    }
    while !workers.0.is_empty() {
        // A worker that stopped with an error stops the copy (the others are aborted
        // when `workers` drops; their open chunk transactions roll back).
        let mut i = 0;
        while i < workers.0.len() {
            if workers.0[i].is_finished() {
                let handle = workers.0.swap_remove(i);
                handle
                    .await
                    .map_err(|e| CasError::Record(format!("a copy worker failed: {e}")))??;
            } else {
                i += 1;
            }
        }
        if let Some(task) = applier {
            task.check()?;
        }
        progress.copied(
            state.rows.load(Ordering::Relaxed),
            estimate,
            applier.map_or(0, |a| a.backlog_max.load(Ordering::Relaxed)),
        );
        if !workers.0.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    progress.copied(
        state.rows.load(Ordering::Relaxed),
        estimate,
        applier.map_or(0, |a| a.backlog_max.load(Ordering::Relaxed)),
    );
    Ok(())
}

/// Copy worker tasks, aborted if the copy stops early (a spawned task otherwise keeps
/// running after its handle is dropped).
struct Workers(Vec<tokio::task::JoinHandle<Result<(), CasError>>>);

impl Drop for Workers {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// `ddl` in one transaction that first takes the shadow tree for itself
/// ([`session::lock_shadow`]: autovacuum on it is waited out), then runs `ddl` under the
/// session's own lock budget — so that a lock `ddl` needs on another table (a foreign
/// key's referenced table) is still waited for briefly. Run it through
/// [`session::settle`].
fn on_shadow(plan: &RunPlan, ddl: &str) -> String {
    format!(
        "BEGIN; {}; SET LOCAL maintenance_work_mem = '256MB'; {ddl}; COMMIT",
        session::lock_shadow(&plan.shadow, session::RUN_SESSION.lock_timeout_ms)
    )
}

/// Whether the shadow has its primary key, valid, under the plan's temporary name (a
/// run recorded before the key was built after the copy always has it).
async fn key_exists(client: &Client, plan: &RunPlan) -> Result<bool, CasError> {
    if plan.key_build.is_none() {
        return Ok(true);
    }
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
              WHERE i.indrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) AND ic.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND i.indisprimary AND i.indisvalid AND i.indisready)",
            &[&plan.shadow.to_string(), &plan.shadow_key_name],
        )
        .await
        .map_err(|e| CasError::db("looking for the shadow's primary key", e))?;
    Ok(row.get(0))
}

/// Builds the shadow's primary key unless it has it (idempotent: a build is one
/// transaction, so a stopped one left nothing; an index of its name that is not a
/// valid key is removed first). Rows the copy inserted twice for one key — which the
/// copy never does — fail the build with a unique violation, and the run stops with
/// nothing swapped (INV: CO-5).
async fn ensure_key(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    ensure_key_watched(client, plan, None).await
}

/// [`ensure_key`], with the build reported on `watcher` (when there is one).
async fn ensure_key_watched(
    client: &Client,
    plan: &RunPlan,
    watcher: Option<&mut Watcher<'_>>,
) -> Result<(), CasError> {
    let Some(build) = &plan.key_build else {
        return Ok(());
    };
    if key_exists(client, plan).await? {
        if let Some(watcher) = watcher {
            watcher.skip();
        }
        return Ok(());
    }
    let index = QualifiedName {
        schema: plan.shadow.schema.clone(),
        name: plan.shadow_key_name.clone(),
    };
    let sql = on_shadow(
        plan,
        &format!(
            "ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}; DROP INDEX IF EXISTS {index}; {build}",
            plan.shadow,
            quote_ident(&plan.shadow_key_name)
        ),
    );
    let result = match watcher {
        Some(watcher) => watcher.run(client, "primary key", &sql).await,
        None => client.batch_execute(&sql).await,
    };
    session::settle(client, "building the shadow's primary key", result).await
}

/// Builds the shadow's primary key (first: the applier waits for it, and foreign keys
/// to the table itself reference it), then its other indexes and constraints (nobody
/// else uses the shadow, so plain builds), skipping any already built by an earlier
/// process. The applier is paused during each build (it would wait for the build's
/// lock on the shadow, within its `lock_timeout`) and catches up between them.
async fn build_indexes(
    spec: &ConnectionSpec,
    monitor: &Client,
    plan: &RunPlan,
    state: &CopyState,
    applier: Option<&ApplierTask>,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    let session = session::open(spec, &format!("pgshift-index-{}", plan.run)).await?;
    let client = session.client();
    let builds = usize::from(plan.key_build.is_some()) + plan.indexes.len();
    let mut watcher = Watcher::new(client, monitor, progress, builds).await;
    ensure_key_watched(client, plan, Some(&mut watcher)).await?;
    state.key_ready.store(true, Ordering::Release);
    let pause = || async {
        match applier {
            Some(task) => Some(task.gate.lock().await),
            None => None,
        }
    };
    let schema = plan.shadow.schema.clone().unwrap_or_default();
    for index in &plan.indexes {
        let exists = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text)",
                &[&schema, &index.temp_name],
            )
            .await
            .map_err(|e| CasError::db("looking for a shadow index", e))?;
        if exists.get::<_, bool>(0) {
            watcher.skip();
            continue;
        }
        let _paused = pause().await;
        let result = watcher
            .run(client, &index.source_name, &on_shadow(plan, &index.sql))
            .await;
        session::settle(
            client,
            &format!("building index {} on the shadow", index.source_name),
            result,
        )
        .await?;
    }
    for constraint in &plan.constraints {
        let exists = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint con WHERE con.conrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) \
                  AND con.conname OPERATOR(pg_catalog.=) $2::pg_catalog.text)",
                &[&plan.shadow.to_string(), &constraint.name],
            )
            .await
            .map_err(|e| CasError::db("looking for a shadow constraint", e))?;
        if exists.get::<_, bool>(0) {
            continue;
        }
        let _paused = pause().await;
        let add = format!(
            "ALTER TABLE {} ADD CONSTRAINT {} {}{}",
            plan.shadow,
            quote_ident(&constraint.name),
            constraint.definition,
            if constraint.validated && plan.source.partition_key.is_none() {
                " NOT VALID"
            } else if constraint.validated {
                ""
            } else {
                " NOT VALID"
            }
        );
        let result = client.batch_execute(&on_shadow(plan, &add)).await;
        session::settle(
            client,
            &format!("adding constraint {} to the shadow", constraint.name),
            result,
        )
        .await?;
        if constraint.validated && plan.source.partition_key.is_none() {
            let validate = format!(
                "ALTER TABLE {} VALIDATE CONSTRAINT {}",
                plan.shadow,
                quote_ident(&constraint.name)
            );
            let result = client.batch_execute(&on_shadow(plan, &validate)).await;
            session::settle(
                client,
                &format!("validating constraint {} on the shadow", constraint.name),
                result,
            )
            .await?;
        }
    }
    Ok(())
}

/// A complete verification pass with no repair and no divergence (INV: CO-7):
/// only that lets the run swap. A pass is verified by `workers` sessions at once, each
/// chunk in one snapshot of its own (as the copy is made by `workers` sessions).
#[allow(clippy::too_many_arguments)]
async fn verify_all(
    spec: &ConnectionSpec,
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
    applier: Option<&ApplierTask>,
    estimate: i64,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    store::set_verified(client, plan.run, false).await?;
    const MAX_PASSES: u32 = 3;
    let mut sessions = Vec::new();
    for _ in 0..plan.options.workers.max(1) {
        sessions.push(Arc::new(
            session::open(spec, &format!("pgshift-verify-{}", plan.run)).await?,
        ));
    }
    for _ in 0..MAX_PASSES {
        report.verification_passes += 1;
        let pass = Arc::new(verify::Pass::default());
        let mut workers = Workers(Vec::new());
        for session in &sessions {
            let (session, statements, pass) = (session.clone(), statements.clone(), pass.clone());
            let repair = plan.options.repair;
            workers.0.push(tokio::spawn(async move {
                verify::worker(session.client(), &statements, &pass, repair).await
            }));
        }
        while !workers.0.is_empty() {
            // A worker that stopped with an error (a divergence) stops the pass (the
            // others are aborted when `workers` drops).
            let mut i = 0;
            while i < workers.0.len() {
                if workers.0[i].is_finished() {
                    let handle = workers.0.swap_remove(i);
                    handle.await.map_err(|e| {
                        CasError::Record(format!("a verification worker failed: {e}"))
                    })??;
                } else {
                    i += 1;
                }
            }
            if let Some(task) = applier {
                task.check()?;
            }
            let notes: Vec<String> = pass
                .notes
                .lock()
                .map(|mut notes| notes.drain(..).collect())
                .unwrap_or_default();
            for note in notes {
                progress.note(&note);
            }
            progress.verified(pass.verified.load(Ordering::Relaxed), estimate);
            if !workers.0.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        report.rows_verified = pass.verified.load(Ordering::Relaxed);
        if !pass.repaired.load(Ordering::Relaxed) {
            // INV: CO-7 — the proof: a complete pass with no repair.
            store::set_verified(client, plan.run, true).await?;
            return Ok(());
        }
    }
    Err(CasError::Divergence(format!(
        "no clean verification pass in {MAX_PASSES} passes"
    )))
}

/// Waits, keeping the shadow in step, until `pgshift cutover` asks for the swap.
async fn wait_for_cutover(
    client: &Client,
    plan: &RunPlan,
    applier: Option<&ApplierTask>,
) -> Result<(), CasError> {
    loop {
        if let Some(task) = applier {
            task.check()?;
        }
        let record = store::by_id(client, plan.run).await?;
        if record.cutover_requested {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Catches up outside the lock (used when the backlog was too large to drain under
/// it): apply until the backlog is small.
async fn catch_up(
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
) -> Result<(), CasError> {
    let mut applier = Applier::new(statements.clone());
    let finished = Mutex::new((Ledger::resume(None, true), 0));
    for _ in 0..10_000 {
        let batch = applier.step(client, &finished, 5_000).await?;
        if batch.read == 0 || applier.backlog(client).await? < plan.options.cutover.max_drain / 2 {
            return Ok(());
        }
    }
    Ok(())
}

/// After the swap: validate re-pointed foreign keys, drop the old table (unless kept)
/// and every artifact, mark the run done.
async fn finish(
    client: &Client,
    plan: &RunPlan,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    for fk in &plan.source.incoming {
        let validate = format!(
            "ALTER TABLE {} VALIDATE CONSTRAINT {}",
            fk.table,
            quote_ident(&fk.name)
        );
        if let Err(e) = bounded(client, 5_000, &validate).await {
            report.unvalidated_foreign_keys.push(format!(
                "{}.{}: {}",
                fk.table,
                quote_ident(&fk.name),
                e.as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.message().to_owned())
            ));
        }
    }
    let names = plan.names();
    let old = names.old(&plan.source.table.name);
    if plan.options.keep_old {
        drop_capture(client, plan, &old).await?;
        report.kept_old = Some(old.to_string());
    } else {
        bounded(client, 5_000, &format!("DROP TABLE IF EXISTS {old}"))
            .await
            .map_err(|e| CasError::db("dropping the old table", e))?;
    }
    drop_engine_objects(client, &names).await?;
    store::set_phase(client, plan.run, Phase::Done).await?;
    progress.phase(Phase::Done);
    report.phase = "done".to_owned();
    if let Ok(value) = serde_json::to_value(&*report) {
        let _ = store::save_report(client, plan.run, &value).await;
    }
    Ok(())
}

/// Runs `sql` in a transaction of its own with `lock_timeout` set locally (the
/// session's budget is back in force afterwards, whatever happens).
async fn bounded(
    client: &Client,
    lock_timeout_ms: u64,
    sql: &str,
) -> Result<(), tokio_postgres::Error> {
    let result = client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL lock_timeout = {lock_timeout_ms}; {sql}; COMMIT"
        ))
        .await;
    if result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result
}

/// Drops the run's triggers from the (kept) old tree.
async fn drop_capture(
    client: &Client,
    plan: &RunPlan,
    old: &QualifiedName,
) -> Result<(), CasError> {
    let names = plan.names();
    let mut relations = vec![old.clone()];
    relations.extend(
        plan.source
            .partitions
            .iter()
            .map(|p| names.old(&p.relation.name)),
    );
    for relation in relations {
        for trigger in [
            names.capture_trigger(),
            names.truncate_trigger(),
            names.fence_trigger(),
        ] {
            client
                .batch_execute(&format!(
                    "DROP TRIGGER IF EXISTS {} ON {relation}",
                    quote_ident(&trigger)
                ))
                .await
                .map_err(|e| CasError::db("removing the run's triggers from the old table", e))?;
        }
    }
    Ok(())
}

async fn drop_engine_objects(client: &Client, names: &RunNames) -> Result<(), CasError> {
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {}; DROP FUNCTION IF EXISTS {}() CASCADE; DROP FUNCTION IF EXISTS {}() CASCADE",
            names.log_table(),
            names.capture_function(),
            names.refuse_function()
        ))
        .await
        .map_err(|e| CasError::db("removing the run's engine objects", e))
}

/// Removes every artifact of a run that has not swapped: the triggers on the source
/// tree, the shadow tree, the change log, the functions.
async fn remove_artifacts(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let names = plan.names();
    for relation in plan.source_relations() {
        for trigger in [
            names.capture_trigger(),
            names.truncate_trigger(),
            names.fence_trigger(),
        ] {
            let sql = format!(
                "DROP TRIGGER IF EXISTS {} ON {relation}",
                quote_ident(&trigger)
            );
            if let Err(e) = bounded(client, 2_000, &sql).await {
                if e.code() != Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) {
                    return Err(CasError::db("removing the run's triggers", e));
                }
            }
        }
    }
    let shadow = names.shadow(&plan.source.table.name);
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {shadow}"))
        .await
        .map_err(|e| CasError::db("dropping the shadow", e))?;
    drop_engine_objects(client, &names).await
}
