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
        "  rows copied {}, verified {} in {} pass{}; change-log backlog at most {}",
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
        let _ = writeln!(
            out,
            "  swap: ACCESS EXCLUSIVE held {} (attempt {}, {} changes drained under the lock)",
            micros(swap.lock_held_us),
            swap.attempts,
            swap.drained
        );
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
