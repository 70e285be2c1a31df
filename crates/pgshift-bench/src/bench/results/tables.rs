//! The figures of the scenarios on plain tables: P1, P2, and P6's samples.

use serde::{Deserialize, Serialize};

use super::EngineRun;

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
    /// Every round, in the order run; the figures above are the median round's
    /// (empty in results written before rounds).
    #[serde(default)]
    pub rounds: Vec<PairRound>,
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
    /// Every round, in the order run; the figures above are the median round's
    /// (empty in results written before rounds).
    #[serde(default)]
    pub rounds: Vec<PairRound>,
}

/// One round of P1 or P2: the other side (the blocking `ALTER TABLE`, or pg_repack)
/// and pgshift, one after the other on their two identical tables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairRound {
    /// Whether pgshift ran first in this round (the order alternates).
    pub pgshift_first: bool,
    /// Wall time of the other side, ms.
    pub other_ms: f64,
    /// The pgshift run.
    pub pgshift: EngineRun,
    /// pgshift wall / the other side's wall.
    pub ratio: f64,
}

impl PairRound {
    /// The round whose ratio is the median (of an even number, the higher of the
    /// two in the middle); `None` without rounds.
    pub fn median(rounds: &[PairRound]) -> Option<&PairRound> {
        let ratios: Vec<f64> = rounds.iter().map(|r| r.ratio).collect();
        pgshift_workload::stats::upper_median_index(&ratios).map(|i| &rounds[i])
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn round(ratio: f64) -> PairRound {
        PairRound {
            pgshift_first: false,
            other_ms: 1_000.0,
            pgshift: EngineRun::default(),
            ratio,
        }
    }

    #[test]
    fn the_median_round_is_the_middle_ratio_or_the_higher_of_two() {
        assert_eq!(PairRound::median(&[]), None);
        let three = [round(1.3), round(1.1), round(1.2)];
        assert_eq!(PairRound::median(&three).map(|r| r.ratio), Some(1.2));
        let four = [round(1.4), round(1.1), round(1.3), round(1.2)];
        assert_eq!(PairRound::median(&four).map(|r| r.ratio), Some(1.3));
    }
}
