//! The benchmark's results, as written to `results.json`: versioned, with
//! the machine, the PostgreSQL version, the sizes, every figure of every
//! scenario, every ratio, and each target with whether it was met and by how
//! much it was missed. [`evaluate`] derives the targets from the figures, so
//! the same JSON always gives the same verdicts.
//!
//! * this module: the run as a whole (machine, server, sizes, settings);
//! * [`engine_run`]: a pgshift run as the benchmark saw it;
//! * [`tables`]: P1, P2 and P6 (plain tables); [`relay`]: P3, P4 and P7 (the
//!   relay under load); [`replica`]: P8 (a streaming replica, its replay lag
//!   and a reader on it); [`throttle`]: the throttle's decisions during a run;
//!   [`capture`]: P5; [`desired`]: D1 (`pull` and `diff` of desired state);
//! * [`targets`]: a target's verdict and its words; [`evaluate`]: the targets
//!   judged from the figures.

use serde::{Deserialize, Serialize};

pub mod capture;
pub mod desired;
pub mod engine_run;
pub mod evaluate;
pub mod relay;
pub mod replica;
pub mod tables;
pub mod targets;
pub mod throttle;

#[cfg(test)]
pub(crate) mod sample;

pub use capture::{P5Round, Throughput, P5};
pub use desired::{ChildProcess, D1Round, DiffFigures, PullFigures, D1};
pub use engine_run::EngineRun;
pub use evaluate::{evaluate, limits};
pub use relay::{LoadFigures, LockHold, OracleFigures, PhaseBacklog, RelayRun, P3, P4, P7};
pub use replica::{LagSample, ReaderFigures, ReplicaRun, StandbyConflicts, StandbyLag, P8};
pub use tables::{PairRound, RssSample, P1, P2, P6};
pub use targets::{with_unit, Direction, TargetResult};
pub use throttle::{ThrottleFigures, ThrottleSpan};

/// The version of this JSON shape. Bump it when a field changes meaning or
/// goes away (a new field that older results lack reads as its default).
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
    /// The scenarios the run was asked for, in the order they ran (empty in
    /// results written before D1: P1–P8, as `args` say).
    #[serde(default)]
    pub scenarios: Vec<String>,
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
    /// P1 at the standard size, when measured.
    pub p1: Option<P1>,
    /// P1 at the larger size (`--p1-large-rows`), when measured: the size the P1
    /// targets are held at.
    #[serde(default)]
    pub p1_large: Option<P1>,
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
    /// P8, when measured (absent in results written before it).
    #[serde(default)]
    pub p8: Option<P8>,
    /// D1, when measured (absent in results written before it).
    #[serde(default)]
    pub d1: Option<D1>,
    /// Scenarios that failed or were skipped, with why.
    pub failures: Vec<Failure>,
    /// Each target: the figure, the target, met or not, the gap.
    pub targets: Vec<TargetResult>,
    /// What is approximated, and how.
    pub notes: Vec<String>,
}

impl BenchResults {
    /// Whether the run was asked for scenario `name` (`P1`, …, `D1`): as it
    /// recorded, or, in results written before the list, whether `name` is one
    /// of P1–P8.
    pub fn asked_for(&self, name: &str) -> bool {
        if self.scenarios.is_empty() {
            name.starts_with('P')
        } else {
            self.scenarios.iter().any(|s| s == name)
        }
    }

    /// Whether the run was asked for any of P1–P8 (the scenarios with targets and
    /// copy-and-swap runs).
    pub fn asked_for_any_p(&self) -> bool {
        self.scenarios.is_empty() || self.scenarios.iter().any(|s| s.starts_with('P'))
    }
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
    /// Rows of each table of P1's larger size (0: not run; absent in results
    /// written before).
    #[serde(default)]
    pub p1_large_rows: u64,
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
    /// Rounds of P1 (at each size) and of P2 (0 in results written before rounds:
    /// one).
    #[serde(default)]
    pub pair_rounds: u32,
    /// Rounds of P3's runs with the default and the stricter throttle (0 in results
    /// written before rounds: one).
    #[serde(default)]
    pub p3_rounds: u32,
    /// Tables of D1's generated schema (0 in results written before D1).
    #[serde(default)]
    pub desired_tables: u32,
    /// Rounds of D1 (0 in results written before D1).
    #[serde(default)]
    pub desired_rounds: u32,
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

/// A scenario that did not produce figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// `P1` … `P8`, `D1`.
    pub scenario: String,
    /// Why.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::sample::sample;
    use super::*;

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
            "p8",
            "d1",
            "scenarios",
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

    #[test]
    fn results_written_before_d1_read_with_it_absent_and_p1_to_p8_asked_for() {
        let mut json = serde_json::to_value(sample()).expect("serialise");
        let object = json.as_object_mut().expect("an object");
        object.remove("d1");
        object.remove("scenarios");
        let sizes = object["sizes"].as_object_mut().expect("sizes");
        sizes.remove("desired_tables");
        sizes.remove("desired_rounds");
        let older: BenchResults = serde_json::from_value(json).expect("reads");
        assert_eq!(older.d1, None);
        assert_eq!(older.sizes.desired_tables, 0);
        assert!(older.asked_for("P3") && older.asked_for_any_p());
        assert!(!older.asked_for("D1"));
        let only_d1 = BenchResults {
            scenarios: vec!["D1".to_owned()],
            ..older
        };
        assert!(only_d1.asked_for("D1") && !only_d1.asked_for("P1"));
        assert!(!only_d1.asked_for_any_p());
    }
}
