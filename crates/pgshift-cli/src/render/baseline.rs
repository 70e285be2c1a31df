//! A baseline verdict for people.

use std::fmt::Write;

use pgshift::migrate::{BaselineStatus, BaselineVerdict};

use super::style::{paint, Tone};

/// The verdict as text.
pub fn baseline(verdict: &BaselineVerdict) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "layout: {}", verdict.layout.description);
    if let Some(schema) = &verdict.sqlx_schema {
        let _ = writeln!(out, "sqlx history: {schema}._sqlx_migrations");
    }
    for file in &verdict.files {
        let label = match &file.version {
            Some(version) => format!("{version:>4} {}", file.name),
            None => format!("   R__{}", file.name),
        };
        let detail = match file.status {
            BaselineStatus::Baselined => "baselined: recorded as applied, not run",
            BaselineStatus::WouldBaseline => "would be baselined (recorded as applied, not run)",
            BaselineStatus::AlreadyApplied => "already applied",
            BaselineStatus::Pending => "pending: migrate applies it",
        };
        let _ = writeln!(out, "{label:<48} {detail}");
        if let Some(replaced) = &file.replaced {
            let _ = writeln!(out, "{:<48} (its record replaces {replaced})", "");
        }
    }
    let count = |status| verdict.files.iter().filter(|f| f.status == status).count();
    let pending = count(BaselineStatus::Pending);
    let last = if verdict.dry_run {
        format!(
            "Dry run: {} file(s) would be baselined ({}); nothing was written.",
            count(BaselineStatus::WouldBaseline),
            verdict.source
        )
    } else {
        format!(
            "Baselined {} file(s) ({}); {pending} pending: run pgshift migrate to apply them.",
            count(BaselineStatus::Baselined),
            verdict.source
        )
    };
    let tone = if verdict.dry_run {
        Tone::Note
    } else {
        Tone::Good
    };
    let _ = writeln!(out, "{}", paint(tone, &last));
    out
}
