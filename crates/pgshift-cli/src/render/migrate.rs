//! A migrate verdict for people.

use std::fmt::Write;

use pgshift::exec::Scheduled;
use pgshift::migrate::{FileStatus, MigrateOutcome, MigrateVerdict};

use super::style::{paint, Tone};

/// The verdict as text.
pub fn migrate(verdict: &MigrateVerdict) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "layout: {}", verdict.layout.description);
    for file in &verdict.files {
        let label = match &file.version {
            Some(version) => format!("{version:>4} {}", file.name),
            None => format!("   R__{}", file.name),
        };
        let detail = match file.status {
            FileStatus::AlreadyApplied => match &file.baselined {
                Some(how) => format!("already applied (baselined: {how}; not run by pgshift)"),
                None => "already applied".to_owned(),
            },
            FileStatus::NotRun => "not run".to_owned(),
            FileStatus::Planned => {
                let units = file.schedule.as_ref().map_or(0, |s| {
                    s.items.iter().filter(|i| matches!(i, Scheduled::Unit { .. })).count()
                });
                let refused = file.schedule.as_ref().map_or(0, |s| s.refusals.len());
                if refused > 0 {
                    format!("would be REFUSED ({refused} statement{})", if refused == 1 { "" } else { "s" })
                } else if file.resumed {
                    format!("would resume at step {} of {units}", file.committed_before + 1)
                } else {
                    format!("would run {units} step{}", if units == 1 { "" } else { "s" })
                }
            }
            FileStatus::Applied | FileStatus::AppliedBlocking => {
                let units = file.verdict.as_ref().map_or(0, |v| v.units.len());
                format!(
                    "applied: {units} step{} committed{}{}",
                    if units == 1 { "" } else { "s" },
                    if file.resumed {
                        format!(" (resumed after {} committed earlier)", file.committed_before)
                    } else {
                        String::new()
                    },
                    if file.status == FileStatus::AppliedBlocking { ", through an accepted BLOCKING step" } else { "" }
                )
            }
            FileStatus::Refused => "REFUSED, nothing of it ran".to_owned(),
            FileStatus::Failed => match &file.verdict {
                Some(v) if v.failed_unit.is_none() && v.interrupted.is_some() => format!(
                    "STOPPED by {} before step {} of {}; {} step{} committed and stay{} (run migrate again to continue)",
                    v.interrupted.as_deref().unwrap_or_default(),
                    v.committed_units + 1,
                    v.units.len(),
                    v.committed_units,
                    if v.committed_units == 1 { "" } else { "s" },
                    if v.committed_units == 1 { "s" } else { "" }
                ),
                Some(v) => format!(
                    "FAILED at step {} of {}; {} step{} committed and stay{} (run migrate again to resume)",
                    v.failed_unit.map_or(0, |i| i + 1),
                    v.units.len(),
                    v.committed_units,
                    if v.committed_units == 1 { "" } else { "s" },
                    if v.committed_units == 1 { "s" } else { "" }
                ),
                None => format!("FAILED: {}", file.error.clone().unwrap_or_default()),
            },
        };
        let _ = writeln!(out, "{label:<48} {detail}");
        if let Some(split) = &file.split {
            let _ = writeln!(out, "      {}", split.describe());
        }
        if let Some(schedule) = &file.schedule {
            for refusal in &schedule.refusals {
                let _ = writeln!(
                    out,
                    "      line {}: {}: {}",
                    refusal.line, refusal.refusal.cause, refusal.refusal.message
                );
                out.push_str(&super::do_this(&refusal.refusal, "        "));
            }
            if matches!(file.status, FileStatus::Planned) {
                for item in &schedule.items {
                    if let Scheduled::Unit { unit } = item {
                        for step in &unit.steps {
                            let one_line: Vec<&str> = step.sql.split_whitespace().collect();
                            let _ = writeln!(out, "      {};", one_line.join(" "));
                        }
                    }
                }
            }
        }
        if let Some(v) = &file.verdict {
            if let Some(refusal) = &v.runtime_refusal {
                let _ = writeln!(out, "      {}: {}", refusal.cause, refusal.message);
                out.push_str(&super::do_this(refusal, "        "));
            }
            if let Some(failed) = v.failed_unit.and_then(|i| v.units.get(i)) {
                if let Some(report) = &failed.report {
                    let _ = writeln!(
                        out,
                        "      failed step: {}",
                        failed.unit.steps.first().map_or("", |s| s.sql.as_str())
                    );
                    let _ = writeln!(
                        out,
                        "      error: {}",
                        report.failure.clone().unwrap_or_default()
                    );
                }
            }
        }
    }
    let (tone, last) = match (verdict.outcome, verdict.dry_run, &verdict.interrupted) {
        (MigrateOutcome::Failed, false, Some(signal)) => (
            Tone::Bad,
            format!("Stopped by {signal}: the files after it were not run; run migrate again to continue."),
        ),
        (MigrateOutcome::Done, ..) => (Tone::Good, "Done online.".to_owned()),
        (MigrateOutcome::DoneWithBlocking, ..) => (
            Tone::Caution,
            "Done, through accepted blocking steps.".to_owned(),
        ),
        (MigrateOutcome::Refused, true, _) => (
            Tone::Bad,
            "Dry run: a pending file would be REFUSED; nothing was written.".to_owned(),
        ),
        (MigrateOutcome::Failed, true, _) => (
            Tone::Bad,
            "Dry run: a pending file cannot be used; nothing was written.".to_owned(),
        ),
        (MigrateOutcome::Refused, false, _) => (Tone::Bad, "Stopped at a refused file.".to_owned()),
        (MigrateOutcome::Failed, false, _) => (Tone::Bad, "Stopped at a failed file.".to_owned()),
        (MigrateOutcome::Planned, ..) => (Tone::Note, "Dry run: nothing was written.".to_owned()),
    };
    let _ = writeln!(out, "{}", paint(tone, &last));
    out
}
