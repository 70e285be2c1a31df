//! `pgshift diff` as text.

use std::fmt::Write as _;

use pgshift::desired::diff::{Action, Impact};
use pgshift::report::DiffReport;

/// The changes, what is destructive, the fingerprints, and the plan of them.
pub fn diff(report: &DiffReport, target: &str) -> String {
    let compared = &report.compared;
    let mut out = String::new();
    if compared.changes.is_empty() {
        let _ = writeln!(
            out,
            "No differences: {target} already has the desired schema (schemas managed: {}).",
            compared.managed_schemas.join(", ")
        );
        let _ = writeln!(out, "live schema {}", short(&compared.live_fingerprint));
        return out;
    }
    let destructive = compared.changes.iter().filter(|c| c.destructive).count();
    let _ = writeln!(
        out,
        "{} changes take {target} to the desired schema (schemas managed: {}); proven on a throwaway copy of the live schema to leave nothing to change.",
        compared.changes.len(),
        compared.managed_schemas.join(", ")
    );
    for change in &compared.changes {
        let action = match change.action {
            Action::Create => "create",
            Action::Drop => "drop",
            Action::Alter => "alter",
        };
        let mark = if change.destructive {
            "  DESTRUCTIVE"
        } else {
            ""
        };
        let _ = writeln!(out, "  {action:<6} {}{mark}", change.object);
    }
    if destructive > 0 {
        let _ = writeln!(
            out,
            "{destructive} of them may lose data or something the database holds (drops, type changes)."
        );
    }
    if let Some(review) = &compared.access_review {
        let _ = writeln!(
            out,
            "{} of them change who may read or write:",
            compared.access.len()
        );
        for access in &compared.access {
            let _ = writeln!(out, "  {}: {}", impact_words(access.impact), access.object);
        }
        let _ = writeln!(
            out,
            "access review {review} (pgshift apply --desired … --expect-rls-review it runs them)"
        );
    }
    let _ = writeln!(
        out,
        "live schema {}  plan {}",
        short(&compared.live_fingerprint),
        short(&compared.plan_fingerprint)
    );
    let _ = writeln!(
        out,
        "fingerprint {} (pgshift apply --desired … --expect-fingerprint it runs this plan only if neither the database nor the plan changed)",
        compared.fingerprint
    );
    if let Some(plan) = &report.plan {
        out.push('\n');
        out.push_str(&super::plan(plan, target));
    }
    out
}

fn short(fingerprint: &str) -> &str {
    fingerprint.get(..16).unwrap_or(fingerprint)
}

/// An access impact in words.
pub fn impact_words(impact: Impact) -> &'static str {
    match impact {
        Impact::MayWiden => "may widen access",
        Impact::MayNarrow => "may narrow access",
        Impact::Changed => "changed: may widen or narrow access",
    }
}
