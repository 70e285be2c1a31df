//! The relay load generator: writer connections inserting, soft-deleting and
//! deleting events at a fixed total rate (some of them as
//! `session_replication_role = replica`), and keyset readers paging through
//! channel windows, against the one cluster it is given.
//!
//! [`start`] checks the configuration and the database, then spawns the
//! workers on the current tokio runtime and returns a [`LoadHandle`]. The run
//! ends when its duration is over ([`LoadHandle::wait`]) or when stopped
//! ([`LoadHandle::stop`]); both return the [`LoadReport`]: the ledger of every
//! write, the per-second timeline and the errors. A failed write never stops
//! the load; a lost connection is made again with bounded backoff.
//!
//! ```no_run
//! # async fn run(conninfo: String) -> Result<(), pgshift_workload::Error> {
//! use std::time::Duration;
//! use pgshift_workload::load::{self, LoadConfig};
//!
//! let mut config = LoadConfig::new(conninfo, Duration::from_secs(30));
//! config.replica_writers = 1;
//! let handle = load::start(config).await?;
//! // ... run a schema change here ...
//! let report = handle.stop().await;
//! println!("{} writes acknowledged", report.ledger.counts().acknowledged_total());
//! # Ok(()) }
//! ```

mod config;
mod reader;
mod recorder;
mod session;
mod writer;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::config::{LoadConfig, LoadSettings, OpMix};
use self::recorder::Recorder;
use self::session::Role;
use crate::errlog::ErrorLog;
use crate::error::{Error, Result};
use crate::event::{Channel, Targets};
use crate::key::PgUuid;
use crate::ledger::{Ledger, LedgerCounts};
use crate::pacing::{Claim, Schedule};
use crate::timeline::{Timeline, TimelineSummary};

/// How long the workers get to finish after the run ends, beyond the longest
/// write or connection attempt.
const STOP_MARGIN: Duration = Duration::from_secs(1);

/// What every worker of a run shares.
pub(crate) struct Shared {
    config: LoadConfig,
    pg: tokio_postgres::Config,
    targets: Arc<Targets>,
    recorder: Recorder,
    deadline: Instant,
    stop: watch::Receiver<bool>,
    writes: Schedule,
    reads: Schedule,
}

impl Shared {
    /// Claims the next slot of `schedule` and waits until it is due; `None`
    /// once the run is over.
    async fn next_slot(&self, schedule: &Schedule) -> Option<Claim> {
        if *self.stop.borrow() {
            return None;
        }
        let claim = schedule.claim(Instant::now());
        if claim.due >= self.deadline {
            return None;
        }
        self.pause_until(claim.due).await.then_some(claim)
    }

    /// Waits until `when`; `false` if the run ended first.
    async fn pause_until(&self, when: Instant) -> bool {
        let until = when.min(self.deadline);
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => {}
            _ = stop.wait_for(|stopped| *stopped) => return false,
        }
        when < self.deadline && !*self.stop.borrow()
    }
}

/// Counters of a running load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Writes acknowledged.
    pub acknowledged: u64,
    /// Writes committed with an unexpected row count.
    pub skipped: u64,
    /// Writes refused.
    pub refused: u64,
    /// Writes with an unknown outcome.
    pub unknown: u64,
    /// Pages read.
    pub reads: u64,
    /// Page reads that failed.
    pub read_failures: u64,
}

/// A running load. Dropping it ends the run (without a report).
pub struct LoadHandle {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    started: Instant,
    started_at: SystemTime,
}

impl LoadHandle {
    /// The counters so far.
    pub fn progress(&self) -> Progress {
        self.shared.recorder.progress()
    }

    /// The wall-clock time the run started (second 0 of the timeline).
    pub fn started_at(&self) -> SystemTime {
        self.started_at
    }

    /// Time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Ends the run now and returns its report once the workers have finished
    /// their current operation (bounded by the write timeout).
    pub async fn stop(mut self) -> LoadReport {
        let _ = self.stop.send(true);
        let limit = Instant::now() + self.grace();
        self.finish(limit).await
    }

    /// Waits until the configured duration is over and returns the report.
    pub async fn wait(mut self) -> LoadReport {
        let limit = self.shared.deadline.max(Instant::now()) + self.grace();
        self.finish(limit).await
    }

    /// How long the workers may take to end after the run is over: the
    /// longest write, or a connection attempt and the preparation after it.
    fn grace(&self) -> Duration {
        let config = &self.shared.config;
        config.op_timeout().max(config.connect_timeout * 2) + STOP_MARGIN
    }

    async fn finish(&mut self, limit: Instant) -> LoadReport {
        let mut stranded = 0;
        for mut task in std::mem::take(&mut self.tasks) {
            if tokio::time::timeout_at(limit.into(), &mut task)
                .await
                .is_err()
            {
                task.abort();
                stranded += 1;
            }
        }
        if stranded > 0 {
            tracing::warn!(
                stranded,
                "load workers still busy at the stop bound were aborted"
            );
        }
        let elapsed = self.started.elapsed();
        let recorded = self.shared.recorder.take(elapsed);
        LoadReport {
            settings: self.shared.config.settings(),
            started_at: self.started_at,
            elapsed,
            timeline: recorded.timeline,
            errors: recorded.errors,
            reconnects: recorded.reconnects,
            keyset_anomalies: recorded.keyset_anomalies,
            stranded_workers: stranded,
            ledger: recorded.ledger,
        }
    }
}

impl std::fmt::Debug for LoadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadHandle")
            .field("elapsed", &self.elapsed())
            .field("progress", &self.progress())
            .field("workers", &self.tasks.len())
            .finish()
    }
}

impl Drop for LoadHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct LoadReport {
    /// The run's settings.
    pub settings: LoadSettings,
    /// The wall-clock time of second 0.
    pub started_at: SystemTime,
    /// How long the run lasted.
    pub elapsed: Duration,
    /// Per-second counts and latencies.
    pub timeline: Timeline,
    /// The errors seen (counts and a sample).
    pub errors: ErrorLog,
    /// Connections made again after one was lost.
    pub reconnects: u64,
    /// Keyset pages out of order or not after their cursor (0 expected).
    pub keyset_anomalies: u64,
    /// Workers still busy past the stop bound, and aborted (0 expected);
    /// their writes in flight are in the ledger as unknown.
    pub stranded_workers: usize,
    /// Every write, with what the client saw.
    pub ledger: Ledger,
}

impl LoadReport {
    /// Acknowledged writes per second over the whole run.
    pub fn acknowledged_writes_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.ledger.counts().acknowledged_total() as f64 / secs
    }

    /// A serialisable summary (the ledger reduced to counts).
    pub fn summary(&self) -> LoadSummary {
        LoadSummary {
            settings: self.settings.clone(),
            started_at_unix_ms: self
                .started_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            elapsed_ms: self.elapsed.as_millis() as u64,
            acknowledged_writes_per_sec: self.acknowledged_writes_per_sec(),
            ledger: self.ledger.counts(),
            timeline: self.timeline.summary(),
            errors: self.errors.clone(),
            reconnects: self.reconnects,
            keyset_anomalies: self.keyset_anomalies,
            stranded_workers: self.stranded_workers,
        }
    }
}

/// A serialisable [`LoadReport`].
#[derive(Clone, Debug, Serialize)]
pub struct LoadSummary {
    /// The run's settings.
    pub settings: LoadSettings,
    /// Second 0, in Unix milliseconds.
    pub started_at_unix_ms: u64,
    /// The run's length.
    pub elapsed_ms: u64,
    /// Acknowledged writes per second.
    pub acknowledged_writes_per_sec: f64,
    /// The ledger's counts.
    pub ledger: LedgerCounts,
    /// Per-second figures.
    pub timeline: TimelineSummary,
    /// Errors.
    pub errors: ErrorLog,
    /// Reconnections.
    pub reconnects: u64,
    /// Keyset anomalies.
    pub keyset_anomalies: u64,
    /// Aborted workers.
    pub stranded_workers: usize,
}

/// Starts a load run on the current tokio runtime. Fails if the configuration
/// is out of bounds, the database cannot be reached, the table does not exist,
/// or there is no live channel to write to.
pub async fn start(config: LoadConfig) -> Result<LoadHandle> {
    config.validate()?;
    let pg: tokio_postgres::Config =
        config
            .conninfo
            .parse()
            .map_err(|e: tokio_postgres::Error| Error::ConnInfo {
                reason: e.to_string(),
            })?;
    let targets = Arc::new(discover(&pg, &config).await?);
    let started = Instant::now();
    let started_at = SystemTime::now();
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        recorder: Recorder::new(started, config.max_error_samples),
        deadline: started + config.duration,
        stop: stop_rx,
        writes: Schedule::new(started, config.write_pace, config.catch_up),
        reads: Schedule::new(started, config.read_pace, config.catch_up),
        targets,
        pg,
        config,
    });
    let mut tasks = Vec::new();
    for index in 0..shared.config.writers {
        let replica = index < shared.config.replica_writers;
        let writer = writer::Writer::new(index as u32, replica, Arc::clone(&shared));
        tasks.push(tokio::spawn(writer.run()));
    }
    for index in 0..shared.config.readers {
        let reader = reader::Reader::new(index as u32, Arc::clone(&shared));
        tasks.push(tokio::spawn(reader.run()));
    }
    Ok(LoadHandle {
        shared,
        stop: stop_tx,
        tasks,
        started,
        started_at,
    })
}

/// Reads the live communities and channels, and checks that the table exists.
async fn discover(pg: &tokio_postgres::Config, config: &LoadConfig) -> Result<Targets> {
    let client = session::connect(pg, config, Role::Probe)
        .await
        .map_err(|e| Error::Connect {
            sqlstate: e.code().to_owned(),
            message: e.message,
        })?;
    let bound = config.statement_timeout;
    let work = async {
        let table = client
            .query_one(
                "SELECT to_regclass($1::text) IS NOT NULL",
                &[&config.table.to_string()],
            )
            .await
            .map_err(|e| Error::sql("checking the table", e))?;
        if !table
            .try_get::<_, bool>(0)
            .map_err(|e| Error::sql("checking the table", e))?
        {
            return Err(Error::NoSuchRelation {
                table: config.table.to_string(),
            });
        }
        if config.replica_writers > 0 {
            client
                .batch_execute(
                    "SET session_replication_role = replica; RESET session_replication_role",
                )
                .await
                .map_err(|e| {
                    Error::sql(
                        "checking that replica writers may set session_replication_role",
                        e,
                    )
                })?;
        }
        let communities = client
            .query(
                "SELECT id FROM communities WHERE deletion_state = 'active' ORDER BY id",
                &[],
            )
            .await
            .map_err(|e| Error::sql("reading communities", e))?;
        // archived_at is read through to_jsonb: the relay's migration 0017 drops the
        // column, and the load runs on the relay at every version of its directory.
        let channels = client
            .query(
                "SELECT ch.community_id, ch.id FROM channels ch \
                 JOIN communities c ON c.id = ch.community_id \
                 WHERE c.deletion_state = 'active' AND ch.deleted_at IS NULL \
                 AND to_jsonb(ch) ->> 'archived_at' IS NULL ORDER BY 1, 2",
                &[],
            )
            .await
            .map_err(|e| Error::sql("reading channels", e))?;
        let communities = communities
            .iter()
            .map(|row| row.try_get::<_, PgUuid>(0))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::sql("reading communities", e))?;
        let channels = channels
            .iter()
            .map(|row| {
                Ok(Channel {
                    community_id: row.try_get(0)?,
                    id: row.try_get(1)?,
                })
            })
            .collect::<std::result::Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| Error::sql("reading channels", e))?;
        Ok(Targets {
            communities,
            channels,
        })
    };
    let targets = tokio::time::timeout(bound, work)
        .await
        .map_err(|_| Error::Timeout {
            what: "reading communities and channels".to_owned(),
            waited: bound,
        })??;
    if targets.communities.is_empty() || targets.channels.is_empty() {
        return Err(Error::NoChannels);
    }
    Ok(targets)
}
