//! An audit for people: findings grouped by the table the trigger is declared on,
//! each with what to do and its SQL; then where triggers fire in replica sessions
//! and who may open one.

use std::fmt::Write;

use pgshift::audit::TableKind;
use pgshift::report::AuditReport;
use pgshift_sql::quote_ident;

use super::style::{paint, verbosity, Tone, Verbosity};

/// The audit as text.
pub fn audit(report: &AuditReport, target: &str) -> String {
    let mut out = String::new();
    let quiet = verbosity() == Verbosity::Quiet;
    let summary = &report.summary;
    if !quiet {
        let _ = writeln!(
            out,
            "pgshift audit: {target} (PostgreSQL {}): {} tables read, {} with triggers ({} triggers, clones included)",
            report.server.version, summary.tables_read, summary.tables_with_triggers, summary.triggers
        );
        findings(report, &mut out);
        replica(report, &mut out);
    }
    let verdict = if report.bypass {
        paint(
            Tone::Bad,
            &format!(
                "{} finding{} let a write bypass a trigger",
                summary.bypasses,
                if summary.bypasses == 1 { "" } else { "s" }
            ),
        )
    } else {
        paint(Tone::Good, "no finding lets a write bypass a trigger")
    };
    let _ = writeln!(
        out,
        "\nverdict: {verdict}; {} note{} (exit {})",
        summary.notes,
        if summary.notes == 1 { "" } else { "s" },
        report.exit_code
    );
    out
}

fn findings(report: &AuditReport, out: &mut String) {
    let mut current = None;
    for finding in &report.findings {
        if current != Some(&finding.table) {
            current = Some(&finding.table);
            let kind = report
                .tables
                .iter()
                .find(|t| t.table == finding.table)
                .map(|t| match t.kind {
                    TableKind::Partitioned => " (partitioned)",
                    TableKind::Foreign => " (foreign)",
                    TableKind::Table => "",
                })
                .unwrap_or("");
            let _ = writeln!(
                out,
                "\n{}{kind}",
                paint(Tone::Heading, &finding.table.to_string())
            );
        }
        let (tone, label) = if finding.bypass {
            (Tone::Bad, "bypass")
        } else {
            (Tone::Note, "note  ")
        };
        let _ = writeln!(
            out,
            "  {} {}: {}",
            paint(tone, label),
            finding.kind.code(),
            finding.message
        );
        let _ = writeln!(
            out,
            "         {} {}",
            paint(Tone::Heading, "do this:"),
            finding.advice
        );
        for sql in &finding.fix {
            let _ = writeln!(out, "           {sql}");
        }
    }
}

fn replica(report: &AuditReport, out: &mut String) {
    let mut firing = Vec::new();
    for table in &report.tables {
        let names: Vec<String> = table
            .triggers
            .iter()
            .filter(|t| t.fires_in_replica)
            .map(|t| quote_ident(&t.name))
            .collect();
        if !names.is_empty() {
            firing.push(format!("{}: {}", table.table, names.join(", ")));
        }
    }
    let _ = writeln!(out, "\nfire in replica sessions (ALWAYS or REPLICA):");
    if firing.is_empty() {
        let _ = writeln!(out, "  none");
    }
    let shown = if verbosity() == Verbosity::Verbose {
        firing.len()
    } else {
        12
    };
    for line in firing.iter().take(shown) {
        let _ = writeln!(out, "  {line}");
    }
    if firing.len() > shown {
        let _ = writeln!(
            out,
            "  … and {} more tables (-v lists them)",
            firing.len() - shown
        );
    }
    let holders: Vec<String> = report
        .replica_role_holders
        .iter()
        .map(|r| quote_ident(r))
        .collect();
    let _ = writeln!(
        out,
        "may set session_replication_role (superusers, SET grants): {}",
        if holders.is_empty() {
            "none".to_owned()
        } else {
            holders.join(", ")
        }
    );
}
