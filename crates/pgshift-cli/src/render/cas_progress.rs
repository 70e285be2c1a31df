//! Copy-and-swap progress on stderr: a live bar on a terminal, a quiet line per phase
//! and per tenth otherwise, or one JSON object per line (`--format json`).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use pgshift::cas::{CasProgress, IndexBuild, Phase};
use pgshift::exec::BuildProgress;
use serde_json::json;

/// How progress is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A live bar (stderr is a terminal).
    Bar,
    /// Plain lines.
    Lines,
    /// JSON lines.
    Json,
}

/// Shows one run's progress.
pub struct CasView {
    style: Style,
    bar: Option<ProgressBar>,
    started: Instant,
    phase: Option<Phase>,
    phase_started: Instant,
    /// The last tenth printed (plain lines) and the last JSON line's time.
    last_tenth: i64,
    /// The index build whose readings are shown (its number), and the last reading's
    /// phase and tenth printed as a plain line.
    last_build: Option<(usize, String, i64)>,
    last_json: Option<Instant>,
    /// The throttle's pace (`open`, `slow`, `paused`), and the time this phase spent
    /// paused (left out of its rate, so the ETA is the time left once it runs again).
    pace: &'static str,
    paused_since: Option<Instant>,
    paused_in_phase: Duration,
}

impl CasView {
    /// A view writing in `style`.
    pub fn new(style: Style) -> Self {
        CasView {
            style,
            bar: None,
            started: Instant::now(),
            phase: None,
            phase_started: Instant::now(),
            last_tenth: -1,
            last_build: None,
            last_json: None,
            pace: "open",
            paused_since: None,
            paused_in_phase: Duration::ZERO,
        }
    }

    /// Time this phase has spent working (not paused by the throttle).
    fn working(&self) -> Duration {
        let paused =
            self.paused_in_phase + self.paused_since.map_or(Duration::ZERO, |at| at.elapsed());
        self.phase_started.elapsed().saturating_sub(paused)
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether a JSON line may go out now (at most one per second per kind of event).
    fn json_due(&mut self) -> bool {
        let due = self
            .last_json
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
        if due {
            self.last_json = Some(Instant::now());
        }
        due
    }

    /// Rows per second in this phase, and the seconds left at that rate.
    fn rate_and_eta(&self, rows: i64, estimate: i64) -> (f64, Option<f64>) {
        let seconds = self.working().as_secs_f64().max(0.001);
        let rate = rows as f64 / seconds;
        let eta = (rate > 0.0 && estimate > rows).then(|| (estimate - rows) as f64 / rate);
        (rate, eta)
    }

    fn counted(&mut self, what: &str, rows: i64, estimate: i64, backlog: Option<i64>) {
        let (rate, eta) = self.rate_and_eta(rows, estimate);
        match self.style {
            Style::Json => {
                if self.json_due() {
                    eprintln!(
                        "{}",
                        json!({
                            "event": "progress",
                            "phase": what,
                            "rows": rows,
                            "rows_estimated": estimate,
                            "rows_per_second": rate.round(),
                            "eta_seconds": eta.map(f64::round),
                            "change_log_backlog_max": backlog,
                            "throttle": self.pace,
                            "elapsed_ms": self.elapsed_ms(),
                        })
                    );
                }
            }
            Style::Bar => {
                let bar = self.bar.get_or_insert_with(|| {
                    let bar = ProgressBar::new(1);
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{spinner} {prefix:10} [{bar:30}] {pos}/{len} rows {msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    bar.enable_steady_tick(Duration::from_millis(120));
                    bar
                });
                bar.set_prefix(what.to_owned());
                bar.set_length(u64::try_from(estimate.max(rows)).unwrap_or(0));
                bar.set_position(u64::try_from(rows).unwrap_or(0));
                bar.set_message(details(rate, eta, backlog, self.pace));
            }
            Style::Lines => {
                let tenth = if estimate > 0 {
                    (rows.saturating_mul(10) / estimate).min(10)
                } else {
                    0
                };
                if tenth != self.last_tenth {
                    self.last_tenth = tenth;
                    eprintln!(
                        "  {what}: {rows} of ~{estimate} rows{}",
                        details(rate, eta, backlog, self.pace)
                    );
                }
            }
        }
    }
}

/// What a reading of a build says: its phase, how far (blocks or tuples), and which
/// partition of a partitioned index.
fn build_details(reading: &BuildProgress) -> String {
    let mut out = reading.phase.clone();
    if reading.blocks_total > 0 {
        out.push_str(&format!(
            " · {} of {} blocks",
            reading.blocks_done, reading.blocks_total
        ));
    } else if reading.tuples_total > 0 {
        out.push_str(&format!(
            " · {} of {} tuples",
            reading.tuples_done, reading.tuples_total
        ));
    }
    if let Some(fraction) = reading.fraction() {
        out.push_str(&format!(" ({:.0} %)", fraction * 100.0));
    }
    if reading.partitions_total > 0 {
        out.push_str(&format!(
            " · {} of {} partitions built",
            reading.partitions_done, reading.partitions_total
        ));
    }
    out
}

fn details(rate: f64, eta: Option<f64>, backlog: Option<i64>, pace: &str) -> String {
    let mut out = format!(" · {:.0} rows/s", rate);
    if let Some(eta) = eta {
        if pace == "paused" {
            out.push_str(&format!(" · ETA {} once resumed", seconds(eta)));
        } else {
            out.push_str(&format!(" · ETA {}", seconds(eta)));
        }
    }
    if pace != "open" {
        out.push_str(&format!(" · throttle: {pace}"));
    }
    if let Some(backlog) = backlog {
        // The run's largest backlog so far, the figure its report ends with.
        out.push_str(&format!(" · change-log backlog at most {backlog} so far"));
    }
    out
}

fn seconds(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5_400.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3_600.0)
    }
}

/// What each phase means, for people.
fn phase_text(phase: Phase) -> &'static str {
    match phase {
        Phase::Prepared => "creating the shadow table and the change capture",
        Phase::Copying => "copying rows (writes continue; changes are applied behind)",
        Phase::Indexing => "building the shadow's indexes and constraints",
        Phase::Verifying => "verifying shadow and source chunk by chunk",
        Phase::Ready => "verified; waiting for `pgshift cutover` (the shadow is kept in step)",
        Phase::Cutover => "swapping under a short ACCESS EXCLUSIVE lock",
        Phase::Done => "the new table is in place",
        Phase::Failed => "the run stopped; the source is in place",
        Phase::Aborted => "every artifact of the run removed",
    }
}

impl CasProgress for CasView {
    fn phase(&mut self, phase: Phase) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.phase = Some(phase);
        self.phase_started = Instant::now();
        self.last_tenth = -1;
        self.last_build = None;
        self.last_json = None;
        self.paused_in_phase = Duration::ZERO;
        if self.paused_since.is_some() {
            self.paused_since = Some(Instant::now());
        }
        match self.style {
            Style::Json => eprintln!(
                "{}",
                json!({"event": "phase", "phase": phase.name(), "elapsed_ms": self.elapsed_ms()})
            ),
            Style::Bar | Style::Lines => {
                eprintln!("  copy-and-swap: {} — {}", phase.name(), phase_text(phase))
            }
        }
    }

    fn copied(&mut self, rows: i64, estimate: i64, backlog: i64) {
        self.counted("copying", rows, estimate, Some(backlog));
    }

    fn verified(&mut self, rows: i64, estimate: i64) {
        self.counted("verifying", rows, estimate, None);
    }

    fn throttled(&mut self, pace: &str, why: &str, paused_ms: u64) {
        self.pace = match pace {
            "paused" => "paused",
            "slow" => "slow",
            _ => "open",
        };
        match (self.pace, self.paused_since) {
            ("paused", None) => self.paused_since = Some(Instant::now()),
            ("paused", Some(_)) => {}
            (_, Some(at)) => {
                self.paused_in_phase += at.elapsed();
                self.paused_since = None;
            }
            _ => {}
        }
        match self.style {
            Style::Json => eprintln!(
                "{}",
                json!({"event": "throttle", "pace": self.pace, "reason": why, "paused_ms": paused_ms, "elapsed_ms": self.elapsed_ms()})
            ),
            Style::Bar | Style::Lines if self.pace == "open" => {
                eprintln!(
                    "  throttle: open again (paused {} in all)",
                    seconds(paused_ms as f64 / 1_000.0)
                )
            }
            Style::Bar | Style::Lines => eprintln!("  throttle: {}: {why}", self.pace),
        }
    }

    fn index_build(&mut self, build: &IndexBuild) {
        let started = self.last_build.as_ref().is_none_or(|b| b.0 != build.number);
        if started {
            if let Some(bar) = self.bar.take() {
                bar.finish_and_clear();
            }
            self.last_build = Some((build.number, String::new(), -1));
            self.last_json = None;
        }
        let title = if build.at_once > 1 {
            format!(
                "{} ({} of {}, {} at once)",
                build.index, build.number, build.count, build.at_once
            )
        } else {
            format!("{} ({} of {})", build.index, build.number, build.count)
        };
        match self.style {
            Style::Json => {
                if started || self.json_due() {
                    let reading = build.reading.as_ref();
                    eprintln!(
                        "{}",
                        json!({
                            "event": "index-build",
                            "index": build.index,
                            "number": build.number,
                            "count": build.count,
                            "at_once": build.at_once,
                            "phase": reading.map(|r| r.phase.as_str()),
                            "blocks_done": reading.map(|r| r.blocks_done),
                            "blocks_total": reading.map(|r| r.blocks_total),
                            "tuples_done": reading.map(|r| r.tuples_done),
                            "tuples_total": reading.map(|r| r.tuples_total),
                            "partitions_done": reading.map(|r| r.partitions_done),
                            "partitions_total": reading.map(|r| r.partitions_total),
                            "elapsed_ms": self.elapsed_ms(),
                        })
                    );
                }
            }
            Style::Bar => {
                let bar = self.bar.get_or_insert_with(|| {
                    let bar = ProgressBar::new(1);
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    bar.enable_steady_tick(Duration::from_millis(120));
                    bar
                });
                bar.set_prefix(format!("index {title}"));
                match &build.reading {
                    Some(reading) => {
                        bar.set_length(1_000);
                        bar.set_position(reading.fraction().map_or(0, |f| (f * 1_000.0) as u64));
                        bar.set_message(build_details(reading));
                    }
                    None => bar.set_message("starting"),
                }
            }
            Style::Lines => match &build.reading {
                None => eprintln!("  building index {title}"),
                Some(reading) => {
                    let tenth = reading.fraction().map_or(-1, |f| (f * 10.0) as i64);
                    let line = (build.number, reading.phase.clone(), tenth);
                    if self.last_build.as_ref() != Some(&line) {
                        eprintln!("  building index {title}: {}", build_details(reading));
                        self.last_build = Some(line);
                    }
                }
            },
        }
    }

    fn note(&mut self, text: &str) {
        match self.style {
            Style::Json => eprintln!("{}", json!({"event": "note", "note": text})),
            Style::Bar | Style::Lines => eprintln!("  note: {text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(blocks: (i64, i64), tuples: (i64, i64), partitions: (i64, i64)) -> BuildProgress {
        BuildProgress {
            phase: "building index: scanning table".to_owned(),
            blocks_done: blocks.0,
            blocks_total: blocks.1,
            tuples_done: tuples.0,
            tuples_total: tuples.1,
            partitions_done: partitions.0,
            partitions_total: partitions.1,
        }
    }

    #[test]
    fn a_build_reading_says_its_phase_how_far_and_which_partition() {
        assert_eq!(
            build_details(&reading((250, 1000), (0, 0), (0, 0))),
            "building index: scanning table · 250 of 1000 blocks (25 %)"
        );
        assert_eq!(
            build_details(&reading((0, 0), (30, 40), (3, 8))),
            "building index: scanning table · 30 of 40 tuples (75 %) · 3 of 8 partitions built"
        );
        assert_eq!(
            build_details(&reading((0, 0), (0, 0), (0, 0))),
            "building index: scanning table"
        );
    }
}
