//! Lookups over [`AuditFacts`]: relations by OID, a table's partitions, a trigger's
//! clones.

use std::collections::HashMap;

use pgshift_sql::QualifiedName;

use super::facts::{AuditFacts, AuditRelation, AuditTrigger};

/// Indexes over one read.
pub(super) struct Index<'a> {
    pub(super) facts: &'a AuditFacts,
    relations: HashMap<u32, &'a AuditRelation>,
    children: HashMap<u32, Vec<&'a AuditRelation>>,
    triggers: HashMap<u32, &'a AuditTrigger>,
    clones: HashMap<u32, Vec<&'a AuditTrigger>>,
}

impl<'a> Index<'a> {
    /// Builds the indexes.
    pub(super) fn new(facts: &'a AuditFacts) -> Self {
        let relations: HashMap<u32, &AuditRelation> =
            facts.relations.iter().map(|r| (r.oid, r)).collect();
        let mut children: HashMap<u32, Vec<&AuditRelation>> = HashMap::new();
        for relation in &facts.relations {
            if let Some(parent) = relation.parent {
                children.entry(parent).or_default().push(relation);
            }
        }
        for list in children.values_mut() {
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
        let triggers: HashMap<u32, &AuditTrigger> =
            facts.triggers.iter().map(|t| (t.oid, t)).collect();
        let mut clones: HashMap<u32, Vec<&AuditTrigger>> = HashMap::new();
        for trigger in &facts.triggers {
            if let Some(parent) = trigger.parent {
                clones.entry(parent).or_default().push(trigger);
            }
        }
        Index {
            facts,
            relations,
            children,
            triggers,
            clones,
        }
    }

    /// The relation of `oid`.
    pub(super) fn relation(&self, oid: u32) -> Option<&'a AuditRelation> {
        self.relations.get(&oid).copied()
    }

    /// The name of relation `oid` (an unknown OID renders as its number).
    pub(super) fn name(&self, oid: u32) -> QualifiedName {
        self.relation(oid)
            .map(|r| r.name.clone())
            .unwrap_or_else(|| QualifiedName::bare(oid.to_string()))
    }

    /// The direct partitions of `oid`, by name.
    pub(super) fn children(&self, oid: u32) -> &[&'a AuditRelation] {
        self.children.get(&oid).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every partition holding rows under `oid` (itself, when it holds rows).
    pub(super) fn leaves(&self, oid: u32) -> Vec<&'a AuditRelation> {
        let mut out = Vec::new();
        let mut stack = vec![oid];
        while let Some(next) = stack.pop() {
            if let Some(relation) = self.relation(next) {
                if relation.holds_rows() {
                    out.push(relation);
                }
            }
            stack.extend(self.children(next).iter().rev().map(|c| c.oid));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The trigger of `oid`.
    pub(super) fn trigger(&self, oid: u32) -> Option<&'a AuditTrigger> {
        self.triggers.get(&oid).copied()
    }

    /// The clone of trigger `parent` on relation `relation`.
    pub(super) fn clone_on(&self, parent: u32, relation: u32) -> Option<&'a AuditTrigger> {
        self.clones
            .get(&parent)?
            .iter()
            .find(|t| t.relation == relation)
            .copied()
    }

    /// Triggers that are no clone (or whose parent is not in the read): each is the
    /// root of a family of clones.
    pub(super) fn roots(&self) -> Vec<&'a AuditTrigger> {
        let mut roots: Vec<&AuditTrigger> = self
            .facts
            .triggers
            .iter()
            .filter(|t| t.parent.is_none_or(|p| self.trigger(p).is_none()))
            .collect();
        roots.sort_by(|a, b| {
            (self.name(a.relation), &a.name).cmp(&(self.name(b.relation), &b.name))
        });
        roots
    }
}
