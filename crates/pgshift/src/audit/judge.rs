//! Facts to findings: for each trigger family, the state that governs each partition
//! holding rows, the templates later partitions copy, and the partitions lacking a
//! clone. Pure: no I/O.

use pgshift_sql::{quote_ident, QualifiedName};

use super::facts::{AuditFacts, AuditTrigger};
use super::family::{Family, Leaf};
use super::finding::{Finding, FindingKind};
use super::index::Index;
use super::notes;
use crate::catalog::TriggerEnabled;

/// Every finding of one read, ordered by table, kind, trigger.
pub fn judge(facts: &AuditFacts) -> Vec<Finding> {
    let index = Index::new(facts);
    let mut findings = Vec::new();
    for root in index.roots() {
        let Some(family) = Family::walk(&index, root) else {
            continue;
        };
        renamed(&family, &mut findings);
        missing(&family, &mut findings);
        states(&family, &mut findings);
        templates(&family, &mut findings);
        notes::of_family(&index, &family, &mut findings);
    }
    notes::of_tables(&index, &mut findings);
    findings.sort_by(|a, b| {
        (&a.table, a.kind, &a.trigger, &a.relations).cmp(&(
            &b.table,
            b.kind,
            &b.trigger,
            &b.relations,
        ))
    });
    findings
}

/// `ALTER TABLE [ONLY] table ENABLE ALWAYS TRIGGER name;`
fn enable_always(table: &QualifiedName, trigger: &str, only: bool) -> String {
    format!(
        "ALTER TABLE {}{table} ENABLE ALWAYS TRIGGER {};",
        if only { "ONLY " } else { "" },
        quote_ident(trigger)
    )
}

/// `BEFORE INSERT OR UPDATE, row`.
pub(super) fn describe(trigger: &AuditTrigger) -> String {
    let timing = match trigger.definition.timing {
        super::facts::Timing::Before => "BEFORE",
        super::facts::Timing::After => "AFTER",
        super::facts::Timing::InsteadOf => "INSTEAD OF",
    };
    let kind = match (trigger.definition.constraint, trigger.definition.row) {
        (true, _) => "constraint trigger, row",
        (false, true) => "row",
        (false, false) => "statement",
    };
    format!("{timing} {}, {kind}", trigger.definition.events.phrase())
}

fn list(names: &[QualifiedName]) -> String {
    const SHOWN: usize = 6;
    let mut text: Vec<String> = names.iter().take(SHOWN).map(ToString::to_string).collect();
    if names.len() > SHOWN {
        text.push(format!("and {} more", names.len() - SHOWN));
    }
    text.join(", ")
}

/// Where the family's rows land, as a phrase: `on t` or `on 8 partitions of t (…)`.
fn place(family: &Family<'_>, leaves: &[&Leaf<'_>]) -> String {
    let names: Vec<QualifiedName> = leaves.iter().map(|l| l.relation.name.clone()).collect();
    if family.clones() {
        format!(
            "on {} partition{} of {} ({})",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            family.table.name,
            list(&names)
        )
    } else {
        format!("on {}", family.table.name)
    }
}

fn states(family: &Family<'_>, findings: &mut Vec<Finding>) {
    let root = family.root;
    for state in [
        TriggerEnabled::Origin,
        TriggerEnabled::Disabled,
        TriggerEnabled::Replica,
    ] {
        let leaves: Vec<&Leaf<'_>> = family
            .leaves
            .iter()
            .filter(|l| l.trigger.enabled == state)
            .collect();
        if leaves.is_empty() {
            continue;
        }
        let (kind, what, advice) = match state {
            TriggerEnabled::Origin => (
                FindingKind::SkippedInReplica,
                "is ORIGIN-enabled (the default): sessions with session_replication_role = replica skip it",
                "make it fire in every session (ENABLE ALWAYS); leave it ORIGIN only if every replica session here is a logical replication apply worker replaying writes its publisher already ran it for",
            ),
            TriggerEnabled::Disabled => (
                FindingKind::Disabled,
                "is disabled: no write fires it",
                "enable it in every session (ENABLE ALWAYS), or drop it if it is retired",
            ),
            _ => (
                FindingKind::ReplicaOnly,
                "is REPLICA-enabled: it fires only in sessions with session_replication_role = replica, and ordinary writes skip it",
                "make it fire in every session (ENABLE ALWAYS), unless it is meant only for replicated writes",
            ),
        };
        let relations = leaves.iter().map(|l| l.relation.name.clone()).collect();
        let fix = if family.uniform(state) {
            vec![enable_always(&family.table.name, &root.name, false)]
        } else {
            leaves
                .iter()
                .map(|l| enable_always(&l.relation.name, &l.trigger.name, false))
                .collect()
        };
        let message = format!(
            "trigger {} ({}) {} {what}",
            quote_ident(&root.name),
            describe(root),
            place(family, &leaves)
        );
        findings.push(
            Finding::new(
                kind,
                &family.table.name,
                Some(&root.name),
                relations,
                message,
            )
            .advise(advice, fix),
        );
    }
}

fn templates(family: &Family<'_>, findings: &mut Vec<Finding>) {
    for template in &family.templates {
        let state = template.trigger.enabled;
        if state == TriggerEnabled::Always {
            continue;
        }
        if family.uniform(state) && !family.leaves.is_empty() {
            // The leaves' own finding covers it, with the parent's recursive fix.
            continue;
        }
        let word = match state {
            TriggerEnabled::Origin => "ORIGIN (skipped by replica sessions)",
            TriggerEnabled::Replica => "REPLICA (skipped by ordinary sessions)",
            _ => "disabled",
        };
        let now = if template.leaves.is_empty() {
            " and it has no partition yet"
        } else {
            ""
        };
        let message = format!(
            "{}'s own entry of row trigger {} is {word}{now}: partitions created or attached later copy that state",
            template.relation.name,
            quote_ident(&template.trigger.name)
        );
        findings.push(
            Finding::new(
                FindingKind::ParentStateDiffers,
                &family.table.name,
                Some(&family.root.name),
                vec![template.relation.name.clone()],
                message,
            )
            .advise(
                "set the template's state alone (ONLY), so that new partitions fire it in every session",
                vec![enable_always(&template.relation.name, &template.trigger.name, true)],
            ),
        );
    }
}

fn missing(family: &Family<'_>, findings: &mut Vec<Finding>) {
    for gap in &family.missing {
        let relations: Vec<QualifiedName> = gap.leaves.iter().map(|l| l.name.clone()).collect();
        let message = format!(
            "partition {} of {} has no clone of row trigger {}: rows landing in {} (written through {} or directly) do not fire it",
            gap.partition.name,
            gap.parent.name,
            quote_ident(&family.root.name),
            if relations.is_empty() { "it".to_owned() } else { list(&relations) },
            family.table.name,
        );
        let fix = match &gap.partition.bound {
            Some(bound) => vec![
                format!(
                    "ALTER TABLE {} DETACH PARTITION {};",
                    gap.parent.name, gap.partition.name
                ),
                format!(
                    "ALTER TABLE {} ATTACH PARTITION {} {bound};",
                    gap.parent.name, gap.partition.name
                ),
            ],
            None => Vec::new(),
        };
        findings.push(
            Finding::new(
                FindingKind::MissingClone,
                &family.table.name,
                Some(&family.root.name),
                relations,
                message,
            )
            .advise(
                "detach and attach the partition again: DETACH drops its clones and ATTACH clones every row trigger of the parent again, in the parent's states (a per-partition state is lost). ATTACH takes ACCESS EXCLUSIVE on the partition and scans it unless a valid CHECK constraint implies its bound; add one first (NOT VALID, then VALIDATE)",
                fix,
            ),
        );
    }
}

fn renamed(family: &Family<'_>, findings: &mut Vec<Finding>) {
    for (partition, clone) in &family.renamed {
        let message = format!(
            "the clone of {} on {} is named {}: ALTER TABLE {} ENABLE/DISABLE TRIGGER {} finds clones by name on PostgreSQL 14 and fails on it",
            quote_ident(&family.root.name),
            partition.name,
            quote_ident(&clone.name),
            family.table.name,
            quote_ident(&family.root.name),
        );
        findings.push(
            Finding::new(
                FindingKind::CloneRenamed,
                &family.table.name,
                Some(&family.root.name),
                vec![partition.name.clone()],
                message,
            )
            .advise(
                "give the clone its parent's name again",
                vec![format!(
                    "ALTER TRIGGER {} ON {} RENAME TO {};",
                    quote_ident(&clone.name),
                    partition.name,
                    quote_ident(&family.root.name)
                )],
            ),
        );
    }
}
