//! The shadow's index builds as progress: which index is being built (its source's
//! name, the n-th of how many, and how many run at once), and how far the server says
//! the build is, read from `pg_stat_progress_create_index` on a second session every
//! half second. On a large table these builds are the longest silence of a run after
//! the copy.

use std::time::Duration;

use tokio_postgres::Client;

use super::error::CasError;
use super::run::CasProgress;
use super::session;
use crate::connect::{ConnectionSpec, Session};
use crate::exec::progress::{read_build, BuildProgress};

/// How often a running build is read.
pub(super) const EVERY: Duration = Duration::from_millis(500);

/// One index build of the indexing phase, as progress reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexBuild {
    /// What is built: the source's index name, or `primary key`.
    pub index: String,
    /// Its place among the phase's builds, from 1 (the order they start in).
    pub number: usize,
    /// How many builds the phase runs.
    pub count: usize,
    /// How many builds run at the time of this report, this one included (more than
    /// one when the phase builds several at once).
    pub at_once: usize,
    /// The server's latest reading of the build (`None`: just started, not read yet).
    pub reading: Option<BuildProgress>,
}

/// A session that builds indexes, and its backend (whose build the server reports).
pub(super) struct Builder {
    session: Session,
    pid: Option<i32>,
}

impl Builder {
    /// Opens a build session named `application`.
    pub(super) async fn open(spec: &ConnectionSpec, application: &str) -> Result<Self, CasError> {
        let session = session::open(spec, application).await?;
        let pid = session
            .client()
            .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
            .await
            .ok()
            .and_then(|row| row.try_get(0).ok());
        Ok(Builder { session, pid })
    }

    /// The session's client.
    pub(super) fn client(&self) -> &Client {
        self.session.client()
    }

    /// The session's backend, when it could be read.
    pub(super) fn pid(&self) -> Option<i32> {
        self.pid
    }
}

/// Reports the builds of the indexing phase on `progress`, with readings taken on
/// `monitor` (another session: a build's own is busy).
pub(super) struct Watcher<'a> {
    monitor: &'a Client,
    progress: &'a mut dyn CasProgress,
    count: usize,
    number: usize,
}

impl<'a> Watcher<'a> {
    /// A watcher of a phase of `count` builds.
    pub(super) fn new(
        monitor: &'a Client,
        progress: &'a mut dyn CasProgress,
        count: usize,
    ) -> Watcher<'a> {
        Watcher {
            monitor,
            progress,
            count,
            number: 0,
        }
    }

    /// Counts a build that is not run (an earlier process built it already).
    pub(super) fn skip(&mut self) {
        self.number += 1;
    }

    /// Numbers the next build, of `index`, and reports that it starts, `at_once`
    /// builds running with it included.
    pub(super) fn start(&mut self, index: &str, at_once: usize) -> IndexBuild {
        self.number += 1;
        let build = IndexBuild {
            index: index.to_owned(),
            number: self.number,
            count: self.count.max(self.number),
            at_once,
            reading: None,
        };
        self.progress.index_build(&build);
        build
    }

    /// Reads how far the build on backend `pid` is, and reports it as `build`.
    pub(super) async fn read(&mut self, pid: i32, build: &mut IndexBuild) {
        if let Some(reading) = read_build(self.monitor, pid).await {
            build.reading = Some(reading);
            self.progress.index_build(build);
        }
    }

    /// Runs `sql` (one build, alone) on `builder`, reporting it as `index`.
    pub(super) async fn run(
        &mut self,
        builder: &Builder,
        index: &str,
        sql: &str,
    ) -> Result<(), tokio_postgres::Error> {
        let mut build = self.start(index, 1);
        let Some(pid) = builder.pid() else {
            return builder.client().batch_execute(sql).await;
        };
        let work = builder.client().batch_execute(sql);
        let mut work = std::pin::pin!(work);
        let mut tick = tokio::time::interval(EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                result = &mut work => return result,
                _ = tick.tick() => self.read(pid, &mut build).await,
            }
        }
    }
}
