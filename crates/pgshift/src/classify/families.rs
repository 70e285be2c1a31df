//! The locks statement families take on relations they do not name, measured against
//! `pg_locks` on PostgreSQL 14, 15 and 18 (`tests/lock_truth.rs`): each function
//! states, for one family, every related relation by role; [`Builder::related`] names
//! them when the facts can.

use pgshift_sql::QualifiedName;

use super::{Builder, Context, ObjectKind};
use crate::lock::LockMode::{
    AccessExclusive, AccessShare, RowExclusive, RowShare, ShareRowExclusive,
};
use crate::lock::{LockMode, ObjectClass, ObjectRef, Role};

fn relation(name: &QualifiedName) -> ObjectRef {
    ObjectRef::relation(name)
}

/// `DROP TABLE/VIEW/MATERIALIZED VIEW/SEQUENCE`: what is dropped with it (its
/// foreign keys lock their other tables, its partitions go too), the partitioned
/// parent (its partition bounds change) and the parent's default partition, and with
/// CASCADE every dependent.
pub(crate) fn drop_relation(
    b: &mut Builder,
    context: &Context<'_>,
    name: &QualifiedName,
    cascade: bool,
) {
    b.related(
        context,
        Role::DroppedWith,
        relation(name),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
    // A partition's parent, and the parent's default partition, whose implied bound
    // changes: named with live facts of both; otherwise the parent is stated with its
    // partitions (a bound that covers the default one).
    let live = context.facts.is_some_and(|f| !f.is_declared());
    let dropped = context.relation(name).filter(|_| live);
    let (known, default) = match dropped {
        Some(d) => match &d.parent {
            None => (true, None),
            Some(parent) => match context.relation(parent) {
                Some(p) => (true, p.default_partition().map(|x| x.name.clone())),
                None => (false, None),
            },
        },
        None => (false, None),
    };
    b.related(
        context,
        Role::Parent,
        relation(name),
        ObjectKind::Table,
        AccessExclusive,
        !known,
    );
    if let Some(default) = default {
        if dropped.is_none_or(|d| d.name != default) {
            b.lock(&default, ObjectKind::Table, AccessExclusive, false);
        }
    }
    if cascade {
        b.related(
            context,
            Role::CascadeDependents,
            relation(name),
            ObjectKind::Table,
            AccessExclusive,
            true,
        );
    }
}

/// `DROP TYPE/DOMAIN/SCHEMA … [CASCADE]` and other objects: what goes with it.
pub(crate) fn drop_object(b: &mut Builder, context: &Context<'_>, of: ObjectRef, cascade: bool) {
    if of.class == ObjectClass::Other {
        if cascade {
            b.related(
                context,
                Role::UnknownDependents,
                of,
                ObjectKind::Table,
                AccessExclusive,
                true,
            );
        }
        return;
    }
    b.related(
        context,
        Role::DroppedWith,
        of.clone(),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
    if cascade {
        b.related(
            context,
            Role::CascadeDependents,
            of,
            ObjectKind::Table,
            AccessExclusive,
            true,
        );
    }
}

/// `TRUNCATE … CASCADE`: every table referencing it by foreign key, at every level.
pub(crate) fn truncate_cascade(b: &mut Builder, context: &Context<'_>, table: &QualifiedName) {
    b.related(
        context,
        Role::ReferencingTables,
        relation(table),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
}

/// A new foreign key to `referenced` (`ADD FOREIGN KEY`, `REFERENCES` in `CREATE
/// TABLE` or `ADD COLUMN`): triggers on it and each of its partitions.
pub(crate) fn new_foreign_key(b: &mut Builder, referenced: &QualifiedName) {
    b.lock(referenced, ObjectKind::Table, ShareRowExclusive, true);
}

/// Creating or attaching a partition of `parent`: its foreign keys are cloned (their
/// referenced tables get triggers), the foreign keys referencing it get the new
/// partition (the referencing tables too), its default partition is scanned, and the
/// parent's own parent is read.
pub(crate) fn new_partition(b: &mut Builder, context: &Context<'_>, parent: &QualifiedName) {
    b.related(
        context,
        Role::ReferencedTables,
        relation(parent),
        ObjectKind::Table,
        ShareRowExclusive,
        true,
    );
    b.related(
        context,
        Role::ReferencingTables,
        relation(parent),
        ObjectKind::Table,
        ShareRowExclusive,
        true,
    );
    b.related(
        context,
        Role::DefaultPartition,
        relation(parent),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
    b.related(
        context,
        Role::Parent,
        relation(parent),
        ObjectKind::Table,
        AccessShare,
        false,
    );
}

/// The table being attached: its own partitions, at every level, are scanned or
/// checked under ACCESS EXCLUSIVE.
///
/// A foreign key the attached table already has that matches one of the parent's is
/// merged into the parent's: its action triggers on the referenced table are dropped,
/// under ACCESS EXCLUSIVE there. With live facts of both tables, the referenced tables
/// both have keys to are named; otherwise each table the attached one references is
/// stated.
pub(crate) fn attached_table(
    b: &mut Builder,
    context: &Context<'_>,
    parent: &QualifiedName,
    partition: &QualifiedName,
) {
    b.related(
        context,
        Role::Descendants,
        relation(partition),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
    let live = context.facts.is_some_and(|f| !f.is_declared());
    match (live, context.relation(parent), context.relation(partition)) {
        (true, Some(parent), Some(attached)) => {
            for key in &attached.foreign_keys_out {
                if parent
                    .foreign_keys_out
                    .iter()
                    .any(|p| p.referenced == key.referenced)
                {
                    b.lock(&key.referenced, ObjectKind::Table, AccessExclusive, false);
                }
            }
        }
        _ => b.related(
            context,
            Role::ReferencedTables,
            relation(partition),
            ObjectKind::Table,
            AccessExclusive,
            false,
        ),
    }
}

/// `DETACH PARTITION`: the foreign keys referencing the parent lose the partition
/// (ACCESS EXCLUSIVE on the referencing tables), the referenced ones are split, the
/// default partition's constraint changes, the detached table's own partitions are
/// locked, and the parent's parent is read.
pub(crate) fn detach_partition(
    b: &mut Builder,
    context: &Context<'_>,
    parent: &QualifiedName,
    partition: Option<&QualifiedName>,
) {
    b.related(
        context,
        Role::ReferencingTables,
        relation(parent),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
    b.related(
        context,
        Role::ReferencedTables,
        relation(parent),
        ObjectKind::Table,
        ShareRowExclusive,
        true,
    );
    b.related(
        context,
        Role::DefaultPartition,
        relation(parent),
        ObjectKind::Table,
        AccessExclusive,
        true,
    );
    b.related(
        context,
        Role::Parent,
        relation(parent),
        ObjectKind::Table,
        AccessShare,
        false,
    );
    if let Some(partition) = partition {
        b.related(
            context,
            Role::Descendants,
            relation(partition),
            ObjectKind::Table,
            AccessExclusive,
            true,
        );
    }
}

/// A data statement writing `target`: foreign-key checks read (`FOR KEY SHARE`) the
/// tables it references, cascading actions write the tables referencing it, its rules
/// act on their relations, its policies read theirs, a view writes its base
/// relations, and its triggers' functions may lock anything.
pub(crate) fn data_target(b: &mut Builder, context: &Context<'_>, target: &QualifiedName) {
    b.related(
        context,
        Role::ReferencedTables,
        relation(target),
        ObjectKind::Table,
        RowShare,
        true,
    );
    b.related(
        context,
        Role::ReferencingTables,
        relation(target),
        ObjectKind::Table,
        RowExclusive,
        true,
    );
    b.related(
        context,
        Role::RuleRelations,
        relation(target),
        ObjectKind::Table,
        RowExclusive,
        true,
    );
    b.related(
        context,
        Role::PolicyRelations,
        relation(target),
        ObjectKind::Table,
        AccessShare,
        true,
    );
    b.related(
        context,
        Role::ViewBaseRelations,
        relation(target),
        ObjectKind::Table,
        RowExclusive,
        true,
    );
    triggers(b, context, target);
}

/// A relation a statement reads in `mode`: a view's base relations in the same mode,
/// its policies' relations.
pub(crate) fn data_read(
    b: &mut Builder,
    context: &Context<'_>,
    read: &QualifiedName,
    mode: LockMode,
) {
    b.related(
        context,
        Role::ViewBaseRelations,
        relation(read),
        ObjectKind::Table,
        mode,
        true,
    );
    b.related(
        context,
        Role::PolicyRelations,
        relation(read),
        ObjectKind::Table,
        AccessShare,
        true,
    );
}

/// Whatever the functions of `table`'s triggers lock: open-ended, stated unless the
/// live facts show it has no user triggers.
fn triggers(b: &mut Builder, context: &Context<'_>, table: &QualifiedName) {
    let none = context.facts.is_some_and(|f| !f.is_declared())
        && context
            .relation(table)
            .is_some_and(|f| f.triggers.is_empty());
    let missing = matches!(context.lookup(table), crate::catalog::Lookup::Missing);
    if !none && !missing {
        b.related(
            context,
            Role::UnknownDependents,
            relation(table),
            ObjectKind::Table,
            AccessExclusive,
            true,
        );
    }
}

/// `LOCK TABLE` on a view: its base relations, through views at every level, in the
/// same mode.
pub(crate) fn lock_view(
    b: &mut Builder,
    context: &Context<'_>,
    view: &QualifiedName,
    mode: LockMode,
) {
    b.related(
        context,
        Role::ViewBaseRelations,
        relation(view),
        ObjectKind::Table,
        mode,
        true,
    );
}
