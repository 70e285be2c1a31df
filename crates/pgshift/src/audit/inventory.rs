//! Every trigger as a user needs to see it: on which table, in which state, and
//! whether it fires in an ordinary session and in a replica session.

use pgshift_sql::QualifiedName;
use serde::Serialize;

use super::facts::{fires, Definition, TableKind};
use super::index::Index;
use crate::catalog::TriggerEnabled;

/// One table's triggers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableTriggers {
    /// The table.
    pub table: QualifiedName,
    /// Its kind.
    pub kind: TableKind,
    /// The partitioned table it is a partition of.
    pub partition_of: Option<QualifiedName>,
    /// Its triggers, by name.
    pub triggers: Vec<TriggerEntry>,
}

/// One trigger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TriggerEntry {
    /// Its name.
    pub name: String,
    /// `tgenabled`.
    pub enabled: TriggerEnabled,
    /// What it is.
    #[serde(flatten)]
    pub definition: Definition,
    /// The table of the trigger it is a clone of.
    pub clone_of: Option<QualifiedName>,
    /// A row trigger on a partitioned table: it does not fire itself (its clones do),
    /// and partitions created or attached later copy its state.
    pub template: bool,
    /// Whether it fires for writes in an ordinary session (`origin`, `local`);
    /// `false` for a template.
    pub fires_in_origin: bool,
    /// Whether it fires for writes in a `session_replication_role = replica` session;
    /// `false` for a template.
    pub fires_in_replica: bool,
}

/// The tables that have triggers, by name, with their triggers.
pub(super) fn inventory(index: &Index<'_>) -> Vec<TableTriggers> {
    let mut tables = Vec::new();
    for relation in &index.facts.relations {
        let mut triggers: Vec<TriggerEntry> = index
            .facts
            .triggers
            .iter()
            .filter(|t| t.relation == relation.oid)
            .map(|t| {
                let template = t.definition.row && relation.kind == TableKind::Partitioned;
                TriggerEntry {
                    name: t.name.clone(),
                    enabled: t.enabled,
                    definition: t.definition.clone(),
                    clone_of: t
                        .parent
                        .and_then(|p| index.trigger(p))
                        .map(|p| index.name(p.relation)),
                    template,
                    fires_in_origin: !template && fires(t.enabled, false),
                    fires_in_replica: !template && fires(t.enabled, true),
                }
            })
            .collect();
        if triggers.is_empty() {
            continue;
        }
        triggers.sort_by(|a, b| a.name.cmp(&b.name));
        tables.push(TableTriggers {
            table: relation.name.clone(),
            kind: relation.kind,
            partition_of: relation.parent.map(|p| index.name(p)),
            triggers,
        });
    }
    tables.sort_by(|a, b| a.table.cmp(&b.table));
    tables
}
