//! Which relations stand in a [`Role`] to an object a statement names, as far as the
//! facts know: the one place roles become names.
//!
//! Live facts (a server's snapshot) are complete: the members they list are all there
//! are. Declared facts (a schema file) may be partial: the members they list are named
//! and the role is stated as well. Without facts, or for an open-ended role, only the
//! role is stated.

use std::collections::BTreeSet;

use pgshift_sql::QualifiedName;

use super::{Context, LockTaken, ObjectKind};
use crate::catalog::{Lookup, RelatedFacts, RelationFacts, RelationKind};
use crate::lock::{ObjectClass, ObjectRef, Role};

/// One member of a role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) name: QualifiedName,
    pub(crate) kind: RelationKind,
}

/// What the facts say about a role's members.
pub(crate) enum Members {
    /// These, and no others.
    Complete(Vec<Member>),
    /// At least these.
    Partial(Vec<Member>),
    /// Not known.
    Unknown,
}

impl Members {
    pub(crate) fn named(&self) -> &[Member] {
        match self {
            Members::Complete(members) | Members::Partial(members) => members,
            Members::Unknown => &[],
        }
    }

    pub(crate) fn is_complete(&self) -> bool {
        matches!(self, Members::Complete(_))
    }
}

/// The object kind a lock on a relation of `kind` is stated with.
pub(crate) fn object_kind(kind: RelationKind) -> Option<ObjectKind> {
    match kind {
        RelationKind::Table | RelationKind::PartitionedTable | RelationKind::ForeignTable => {
            Some(ObjectKind::Table)
        }
        RelationKind::Index | RelationKind::PartitionedIndex => Some(ObjectKind::Index),
        RelationKind::View | RelationKind::MaterializedView => Some(ObjectKind::View),
        RelationKind::Sequence => Some(ObjectKind::Sequence),
        RelationKind::Other => Some(ObjectKind::Type),
    }
}

/// The members of `role` relative to `of`.
pub(crate) fn members(context: &Context<'_>, role: Role, of: &ObjectRef) -> Members {
    if role == Role::UnknownDependents {
        return Members::Unknown;
    }
    let Some(facts) = context.facts else {
        return Members::Unknown;
    };
    if of.class == ObjectClass::Other {
        return Members::Unknown;
    }
    if of.class != ObjectClass::Relation {
        if facts.is_declared() {
            return Members::Unknown;
        }
        return match facts.object(of) {
            Some(object) if object.found => Members::Complete(listed(&object.related, role)),
            Some(_) => Members::Complete(Vec::new()),
            None => Members::Unknown,
        };
    }
    match context.lookup(&of.name) {
        Lookup::Found(relation) if facts.is_declared() => match declared(relation, role) {
            Some(members) => Members::Partial(members),
            None => Members::Unknown,
        },
        Lookup::Found(relation) => Members::Complete(live(relation, role)),
        Lookup::Missing => Members::Complete(Vec::new()),
        Lookup::Unknown => Members::Unknown,
    }
}

/// The members a schema file can declare.
fn declared(relation: &RelationFacts, role: Role) -> Option<Vec<Member>> {
    match role {
        Role::DefaultPartition
        | Role::ReferencedTables
        | Role::Parent
        | Role::Descendants
        | Role::IndexedTable => Some(from_fields(relation, role)),
        _ => None,
    }
}

/// The members live facts list.
fn live(relation: &RelationFacts, role: Role) -> Vec<Member> {
    let mut members = from_fields(relation, role);
    for member in listed(&relation.related, role) {
        if !members.contains(&member) {
            members.push(member);
        }
    }
    // A table whose foreign key references itself is its own partner.
    if !matches!(role, Role::ReferencedTables | Role::ReferencingTables) {
        members.retain(|m| m.name != relation.name);
    }
    members
}

/// The members the relation's own fields say.
fn from_fields(relation: &RelationFacts, role: Role) -> Vec<Member> {
    let table = |name: &QualifiedName| Member {
        name: name.clone(),
        kind: RelationKind::Table,
    };
    let mut seen = BTreeSet::new();
    let mut unique = |members: Vec<Member>| -> Vec<Member> {
        members
            .into_iter()
            .filter(|m| seen.insert(m.name.clone()))
            .collect()
    };
    match role {
        Role::Parent => unique(relation.parent.iter().map(table).collect()),
        Role::Descendants => unique(
            relation
                .partitions
                .iter()
                .map(|p| Member {
                    name: p.name.clone(),
                    kind: if p.is_partitioned {
                        RelationKind::PartitionedTable
                    } else {
                        RelationKind::Table
                    },
                })
                .collect(),
        ),
        Role::DefaultPartition => unique(
            relation
                .default_partition()
                .map(|p| table(&p.name))
                .into_iter()
                .collect(),
        ),
        Role::ReferencedTables => unique(
            relation
                .foreign_keys_out
                .iter()
                .map(|fk| table(&fk.referenced))
                .collect(),
        ),
        Role::ReferencingTables => unique(
            relation
                .foreign_keys_in
                .iter()
                .map(|fk| table(&fk.referencing))
                .collect(),
        ),
        Role::IndexedTable => unique(relation.indexed_table.iter().map(table).collect()),
        _ => Vec::new(),
    }
}

fn listed(related: &[RelatedFacts], role: Role) -> Vec<Member> {
    let mut members: Vec<Member> = Vec::new();
    for facts in related.iter().filter(|r| r.role == role) {
        let member = Member {
            name: facts.name.clone(),
            kind: facts.kind,
        };
        if !members.contains(&member) {
            members.push(member);
        }
    }
    members
}

/// Merges locks that name the same relation once written names are resolved to the
/// facts' qualified names: the strongest mode, and a statement's own name wins over a
/// related one.
pub(crate) fn merge_resolved(locks: Vec<LockTaken>, context: &Context<'_>) -> Vec<LockTaken> {
    let resolved = |name: &QualifiedName| -> QualifiedName {
        context
            .relation(name)
            .map_or_else(|| name.clone(), |facts| facts.name.clone())
    };
    let mut merged: Vec<(QualifiedName, LockTaken)> = Vec::new();
    for lock in locks {
        let key = resolved(&lock.relation);
        match merged.iter_mut().find(|(k, _)| *k == key) {
            Some((_, existing)) => absorb(existing, lock),
            None => merged.push((key, lock)),
        }
    }
    let (direct, related): (Vec<LockTaken>, Vec<LockTaken>) = merged
        .into_iter()
        .map(|(_, lock)| lock)
        .partition(|lock| lock.related_to.is_none());
    direct.into_iter().chain(related).collect()
}

/// Folds `other` (a lock on the same relation) into `lock`, keeping the strongest
/// mode on the relation, on its partitions and on its indexes.
fn absorb(lock: &mut LockTaken, other: LockTaken) {
    let partitions = |l: &LockTaken| l.recurses.then(|| l.partition_mode.unwrap_or(l.mode));
    let indexes = |l: &LockTaken| l.index_mode.unwrap_or(l.mode);
    let partition_mode = partitions(lock).max(partitions(&other));
    let index_mode = indexes(lock).max(indexes(&other));
    lock.mode = lock.mode.max(other.mode);
    lock.recurses |= other.recurses;
    lock.partition_mode = partition_mode.filter(|m| *m != lock.mode);
    lock.index_mode = Some(index_mode).filter(|m| *m > lock.mode);
    if other.related_to.is_none() {
        lock.related_to = None;
    }
}
