//! P8's figures: a streaming replica of the bench cluster while the relay load runs
//! on the primary and pgshift copies and swaps `events`, once with the default
//! throttle (which watches the replica's replay lag) and once with the throttle off:
//! the replay lag over time, at most and at the swap, and what a keyset reader on the
//! replica saw (pages, rows, skips, repeats, cancelled queries).

use serde::{Deserialize, Serialize};

use super::RelayRun;

/// One sample of the replica's replay lag, from `pg_stat_replication` on the primary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LagSample {
    /// Seconds since the load started.
    pub at_s: f64,
    /// `pg_current_wal_lsn() - replay_lsn`, bytes.
    pub bytes: i64,
    /// `replay_lag`, ms (NULL once the standby is caught up and idle).
    pub replay_lag_ms: Option<f64>,
}

/// A standby as the engine saw it at the swap (`RunReport.standbys`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StandbyLag {
    /// `application_name`.
    pub name: String,
    /// Its replay lag before the swap, at most (ms).
    pub lag_before_ms: Option<u64>,
    /// WAL it had not replayed when the swap committed (bytes).
    pub behind_at_swap_bytes: Option<i64>,
    /// How long after the swap's commit it had replayed it (ms).
    pub replayed_swap_after_ms: Option<u64>,
}

/// What the keyset reader on the replica saw, checked against the primary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReaderFigures {
    /// Rows per page.
    pub page_size: i64,
    /// Fenced rows on the primary before the load and after the run (the set every
    /// pass must read; the load does not touch it, so they are equal).
    pub fenced_rows_before: u64,
    /// The same, after the run: what the passes were checked against.
    pub fenced_rows_after: u64,
    /// Complete passes checked.
    pub passes: u64,
    /// Passes that read the table before the swap and after it (old and new relations).
    pub passes_through_swap: u64,
    /// Pages read (complete passes and the last unfinished one).
    pub pages: u64,
    /// Rows read.
    pub rows: u64,
    /// Expected rows a pass did not read (summed over passes).
    pub skipped: u64,
    /// Rows a pass read twice.
    pub repeated: u64,
    /// Rows read that are not in the fenced set.
    pub unexpected: u64,
    /// Rows out of `(created_at, id)` order within a pass.
    pub out_of_order: u64,
    /// Page queries that failed.
    pub errors: u64,
    /// Of them, cancelled by a conflict with recovery.
    pub cancelled: u64,
    /// The largest page latency, ms.
    pub max_page_ms: f64,
    /// A few failed queries, `SQLSTATE: message`.
    pub error_examples: Vec<String>,
}

/// `pg_stat_database_conflicts` of the run's database on the standby, over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StandbyConflicts {
    /// `confl_tablespace`.
    pub tablespace: i64,
    /// `confl_lock`.
    pub lock: i64,
    /// `confl_snapshot`.
    pub snapshot: i64,
    /// `confl_bufferpin`.
    pub bufferpin: i64,
    /// `confl_deadlock`.
    pub deadlock: i64,
}

impl StandbyConflicts {
    /// Every query the standby cancelled.
    pub fn total(&self) -> i64 {
        self.tablespace + self.lock + self.snapshot + self.bufferpin + self.deadlock
    }

    /// `self - before`, counter by counter.
    pub fn since(&self, before: &StandbyConflicts) -> StandbyConflicts {
        StandbyConflicts {
            tablespace: self.tablespace - before.tablespace,
            lock: self.lock - before.lock,
            snapshot: self.snapshot - before.snapshot,
            bufferpin: self.bufferpin - before.bufferpin,
            deadlock: self.deadlock - before.deadlock,
        }
    }
}

/// One P8 run: the relay run on the primary and what the replica showed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaRun {
    /// The load, the pgshift run, its phases and throttle (as for P3).
    pub run: RelayRun,
    /// The replay lag, every sample.
    pub lag: Vec<LagSample>,
    /// The largest sampled lag, bytes.
    pub max_lag_bytes: i64,
    /// The largest sampled `replay_lag`, ms.
    pub max_lag_ms: Option<f64>,
    /// The standby at the swap, as the engine reported it.
    pub at_swap: Option<StandbyLag>,
    /// The reader on the replica.
    pub reader: ReaderFigures,
    /// Queries the standby cancelled during the run.
    pub conflicts: StandbyConflicts,
    /// The run's wall time: the load from its start to its stop, seconds.
    pub wall_s: f64,
    /// The replay lag chart's file.
    pub lag_chart: String,
}

impl ReplicaRun {
    /// The largest lag sampled with the cutover in progress or within a second of it
    /// (bytes), when the run reached the cutover.
    pub fn lag_around_swap_bytes(&self) -> Option<i64> {
        let cutover = self.run.phases.iter().find(|p| p.label == "cutover")?;
        self.lag
            .iter()
            .filter(|s| s.at_s >= cutover.start_s - 1.0 && s.at_s <= cutover.end_s + 1.0)
            .map(|s| s.bytes)
            .max()
    }
}

/// P8: the default throttle's run, and the run with the throttle off.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct P8 {
    /// The statement (relay migration 0008, as in P3).
    pub statement: String,
    /// The standby's server version.
    pub standby_version: String,
    /// `max_standby_streaming_delay` on the standby.
    pub max_standby_streaming_delay: String,
    /// The runs, default throttle first.
    pub runs: Vec<ReplicaRun>,
}

impl P8 {
    /// The reader's figure `f` summed over the runs, or `None` when a run completed
    /// no pass (nothing was checked: not a zero).
    pub fn checked_sum(&self, f: impl Fn(&ReaderFigures) -> u64) -> Option<f64> {
        if self.runs.is_empty() || self.runs.iter().any(|r| r.reader.passes == 0) {
            return None;
        }
        Some(self.runs.iter().map(|r| f(&r.reader)).sum::<u64>() as f64)
    }
}
