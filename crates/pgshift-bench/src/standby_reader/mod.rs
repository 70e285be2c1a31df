//! A keyset reader meant for a streaming standby: the relay's read pattern, pages of a
//! table ordered by `(created_at, id)` behind a fence timestamp, each page one short
//! query of its own, read over and over in passes until it is stopped.
//!
//! The rows at or before the fence are a fixed set as long as nothing inserts,
//! deletes or re-keys them (updates of other columns are fine), so every pass must
//! read each of them exactly once, whatever happens to the table in between (a
//! copy-and-swap replacing it, its swap's lock replayed on the standby): [`check`]
//! compares every pass with the set read on the primary afterwards.
//!
//! The reader records every row key it read (in passes), every failed query (a query
//! cancelled by a recovery conflict among them: SQLSTATE 40001, "canceling statement
//! due to conflict with recovery"), each page's latency, and which relations each
//! pass read (`tableoid`: a pass that saw the table before and after a swap holds both
//! relations).
//!
//! `id` may be of any type: its value is kept in the server's binary form and bound
//! back as such, so the cursor compares with the server's own ordering.

mod check;
mod raw;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use pgshift_workload::key::unix_us;
use pgshift_workload::TableRef;
use serde::Serialize;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

pub use check::{check, ReaderVerdict};
use raw::RawValue;

/// What to read, where, and how fast.
#[derive(Clone, Debug)]
pub struct ReaderConfig {
    /// The server to read (a standby, usually).
    pub conninfo: String,
    /// The table, with `created_at timestamptz` and `id` columns.
    pub table: TableRef,
    /// Only rows with `created_at <= fence` are read.
    pub fence: SystemTime,
    /// And, when set, only rows with `created_at > since` (a window of the newest
    /// fenced rows, so that a pass of a large table stays short).
    pub since: Option<SystemTime>,
    /// Rows per page.
    pub page_size: i64,
    /// The wait between two pages.
    pub pause: Duration,
    /// How long each page's query sleeps after reading (holding its lock on the
    /// table): a long standby query, to show a recovery conflict. `None`: none.
    pub hold: Option<Duration>,
    /// `statement_timeout` of the reader's session, and the client's bound on a page.
    pub page_timeout: Duration,
}

impl ReaderConfig {
    /// Pages of 100 rows, 10 ms apart, of `table` on `conninfo`, behind `fence`.
    pub fn new(conninfo: impl Into<String>, table: TableRef, fence: SystemTime) -> Self {
        ReaderConfig {
            conninfo: conninfo.into(),
            table,
            fence,
            since: None,
            page_size: 100,
            pause: Duration::from_millis(10),
            hold: None,
            page_timeout: Duration::from_secs(60),
        }
    }
}

/// The key of one row read: `created_at` in Unix microseconds and `id` in the
/// server's binary form of its type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RowKey {
    /// `created_at`, Unix microseconds.
    pub created_at_us: i64,
    /// `id`, as the server sends it in binary.
    pub id: Vec<u8>,
}

/// One complete read of the fenced rows, first page to last.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Pass {
    /// Every key read, in the order read.
    pub keys: Vec<RowKey>,
    /// The relations the pages read (`tableoid`), in the order first seen.
    pub relations: Vec<u32>,
    /// Pages read.
    pub pages: usize,
}

/// A page's query that failed.
#[derive(Clone, Debug, Serialize)]
pub struct PageError {
    /// When, from the reader's start (ms).
    pub at_ms: u64,
    /// SQLSTATE, when the server sent one.
    pub sqlstate: Option<String>,
    /// The server's (or the client's) message.
    pub message: String,
    /// Cancelled (or its session ended) by a conflict with recovery.
    pub recovery_conflict: bool,
}

/// Everything the reader saw, once it stopped.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReaderLog {
    /// Complete passes.
    pub passes: Vec<Pass>,
    /// The pass in progress when the reader stopped (only when it could not finish it).
    pub unfinished: Option<Pass>,
    /// Every failed page query.
    pub errors: Vec<PageError>,
    /// Every page's latency (µs), successful or not, in order.
    pub page_latencies_us: Vec<u64>,
}

impl ReaderLog {
    /// Queries cancelled by a recovery conflict.
    pub fn cancelled(&self) -> usize {
        self.errors.iter().filter(|e| e.recovery_conflict).count()
    }

    /// The largest page latency (µs).
    pub fn max_latency_us(&self) -> u64 {
        self.page_latencies_us.iter().copied().max().unwrap_or(0)
    }
}

#[derive(Default)]
struct Progress {
    passes: AtomicUsize,
    pages_in_pass: AtomicUsize,
}

/// A running reader.
pub struct StandbyReader {
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    log: Arc<Mutex<ReaderLog>>,
    task: tokio::task::JoinHandle<()>,
}

impl StandbyReader {
    /// Starts reading in a task of its own.
    pub fn start(config: ReaderConfig) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Progress::default());
        let log = Arc::new(Mutex::new(ReaderLog::default()));
        let worker = Worker {
            config,
            stop: Arc::clone(&stop),
            progress: Arc::clone(&progress),
            log: Arc::clone(&log),
            started: Instant::now(),
        };
        let task = tokio::spawn(worker.run());
        StandbyReader {
            stop,
            progress,
            log,
            task,
        }
    }

    /// Complete passes so far.
    pub fn passes(&self) -> usize {
        self.progress.passes.load(Ordering::Acquire)
    }

    /// Pages read in the pass in progress.
    pub fn pages_in_pass(&self) -> usize {
        self.progress.pages_in_pass.load(Ordering::Acquire)
    }

    /// Failed page queries so far.
    pub fn errors(&self) -> usize {
        self.log.lock().map(|l| l.errors.len()).unwrap_or(0)
    }

    /// Asks the reader to stop at the end of its pass in progress, waits for it for at
    /// most `finish` (a pass it cannot finish by then is kept as `unfinished`), and
    /// returns what it saw.
    pub async fn stop(self, finish: Duration) -> ReaderLog {
        self.stop.store(true, Ordering::Release);
        let mut task = self.task;
        if tokio::time::timeout(finish, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
        }
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// The reader's session and its two page statements.
struct Session {
    client: Client,
    first: Statement,
    next: Statement,
}

struct Worker {
    config: ReaderConfig,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
    log: Arc<Mutex<ReaderLog>>,
    started: Instant,
}

impl Worker {
    async fn run(self) {
        let mut session: Option<Session> = None;
        let mut pass = Pass::default();
        let mut cursor: Option<(SystemTime, RawValue)> = None;
        loop {
            if session.is_none() {
                match connect(&self.config).await {
                    Ok(s) => session = Some(s),
                    Err(error) => {
                        self.failed(Instant::now(), error);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                }
            }
            let Some(open) = session.as_ref() else {
                continue;
            };
            let started = Instant::now();
            match self.page(open, cursor.as_ref()).await {
                Ok(rows) => {
                    self.latency(started);
                    let full = rows.len() as i64 >= self.config.page_size;
                    pass.pages += 1;
                    for (created_at, id, relation) in rows {
                        if !pass.relations.contains(&relation) {
                            pass.relations.push(relation);
                        }
                        pass.keys.push(RowKey {
                            created_at_us: unix_us(created_at),
                            id: id.0.clone(),
                        });
                        cursor = Some((created_at, id));
                    }
                    self.progress
                        .pages_in_pass
                        .store(pass.pages, Ordering::Release);
                    if !full {
                        self.finish_pass(std::mem::take(&mut pass));
                        cursor = None;
                        if self.stop.load(Ordering::Acquire) {
                            return;
                        }
                    }
                }
                Err(PageFailure {
                    error,
                    drop_session,
                }) => {
                    self.latency(started);
                    self.failed(started, error);
                    if drop_session {
                        session = None;
                    }
                }
            }
            // The unfinished pass is readable should the reader be aborted.
            if let Ok(mut log) = self.log.lock() {
                log.unfinished = (pass.pages > 0).then(|| pass.clone());
            }
            tokio::time::sleep(self.config.pause).await;
        }
    }

    async fn page(
        &self,
        session: &Session,
        cursor: Option<&(SystemTime, RawValue)>,
    ) -> Result<Vec<(SystemTime, RawValue, u32)>, PageFailure> {
        let limit = self.config.page_size;
        let fence = self.config.fence;
        let hold = self.config.hold.map_or(0.0, |h| h.as_secs_f64());
        let since = self.config.since;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&fence, &limit, &hold];
        if let Some(since) = since.as_ref() {
            params.push(since);
        }
        if let Some((at, id)) = cursor {
            params.push(at);
            params.push(id);
        }
        let statement = if cursor.is_some() {
            &session.next
        } else {
            &session.first
        };
        let query = session.client.query(statement, &params);
        let rows = match tokio::time::timeout(self.config.page_timeout, query).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(error)) => {
                let drop_session = error.is_closed() || error.as_db_error().is_none();
                return Err(PageFailure {
                    error: ClientError::from(&error),
                    drop_session,
                });
            }
            Err(_) => {
                return Err(PageFailure {
                    error: ClientError {
                        sqlstate: None,
                        message: format!(
                            "a page took longer than {:?}; the session was dropped",
                            self.config.page_timeout
                        ),
                    },
                    drop_session: true,
                })
            }
        };
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|error| PageFailure {
                error: ClientError::from(&error),
                drop_session: false,
            })
    }

    fn finish_pass(&self, pass: Pass) {
        if let Ok(mut log) = self.log.lock() {
            log.passes.push(pass);
            log.unfinished = None;
        }
        self.progress.passes.fetch_add(1, Ordering::AcqRel);
        self.progress.pages_in_pass.store(0, Ordering::Release);
    }

    fn latency(&self, started: Instant) {
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Ok(mut log) = self.log.lock() {
            log.page_latencies_us.push(us);
        }
    }

    fn failed(&self, at: Instant, error: ClientError) {
        let at_ms = u64::try_from(at.saturating_duration_since(self.started).as_millis())
            .unwrap_or(u64::MAX);
        let recovery_conflict = error.message.contains("conflict with recovery");
        if let Ok(mut log) = self.log.lock() {
            log.errors.push(PageError {
                at_ms,
                sqlstate: error.sqlstate,
                message: error.message,
                recovery_conflict,
            });
        }
    }
}

struct PageFailure {
    error: ClientError,
    drop_session: bool,
}

struct ClientError {
    sqlstate: Option<String>,
    message: String,
}

impl From<&tokio_postgres::Error> for ClientError {
    fn from(error: &tokio_postgres::Error) -> Self {
        match error.as_db_error() {
            Some(db) => ClientError {
                sqlstate: Some(db.code().code().to_owned()),
                message: db.message().to_owned(),
            },
            None => ClientError {
                sqlstate: None,
                message: error.to_string(),
            },
        }
    }
}

/// The page query: `$1` the fence, `$2` the page size, `$3` the hold in seconds, then
/// the window's lower bound when there is one, and after the first page the last key
/// read.
fn page_sql(table: &TableRef, windowed: bool, after_cursor: bool) -> String {
    let mut next = 4;
    let mut bounds = String::new();
    if windowed {
        bounds.push_str(" AND t.created_at > $4::pg_catalog.timestamptz");
        next = 5;
    }
    if after_cursor {
        bounds.push_str(&format!(
            " AND (t.created_at, t.id) > (${next}::pg_catalog.timestamptz, ${})",
            next + 1
        ));
    }
    format!(
        "SELECT p.created_at, p.id, p.relation FROM ( \
           SELECT t.created_at, t.id, t.tableoid::pg_catalog.oid AS relation FROM {table} t \
            WHERE t.created_at <= $1::pg_catalog.timestamptz{bounds} \
            ORDER BY t.created_at, t.id LIMIT $2::pg_catalog.int8) p \
         CROSS JOIN (SELECT pg_catalog.pg_sleep($3::pg_catalog.float8)) h \
         ORDER BY p.created_at, p.id"
    )
}

async fn connect(config: &ReaderConfig) -> Result<Session, ClientError> {
    let bound = config.page_timeout;
    let opened = tokio::time::timeout(bound, async {
        let (client, connection) = tokio_postgres::connect(&config.conninfo, NoTls).await?;
        tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "SET application_name = 'pgshift-bench standby reader'; \
                 SET statement_timeout = {}",
                bound.as_millis()
            ))
            .await?;
        let windowed = config.since.is_some();
        let first = client
            .prepare(&page_sql(&config.table, windowed, false))
            .await?;
        let next = client
            .prepare(&page_sql(&config.table, windowed, true))
            .await?;
        Ok::<_, tokio_postgres::Error>(Session {
            client,
            first,
            next,
        })
    })
    .await;
    match opened {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(error)) => Err(ClientError::from(&error)),
        Err(_) => Err(ClientError {
            sqlstate: None,
            message: format!("connecting the reader took longer than {bound:?}"),
        }),
    }
}

/// Every key of `table` at or before `fence`, in order, read in one query on `client`
/// (the primary, after the run): what every pass should have read.
pub async fn fenced_keys(
    client: &Client,
    table: &TableRef,
    fence: SystemTime,
) -> Result<Vec<RowKey>, tokio_postgres::Error> {
    fenced_keys_since(client, table, None, fence).await
}

/// [`fenced_keys`] of a window: only the keys after `since` too, when it is set (what
/// a reader with [`ReaderConfig::since`] should read).
pub async fn fenced_keys_since(
    client: &Client,
    table: &TableRef,
    since: Option<SystemTime>,
    fence: SystemTime,
) -> Result<Vec<RowKey>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT t.created_at, t.id FROM {table} t \
          WHERE t.created_at <= $1::pg_catalog.timestamptz \
            AND ($2::pg_catalog.timestamptz IS NULL OR t.created_at > $2::pg_catalog.timestamptz) \
          ORDER BY t.created_at, t.id"
    );
    let rows = client.query(&sql, &[&fence, &since]).await?;
    rows.iter()
        .map(|row| {
            let created_at: SystemTime = row.try_get(0)?;
            let id: RawValue = row.try_get(1)?;
            Ok(RowKey {
                created_at_us: unix_us(created_at),
                id: id.0,
            })
        })
        .collect()
}
