//! The figures of D1: `pull` and `diff` of desired state on a generated schema.

use serde::{Deserialize, Serialize};

/// A child process of the benchmark, as the benchmark saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildProcess {
    /// Spawn to exit, ms.
    pub wall_ms: f64,
    /// Peak RSS (`VmHWM`), KiB.
    pub vm_hwm_kib: u64,
}

/// One `pull`, as the library reported it and the benchmark saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PullFigures {
    /// Connecting, reading globals and `pg_dump`, ms (`Pulled.timings_ms.read_ms`).
    pub read_ms: u64,
    /// The proof on a throwaway cluster, ms (`Pulled.timings_ms.prove_ms`).
    pub prove_ms: u64,
    /// The whole pull, ms (`Pulled.timings_ms.total_ms`).
    pub total_ms: u64,
    /// Files written, the manifest left out.
    pub files: usize,
    /// Statements in them.
    pub statements: usize,
    /// How the files rebuild the live schema (`exact`, or `as-pg-dump-rebuilds`
    /// with the number of lines).
    pub fidelity: String,
    /// The child process it ran in, as the benchmark saw it.
    #[serde(default)]
    pub child: ChildProcess,
}

/// One `diff`: the comparison, then the plan of its statements against the
/// database, as `pgshift diff` runs them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiffFigures {
    /// `desired::compare`: both schemas built on a throwaway cluster, compared,
    /// and the changes run there until nothing is left, ms (`Compared.total_ms`).
    pub compare_ms: u64,
    /// Planning the changes against the database (`plan`), ms.
    pub plan_ms: u64,
    /// Both, from the call of `compare` to the plan, ms.
    pub total_ms: u64,
    /// Statements of the plan.
    pub changes: usize,
    /// Those that add a column.
    pub added_columns: usize,
    /// Those marked destructive.
    pub destructive: usize,
    /// Those the plan refuses.
    pub refused: usize,
    /// The plan's first statement, when there is one.
    pub first_change: Option<String>,
    /// The child process it ran in, as the benchmark saw it.
    #[serde(default)]
    pub child: ChildProcess,
}

/// One round of D1: a pull into a new folder, an edit, a diff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct D1Round {
    /// The pull.
    pub pull: PullFigures,
    /// The diff of the pulled folder, edited, against the database.
    pub diff: DiffFigures,
}

/// D1: how long `pull` and `diff` take on a generated schema (no target).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct D1 {
    /// The schema the tables are in.
    pub schema: String,
    /// Tables generated.
    pub tables: u32,
    /// What each table holds, in words.
    pub shape: String,
    /// Statements of the generated script.
    pub generated_statements: usize,
    /// Tables whose pulled file is edited before the diff.
    pub edited_tables: u32,
    /// The edit, in words.
    pub edit: String,
    /// Every round, in the order run.
    pub rounds: Vec<D1Round>,
    /// The median round's pull (`total_ms`), ms.
    pub pull_median_ms: u64,
    /// The median round's diff (`total_ms`), ms.
    pub diff_median_ms: u64,
}

impl D1 {
    /// The median (of an even number, the higher of the two in the middle) of
    /// `figure` over the rounds; 0 without rounds.
    pub fn median(rounds: &[D1Round], figure: fn(&D1Round) -> u64) -> u64 {
        let values: Vec<f64> = rounds.iter().map(|r| figure(r) as f64).collect();
        pgshift_workload::stats::upper_median_index(&values).map_or(0, |i| figure(&rounds[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(pull_ms: u64, diff_ms: u64) -> D1Round {
        D1Round {
            pull: PullFigures {
                total_ms: pull_ms,
                ..PullFigures::default()
            },
            diff: DiffFigures {
                total_ms: diff_ms,
                ..DiffFigures::default()
            },
        }
    }

    #[test]
    fn medians_are_taken_per_figure() {
        let rounds = [
            round(14_000, 27_000),
            round(12_000, 30_000),
            round(13_000, 26_000),
        ];
        assert_eq!(D1::median(&rounds, |r| r.pull.total_ms), 13_000);
        assert_eq!(D1::median(&rounds, |r| r.diff.total_ms), 27_000);
        assert_eq!(D1::median(&rounds[..2], |r| r.pull.total_ms), 14_000);
        assert_eq!(D1::median(&[], |r| r.pull.total_ms), 0);
    }

    #[test]
    fn the_child_s_figures_read_without_what_the_benchmark_adds() {
        let json = serde_json::json!({
            "read_ms": 2400, "prove_ms": 11700, "total_ms": 14200,
            "files": 1002, "statements": 5004, "fidelity": "exact"
        });
        let pull: PullFigures = serde_json::from_value(json).expect("reads");
        assert_eq!(
            (pull.total_ms, pull.child),
            (14_200, ChildProcess::default())
        );
    }
}
