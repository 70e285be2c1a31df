//! A trigger and its clones, walked down the partition tree: where each row lands,
//! which trigger state governs it there, and where a clone is missing.
//!
//! A row trigger on a partitioned table never fires itself: a row written through the
//! parent (or straight into a partition) fires the clone on the partition it lands
//! in, in that clone's state. The parent's own entry (and an intermediate
//! partition's clone) is the template PostgreSQL copies, state included, onto
//! partitions created or attached later. Clones are matched by `tgparentid`, never by
//! name (PostgreSQL 14 lets a clone be renamed).

use super::facts::{AuditRelation, AuditTrigger};
use super::index::Index;
use crate::catalog::TriggerEnabled;

/// A partition holding rows, and the trigger that fires for rows landing in it.
pub(super) struct Leaf<'a> {
    pub(super) relation: &'a AuditRelation,
    pub(super) trigger: &'a AuditTrigger,
}

/// A partitioned table of the family and its entry of the trigger (the template for
/// later partitions).
pub(super) struct Template<'a> {
    pub(super) relation: &'a AuditRelation,
    pub(super) trigger: &'a AuditTrigger,
    /// The leaves under it that have the trigger.
    pub(super) leaves: Vec<TriggerEnabled>,
}

/// A partition lacking its clone, with the partitioned table it should come from.
pub(super) struct Missing<'a> {
    pub(super) parent: &'a AuditRelation,
    pub(super) partition: &'a AuditRelation,
    /// The partitions holding rows under it (itself when it holds rows).
    pub(super) leaves: Vec<&'a AuditRelation>,
}

/// One family, walked.
pub(super) struct Family<'a> {
    pub(super) root: &'a AuditTrigger,
    pub(super) table: &'a AuditRelation,
    pub(super) leaves: Vec<Leaf<'a>>,
    pub(super) templates: Vec<Template<'a>>,
    pub(super) missing: Vec<Missing<'a>>,
    /// Clones whose name is not the root's: (partition, clone).
    pub(super) renamed: Vec<(&'a AuditRelation, &'a AuditTrigger)>,
}

impl<'a> Family<'a> {
    /// Walks the family of `root` (a trigger on a relation the read holds).
    // INV: AU-1 — clones are found by `tgparentid` on each partition, at every level.
    pub(super) fn walk(index: &Index<'a>, root: &'a AuditTrigger) -> Option<Family<'a>> {
        let table = index.relation(root.relation)?;
        let mut family = Family {
            root,
            table,
            leaves: Vec::new(),
            templates: Vec::new(),
            missing: Vec::new(),
            renamed: Vec::new(),
        };
        family.visit(index, table, root);
        family
            .leaves
            .sort_by(|a, b| a.relation.name.cmp(&b.relation.name));
        Some(family)
    }

    /// Whether the family clones: a row trigger on a partitioned table.
    pub(super) fn clones(&self) -> bool {
        self.root.definition.row && !self.table.holds_rows()
    }

    fn visit(&mut self, index: &Index<'a>, relation: &'a AuditRelation, trigger: &'a AuditTrigger) {
        if relation.holds_rows() || !trigger.definition.row {
            // A statement trigger on a partitioned table fires on that table itself.
            self.leaves.push(Leaf { relation, trigger });
            return;
        }
        let first_leaf = self.leaves.len();
        for child in index.children(relation.oid) {
            match index.clone_on(trigger.oid, child.oid) {
                Some(clone) => {
                    if clone.name != self.root.name {
                        self.renamed.push((child, clone));
                    }
                    self.visit(index, child, clone);
                }
                None => self.missing.push(Missing {
                    parent: relation,
                    partition: child,
                    leaves: index.leaves(child.oid),
                }),
            }
        }
        let leaves = self.leaves[first_leaf..]
            .iter()
            .map(|leaf| leaf.trigger.enabled)
            .collect();
        self.templates.push(Template {
            relation,
            trigger,
            leaves,
        });
    }

    /// Whether every leaf and template is in `state`.
    pub(super) fn uniform(&self, state: TriggerEnabled) -> bool {
        self.leaves.iter().all(|l| l.trigger.enabled == state)
            && self.templates.iter().all(|t| t.trigger.enabled == state)
            && self.renamed.is_empty()
    }
}
