//! `lint --trace` in text: one `traced:` line per statement with what the server did,
//! and a `traced[differs]:` line for each way lint's static judgement differs:
//!
//! ```text
//! 0002.sql:3:1: traced: ACCESS EXCLUSIVE on public.events, public.events_2026_01; rewrote public.events_2026_01 (default-value); ran ALTER TABLE public.events ×2
//! 0002.sql:3:1: traced[differs]: public.events_2026_01: lint stated unknown (procedural code), the server did rewrite (default-value)
//! ```

use std::collections::BTreeMap;
use std::fmt::Write;

use pgshift::catalog::volume::LiveVolume;
use pgshift::lock::LockMode;
use pgshift::report::{LintTrace, TracedStatementReport};
use pgshift::trace::{Difference, Outcome, SchemaOrigin};

use super::style::{paint, verbosity, Tone, Verbosity};

/// The trace section of a text lint report.
pub fn trace_section(trace: &LintTrace) -> String {
    let mut out = String::new();
    let heading = match (&trace.error, &trace.server_version, &trace.schema) {
        (Some(error), _, _) => format!("trace: not made: {error}"),
        (None, Some(version), Some(SchemaOrigin::Dump { .. })) => {
            format!("trace: PostgreSQL {version}, schema dumped from --url")
        }
        (None, Some(version), _) => {
            format!("trace: PostgreSQL {version}, the files replayed from the first")
        }
        (None, None, _) => "trace:".to_owned(),
    };
    let tone = if trace.error.is_some() {
        Tone::Bad
    } else {
        Tone::Heading
    };
    let _ = writeln!(out, "{}", paint(tone, &heading));
    if let Some(error) = &trace.live_sizes_error {
        let _ = writeln!(
            out,
            "{}",
            paint(Tone::Caution, &format!("live sizes not read: {error}"))
        );
    }
    let level = verbosity();
    for statement in &trace.statements {
        let at = format!("{}:{}:{}", statement.path, statement.line, statement.column);
        if level != Verbosity::Quiet || matches!(statement.outcome, Outcome::Failed { .. }) {
            let _ = writeln!(
                out,
                "{at}: {}: {}",
                paint(Tone::Note, "traced"),
                summary(statement)
            );
        }
        for difference in &statement.differences {
            let tone = if difference.understated {
                Tone::Bad
            } else {
                Tone::Caution
            };
            let _ = writeln!(
                out,
                "{at}: {}: {}",
                paint(tone, "traced[differs]"),
                differs(difference)
            );
        }
        if level == Verbosity::Verbose {
            for nested in statement.trace.nested.iter().flatten() {
                let text = nested.text.split_whitespace().collect::<Vec<_>>().join(" ");
                let _ = writeln!(out, "  nested ×{}: {text}", nested.calls);
            }
        }
    }
    out.push('\n');
    out
}

/// What the server did, in one line.
fn summary(statement: &TracedStatementReport) -> String {
    match &statement.outcome {
        Outcome::Failed { message, sqlstate } => {
            let code = sqlstate
                .as_deref()
                .map_or_else(String::new, |c| format!(" (SQLSTATE {c})"));
            return format!("failed on the clone: {message}{code}; the trace stops here");
        }
        Outcome::NotRun => return "not run (an earlier statement failed)".to_owned(),
        Outcome::Skipped => {
            return "transaction control, not run (each statement is traced in a transaction \
                    of its own)"
                .to_owned()
        }
        Outcome::Ran => {}
    }
    let trace = &statement.trace;
    let mut parts = vec![locks(statement)];
    if !trace.rewrites.is_empty() {
        let rewrites: Vec<String> = trace
            .rewrites
            .iter()
            .map(|r| format!("{} ({})", r.table, r.reasons.join(", ")))
            .collect();
        parts.push(format!("rewrote {}", rewrites.join(", ")));
    }
    let mut ran: Vec<(String, usize)> = Vec::new();
    for ddl in &trace.ddl {
        let line = if ddl.dropped {
            format!("dropped {} {}", ddl.object_type, ddl.object_identity)
        } else {
            format!("{} {}", ddl.command_tag, ddl.object_identity)
        };
        match ran.iter_mut().find(|(text, _)| *text == line) {
            Some((_, count)) => *count += 1,
            None => ran.push((line, 1)),
        }
    }
    if !ran.is_empty() {
        let ran: Vec<String> = ran
            .into_iter()
            .map(|(text, n)| if n > 1 { format!("{text} ×{n}") } else { text })
            .collect();
        parts.push(format!("ran {}", ran.join(", ")));
    }
    if !statement.live.is_empty() {
        let live: Vec<String> = statement.live.iter().map(live_size).collect();
        parts.push(format!("live: {}", live.join(", ")));
    }
    parts.join("; ")
}

/// `"public"."events" 1.6 GB heap, ~10000000 rows` as the target measured it.
fn live_size(volume: &LiveVolume) -> String {
    let rows = if volume.row_estimate >= 0 {
        format!(", ~{} rows", volume.row_estimate)
    } else {
        String::new()
    };
    match volume.heap_bytes {
        Some(bytes) => format!(
            "{} {} heap{rows}",
            volume.relation,
            super::plan::human_bytes(bytes)
        ),
        None => format!("{} (size not known)", volume.relation),
    }
}

/// The locks on tables, views and materialized views, grouped by mode (strongest
/// first); the locks on their indexes, TOAST tables and sequences counted.
fn locks(statement: &TracedStatementReport) -> String {
    let Some(locks) = &statement.trace.locks else {
        return "locks not read (it runs only outside a transaction block)".to_owned();
    };
    let mut by_mode: BTreeMap<std::cmp::Reverse<LockMode>, Vec<String>> = BTreeMap::new();
    let mut others = 0;
    for lock in locks {
        if matches!(
            lock.kind,
            "table" | "partitioned-table" | "view" | "materialized-view" | "foreign-table"
        ) {
            let created = if lock.created { " (new)" } else { "" };
            by_mode
                .entry(std::cmp::Reverse(lock.mode))
                .or_default()
                .push(format!("{}{created}", lock.relation));
        } else {
            others += 1;
        }
    }
    if by_mode.is_empty() && others == 0 {
        return "no relation locks".to_owned();
    }
    let mut text: Vec<String> = by_mode
        .into_iter()
        .map(|(mode, names)| format!("{} on {}", mode.0.sql_name(), names.join(", ")))
        .collect();
    if others > 0 {
        text.push(format!(
            "{others} lock{} on indexes, TOAST tables or sequences",
            if others == 1 { "" } else { "s" }
        ));
    }
    text.join(", ")
}

fn differs(difference: &Difference) -> String {
    match &difference.relation {
        Some(relation) => format!(
            "{relation}: lint stated {}, the server did {}",
            difference.stated, difference.observed
        ),
        None => format!(
            "lint stated {}, the server did {}",
            difference.stated, difference.observed
        ),
    }
}
