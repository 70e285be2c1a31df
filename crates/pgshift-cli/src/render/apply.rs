//! An apply verdict for people.

use std::fmt::Write;

use pgshift::exec::Outcome;
use pgshift::report::ApplyReport;
use pgshift::script::Script;

/// The verdict as text.
pub fn apply(report: &ApplyReport, script: &Script) -> String {
    let mut out = String::new();
    let verdict = &report.verdict;
    let line_of = |statement: usize| {
        script
            .statements
            .get(statement)
            .map_or(0, |s| s.statement.position.line)
    };
    for note in &verdict.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if !verdict.refusals.is_empty() {
        let _ = writeln!(out, "REFUSED: nothing ran.");
        for refusal in &verdict.refusals {
            let _ = writeln!(
                out,
                "  {}:{}: {} ({}): {}",
                report.path,
                refusal.line,
                refusal.refusal.cause,
                serde_json::to_value(refusal.refusal.class)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                refusal.refusal.message
            );
        }
        return out;
    }
    for result in &verdict.units {
        let sql: Vec<&str> = result
            .unit
            .steps
            .iter()
            .map(|s| s.sql.lines().next().unwrap_or(""))
            .collect();
        let first_statement = result.unit.statements.first().copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "[{}/{}] line {}: {}",
            result.index + 1,
            verdict.units.len(),
            line_of(first_statement),
            sql.join("; ")
        );
        match (&result.report, &result.skipped) {
            (Some(r), _) => {
                let attempts = r.attempts.len();
                let elapsed: u64 = r.attempts.iter().map(|a| a.elapsed_us + a.backoff_us).sum();
                if r.committed {
                    let held = r.strong_lock_held_us_max.map_or_else(String::new, |us| {
                        format!("; strong lock held ≤ {}", duration(us))
                    });
                    let _ = writeln!(
                        out,
                        "      committed after {attempts} attempt{} ({}){held}{}",
                        if attempts == 1 { "" } else { "s" },
                        duration(elapsed),
                        if result.unit.accepted_blocking {
                            "; BLOCKING form, accepted with --allow-blocking"
                        } else {
                            ""
                        }
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "      FAILED after {attempts} attempt{}: {}{}",
                        if attempts == 1 { "" } else { "s" },
                        r.failure.clone().unwrap_or_default(),
                        r.lock_wait_us_observed
                            .map_or_else(String::new, |us| format!(
                                " (waited for locks {})",
                                duration(us)
                            ))
                    );
                }
                for cleanup in &r.cleanups {
                    let _ = writeln!(out, "      {cleanup}");
                }
                if let Some(cas) = &result.copy_and_swap {
                    if cas.found_done {
                        let _ = writeln!(
                            out,
                            "      its copy-and-swap run {} had already finished",
                            cas.run.unwrap_or_default()
                        );
                    } else if cas.resumed {
                        let _ = writeln!(
                            out,
                            "      resumed copy-and-swap run {}",
                            cas.run.unwrap_or_default()
                        );
                    }
                    if let Some(run) = &cas.report {
                        for line in super::cas_report(run).lines() {
                            let _ = writeln!(out, "      {line}");
                        }
                    }
                    if let Some(next) = &cas.next {
                        let _ = writeln!(out, "      next: {next}");
                    }
                }
            }
            (None, Some(skipped)) => {
                let _ = writeln!(out, "      not run: {skipped}");
            }
            (None, None) => {}
        }
    }
    let total = verdict.units.len();
    let _ = match report.outcome {
        Outcome::Done => writeln!(out, "Done online: {total} of {total} steps committed."),
        Outcome::DoneWithBlocking => writeln!(
            out,
            "Done, through an accepted blocking step: {total} of {total} steps committed."
        ),
        Outcome::Refused => writeln!(
            out,
            "REFUSED: nothing committed. {}",
            verdict
                .runtime_refusal
                .as_ref()
                .map_or_else(String::new, |r| format!("{}: {}", r.cause, r.message))
        ),
        Outcome::Failed => {
            let (what, step) = match (&verdict.interrupted, verdict.failed_unit) {
                (Some(signal), None) => (
                    format!("STOPPED by {signal} before"),
                    verdict.committed_units + 1,
                ),
                (Some(signal), Some(i)) => (format!("STOPPED by {signal} at"), i + 1),
                (None, failed) => ("FAILED at".to_owned(), failed.map_or(0, |i| i + 1)),
            };
            let (s, stays) = if verdict.committed_units == 1 {
                ("", "s")
            } else {
                ("s", "")
            };
            writeln!(
                out,
                "{what} step {step} of {total}; the {} step{s} before it committed and stay{stays}.",
                verdict.committed_units
            )
        }
    };
    out
}

/// Microseconds for people: `850 µs`, `12.3 ms`, `4.56 s`.
fn duration(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1_000.0)
    } else {
        format!("{:.2} s", us as f64 / 1_000_000.0)
    }
}
