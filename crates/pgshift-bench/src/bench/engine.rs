//! The engine in a child process: the benchmark executable runs itself with
//! the hidden subcommand `engine-run`, which calls [`pgshift::cas::start`]
//! and prints one line of JSON (the engine's `RunReport`, its wall time and
//! its own `VmHWM`). The parent samples the child's `VmHWM` from
//! `/proc/<pid>/status` while it runs, and can kill it. D1's child (`desired-run`,
//! [`super::desired`]) is started, sampled and read the same way.
//!
//! The connection string and the run options travel in environment variables,
//! not on the command line, where any user of the machine could read them.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgshift::cas::{self, CasProgress, Phase, RunOptions};
use pgshift::connect::ConnectionSpec;
use pgshift_sql::QualifiedName;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::env::vm_hwm_kib;
use super::results::{EngineRun, StandbyLag};
use super::{BenchError, BenchResult, Context};

/// The hidden subcommand.
pub const SUBCOMMAND: &str = "engine-run";
/// The environment variable holding the child's connection string.
pub const CONNINFO_ENV: &str = "PGSHIFT_BENCH_CONNINFO";
/// The environment variable holding the child's [`RunOptions`] (JSON).
pub const OPTIONS_ENV: &str = "PGSHIFT_BENCH_RUN_OPTIONS";

/// What the child prints.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChildOutput {
    /// Whether the run finished.
    pub ok: bool,
    /// Why not.
    pub error: Option<String>,
    /// The engine's `RunReport`, as JSON.
    pub report: Option<Value>,
    /// Wall time of `cas::start`, ms.
    pub wall_ms: f64,
    /// The child's own `VmHWM` at the end, KiB.
    pub vm_hwm_kib: Option<u64>,
}

/// Progress of the child on its stderr, one line per phase.
struct PhaseLines {
    table: String,
    started: Instant,
}

impl CasProgress for PhaseLines {
    fn phase(&mut self, phase: Phase) {
        eprintln!(
            "           engine on {}: {} (+{:.1} s)",
            self.table,
            phase.name(),
            self.started.elapsed().as_secs_f64()
        );
    }
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, text: &str) {
        eprintln!("           engine on {}: {text}", self.table);
    }
}

/// The child's side: runs `sql` on `table` through copy-and-swap with the
/// connection string and options from the environment, prints a
/// [`ChildOutput`] line on stdout and returns the exit code.
pub async fn child_main(table: &str, sql: &str) -> i32 {
    let started = Instant::now();
    let result = child_run(table, sql).await;
    print_output(started, result)
}

/// Prints what a child process of the benchmark did (its report, or why it has
/// none), with its wall time since `started` and its own `VmHWM`, as one
/// [`ChildOutput`] line on stdout; returns the exit code.
pub(crate) fn print_output(started: Instant, result: BenchResult<Value>) -> i32 {
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (report, error) = match result {
        Ok(report) => (Some(report), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let output = ChildOutput {
        ok: report.is_some(),
        error,
        report,
        wall_ms,
        vm_hwm_kib: vm_hwm_kib("self"),
    };
    match serde_json::to_string(&output) {
        Ok(line) => {
            println!("{line}");
            if output.ok {
                0
            } else {
                1
            }
        }
        Err(e) => {
            eprintln!("{SUBCOMMAND}: cannot print the result: {e}");
            2
        }
    }
}

async fn child_run(table: &str, sql: &str) -> BenchResult<Value> {
    let conninfo = std::env::var(CONNINFO_ENV).ctx(CONNINFO_ENV)?;
    let options: RunOptions =
        serde_json::from_str(&std::env::var(OPTIONS_ENV).ctx(OPTIONS_ENV)?).ctx(OPTIONS_ENV)?;
    let spec = ConnectionSpec::parse(&conninfo).ctx("the connection string")?;
    let statements = pgshift_sql::parse(sql).ctx("the statement")?;
    let statement = statements
        .first()
        .ok_or_else(|| BenchError("no statement".to_owned()))?;
    let mut progress = PhaseLines {
        table: table.to_owned(),
        started: Instant::now(),
    };
    let report = cas::start(
        &spec,
        statement,
        &QualifiedName::bare(table),
        options,
        &mut progress,
    )
    .await
    .ctx("copy-and-swap")?;
    serde_json::to_value(&report).ctx("the run report")
}

/// A running engine child.
pub struct EngineChild {
    child: tokio::process::Child,
    pid: u32,
    started: Instant,
    peak_kib: Arc<AtomicU64>,
    sampler: tokio::task::JoinHandle<()>,
}

/// A finished engine child.
#[derive(Clone, Debug)]
pub struct ChildRun {
    /// Spawn to exit, ms.
    pub wall_ms: f64,
    /// What it printed.
    pub output: ChildOutput,
    /// The largest `VmHWM` the parent sampled, KiB.
    pub sampled_peak_kib: u64,
}

impl ChildRun {
    /// The peak RSS: the child's own figure, or the parent's samples.
    pub fn peak_kib(&self) -> u64 {
        self.output
            .vm_hwm_kib
            .unwrap_or(0)
            .max(self.sampled_peak_kib)
    }

    /// What the child reported (an error if it failed).
    pub fn report(&self) -> BenchResult<&Value> {
        match (&self.output.report, self.output.ok) {
            (Some(report), true) => Ok(report),
            _ => Err(BenchError(format!(
                "the engine failed: {}",
                self.output.error.as_deref().unwrap_or("no report")
            ))),
        }
    }

    /// The run as the benchmark reports it (an error if the run failed).
    pub fn engine_run(&self) -> BenchResult<EngineRun> {
        let mut run = engine_run_from_report(self.report()?, self.wall_ms);
        run.vm_hwm_kib = Some(self.peak_kib());
        Ok(run)
    }
}

impl EngineChild {
    /// Starts `sql` on `table` in a child process.
    pub fn spawn(
        conninfo: &str,
        table: &str,
        sql: &str,
        options: &RunOptions,
    ) -> BenchResult<EngineChild> {
        let options = serde_json::to_string(options).ctx("the run options")?;
        Self::spawn_with(
            [SUBCOMMAND, "--table", table, "--sql", sql],
            &[(CONNINFO_ENV, conninfo), (OPTIONS_ENV, &options)],
        )
    }

    /// Starts the benchmark executable with `args` (a hidden subcommand that
    /// prints a [`ChildOutput`] line) and `envs`, sampling its `VmHWM`.
    pub(crate) fn spawn_with<I, S>(args: I, envs: &[(&str, &str)]) -> BenchResult<EngineChild>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let exe = std::env::current_exe().ctx("finding the benchmark executable")?;
        let started = Instant::now();
        let child = tokio::process::Command::new(exe)
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .ctx("starting the engine child")?;
        let pid = child
            .id()
            .ok_or_else(|| BenchError("the engine child has no pid".to_owned()))?;
        let peak_kib = Arc::new(AtomicU64::new(0));
        let peak = peak_kib.clone();
        let sampler = tokio::spawn(async move {
            let pid = pid.to_string();
            // A reaped or zombie process has no VmHWM: the sampling ends.
            while let Some(kib) = vm_hwm_kib(&pid) {
                peak.fetch_max(kib, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Ok(EngineChild {
            child,
            pid,
            started,
            peak_kib,
            sampler,
        })
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the child has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the child to exit and reads its result.
    pub async fn finish(self) -> BenchResult<ChildRun> {
        let output = self
            .child
            .wait_with_output()
            .await
            .ctx("waiting for the engine child")?;
        let wall_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        self.sampler.abort();
        let sampled_peak_kib = self.peak_kib.load(Ordering::Relaxed);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .ok_or_else(|| {
                BenchError(format!(
                    "the engine child ({}) printed no result",
                    output.status
                ))
            })?;
        let output: ChildOutput = serde_json::from_str(line).ctx("the engine child's result")?;
        Ok(ChildRun {
            wall_ms,
            output,
            sampled_peak_kib,
        })
    }

    /// Kills the child with SIGKILL and waits for it; returns the largest
    /// `VmHWM` sampled.
    pub async fn kill(mut self) -> BenchResult<u64> {
        self.child.kill().await.ctx("killing the engine child")?;
        self.sampler.abort();
        Ok(self.peak_kib.load(Ordering::Relaxed))
    }
}

/// Runs `sql` on `table` in a child process to its end.
pub async fn run_child(
    conninfo: &str,
    table: &str,
    sql: &str,
    options: &RunOptions,
) -> BenchResult<ChildRun> {
    EngineChild::spawn(conninfo, table, sql, options)?
        .finish()
        .await
}

/// The figures of a `RunReport` (as JSON).
pub fn engine_run_from_report(report: &Value, wall_ms: f64) -> EngineRun {
    let phases_ms = report["phases_ms"]
        .as_array()
        .map(|phases| {
            phases
                .iter()
                .filter_map(|p| Some((p[0].as_str()?.to_owned(), p[1].as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let swap = &report["swap"];
    EngineRun {
        wall_ms,
        phases_ms,
        rows_copied: report["rows_copied"].as_i64().unwrap_or(0),
        lock_held_us: swap["lock_held_us"].as_u64(),
        swap_attempts: swap["attempts"].as_u64().map(|a| a as u32),
        drained: swap["drained"].as_i64(),
        backlog_max: report["backlog_max"].as_i64().unwrap_or(0),
        verified_beside_builds: report["verified_beside_builds"].as_bool().unwrap_or(false),
        vm_hwm_kib: None,
        standbys: report["standbys"]["standbys"]
            .as_array()
            .map(|standbys| {
                standbys
                    .iter()
                    .map(|s| StandbyLag {
                        name: s["name"].as_str().unwrap_or_default().to_owned(),
                        lag_before_ms: s["lag_before_ms"].as_u64(),
                        behind_at_swap_bytes: s["behind_at_swap_bytes"].as_i64(),
                        replayed_swap_after_ms: s["replayed_swap_after_ms"].as_u64(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// [`engine_run_from_report`] of an in-process run.
pub fn engine_run_of(report: &cas::RunReport, wall_ms: f64) -> EngineRun {
    let value = serde_json::to_value(report).unwrap_or(Value::Null);
    engine_run_from_report(&value, wall_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_report_gives_its_figures() {
        let report = serde_json::json!({
            "run": 3, "table": "t", "phase": "done", "rows_copied": 2000000,
            "rows_verified": 2000000, "verification_passes": 1, "backlog_max": 17,
            "phases_ms": [["copying", 4100], ["indexing", 3000], ["verifying", 900], ["cutover", 60]],
            "swap": {"attempts": 1, "drained": 3, "lock_held_us": 41234, "foreign_keys": [], "views": []},
            "unvalidated_foreign_keys": [], "kept_old": null, "settled_from_catalog": false
        });
        let run = engine_run_from_report(&report, 8123.0);
        assert_eq!(run.phases_ms.len(), 4);
        assert_eq!(run.phases_ms[1], ("indexing".to_owned(), 3000));
        assert_eq!(run.lock_held_us, Some(41234));
        assert_eq!((run.swap_attempts, run.drained), (Some(1), Some(3)));
        assert_eq!((run.rows_copied, run.backlog_max), (2_000_000, 17));
        let unswapped = engine_run_from_report(&serde_json::json!({"swap": null}), 1.0);
        assert_eq!(unswapped.lock_held_us, None);
    }

    #[test]
    fn a_failed_child_is_an_error_with_its_reason() {
        let run = ChildRun {
            wall_ms: 10.0,
            output: ChildOutput {
                ok: false,
                error: Some("copy-and-swap: refused".to_owned()),
                report: None,
                wall_ms: 9.0,
                vm_hwm_kib: Some(1000),
            },
            sampled_peak_kib: 1200,
        };
        assert_eq!(run.peak_kib(), 1200);
        let err = run.engine_run().expect_err("failed");
        assert!(err.to_string().contains("refused"), "{err}");
    }
}
