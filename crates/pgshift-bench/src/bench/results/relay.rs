//! The figures of the scenarios under the relay load: P3, P4 and P7.

use pgshift_workload::chart::PhaseMark;
use pgshift_workload::stats::{SecondPoint, SteadyState, WindowStats};
use serde::{Deserialize, Serialize};

use super::{EngineRun, ThrottleFigures};

/// Counts of a load run's writes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadFigures {
    /// Target write rate, per second.
    pub target_rate: f64,
    /// Writer connections.
    pub writers: usize,
    /// Of which `session_replication_role = replica`.
    pub replica_writers: usize,
    /// Reader connections.
    pub readers: usize,
    /// Length of the load, seconds.
    pub duration_s: f64,
    /// Writes acknowledged.
    pub acknowledged: u64,
    /// Writes refused.
    pub refused: u64,
    /// Writes with an unknown outcome.
    pub unknown: u64,
    /// Writes skipped (committed with an unexpected row count).
    pub skipped: u64,
    /// Acknowledged writes per second over the whole load.
    pub acknowledged_per_s: f64,
    /// Writer slots skipped because every writer was waiting.
    pub missed_slots: u64,
    /// Connections made again.
    pub reconnects: u64,
    /// Errors of the load's operations per SQLSTATE (reads included).
    pub errors_by_sqlstate: std::collections::BTreeMap<String, u64>,
    /// The first few distinct errors, `SQLSTATE: message`.
    pub error_examples: Vec<String>,
}

/// The lost-write oracle's verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OracleFigures {
    /// The relation checked (after a swap: the new table).
    pub relation: String,
    /// Keys checked.
    pub keys_checked: u64,
    /// Acknowledged writes in the ledger.
    pub acknowledged: u64,
    /// Keys with an unknown outcome (either state accepted).
    pub unknown_keys: u64,
    /// Acknowledged writes whose row is missing.
    pub lost: u64,
    /// Acknowledged deletes whose row is back.
    pub resurrected: u64,
    /// Rows with content no acknowledged write produced.
    pub wrong_content: u64,
    /// Rows for refused writes.
    pub phantom: u64,
    /// Keys with several rows.
    pub duplicated: u64,
    /// Whether every category is empty.
    pub clean: bool,
}

/// One change run under the relay load.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RelayRun {
    /// What ran (`blocking ALTER TABLE`, `pgshift copy-and-swap`).
    pub label: String,
    /// When the change started, seconds since the load started.
    pub change_start_s: f64,
    /// When it ended.
    pub change_end_s: f64,
    /// The phases, for the chart.
    pub phases: Vec<PhaseMark>,
    /// Writes before the change (after a warm-up).
    pub before: WindowStats,
    /// Writes started while the change ran.
    pub during: WindowStats,
    /// Writes started in the seconds around the cutover (pgshift only).
    pub around_cutover: Option<WindowStats>,
    /// Writes after the change.
    pub after: WindowStats,
    /// Writes (started during the change) that took longer than 1 s, exact.
    pub writes_over_1s: u64,
    /// The longest write started during the change, ms, exact.
    pub longest_write_ms: f64,
    /// The longest write started within 1 s of the cutover, ms (pgshift).
    pub cutover_spike_ms: Option<f64>,
    /// The load.
    pub load: LoadFigures,
    /// The oracle on the table afterwards.
    pub oracle: Option<OracleFigures>,
    /// The engine's run (pgshift only).
    pub engine: Option<EngineRun>,
    /// Change-log backlog sampled every 500 ms (`seconds`, entries).
    pub backlog: Vec<(f64, i64)>,
    /// Per-second writes and latencies of the whole load.
    pub series: Vec<SecondPoint>,
    /// The chart's file name.
    pub chart: String,
    /// The throttle's limits and decisions (pgshift runs; absent in results
    /// written before).
    #[serde(default)]
    pub throttle: Option<ThrottleFigures>,
}

/// P3: writers during a blocking ALTER and during pgshift.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P3 {
    /// The statement (relay migration 0008).
    pub statement: String,
    /// Rows of `events` before.
    pub rows: u64,
    /// Bytes of `events` (all partitions, with indexes) before.
    pub total_bytes: u64,
    /// The blocking run.
    pub blocking: RelayRun,
    /// The pgshift run.
    pub pgshift: RelayRun,
    /// pgshift: p99 during / p99 before.
    pub pgshift_p99_ratio: f64,
    /// blocking: p99 during / p99 before.
    pub blocking_p99_ratio: f64,
    /// The pgshift run with the stricter throttle setting, when measured.
    #[serde(default)]
    pub strict: Option<RelayRun>,
    /// The strict run: p99 during / p99 before.
    #[serde(default)]
    pub strict_p99_ratio: Option<f64>,
    /// The pgshift run with every throttle limit off, under the same load: the
    /// copy time the throttled runs' slowdowns are measured against.
    #[serde(default)]
    pub unthrottled: Option<RelayRun>,
    /// p99 during / before of every round with the default throttle, in the order
    /// run; `pgshift` is the median round (empty in results written before rounds).
    #[serde(default)]
    pub pgshift_rounds: Vec<f64>,
    /// The same with the stricter throttle; `strict` is its median round.
    #[serde(default)]
    pub strict_rounds: Vec<f64>,
}

impl P3 {
    /// The pgshift runs, in the order they are reported: default throttle, strict,
    /// unthrottled (those measured).
    pub fn pgshift_runs(&self) -> Vec<&RelayRun> {
        std::iter::once(&self.pgshift)
            .chain(self.strict.as_ref())
            .chain(self.unthrottled.as_ref())
            .collect()
    }

    /// The copy's slowdown of `run`: its copy phase over the unthrottled run's,
    /// when both copied.
    pub fn copy_slowdown(&self, run: &RelayRun) -> Option<f64> {
        let base = self.unthrottled.as_ref()?.copying_ms()?;
        let copying = run.copying_ms()?;
        (base > 0).then(|| copying as f64 / base as f64)
    }
}

impl RelayRun {
    /// The engine's copy phase, ms, when the run copied.
    pub fn copying_ms(&self) -> Option<u64> {
        self.engine.as_ref()?.phase_ms("copying")
    }
}

/// One swap's ACCESS EXCLUSIVE hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockHold {
    /// Which run.
    pub run: String,
    /// Whether writers were running.
    pub under_load: bool,
    /// Microseconds.
    pub lock_held_us: u64,
}

/// P4: the cutover.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P4 {
    /// Every swap of the benchmark.
    pub holds: Vec<LockHold>,
    /// The largest hold (p99 over so few runs is the largest), µs.
    pub max_hold_us: u64,
    /// The relay run's hold under load, µs.
    pub relay_hold_us: u64,
    /// The longest write started within 1 s of the relay cutover, ms.
    pub spike_ms: f64,
    /// p99 of the writes in the seconds around the cutover, ms.
    pub around_p99_ms: f64,
    /// p99 before the change, ms.
    pub before_p99_ms: f64,
}

/// The backlog during one phase of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseBacklog {
    /// The phase.
    pub phase: String,
    /// Samples in it.
    pub samples: usize,
    /// The largest backlog sampled in it.
    pub max: i64,
    /// Least-squares slope of the backlog in it, entries per second.
    pub slope_per_s: Option<f64>,
}

/// P7: catch-up at twice the demo rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P7 {
    /// The demo's write rate, per second.
    pub demo_rate: f64,
    /// The run.
    pub run: RelayRun,
    /// The engine's largest backlog.
    pub backlog_max: i64,
    /// The largest backlog sampled by the benchmark.
    pub sampled_max: i64,
    /// The verdict.
    pub steady: SteadyState,
    /// The backlog phase by phase.
    pub phases: Vec<PhaseBacklog>,
    /// The backlog chart's file name.
    pub backlog_chart: String,
}
