//! The benchmark's results, as written to `results.json`: versioned, with
//! the machine, the PostgreSQL version, the sizes, every figure of every
//! scenario, every ratio, and each target with whether it was met and by how
//! much it was missed. [`evaluate`] derives the targets from the figures, so
//! the same JSON always gives the same verdicts.

use serde::{Deserialize, Serialize};

use crate::chart::PhaseMark;
use crate::stats::{SecondPoint, SteadyState, WindowStats};

/// The version of this JSON shape. Bump it when a field changes meaning or
/// goes away.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything one benchmark run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResults {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `pgshift-bench <version>`.
    pub tool: String,
    /// When the run started (UTC, ISO 8601).
    pub started_at_utc: String,
    /// The arguments the command was given (after the program name).
    pub args: Vec<String>,
    /// The command line, as run from the workspace.
    pub command: String,
    /// The source the benchmark was built from: the commit, and whether the
    /// engine's sources differed from it (`git`, at run time).
    pub source_revision: String,
    /// Wall time of the whole benchmark, seconds.
    pub runtime_s: f64,
    /// The machine.
    pub machine: Machine,
    /// The server.
    pub postgres: PostgresInfo,
    /// The sizes used.
    pub sizes: Sizes,
    /// The options every pgshift run used.
    pub engine: EngineSettings,
    /// P1, when measured.
    pub p1: Option<P1>,
    /// P2, when measured.
    pub p2: Option<P2>,
    /// P3, when measured.
    pub p3: Option<P3>,
    /// P4, when measured.
    pub p4: Option<P4>,
    /// P5, when measured.
    pub p5: Option<P5>,
    /// P6, when measured.
    pub p6: Option<P6>,
    /// P7, when measured.
    pub p7: Option<P7>,
    /// Scenarios that failed or were skipped, with why.
    pub failures: Vec<Failure>,
    /// Each target: the figure, the target, met or not, the gap.
    pub targets: Vec<TargetResult>,
    /// What is approximated, and how.
    pub notes: Vec<String>,
}

/// The machine the benchmark ran on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Memory, MiB (`/proc/meminfo`).
    pub memory_mib: u64,
    /// The operating system (`/etc/os-release`).
    pub os: String,
    /// The kernel release.
    pub kernel: String,
    /// `/proc/loadavg` (1, 5 and 15 minutes) when the benchmark started:
    /// anything else running on the machine shows here.
    pub load_average_start: String,
    /// `/proc/loadavg` when it ended.
    pub load_average_end: String,
}

/// The server the benchmark ran against.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PostgresInfo {
    /// `server_version`.
    pub version: String,
    /// `version()`.
    pub version_string: String,
    /// The bin directory of the installation.
    pub bindir: String,
    /// Settings that matter to the figures, as `SHOW` gives them.
    pub settings: Vec<(String, String)>,
}

/// The sizes of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sizes {
    /// `--quick` was given.
    pub quick: bool,
    /// Rows of each P1/P2 table.
    pub rows: u64,
    /// Rows of the small P6 table.
    pub small_rows: u64,
    /// Seed rows per partition of the relay's `events` (8 partitions).
    pub relay_rows_per_partition: u32,
    /// The relay writers' rate (P3/P4), per second.
    pub relay_rate: f64,
    /// Seconds of load before and after each relay change.
    pub relay_before_s: u64,
    /// Seconds after.
    pub relay_after_s: u64,
    /// Seconds of each P5 throughput measurement.
    pub p5_seconds: u64,
    /// P5 rounds.
    pub p5_rounds: u32,
}

/// The copy-and-swap options of every pgshift run of the benchmark.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineSettings {
    /// Copy workers.
    pub workers: usize,
    /// Chunk target duration, ms.
    pub chunk_target_ms: u64,
    /// First chunk, rows.
    pub first_chunk_rows: i64,
    /// The swap's `lock_timeout`, ms.
    pub cutover_lock_timeout_ms: u64,
    /// Attempts to take the swap's lock.
    pub cutover_attempts: u32,
    /// Most change-log entries drained under the lock.
    pub max_drain: i64,
    /// How verification compared (`digest`, `exact`; empty in results written before).
    #[serde(default)]
    pub verify: String,
}

/// A pgshift run as the benchmark saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineRun {
    /// Wall time, ms (for a child process: spawn to exit).
    pub wall_ms: f64,
    /// The engine's own phase times (`phase`, ms).
    pub phases_ms: Vec<(String, u64)>,
    /// Rows copied.
    pub rows_copied: i64,
    /// ACCESS EXCLUSIVE hold at the swap, microseconds.
    pub lock_held_us: Option<u64>,
    /// Attempts to take the swap's lock.
    pub swap_attempts: Option<u32>,
    /// Change-log entries drained under the lock.
    pub drained: Option<i64>,
    /// The largest backlog the engine saw.
    pub backlog_max: i64,
    /// Peak RSS of the engine process (`VmHWM`), KiB, when it ran in a child.
    pub vm_hwm_kib: Option<u64>,
}

impl EngineRun {
    /// The duration of a phase, ms, when the run went through it.
    pub fn phase_ms(&self, phase: &str) -> Option<u64> {
        self.phases_ms
            .iter()
            .find(|(name, _)| name == phase)
            .map(|(_, ms)| *ms)
    }

    /// Verification time over copy time (the target: at most 0.5), when the run both
    /// copied and verified.
    pub fn verify_copy_ratio(&self) -> Option<f64> {
        let copying = self.phase_ms("copying")?;
        let verifying = self.phase_ms("verifying")?;
        (copying > 0).then(|| verifying as f64 / copying as f64)
    }
}

/// P1: the same `ALTER … TYPE` blocking and through copy-and-swap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P1 {
    /// The statement (on each table).
    pub statement: String,
    /// Rows of each table.
    pub rows: u64,
    /// Heap bytes of each table before.
    pub table_bytes: u64,
    /// Heap and index bytes of each table before.
    pub total_bytes: u64,
    /// Indexes of each table.
    pub indexes: u32,
    /// Wall time of the blocking `ALTER TABLE`, ms.
    pub blocking_ms: f64,
    /// The pgshift run (no load).
    pub pgshift: EngineRun,
    /// pgshift wall / blocking wall.
    pub ratio: f64,
}

/// P2: a plain rebuild by pgshift and by pg_repack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2 {
    /// The statement run through copy-and-swap.
    pub statement: String,
    /// The pg_repack command line (connection options left out).
    pub pg_repack_command: String,
    /// `pg_repack --version`.
    pub pg_repack_version: String,
    /// Rows of each table.
    pub rows: u64,
    /// Heap and index bytes of each table before.
    pub total_bytes: u64,
    /// The pgshift run.
    pub pgshift: EngineRun,
    /// Wall time of pg_repack, ms.
    pub pg_repack_ms: f64,
    /// Bytes of the pgshift-rebuilt table after.
    pub pgshift_bytes_after: u64,
    /// Bytes of the pg_repack-rebuilt table after.
    pub pg_repack_bytes_after: u64,
    /// pgshift wall / pg_repack wall.
    pub ratio: f64,
}

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

/// One throughput measurement of P5.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// The round (from 1).
    pub round: u32,
    /// What was installed.
    pub label: String,
    /// Transactions (single-row inserts) per second.
    pub tps: f64,
}

/// One round of P5: every configuration, back to back on a fresh table, so
/// that a slow drift of the machine cancels out of the round's ratios.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P5Round {
    /// Without triggers: the mean of the measurements at the start and at the
    /// end of the round.
    pub baseline_tps: f64,
    /// With the naive capture.
    pub naive_tps: f64,
    /// With pgshift's capture, the engine running.
    pub capture_engine_running_tps: f64,
    /// With pgshift's capture, the engine killed.
    pub capture_only_tps: f64,
    /// The two baselines' difference over their mean (noise of the round).
    pub baseline_spread: f64,
}

/// P5: write throughput with and without the capture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P5 {
    /// How the writes were made.
    pub method: String,
    /// Client connections.
    pub clients: u32,
    /// Seconds per measurement.
    pub seconds: u64,
    /// Every measurement, in order.
    pub measurements: Vec<Throughput>,
    /// The rounds.
    pub rounds: Vec<P5Round>,
    /// Without triggers (median over the rounds).
    pub baseline_tps: f64,
    /// With pgshift's capture, the engine waiting in `ready` (its applier
    /// running) (median over the rounds).
    pub capture_engine_running_tps: f64,
    /// With pgshift's capture, the engine process killed (triggers only).
    pub capture_only_tps: f64,
    /// With a naive plpgsql capture trigger (a bigserial log table).
    pub naive_tps: f64,
    /// capture (engine running) / baseline, the median of the rounds'
    /// ratios: the headline.
    pub ratio: f64,
    /// capture only / baseline, median of the rounds.
    pub capture_only_ratio: f64,
    /// naive / baseline, median of the rounds.
    pub naive_ratio: f64,
    /// The largest baseline spread of a round.
    pub max_baseline_spread: f64,
}

/// One peak-RSS sample of P6.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RssSample {
    /// Which run.
    pub run: String,
    /// Rows of the table.
    pub rows: u64,
    /// Bytes of the table with its indexes.
    pub total_bytes: u64,
    /// `VmHWM` of the engine process, KiB.
    pub vm_hwm_kib: u64,
    /// The engine's wall time, ms.
    pub wall_ms: f64,
}

/// P6: the engine's footprint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P6 {
    /// Every sample, smallest table first.
    pub samples: Vec<RssSample>,
    /// The largest peak, KiB.
    pub max_kib: u64,
    /// Peak at the largest table / peak at the smallest.
    pub growth: f64,
    /// Rows of the largest table / rows of the smallest.
    pub size_factor: f64,
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

/// A scenario that did not produce figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// `P1` … `P7`.
    pub scenario: String,
    /// Why.
    pub error: String,
}

/// Whether a figure must stay below or above its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The figure must be at most the target.
    AtMost,
    /// The figure must be at least the target.
    AtLeast,
    /// A yes/no check (1 = yes); the target is 1.
    Holds,
}

/// One target's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    /// `P1`, `P3a`, …
    pub id: String,
    /// What is measured.
    pub what: String,
    /// The figure (`None`: not measured).
    pub value: Option<f64>,
    /// Its unit (`×`, `ms`, `MiB`, `%`, ``).
    pub unit: String,
    /// The target's bound.
    pub target: f64,
    /// Which side of the bound is good.
    pub direction: Direction,
    /// Met, not met, or not measured.
    pub met: Option<bool>,
    /// The gap, in words.
    pub gap: String,
}

impl TargetResult {
    fn new(
        id: &str,
        what: &str,
        value: Option<f64>,
        unit: &str,
        direction: Direction,
        target: f64,
    ) -> Self {
        let met = value.map(|v| match direction {
            Direction::AtMost => v <= target,
            Direction::AtLeast => v >= target,
            Direction::Holds => v >= 1.0,
        });
        TargetResult {
            id: id.to_owned(),
            what: what.to_owned(),
            value,
            unit: unit.to_owned(),
            target,
            direction,
            met,
            gap: gap_text(value, unit, direction, target),
        }
    }

    /// The bound in words: `≤ 1.5×`, `≥ 80 %`, `yes`.
    pub fn target_text(&self) -> String {
        match self.direction {
            Direction::AtMost => format!("≤ {}", with_unit(self.target, &self.unit)),
            Direction::AtLeast => format!("≥ {}", with_unit(self.target, &self.unit)),
            Direction::Holds => "yes".to_owned(),
        }
    }

    /// The figure in words.
    pub fn value_text(&self) -> String {
        match (self.value, self.direction) {
            (None, _) => "not measured".to_owned(),
            (Some(v), Direction::Holds) => if v >= 1.0 { "yes" } else { "no" }.to_owned(),
            (Some(v), _) => with_unit(v, &self.unit),
        }
    }
}

/// A number with its unit, rounded for reading.
pub fn with_unit(value: f64, unit: &str) -> String {
    let integral = unit.is_empty() && value.fract() == 0.0 && value.abs() < 1e15;
    let number = if integral || value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    match unit {
        "" => number,
        "×" => format!("{number}×"),
        unit => format!("{number} {unit}"),
    }
}

/// The gap between a figure and its target, in words.
fn gap_text(value: Option<f64>, unit: &str, direction: Direction, target: f64) -> String {
    let Some(value) = value else {
        return "not measured".to_owned();
    };
    let relative = |over: f64| {
        if target.abs() > f64::EPSILON {
            format!(" ({:.0} %)", over / target.abs() * 100.0)
        } else {
            String::new()
        }
    };
    match direction {
        Direction::Holds if value >= 1.0 => "met".to_owned(),
        Direction::Holds => "not met".to_owned(),
        Direction::AtMost | Direction::AtLeast if value == target => "met".to_owned(),
        Direction::AtMost if value <= target => {
            format!("met, {} under", with_unit(target - value, unit))
        }
        Direction::AtMost => format!(
            "missed by {}{}",
            with_unit(value - target, unit),
            relative(value - target)
        ),
        Direction::AtLeast if value >= target => {
            format!("met, {} over", with_unit(value - target, unit))
        }
        Direction::AtLeast => format!(
            "missed by {}{}",
            with_unit(target - value, unit),
            relative(target - value)
        ),
    }
}

/// The limits of the targets (`shared/design/targets.md`).
pub mod limits {
    /// P1: pgshift wall / blocking wall.
    pub const P1_RATIO: f64 = 1.5;
    /// P1, later.
    pub const P1_RATIO_LATER: f64 = 1.2;
    /// P2: pgshift wall / pg_repack wall.
    pub const P2_RATIO: f64 = 1.0;
    /// P3: p99 during / before.
    pub const P3_P99_RATIO: f64 = 2.0;
    /// P3: writes waiting longer than this, none allowed (ms).
    pub const P3_WAIT_MS: f64 = 1000.0;
    /// P4: hold, ms.
    pub const P4_HOLD_MS: f64 = 100.0;
    /// P4: spike, ms.
    pub const P4_SPIKE_MS: f64 = 250.0;
    /// P5: share of baseline throughput kept.
    pub const P5_KEPT: f64 = 0.80;
    /// P6: peak RSS, MiB.
    pub const P6_MAX_MIB: f64 = 100.0;
    /// P6: peak at the largest size / at the smallest ("flat").
    pub const P6_GROWTH: f64 = 1.25;
    /// P7: the backlog may grow by this share of the write rate per second
    /// over the second half of the run and still count as steady.
    pub const P7_GROWTH_SHARE: f64 = 0.05;
}

/// The targets, judged from the figures.
pub fn evaluate(results: &BenchResults) -> Vec<TargetResult> {
    use limits::*;
    let mut out = Vec::new();
    out.push(TargetResult::new(
        "P1",
        "rewrite wall: pgshift copy-and-swap / blocking ALTER",
        results.p1.as_ref().map(|p| p.ratio),
        "×",
        Direction::AtMost,
        P1_RATIO,
    ));
    out.push(TargetResult::new(
        "P1 later",
        "the same, later target",
        results.p1.as_ref().map(|p| p.ratio),
        "×",
        Direction::AtMost,
        P1_RATIO_LATER,
    ));
    out.push(TargetResult::new(
        "P2",
        "plain rebuild wall: pgshift / pg_repack",
        results.p2.as_ref().map(|p| p.ratio),
        "×",
        Direction::AtMost,
        P2_RATIO,
    ));
    out.push(TargetResult::new(
        "P3 p99",
        "writer p99 during the pgshift run / before",
        results.p3.as_ref().map(|p| p.pgshift_p99_ratio),
        "×",
        Direction::AtMost,
        P3_P99_RATIO,
    ));
    out.push(TargetResult::new(
        "P3 waits",
        "writes that waited > 1 s during the pgshift run",
        results.p3.as_ref().map(|p| p.pgshift.writes_over_1s as f64),
        "",
        Direction::AtMost,
        0.0,
    ));
    out.push(TargetResult::new(
        "P3 lost",
        "acknowledged writes lost (oracle, pgshift run under load)",
        results.p3.as_ref().and_then(|p| {
            p.pgshift.oracle.as_ref().map(|o| {
                (o.lost + o.resurrected + o.wrong_content + o.phantom + o.duplicated) as f64
            })
        }),
        "",
        Direction::AtMost,
        0.0,
    ));
    out.push(TargetResult::new(
        "P4 hold",
        "ACCESS EXCLUSIVE hold at the swap, largest over the runs",
        results.p4.as_ref().map(|p| p.max_hold_us as f64 / 1000.0),
        "ms",
        Direction::AtMost,
        P4_HOLD_MS,
    ));
    out.push(TargetResult::new(
        "P4 spike",
        "longest write within 1 s of the cutover, under load",
        results.p4.as_ref().map(|p| p.spike_ms),
        "ms",
        Direction::AtMost,
        P4_SPIKE_MS,
    ));
    out.push(TargetResult::new(
        "P5",
        "write throughput kept with the capture installed (engine running)",
        results.p5.as_ref().map(|p| p.ratio * 100.0),
        "%",
        Direction::AtLeast,
        P5_KEPT * 100.0,
    ));
    out.push(TargetResult::new(
        "P6 peak",
        "engine peak RSS, largest over the sizes",
        results.p6.as_ref().map(|p| p.max_kib as f64 / 1024.0),
        "MiB",
        Direction::AtMost,
        P6_MAX_MIB,
    ));
    out.push(TargetResult::new(
        "P6 flat",
        "peak RSS at the largest table / at the smallest",
        results.p6.as_ref().map(|p| p.growth),
        "×",
        Direction::AtMost,
        P6_GROWTH,
    ));
    out.push(TargetResult::new(
        "P7",
        "change log drained as fast as filled at 2× the demo rate (steady state)",
        results
            .p7
            .as_ref()
            .map(|p| if p.steady.reached { 1.0 } else { 0.0 }),
        "",
        Direction::Holds,
        1.0,
    ));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn window(first: u64, end: u64, p99_us: u64) -> WindowStats {
        WindowStats {
            from_s: first as f64,
            to_s: end as f64,
            writes: 100,
            acknowledged: 100,
            failed: 0,
            missed_slots: 0,
            acknowledged_per_s: 200.0,
            p50_us: p99_us / 4,
            p99_us,
            max_us: p99_us * 2,
        }
    }

    pub(crate) fn relay_run(label: &str) -> RelayRun {
        RelayRun {
            label: label.to_owned(),
            change_start_s: 10.0,
            change_end_s: 30.0,
            phases: vec![PhaseMark::new("copying", 10.0, 25.0)],
            before: window(2, 10, 4_000),
            during: window(10, 30, 9_000),
            around_cutover: Some(window(28, 31, 20_000)),
            after: window(31, 40, 4_100),
            writes_over_1s: 0,
            longest_write_ms: 80.0,
            cutover_spike_ms: Some(60.0),
            load: LoadFigures {
                target_rate: 200.0,
                writers: 4,
                replica_writers: 1,
                readers: 1,
                duration_s: 40.0,
                acknowledged: 7900,
                acknowledged_per_s: 197.5,
                ..LoadFigures::default()
            },
            oracle: Some(OracleFigures {
                relation: "events".to_owned(),
                keys_checked: 7000,
                acknowledged: 7900,
                clean: true,
                ..OracleFigures::default()
            }),
            engine: Some(EngineRun {
                wall_ms: 20_000.0,
                phases_ms: vec![("copying".to_owned(), 15_000)],
                rows_copied: 400_000,
                lock_held_us: Some(42_000),
                swap_attempts: Some(1),
                drained: Some(12),
                backlog_max: 150,
                vm_hwm_kib: None,
            }),
            backlog: vec![(11.0, 10), (12.0, 30)],
            series: Vec::new(),
            chart: "p3-pgshift.svg".to_owned(),
        }
    }

    /// A complete result with plausible figures.
    pub(crate) fn sample() -> BenchResults {
        let engine = EngineRun {
            wall_ms: 7_800.0,
            phases_ms: vec![
                ("copying".to_owned(), 4_000),
                ("indexing".to_owned(), 3_000),
            ],
            rows_copied: 2_000_000,
            lock_held_us: Some(30_000),
            swap_attempts: Some(1),
            drained: Some(0),
            backlog_max: 0,
            vm_hwm_kib: Some(20_000),
        };
        let mut results = BenchResults {
            schema_version: SCHEMA_VERSION,
            tool: "pgshift-bench 0.1.0".to_owned(),
            started_at_utc: "2026-11-30T10:00:00Z".to_owned(),
            args: vec!["--out".to_owned(), "docs/bench".to_owned()],
            command: "cargo run --release -p pgshift-bench --bin pgshift-bench -- --out docs/bench"
                .to_owned(),
            source_revision: "4720e89".to_owned(),
            runtime_s: 400.0,
            machine: Machine {
                cpus: 2,
                cpu_model: "Test CPU".to_owned(),
                memory_mib: 24_000,
                os: "Debian GNU/Linux 12 (bookworm)".to_owned(),
                kernel: "6.1.0".to_owned(),
                load_average_start: "0.10 0.20 0.30".to_owned(),
                load_average_end: "1.90 1.50 0.90".to_owned(),
            },
            postgres: PostgresInfo {
                version: "15.18".to_owned(),
                version_string: "PostgreSQL 15.18".to_owned(),
                bindir: "/usr/lib/postgresql/15/bin".to_owned(),
                settings: vec![("fsync".to_owned(), "off".to_owned())],
            },
            sizes: Sizes {
                quick: false,
                rows: 2_000_000,
                small_rows: 200_000,
                relay_rows_per_partition: 50_000,
                relay_rate: 200.0,
                relay_before_s: 10,
                relay_after_s: 10,
                p5_seconds: 10,
                p5_rounds: 3,
            },
            engine: EngineSettings {
                workers: 2,
                chunk_target_ms: 500,
                first_chunk_rows: 10_000,
                cutover_lock_timeout_ms: 1000,
                cutover_attempts: 10,
                max_drain: 10_000,
                verify: "digest".to_owned(),
            },
            p1: Some(P1 {
                statement: "ALTER TABLE p1 ALTER COLUMN qty TYPE bigint".to_owned(),
                rows: 2_000_000,
                table_bytes: 250_000_000,
                total_bytes: 370_000_000,
                indexes: 3,
                blocking_ms: 3_000.0,
                pgshift: engine.clone(),
                ratio: 2.6,
            }),
            p2: Some(P2 {
                statement: "VACUUM FULL p2".to_owned(),
                pg_repack_command: "pg_repack --table=public.p2".to_owned(),
                pg_repack_version: "pg_repack 1.4.8".to_owned(),
                rows: 2_000_000,
                total_bytes: 370_000_000,
                pgshift: engine.clone(),
                pg_repack_ms: 9_000.0,
                pgshift_bytes_after: 360_000_000,
                pg_repack_bytes_after: 360_000_000,
                ratio: 0.87,
            }),
            p3: Some(P3 {
                statement: "ALTER TABLE events …".to_owned(),
                rows: 400_000,
                total_bytes: 450_000_000,
                blocking: RelayRun {
                    engine: None,
                    oracle: None,
                    around_cutover: None,
                    cutover_spike_ms: None,
                    writes_over_1s: 5,
                    longest_write_ms: 9_000.0,
                    ..relay_run("blocking ALTER TABLE")
                },
                pgshift: relay_run("pgshift copy-and-swap"),
                pgshift_p99_ratio: 2.25,
                blocking_p99_ratio: 2_000.0,
            }),
            p4: Some(P4 {
                holds: vec![LockHold {
                    run: "P3".to_owned(),
                    under_load: true,
                    lock_held_us: 42_000,
                }],
                max_hold_us: 42_000,
                relay_hold_us: 42_000,
                spike_ms: 60.0,
                around_p99_ms: 20.0,
                before_p99_ms: 4.0,
            }),
            p5: Some(P5 {
                method: "pgbench".to_owned(),
                clients: 2,
                seconds: 10,
                measurements: vec![Throughput {
                    round: 1,
                    label: "no trigger".to_owned(),
                    tps: 20_000.0,
                }],
                rounds: vec![P5Round {
                    baseline_tps: 20_000.0,
                    naive_tps: 14_000.0,
                    capture_engine_running_tps: 13_000.0,
                    capture_only_tps: 15_000.0,
                    baseline_spread: 0.05,
                }],
                max_baseline_spread: 0.05,
                baseline_tps: 20_000.0,
                capture_engine_running_tps: 13_000.0,
                capture_only_tps: 15_000.0,
                naive_tps: 14_000.0,
                ratio: 0.65,
                capture_only_ratio: 0.75,
                naive_ratio: 0.7,
            }),
            p6: Some(P6 {
                samples: vec![RssSample {
                    run: "small".to_owned(),
                    rows: 200_000,
                    total_bytes: 37_000_000,
                    vm_hwm_kib: 18_000,
                    wall_ms: 900.0,
                }],
                max_kib: 20_000,
                growth: 1.1,
                size_factor: 10.0,
            }),
            p7: Some(P7 {
                demo_rate: 200.0,
                run: relay_run("pgshift at 400 writes/s"),
                backlog_max: 400,
                sampled_max: 380,
                steady: SteadyState {
                    samples: 30,
                    late_slope_per_s: Some(0.5),
                    allowed_slope_per_s: 20.0,
                    early_max: 300,
                    late_max: 380,
                    max_lag_s: 0.95,
                    reached: true,
                },
                phases: vec![PhaseBacklog {
                    phase: "indexing".to_owned(),
                    samples: 5,
                    max: 300,
                    slope_per_s: Some(120.0),
                }],
                backlog_chart: "p7-backlog.svg".to_owned(),
            }),
            failures: Vec::new(),
            targets: Vec::new(),
            notes: vec!["a note".to_owned()],
        };
        results.targets = evaluate(&results);
        results
    }

    #[test]
    fn targets_are_judged_with_their_gaps() {
        let results = sample();
        let by_id = |id: &str| {
            results
                .targets
                .iter()
                .find(|t| t.id == id)
                .unwrap_or_else(|| panic!("{id}"))
                .clone()
        };
        let p1 = by_id("P1");
        assert_eq!(p1.met, Some(false));
        assert_eq!(p1.gap, "missed by 1.10× (73 %)");
        assert_eq!(p1.target_text(), "≤ 1.50×");
        let p2 = by_id("P2");
        assert_eq!(p2.met, Some(true));
        assert_eq!(p2.gap, "met, 0.13× under");
        let waits = by_id("P3 waits");
        assert_eq!(
            (waits.met, waits.value_text().as_str(), waits.gap.as_str()),
            (Some(true), "0", "met")
        );
        assert_eq!(by_id("P3 lost").value, Some(0.0));
        assert_eq!(by_id("P4 hold").value, Some(42.0));
        let p5 = by_id("P5");
        assert_eq!(p5.met, Some(false));
        assert_eq!(p5.value_text(), "65.0 %");
        assert_eq!(p5.gap, "missed by 15.0 % (19 %)");
        assert_eq!(by_id("P6 peak").met, Some(true));
        let p7 = by_id("P7");
        assert_eq!((p7.met, p7.value_text().as_str()), (Some(true), "yes"));
    }

    #[test]
    fn a_missing_scenario_is_not_measured_rather_than_met() {
        let mut results = sample();
        results.p2 = None;
        results.targets = evaluate(&results);
        let p2 = results.targets.iter().find(|t| t.id == "P2").expect("P2");
        assert_eq!(p2.met, None);
        assert_eq!(p2.value_text(), "not measured");
        assert_eq!(p2.gap, "not measured");
    }

    #[test]
    fn the_json_is_versioned_and_reads_back_the_same() {
        let results = sample();
        let json = serde_json::to_value(&results).expect("serialise");
        assert_eq!(json["schema_version"], SCHEMA_VERSION);
        for key in [
            "tool",
            "started_at_utc",
            "command",
            "runtime_s",
            "machine",
            "postgres",
            "sizes",
            "engine",
            "p1",
            "p2",
            "p3",
            "p4",
            "p5",
            "p6",
            "p7",
            "failures",
            "targets",
            "notes",
        ] {
            assert!(json.get(key).is_some(), "{key} missing");
        }
        assert_eq!(json["postgres"]["version"], "15.18");
        assert_eq!(json["p1"]["ratio"], 2.6);
        assert_eq!(json["p3"]["pgshift"]["oracle"]["lost"], 0);
        assert_eq!(json["p3"]["pgshift"]["phases"][0]["label"], "copying");
        assert_eq!(json["p7"]["steady"]["reached"], true);
        assert_eq!(json["targets"][0]["id"], "P1");
        assert_eq!(json["targets"][0]["direction"], "at_most");
        let text = serde_json::to_string_pretty(&results).expect("text");
        let back: BenchResults = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, results);
    }
}
