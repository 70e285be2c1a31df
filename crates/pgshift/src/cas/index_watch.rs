//! The shadow's index builds as progress: which index is being built (its source's
//! name, the n-th of how many), and how far the server says the build is, read from
//! `pg_stat_progress_create_index` on a second session every half second. On a large
//! table these builds are the longest silence of a run after the copy.

use std::time::Duration;

use tokio_postgres::Client;

use super::run::CasProgress;
use crate::exec::progress::{read_build, BuildProgress};

/// How often a running build is read.
const EVERY: Duration = Duration::from_millis(500);

/// One index build of the indexing phase, as progress reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexBuild {
    /// What is built: the source's index name, or `primary key`.
    pub index: String,
    /// Its place among the phase's builds, from 1.
    pub number: usize,
    /// How many builds the phase runs.
    pub count: usize,
    /// The server's latest reading of the build (`None`: just started, not read yet).
    pub reading: Option<BuildProgress>,
}

/// Runs the builds of the indexing phase on `build`, reporting each on `progress`
/// with readings taken on `monitor` (another session: the build's own is busy).
pub(super) struct Watcher<'a> {
    monitor: &'a Client,
    progress: &'a mut dyn CasProgress,
    /// The building session's backend.
    pid: Option<i32>,
    count: usize,
    number: usize,
}

impl<'a> Watcher<'a> {
    /// A watcher of `count` builds run on `build`.
    pub(super) async fn new(
        build: &Client,
        monitor: &'a Client,
        progress: &'a mut dyn CasProgress,
        count: usize,
    ) -> Watcher<'a> {
        let pid = build
            .query_one("SELECT pg_catalog.pg_backend_pid()", &[])
            .await
            .ok()
            .and_then(|row| row.try_get(0).ok());
        Watcher {
            monitor,
            progress,
            pid,
            count,
            number: 0,
        }
    }

    /// Counts a build that is not run (an earlier process built it already).
    pub(super) fn skip(&mut self) {
        self.number += 1;
    }

    /// Runs `sql` (one build) on `build`, reporting it as `index`.
    pub(super) async fn run(
        &mut self,
        build: &Client,
        index: &str,
        sql: &str,
    ) -> Result<(), tokio_postgres::Error> {
        self.number += 1;
        let mut step = IndexBuild {
            index: index.to_owned(),
            number: self.number,
            count: self.count.max(self.number),
            reading: None,
        };
        self.progress.index_build(&step);
        let Some(pid) = self.pid else {
            return build.batch_execute(sql).await;
        };
        let work = build.batch_execute(sql);
        let mut work = std::pin::pin!(work);
        let mut tick = tokio::time::interval(EVERY);
        tick.tick().await;
        loop {
            tokio::select! {
                result = &mut work => return result,
                _ = tick.tick() => {
                    if let Some(reading) = read_build(self.monitor, pid).await {
                        step.reading = Some(reading);
                        self.progress.index_build(&step);
                    }
                }
            }
        }
    }
}
