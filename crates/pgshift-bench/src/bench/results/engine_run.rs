//! A pgshift run as the benchmark saw it: wall time, phases, the swap.

use serde::{Deserialize, Serialize};

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
    /// The standbys at the swap, as the engine reported them (none without one;
    /// absent in results written before).
    #[serde(default)]
    pub standbys: Vec<super::StandbyLag>,
    /// Whether verification ran beside the index builds (its phase time then lies
    /// inside indexing's; absent in results written before).
    #[serde(default)]
    pub verified_beside_builds: bool,
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
