//! The figures of P5: write throughput with and without the capture.

use serde::{Deserialize, Serialize};

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
