//! An apply verdict for people.

use std::fmt::Write;

use pgshift::exec::Outcome;
use pgshift::report::ApplyReport;
use pgshift::script::Script;

use super::style::{paint, verbosity, Tone, Verbosity};

/// The verdict as text. Quiet: refusals and the last line only. Verbose: every attempt
/// of every unit.
pub fn apply(report: &ApplyReport, script: &Script) -> String {
    let level = verbosity();
    let mut out = String::new();
    let verdict = &report.verdict;
    let line_of = |statement: usize| {
        script
            .statements
            .get(statement)
            .map_or(0, |s| s.statement.position.line)
    };
    for note in verdict.notes.iter().filter(|_| level > Verbosity::Quiet) {
        let _ = writeln!(out, "note: {note}");
    }
    for traced in report
        .procedural
        .iter()
        .filter(|_| level > Verbosity::Quiet)
    {
        let _ = writeln!(
            out,
            "traced: line {}: {} ({} rewrite{} on the clone)",
            traced.line,
            traced.decision,
            traced.rewrites.len(),
            if traced.rewrites.len() == 1 { "" } else { "s" }
        );
        for sql in &traced.expanded {
            let _ = writeln!(out, "  runs as: {sql}");
        }
    }
    if !verdict.refusals.is_empty() {
        let _ = writeln!(out, "{} nothing ran.", paint(Tone::Bad, "REFUSED:"));
        for refusal in &verdict.refusals {
            let _ = writeln!(
                out,
                "  {}:{}: {} ({}): {}",
                report.path,
                refusal.line,
                refusal.refusal.cause,
                refusal.refusal.class.name(),
                refusal.refusal.message
            );
            out.push_str(&super::do_this(&refusal.refusal, "    "));
        }
        return out;
    }
    for result in verdict.units.iter().filter(|_| level > Verbosity::Quiet) {
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
                        match (
                            result.unit.accepted_blocking,
                            procedural_unit(script, &result.unit)
                        ) {
                            (true, true) =>
                                "; procedural code run as written, accepted with --allow-procedural",
                            (true, false) => "; BLOCKING form, accepted with --allow-blocking",
                            _ if r.guarded.is_some() =>
                                "; guarded procedural code (PC-5): ran read-only on live, a no-op here",
                            _ => "",
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
                if level == Verbosity::Verbose {
                    for attempt in &r.attempts {
                        let _ = writeln!(
                            out,
                            "      attempt {}: {} after {}{}",
                            attempt.number,
                            attempt.outcome,
                            duration(attempt.elapsed_us),
                            if attempt.backoff_us > 0 {
                                format!(", then waited {}", duration(attempt.backoff_us))
                            } else {
                                String::new()
                            }
                        );
                    }
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
        Outcome::Done => writeln!(
            out,
            "{}",
            paint(
                Tone::Good,
                &format!("Done online: {total} of {total} steps committed.")
            )
        ),
        Outcome::DoneWithBlocking => writeln!(
            out,
            "{}",
            paint(
                Tone::Caution,
                &format!(
                    "Done, through an accepted blocking step: {total} of {total} steps committed."
                )
            )
        ),
        Outcome::Refused => {
            let _ = writeln!(
                out,
                "{} nothing committed. {}",
                paint(Tone::Bad, "REFUSED:"),
                verdict
                    .runtime_refusal
                    .as_ref()
                    .map_or_else(String::new, |r| format!("{}: {}", r.cause, r.message))
            );
            if let Some(refusal) = &verdict.runtime_refusal {
                out.push_str(&super::do_this(refusal, "  "));
            }
            Ok(())
        }
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
                "{} step {step} of {total}; the {} step{s} before it committed and stay{stays}.",
                paint(Tone::Bad, &what),
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

/// Whether a unit runs procedural code its trace (or the operator) let run as written.
fn procedural_unit(script: &pgshift::script::Script, unit: &pgshift::exec::Unit) -> bool {
    unit.statements.iter().any(|&i| {
        script.statements.get(i).is_some_and(|s| {
            s.classification
                .effects
                .iter()
                .any(|e| matches!(e, pgshift::classify::Effect::RunsProcedural { .. }))
        })
    })
}
