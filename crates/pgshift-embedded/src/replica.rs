//! Controls of a streaming replica made by [`Cluster::add_replica`]: pausing and
//! resuming WAL replay (`pg_wal_replay_pause()` / `pg_wal_replay_resume()`, both
//! PostgreSQL 10+) and reading how far replay is behind, from the standby's side
//! (`pg_last_wal_replay_lsn()`) and from the primary's (`pg_stat_replication`).

use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::process::Backoff;

/// How far one standby is behind, as its primary sees it in `pg_stat_replication`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayLag {
    /// The standby's `application_name`.
    pub application_name: String,
    /// `pg_current_wal_lsn() - replay_lsn`, in bytes.
    pub bytes: i64,
    /// `replay_lag` in seconds, when the primary has a sample (it is NULL once the
    /// standby is caught up and idle, and stays at its last sample while replay is
    /// paused).
    pub seconds: Option<f64>,
}

impl Cluster {
    /// Pauses WAL replay on this standby (`pg_wal_replay_pause()`) and waits until
    /// it is paused (PostgreSQL 14+ reports the state; on older servers the request
    /// is taken as done).
    pub fn pause_replay(&self) -> Result<()> {
        self.psql("postgres", "SELECT pg_catalog.pg_wal_replay_pause()")?;
        self.wait_until(Duration::from_secs(30), "WAL replay to pause", |c| {
            c.replay_paused()
        })
    }

    /// Resumes WAL replay on this standby (`pg_wal_replay_resume()`).
    pub fn resume_replay(&self) -> Result<()> {
        self.psql("postgres", "SELECT pg_catalog.pg_wal_replay_resume()")?;
        Ok(())
    }

    /// Whether replay is paused on this standby (`pg_is_wal_replay_paused()`).
    pub fn replay_paused(&self) -> Result<bool> {
        let out = self.psql("postgres", "SELECT pg_catalog.pg_is_wal_replay_paused()")?;
        Ok(out.trim() == "t")
    }

    /// The standby's last replayed LSN (`pg_last_wal_replay_lsn()`), as text.
    pub fn replay_lsn(&self) -> Result<String> {
        Ok(self
            .psql("postgres", "SELECT pg_catalog.pg_last_wal_replay_lsn()")?
            .trim()
            .to_owned())
    }

    /// Every standby streaming from this primary, with its replay lag.
    pub fn replay_lags(&self) -> Result<Vec<ReplayLag>> {
        let out = self.psql(
            "postgres",
            "SELECT application_name, \
                    coalesce(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), replay_lsn), -1)::bigint, \
                    coalesce(extract(epoch FROM replay_lag)::text, '') \
               FROM pg_catalog.pg_stat_replication ORDER BY application_name",
        )?;
        out.lines()
            .filter(|line| !line.is_empty())
            .map(|line| {
                let fields: Vec<&str> = line.split('|').collect();
                let [name, bytes, seconds] = fields.as_slice() else {
                    return Err(unexpected(format!("a pg_stat_replication row {line:?}")));
                };
                Ok(ReplayLag {
                    application_name: (*name).to_owned(),
                    bytes: bytes
                        .parse()
                        .map_err(|_| unexpected(format!("a replay lag of {bytes:?} bytes")))?,
                    seconds: seconds.parse().ok(),
                })
            })
            .collect()
    }

    /// Waits until `standby` has replayed everything this primary has written so far
    /// (its replay LSN reaches the primary's current LSN), up to `timeout`.
    pub fn wait_for_replay(&self, standby: &Cluster, timeout: Duration) -> Result<()> {
        let target = self
            .psql("postgres", "SELECT pg_catalog.pg_current_wal_lsn()")?
            .trim()
            .to_owned();
        let sql = format!(
            "SELECT pg_catalog.pg_last_wal_replay_lsn() >= '{}'::pg_catalog.pg_lsn",
            target.replace('\'', "")
        );
        standby.wait_until(timeout, "the standby to replay the primary's WAL", |c| {
            Ok(c.psql("postgres", &sql)?.trim() == "t")
        })
    }

    fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&Cluster) -> Result<bool>,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new();
        loop {
            if done(self)? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    waited: timeout,
                    log_tail: Some(self.log_tail(20)),
                });
            }
            backoff.sleep(deadline);
        }
    }
}

/// Output of the crate's own query that it cannot read.
fn unexpected(what: String) -> Error {
    Error::Sql {
        dbname: "postgres".to_owned(),
        stderr: format!("unexpected output: {what}"),
    }
}
