//! Progress on stderr: a live bar on a terminal, one quiet line per event otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use pgshift::cas::CasProgress;
use pgshift::exec::{BuildProgress, Progress, Unit, UnitResult};
use serde_json::json;

use super::cas_progress::{CasView, Style};

/// Shows apply progress on stderr.
pub struct ProgressDisplay {
    terminal: bool,
    json: bool,
    /// `-q` (text only): no progress at all.
    quiet: bool,
    bar: Option<ProgressBar>,
    /// Without a terminal: the last phase and tenth printed, so a line appears only
    /// when either changes.
    last_line: Option<(String, i64)>,
    /// Copy-and-swap units report here.
    cas: CasView,
}

impl ProgressDisplay {
    /// A display for this process's stderr; `json`: one JSON object per line.
    pub fn new(json: bool) -> Self {
        let terminal = !json && std::io::stderr().is_terminal();
        let style = if json {
            Style::Json
        } else if terminal {
            Style::Bar
        } else {
            Style::Lines
        };
        ProgressDisplay {
            terminal,
            json,
            quiet: !json && super::style::verbosity() == super::style::Verbosity::Quiet,
            bar: None,
            last_line: None,
            cas: CasView::new(style),
        }
    }
}

fn first_line(unit: &Unit) -> String {
    let sql = unit.steps.first().map_or("", |s| s.sql.as_str());
    let line = sql.lines().next().unwrap_or("");
    if line.chars().count() > 90 {
        format!("{}…", line.chars().take(90).collect::<String>())
    } else {
        line.to_owned()
    }
}

impl Progress for ProgressDisplay {
    fn started(&mut self, index: usize, total: usize, unit: &Unit) {
        if self.quiet {
            return;
        }
        if self.json {
            eprintln!(
                "{}",
                json!({"event": "unit-started", "unit": index + 1, "units": total, "sql": first_line(unit),
                       "copy_and_swap": unit.copy_and_swap.as_ref().map(ToString::to_string)})
            );
            return;
        }
        let label = format!("[{}/{}] {}", index + 1, total, first_line(unit));
        if unit.copy_and_swap.is_some() {
            eprintln!("{label}: copy-and-swap");
        } else if self.terminal {
            let bar = ProgressBar::new(1000);
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(label);
            bar.enable_steady_tick(Duration::from_millis(120));
            self.bar = Some(bar);
        } else {
            eprintln!("{label}: running");
        }
    }

    fn build(&mut self, progress: BuildProgress) {
        if self.quiet {
            return;
        }
        if self.json {
            eprintln!(
                "{}",
                json!({"event": "build", "phase": progress.phase, "fraction": progress.fraction()})
            );
            return;
        }
        let percent = progress
            .fraction()
            .map_or_else(String::new, |f| format!(" {:.0}%", f * 100.0));
        match &self.bar {
            Some(bar) => {
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {percent}% {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                if let Some(fraction) = progress.fraction() {
                    bar.set_position((fraction * 1000.0) as u64);
                }
                bar.set_message(progress.phase.clone());
            }
            None => {
                let tenth = progress.fraction().map_or(-1, |f| (f * 10.0) as i64);
                let line = (progress.phase.clone(), tenth);
                if self.last_line.as_ref() != Some(&line) {
                    eprintln!("  build: {}{percent}", progress.phase);
                    self.last_line = Some(line);
                }
            }
        }
    }

    fn finished(&mut self, index: usize, total: usize, result: &UnitResult) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.last_line = None;
        if self.quiet {
            return;
        }
        let status = match (&result.report, &result.skipped) {
            (Some(r), _) if r.committed => "committed".to_owned(),
            (Some(r), _) => format!("failed: {}", r.failure.clone().unwrap_or_default()),
            (None, Some(s)) => format!("not run: {s}"),
            (None, None) => "not run".to_owned(),
        };
        if self.json {
            eprintln!(
                "{}",
                json!({"event": "unit-finished", "unit": index + 1, "units": total, "status": status})
            );
        } else {
            eprintln!("[{}/{}] {status}", index + 1, total);
        }
    }

    fn copy_and_swap(&mut self) -> Option<&mut dyn CasProgress> {
        if self.quiet {
            return None;
        }
        Some(&mut self.cas)
    }
}
