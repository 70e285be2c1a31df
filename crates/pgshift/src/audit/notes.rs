//! Findings that are notes, not bypasses: how a trigger fires that a reader of the
//! schema may not expect (a partition-only trigger, a statement trigger on a
//! partitioned table, a deferrable constraint trigger, `TRUNCATE` and row `DELETE`
//! triggers, foreign keys in replica sessions).

use pgshift_sql::quote_ident;

use super::facts::TableKind;
use super::family::Family;
use super::finding::{Finding, FindingKind};
use super::index::Index;
use super::judge::describe;

/// The notes about one family's root trigger.
pub(super) fn of_family(index: &Index<'_>, family: &Family<'_>, findings: &mut Vec<Finding>) {
    let root = family.root;
    let table = &family.table.name;
    let name = quote_ident(&root.name);
    if let Some(parent) = family.table.parent {
        let parent = index.name(parent);
        findings.push(
            Finding::new(
                FindingKind::PartitionOnlyTrigger,
                table,
                Some(&root.name),
                vec![table.clone()],
                format!(
                    "trigger {name} ({}) is on partition {table} only: rows landing in the other partitions of {parent} do not fire it",
                    describe(root)
                ),
            )
            .advise(
                format!("if every row of {parent} must pass it, create it on {parent} instead (PostgreSQL clones it onto every partition, and onto partitions attached later); if it belongs to this partition alone, nothing to do"),
                Vec::new(),
            ),
        );
    }
    if !root.definition.row && family.table.kind == TableKind::Partitioned {
        findings.push(
            Finding::new(
                FindingKind::StatementTriggerOnParent,
                table,
                Some(&root.name),
                vec![table.clone()],
                format!(
                    "statement trigger {name} ({}) fires for statements naming {table}; statements naming one of its partitions directly do not fire it",
                    describe(root)
                ),
            )
            .advise(
                "if it must see every write, make it a row trigger (cloned onto every partition), or create it on each partition too",
                Vec::new(),
            ),
        );
    }
    if root.definition.constraint && root.definition.deferrable {
        let when = if root.definition.initially_deferred {
            "is INITIALLY DEFERRED: it runs at COMMIT, not at the write, so a write it rejects succeeds and the transaction fails at COMMIT"
        } else {
            "is DEFERRABLE: a transaction may postpone it to COMMIT with SET CONSTRAINTS … DEFERRED"
        };
        findings.push(
            Finding::new(
                FindingKind::DeferrableConstraintTrigger,
                table,
                Some(&root.name),
                vec![table.clone()],
                format!("constraint trigger {name} ({}) {when}", describe(root)),
            )
            .advise(
                "nothing to do for the invariant (it still runs before the transaction commits, and its enable state is judged like any trigger's); writers must expect its error at COMMIT",
                Vec::new(),
            ),
        );
    }
}

/// The notes about whole tables: `TRUNCATE` and row `DELETE` triggers, foreign keys.
pub(super) fn of_tables(index: &Index<'_>, findings: &mut Vec<Finding>) {
    let roots = index.roots();
    for relation in &index.facts.relations {
        let own: Vec<_> = roots
            .iter()
            .filter(|t| t.relation == relation.oid)
            .collect();
        let deletes: Vec<String> = own
            .iter()
            .filter(|t| t.definition.row && t.definition.events.delete)
            .map(|t| quote_ident(&t.name))
            .collect();
        let guarded = own.iter().any(|t| t.definition.events.truncate);
        if !deletes.is_empty() && !guarded {
            findings.push(
                Finding::new(
                    FindingKind::TruncateSkipsDeleteTriggers,
                    &relation.name,
                    None,
                    vec![relation.name.clone()],
                    format!(
                        "{} has row DELETE trigger{} {} and no TRUNCATE trigger: TRUNCATE removes rows without firing {}",
                        relation.name,
                        if deletes.len() == 1 { "" } else { "s" },
                        deletes.join(", "),
                        if deletes.len() == 1 { "it" } else { "them" },
                    ),
                )
                .advise(
                    "if rows must never go without it, add a BEFORE TRUNCATE … FOR EACH STATEMENT trigger that raises, or revoke TRUNCATE from the roles that write",
                    Vec::new(),
                ),
            );
        }
        if !relation.foreign_keys.is_empty() {
            let keys: Vec<String> = relation
                .foreign_keys
                .iter()
                .map(|k| quote_ident(k))
                .collect();
            let holders = if index.facts.replica_role_holders.is_empty() {
                "none found".to_owned()
            } else {
                index
                    .facts
                    .replica_role_holders
                    .iter()
                    .map(|r| quote_ident(r))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            findings.push(
                Finding::new(
                    FindingKind::ForeignKeysSkippedInReplica,
                    &relation.name,
                    None,
                    vec![relation.name.clone()],
                    format!(
                        "foreign key{} {} of {} {} checked by internal ORIGIN triggers: sessions with session_replication_role = replica write rows {} would reject",
                        if keys.len() == 1 { "" } else { "s" },
                        keys.join(", "),
                        relation.name,
                        if keys.len() == 1 { "is" } else { "are" },
                        if keys.len() == 1 { "it" } else { "they" },
                    ),
                )
                .advise(
                    format!("keep the roles that may set session_replication_role few (now: {holders}); the internal triggers are not meant to be re-enabled"),
                    Vec::new(),
                ),
            );
        }
    }
}
