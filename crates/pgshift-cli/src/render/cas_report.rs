//! A copy-and-swap run's report for people.

use std::fmt::Write;

use pgshift::cas::RunReport;

/// A finished run for people.
pub fn cas_report(report: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Run {} on {}: {}.",
        report.run, report.table, report.phase
    );
    if report.settled_from_catalog {
        let _ = writeln!(
            out,
            "  The swap had already committed (read from the catalog); the run was finished."
        );
    }
    let phases: Vec<String> = report
        .phases_ms
        .iter()
        .map(|(phase, ms)| format!("{phase} {}", millis(*ms)))
        .collect();
    if !phases.is_empty() {
        let _ = writeln!(out, "  phases: {}", phases.join(", "));
    }
    let _ = writeln!(
        out,
        // The same figure as the copy's progress ("at most N so far"), over the whole
        // run: the backlog still grows while the shadow's indexes are built.
        "  rows copied {}, verified {} in {} pass{}; change-log backlog at most {} over the run (indexing included)",
        report.rows_copied,
        report.rows_verified,
        report.verification_passes,
        if report.verification_passes == 1 {
            ""
        } else {
            "es"
        },
        report.backlog_max
    );
    if let Some(swap) = &report.swap {
        // One cutover, two figures named apart: the phase (taking the lock, with its
        // retries and any catching up between them) and, within its last moments, the
        // lock's hold (what writers wait for).
        let phase = report
            .phases_ms
            .iter()
            .find(|(phase, _)| phase == "cutover")
            .map_or_else(String::new, |(_, ms)| {
                format!(
                    "cutover phase {} (taking the lock, catching up); of it, ",
                    millis(*ms)
                )
            });
        let _ = writeln!(
            out,
            "  {phase}ACCESS EXCLUSIVE held {} (attempt {}, {} changes drained under the lock)",
            micros(swap.lock_held_us),
            swap.attempts,
            swap.drained
        );
    }
    let pauses = report
        .throttle
        .iter()
        .filter(|e| e.pace == pgshift::cas::Pace::Paused)
        .count();
    if report.throttled_ms > 0 || pauses > 0 {
        let _ = writeln!(
            out,
            "  throttle: paused {} in all ({} decision{} recorded in the report)",
            millis(report.throttled_ms),
            report.throttle.len(),
            if report.throttle.len() == 1 { "" } else { "s" }
        );
    }
    for standby in report.standbys.iter().flat_map(|s| &s.standbys) {
        let _ = writeln!(
            out,
            "  standby {:?}: behind by {} at the swap, replayed it {}",
            standby.name,
            standby
                .behind_at_swap_bytes
                .map_or_else(|| "an unknown amount".to_owned(), |b| format!("{b} bytes")),
            standby.replayed_swap_after_ms.map_or_else(
                || "not within the wait".to_owned(),
                |ms| format!("{} after the commit", millis(ms))
            )
        );
    }
    for queried in report.standbys.iter().flat_map(|s| &s.queried) {
        let _ = writeln!(out, "  {}", pgshift::cas::standby::cancelled_note(queried));
    }
    for fk in &report.unvalidated_foreign_keys {
        let _ = writeln!(out, "  NOT VALIDATED (left NOT VALID): {fk}");
    }
    if !report.left_behind.is_empty() {
        let _ = writeln!(
            out,
            "  LEFT BEHIND (the swap is done; drop these later, in order, one statement per transaction):"
        );
    }
    for left in &report.left_behind {
        let _ = writeln!(
            out,
            "    {} ({}): {};",
            left.object, left.reason, left.statement
        );
    }
    if let Some(old) = &report.kept_old {
        let _ = writeln!(out, "  the old table is kept as {old}");
    }
    // Said whether or not it could be checked: an unmeasured disk is never silent.
    if !report.disk.is_empty() {
        let _ = writeln!(out, "  {}", report.disk);
    }
    out
}

fn millis(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1_000.0)
    }
}

fn micros(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.1} ms", us as f64 / 1_000.0)
    } else {
        format!("{:.2} s", us as f64 / 1_000_000.0)
    }
}
