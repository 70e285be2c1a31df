//! Reading the throttle's signals on the primary, each on every tick:
//!
//! - writer commit latency: a probe transaction of the engine's own — one row of
//!   `pgshift.throttle_probe` updated and committed, timed from the client — kept over
//!   a window of recent probes, of which the 99th percentile is the signal;
//! - writer slowdown: the 95th percentile of the same window over that of a baseline,
//!   the first [`BASELINE_PROBES`] probes (as many as the window), taken before the
//!   work starts (while the application's writers run as usual). Until the baseline
//!   is complete, and for good if the work started without it, the slowdown cannot be
//!   read. With it, the sessions of the application that are at work ([`application_sessions`]): with none, there
//!   is no writer for the slowdown to protect, and what the probe measures is the run
//!   competing with itself;
//! - replay lag of each standby in `pg_stat_replication`: the largest of its
//!   `replay_lag` and the age of the oldest WAL it has not replayed (the time at which
//!   the primary's `pg_current_wal_lsn()` last stood at or below the standby's
//!   `replay_lsn`, from the samples taken on every tick). `replay_lag` alone stops
//!   moving while a standby does not replay, so the samples are what show a stopped
//!   one. A standby whose LSNs are hidden (a role without `pg_read_all_stats` sees
//!   NULL) cannot be read;
//! - WAL generation: `pg_current_wal_lsn()` deltas over the window.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::decide::{Reading, Slowdown};
use crate::cas::names::RunNames;
use crate::connect::APPLICATION_NAME;

/// Probes kept for the percentiles: five seconds of them at [`PROBE_SPACING`].
const PROBE_WINDOW: usize = 100;
/// The time between two probes. A writer's tail is made of the moments a busy server
/// keeps it waiting, and two probes a second (one a tick, as before) missed most of
/// them: under the relay load (P3, 2026-12-03, with the 1 ms floor) the strict
/// setting's probe read under 1.25× its baseline for 16 s, through a copy, its index
/// builds and half of verification, while the writers' p99 was 4–16 ms a second
/// against 4.5 ms before. Each probe is a one-row upsert on a table of the engine's.
pub const PROBE_SPACING: Duration = Duration::from_millis(50);
/// Probes the writers' baseline is made of (2.5 s of them, 25 ms apart, while the
/// application is at work): as many as the window the slowdown compares with it, so
/// that both 95th percentiles are the same rank of the same count. With 40, the third
/// slowest, one run of P3 (2026-12-03) read its baseline at 2.20 ms where the run
/// before, on the same load, read 1.14 ms, and the strict setting then left the copy
/// open while the writers' p99 was 2.6–3× what it had been.
pub const BASELINE_PROBES: usize = PROBE_WINDOW;
/// The percentile the slowdown compares, of the window and of the baseline alike:
/// the sixth slowest of a hundred probes. High enough to see the tail the writers
/// feel (their p99 is what a user limits), low enough that a probe or two a busy
/// machine delays is not it.
/// With the 90th percentile of twenty probes, two a second, the stricter throttle of
/// P3 did not act in the copy or the index builds; with this one it slowed them.
const SLOWDOWN_QUANTILE: f64 = 0.95;
/// The least baseline (ms) the slowdown is measured against: a probe that commits in
/// a fraction of a millisecond on a quiet server is no steadier a divisor than that.
///
/// It was 5 ms, to keep a run with no writer from pausing itself: its own work on both
/// cores takes an idle probe's 90th percentile from about 1 ms to about five (2 M rows,
/// 2026-12-02: 13.7 s against 5.4 s with the limit off). But under the relay load
/// (P3, 2026-12-03, three runs) the probe's 90th percentile went from 1.2 ms before
/// the work to 3.7–5.7 ms in each run's worst phase while the writers' own p99 went
/// from 3.5–4.4 ms to 9.5–12 ms: a 5 ms floor hid the slowdown the writers felt, and neither
/// the default limit nor a stricter one ever acted. A run with no writer is now told
/// apart by the sessions at work ([`application_sessions`]) instead.
pub const SLOWDOWN_FLOOR_MS: f64 = 1.0;
/// A session that finished a statement this many seconds ago or less is at work.
const RECENT_S: f64 = 5.0;
/// WAL samples kept (ten minutes at the default interval): a standby behind the oldest
/// is at least that far behind.
const WAL_SAMPLES: usize = 1_200;
/// The span the WAL rate is measured over.
const RATE_SPAN: Duration = Duration::from_secs(5);

/// The probe: one row per run, updated and committed.
const PROBE_SQL: &str =
    "INSERT INTO pgshift.throttle_probe AS p (run, at) VALUES ($1, pg_catalog.now()) \
     ON CONFLICT (run) DO UPDATE SET at = excluded.at";

/// The client sessions of the application at work: every client backend but this
/// one, a pgshift process's own (named `$2`, the connection's application name) and
/// the run's task sessions (named one of `$3`), that is not idle, or went idle within
/// the last `$1` seconds. A session whose state the role may not see (another role's,
/// without `pg_read_all_stats`) counts as at work. Names are matched whole: an
/// application whose name merely starts like the engine's (the benchmark's
/// `pgshift-bench writer 1`) is the application, and another run's task sessions count
/// as at work too (they load the server like any other; counting them only slows
/// this run).
const APPLICATION_SQL: &str = "SELECT pg_catalog.array_agg(a.pid ORDER BY a.pid) \
     FROM pg_catalog.pg_stat_activity a \
    WHERE a.backend_type OPERATOR(pg_catalog.=) 'client backend' \
      AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() \
      AND a.application_name OPERATOR(pg_catalog.<>) $2::pg_catalog.text \
      AND a.application_name OPERATOR(pg_catalog.<>) ALL ($3::pg_catalog.text[]) \
      AND (a.state IS NULL OR a.state OPERATOR(pg_catalog.<>) 'idle' \
           OR a.state_change OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $1::pg_catalog.float8)))";

/// The backend pids of the application's sessions at work now (see the module's
/// notes) while run `run` works: what tells a run with writers from one without.
pub async fn application_sessions(client: &Client, run: i64) -> Result<Vec<i32>, String> {
    let tasks = RunNames::new(run).task_applications();
    let row = client
        .query_one(APPLICATION_SQL, &[&RECENT_S, &APPLICATION_NAME, &tasks])
        .await
        .map_err(|e| super::unread(&e))?;
    Ok(row.get::<_, Option<Vec<i32>>>(0).unwrap_or_default())
}

/// The standbys and the primary's WAL position, in one statement.
const REPLICAS_SQL: &str = "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), '0/0')::pg_catalog.float8, \
       r.application_name, r.state, \
       pg_catalog.pg_wal_lsn_diff(r.replay_lsn, '0/0')::pg_catalog.float8, \
       (extract(epoch FROM r.replay_lag) * 1000)::pg_catalog.float8 \
     FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_stat_replication r ON true \
     ORDER BY r.application_name, r.pid";

/// One standby as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Standby {
    /// `application_name`.
    pub name: String,
    /// Replay lag in milliseconds, or why it cannot be read.
    pub lag_ms: Reading,
    /// Bytes of WAL not replayed yet.
    pub lag_bytes: Option<f64>,
}

/// What one tick read.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Every standby.
    pub standbys: Vec<Standby>,
    /// The probe's 99th percentile over the window (ms).
    pub writer_p99_ms: Reading,
    /// The probe's recent latency over its baseline.
    pub writer_slowdown: Result<Slowdown, String>,
    /// WAL bytes per second.
    pub wal_bytes_per_s: Reading,
}

/// The signal reader of one run, with its history.
pub struct Signals {
    run: i64,
    probes: VecDeque<f64>,
    baseline: Baseline,
    wal: VecDeque<(Instant, f64)>,
    probe_timeout: Duration,
}

/// The probes taken before the work started.
#[derive(Default)]
struct Baseline {
    probes: Vec<f64>,
    /// The work has started: no probe is a baseline probe any more.
    closed: bool,
    /// No session of the application was at work when it was measured.
    quiet: bool,
}

/// Whether the application's sessions at work, as read when the baseline starts, are
/// none at all: then its probes go back to back. A reading that failed is not quiet.
fn quiet(at_work: &Result<Vec<i32>, String>) -> bool {
    matches!(at_work, Ok(pids) if pids.is_empty())
}

impl Baseline {
    fn complete(&self) -> bool {
        self.probes.len() >= BASELINE_PROBES
    }

    fn add(&mut self, ms: f64) {
        if !self.closed && !self.complete() {
            self.probes.push(ms);
        }
    }

    /// The baseline's percentile, once complete.
    fn ms(&self) -> Result<f64, String> {
        if self.complete() {
            let probes: VecDeque<f64> = self.probes.iter().copied().collect();
            // A clock that cannot tell the probes apart from nothing is not a divisor.
            Ok(percentile(&probes, SLOWDOWN_QUANTILE).max(0.001))
        } else if self.closed {
            Err("the writers' baseline was not measured before the work started".to_owned())
        } else {
            Err(format!(
                "the writers' baseline is not measured yet ({} of {BASELINE_PROBES} probes before the work)",
                self.probes.len()
            ))
        }
    }
}

/// The slowdown of a recent 95th percentile over the baseline's, the baseline counted
/// as at least [`SLOWDOWN_FLOOR_MS`].
fn slowdown(recent_ms: f64, baseline_ms: f64, application_sessions: usize) -> Slowdown {
    Slowdown {
        ratio: recent_ms / baseline_ms.max(SLOWDOWN_FLOOR_MS),
        baseline_ms,
        application_sessions,
    }
}

impl Signals {
    /// A reader for run `run`; a probe that takes longer than `probe_timeout` counts
    /// as unreadable.
    pub fn new(run: i64, probe_timeout: Duration) -> Self {
        Signals {
            run,
            probes: VecDeque::new(),
            baseline: Baseline::default(),
            wal: VecDeque::new(),
            probe_timeout,
        }
    }

    /// Probes until the baseline is complete, `spacing` apart, or until a probe fails
    /// (the ticks then go on measuring it while the work waits). With no session of
    /// the application at work ([`application_sessions`]) there is no writer whose
    /// moments of waiting the spacing would sample: the probes are taken one after the
    /// other (a second of waiting is spared, and the baseline is the idle server's,
    /// the lowest it can be, so the slowdown is read high rather than low). A reading
    /// that fails keeps the spacing.
    pub async fn measure_baseline(&mut self, client: &Client, spacing: Duration) {
        self.baseline.quiet = quiet(&application_sessions(client, self.run).await);
        let spacing = if self.baseline.quiet {
            Duration::ZERO
        } else {
            spacing
        };
        while !self.baseline.complete() && !self.baseline.closed {
            if self.probe(client).await.is_err() {
                return;
            }
            // Back to back means no timer at all: tokio's timers tick by the
            // millisecond, so a zero sleep still waited about 1 ms a probe (0.1 s
            // of 0.14 s for the baseline of an idle server).
            if !spacing.is_zero() {
                tokio::time::sleep(spacing).await;
            }
        }
    }

    /// The work has started: later probes are not the baseline's.
    pub fn close_baseline(&mut self) {
        self.baseline.closed = true;
    }

    /// The baseline's 95th percentile (ms), once measured.
    pub fn baseline_ms(&self) -> Option<f64> {
        self.baseline.ms().ok()
    }

    /// Whether the baseline was measured with no session of the application at work
    /// (its probes back to back, on an idle server).
    pub fn baseline_quiet(&self) -> bool {
        self.baseline.quiet
    }

    /// Reads every signal once, and the probe `probes` times, [`PROBE_SPACING`] apart
    /// (the first failure ends them: the probe is then unreadable).
    pub async fn read(&mut self, client: &Client, probes: usize) -> Sample {
        let mut writer_p99_ms = self.probe(client).await;
        for _ in 1..probes {
            if writer_p99_ms.is_err() {
                break;
            }
            tokio::time::sleep(PROBE_SPACING).await;
            writer_p99_ms = self.probe(client).await;
        }
        let writer_slowdown = match &writer_p99_ms {
            Err(e) => Err(e.clone()),
            Ok(_) => match self.baseline.ms() {
                Err(e) => Err(e),
                // INV: OC-5 — who is at work cannot be read: the slowdown is not read.
                Ok(baseline_ms) => application_sessions(client, self.run).await.map(|pids| {
                    slowdown(
                        percentile(&self.probes, SLOWDOWN_QUANTILE),
                        baseline_ms,
                        pids.len(),
                    )
                }),
            },
        };
        let (standbys, wal_bytes_per_s) = match self.replicas(client).await {
            Ok(read) => read,
            Err(e) => (
                vec![Standby {
                    name: "(any)".to_owned(),
                    lag_ms: Err(e.clone()),
                    lag_bytes: None,
                }],
                Err(e),
            ),
        };
        Sample {
            standbys,
            writer_p99_ms,
            writer_slowdown,
            wal_bytes_per_s,
        }
    }

    async fn probe(&mut self, client: &Client) -> Reading {
        let started = Instant::now();
        let run = self.run;
        match tokio::time::timeout(self.probe_timeout, client.execute(PROBE_SQL, &[&run])).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(super::unread(&e)),
            Err(_) => {
                return Err(format!(
                    "the probe did not commit within {} ms",
                    self.probe_timeout.as_millis()
                ))
            }
        }
        let ms = started.elapsed().as_secs_f64() * 1_000.0;
        if self.probes.len() == PROBE_WINDOW {
            self.probes.pop_front();
        }
        self.probes.push_back(ms);
        self.baseline.add(ms);
        Ok(percentile(&self.probes, 0.99))
    }

    async fn replicas(&mut self, client: &Client) -> Result<(Vec<Standby>, Reading), String> {
        let rows = client
            .query(REPLICAS_SQL, &[])
            .await
            .map_err(|e| super::unread(&e))?;
        let now = Instant::now();
        let current: f64 = rows
            .first()
            .and_then(|r| r.get::<_, Option<f64>>(0))
            .ok_or_else(|| "pg_current_wal_lsn() returned nothing".to_owned())?;
        if self.wal.len() == WAL_SAMPLES {
            self.wal.pop_front();
        }
        self.wal.push_back((now, current));
        let mut standbys = Vec::new();
        for row in &rows {
            let Some(name) = row.get::<_, Option<String>>(1) else {
                continue; // no standby: the one row of the outer join
            };
            let state: Option<String> = row.get(2);
            let replay: Option<f64> = row.get(3);
            let replay_lag: Option<f64> = row.get(4);
            let (lag_ms, lag_bytes) = match (state, replay) {
                (None, _) => (
                    Err(
                        "pg_stat_replication hides its state (the role needs pg_read_all_stats)"
                            .to_owned(),
                    ),
                    None,
                ),
                (Some(state), None) => (
                    Err(format!("it reports no replay position yet (state {state})")),
                    None,
                ),
                (Some(_), Some(replay)) => {
                    let lag = match self.unreplayed_age_ms(replay, current, now) {
                        Some(age) => Ok(age.max(replay_lag.unwrap_or(0.0))),
                        // INV: OC-5 — behind every sample so far: how far is not
                        // known yet, so the work waits until it replays past one.
                        None => Err(format!(
                            "it has not replayed the WAL written before the throttle's first sample ({} bytes behind); its lag is not known yet",
                            (current - replay).max(0.0)
                        )),
                    };
                    (lag, Some((current - replay).max(0.0)))
                }
            };
            standbys.push(Standby {
                name,
                lag_ms,
                lag_bytes,
            });
        }
        Ok((standbys, Ok(self.wal_rate(now))))
    }

    /// How long ago the primary last stood at or below `replay` (0 when the standby
    /// has replayed everything): the age of the oldest WAL it has not replayed, to
    /// within one tick. `None` when the standby is behind every sample and the
    /// samples do not span their full window yet (its lag is not known); once they
    /// do, at least the window's age.
    fn unreplayed_age_ms(&self, replay: f64, current: f64, now: Instant) -> Option<f64> {
        if replay >= current {
            return Some(0.0);
        }
        let since = match self.wal.iter().rev().find(|(_, lsn)| *lsn <= replay) {
            Some((at, _)) => *at,
            None if self.wal.len() >= WAL_SAMPLES => self.wal.front()?.0,
            None => return None,
        };
        Some(now.duration_since(since).as_secs_f64() * 1_000.0)
    }

    fn wal_rate(&self, now: Instant) -> f64 {
        let newest = self.wal.back();
        let oldest = self
            .wal
            .iter()
            .find(|(at, _)| now.duration_since(*at) <= RATE_SPAN);
        let (Some((newest_at, newest)), Some((oldest_at, oldest))) = (newest, oldest) else {
            return 0.0;
        };
        let seconds = newest_at.duration_since(*oldest_at).as_secs_f64();
        if seconds <= 0.0 {
            0.0
        } else {
            (newest - oldest).max(0.0) / seconds
        }
    }
}

/// The `q` quantile of `values` (nearest rank).
pub fn percentile(values: &VecDeque<f64>, q: f64) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_is_probed_back_to_back_only_when_no_application_session_is_at_work() {
        assert!(quiet(&Ok(vec![])));
        assert!(!quiet(&Ok(vec![4242])));
        // Who is at work could not be read: sampled as if the application were.
        assert!(!quiet(&Err("permission denied".to_owned())));
    }

    #[test]
    fn the_99th_percentile_of_a_small_window_is_its_largest() {
        let window: VecDeque<f64> = [1.0, 3.0, 2.0, 40.0, 2.0].into_iter().collect();
        assert_eq!(percentile(&window, 0.99), 40.0);
        assert_eq!(percentile(&window, 0.5), 2.0);
        assert_eq!(percentile(&VecDeque::new(), 0.99), 0.0);
    }

    #[test]
    fn unreplayed_wal_ages_from_the_last_sample_at_or_below_the_replay_position() {
        let mut signals = Signals::new(1, Duration::from_secs(1));
        let start = Instant::now();
        for (i, lsn) in [100.0, 100.0, 200.0, 300.0].into_iter().enumerate() {
            signals
                .wal
                .push_back((start + Duration::from_secs(i as u64), lsn));
        }
        let now = start + Duration::from_secs(3);
        assert_eq!(signals.unreplayed_age_ms(300.0, 300.0, now), Some(0.0));
        // Replayed up to 100: the primary stood there last at t=1.
        assert_eq!(signals.unreplayed_age_ms(100.0, 300.0, now), Some(2_000.0));
        // Older than every sample of a young history: not known.
        assert_eq!(signals.unreplayed_age_ms(50.0, 300.0, now), None);
        assert_eq!(signals.wal_rate(now), 200.0 / 3.0);
    }

    #[test]
    fn a_baseline_under_the_floor_counts_as_the_floor() {
        let quiet = slowdown(2.7, 0.4, 1);
        assert!(
            (quiet.ratio - 2.7 / SLOWDOWN_FLOOR_MS).abs() < 1e-9,
            "{quiet:?}"
        );
        assert_eq!(
            quiet.baseline_ms, 0.4,
            "the baseline is reported as measured"
        );
        // Over the floor the baseline is the divisor: the relay's 1.2 ms before the
        // work and 4.8 ms during it (P3, 2026-12-03) is a slowdown of 4.
        let loaded = slowdown(4.8, 1.2, 5);
        assert!((loaded.ratio - 4.0).abs() < 1e-9, "{loaded:?}");
        assert_eq!(loaded.application_sessions, 5);
    }

    #[test]
    fn the_baseline_is_the_probes_before_the_work_and_only_those() {
        let mut baseline = Baseline::default();
        for i in 0..BASELINE_PROBES - 1 {
            baseline.add((i + 1) as f64);
        }
        let err = baseline.ms().expect_err("one probe short");
        assert!(err.contains("99 of 100"), "{err}");
        baseline.add(100.0);
        // The 95th percentile of a hundred: the sixth slowest, as of the window.
        assert_eq!(baseline.ms(), Ok(95.0));
        baseline.add(500.0);
        assert_eq!(
            baseline.ms(),
            Ok(95.0),
            "a probe past the hundredth is not kept"
        );
        let mut late = Baseline::default();
        late.add(1.0);
        late.closed = true;
        late.add(1.0);
        assert_eq!(late.probes.len(), 1, "no probe after the work started");
        assert!(late
            .ms()
            .expect_err("closed")
            .contains("not measured before"));
    }
}
