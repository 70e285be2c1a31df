//! `ALTER TABLE` (and `ALTER INDEX`, `ALTER VIEW`, …, which share its syntax tree):
//! one classification per subcommand, then one route for the statement.
//!
//! Lock levels follow PostgreSQL's `AlterTableGetLockLevel`: the statement takes the
//! strongest level among its subcommands, on the table and (without `ONLY`) on every
//! partition.

mod add_column;
mod columns;
mod constraints;
pub(crate) use constraints::unnamed_constraint_name;
mod foreign_keys;
mod options;
mod partitions;

use add_column::*;
use columns::*;
use constraints::*;
use foreign_keys::*;
use options::*;
use partitions::*;

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, ColumnDef, ConstrType, Constraint, ObjectType,
    RangeVar, TypeName,
};
use pgshift_sql::{NodeEnum, QualifiedName};

use crate::catalog::{Lookup, Persistence, RelationFacts, RelationKind};
use crate::classify::names::{range_var_name, strings};
use crate::classify::steps::{self, StepError};
use crate::classify::{families, Builder, Context, ObjectKind, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::{Route, Step};

/// The operation detail of a `DETACH PARTITION` whose table has a default partition.
pub const HAS_DEFAULT_PARTITION: &str = "the table has a default partition";

/// How one subcommand would run.
enum Plan {
    /// As written.
    AsWritten,
    /// Replaced by these steps.
    Sequence(Vec<Step>),
    /// Through copy-and-swap.
    CopyAndSwap,
    /// Not at all.
    Refused(RefusalCause, String),
}

/// One classified subcommand.
struct Piece {
    cmd: AlterTableCmd,
    mode: LockMode,
    plan: Plan,
}

/// What every subcommand classifier needs.
struct Target<'a> {
    relation: &'a RangeVar,
    table: QualifiedName,
    facts: Option<&'a RelationFacts>,
    context: &'a Context<'a>,
    /// The columns the statement's own `DROP COLUMN` subcommands drop: PostgreSQL runs
    /// the drops before the type changes of the same statement.
    dropped: Vec<String>,
}

impl Target<'_> {
    /// Whether the facts are declared by SQL (partial) rather than read live: then an
    /// absent column proves nothing.
    fn declared(&self) -> bool {
        self.context.facts.is_some_and(|facts| facts.is_declared())
    }

    /// Whether `column`'s absence from the facts proves nothing: the facts are
    /// declared, or an earlier statement of the input adds it (the live catalog does
    /// not have it yet; the server will when this runs).
    fn absence_unproven(&self, column: &str) -> bool {
        self.declared() || self.context.column_added_earlier(&self.table, column)
    }

    fn is_partitioned(&self) -> Option<bool> {
        self.facts
            .map(|facts| facts.kind == RelationKind::PartitionedTable)
    }
}

pub(crate) fn classify(stmt: &AlterTableStmt, context: &Context<'_>, b: &mut Builder) {
    let Some(relation) = &stmt.relation else {
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "ALTER without a relation name is not understood",
        );
        return;
    };
    let objtype = ObjectType::try_from(stmt.objtype).unwrap_or(ObjectType::Undefined);
    let table = range_var_name(relation);
    match objtype {
        ObjectType::ObjectTable | ObjectType::ObjectForeignTable => {}
        ObjectType::ObjectIndex => return alter_index(stmt, &table, context, b),
        _ => return alter_other_relation(stmt, objtype, &table, context, b),
    }
    b.statement("alter-table");
    if let Lookup::Missing = context.lookup(&table) {
        if !context.is_new(&table) && !stmt.missing_ok {
            b.refuse(
                RefusalCause::TableMissing,
                format!("table {table} does not exist in the search path"),
            );
        }
    }
    // The altered table is the statement's first lock (copy-and-swap takes its target
    // from it), before any table its subcommands reference; its mode is raised below.
    b.lock(&table, ObjectKind::Table, LockMode::AccessShare, false);
    let dropped = stmt
        .cmds
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AlterTableCmd(cmd))
                if AlterTableType::try_from(cmd.subtype) == Ok(AlterTableType::AtDropColumn) =>
            {
                Some(cmd.name.clone())
            }
            _ => None,
        })
        .collect();
    let target = Target {
        relation,
        facts: context.relation(&table),
        table,
        context,
        dropped,
    };
    // Each subcommand's heaviest work, from the operations it recorded: a part run as
    // written inside a safer sequence keeps it (INV: LK-6 judges steps by it).
    let mut works = Vec::new();
    let pieces: Vec<Piece> = stmt
        .cmds
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AlterTableCmd(cmd)) => {
                let before = b.operations.len();
                let piece = classify_cmd(cmd, &target, b);
                works.push(
                    b.operations[before..]
                        .iter()
                        .map(|op| op.work)
                        .max()
                        .unwrap_or(WorkClass::CatalogOnly),
                );
                Some(piece)
            }
            _ => None,
        })
        .collect();
    let mode = pieces
        .iter()
        .map(|piece| piece.mode)
        .max()
        .unwrap_or(LockMode::AccessExclusive);
    let version = context.server_version_num();
    let recursing: Vec<&Piece> = pieces
        .iter()
        .filter(|p| recurses_to_partitions(&p.cmd, version))
        .collect();
    let recurses = relation.inh && !recursing.is_empty()
        || pieces
            .iter()
            .any(|p| recurses_even_with_only(&p.cmd, version));
    b.lock(&target.table, ObjectKind::Table, mode, recurses);
    if let Some(partitions) = recursing
        .iter()
        .map(|p| partition_mode_of(p, version))
        .max()
    {
        b.partition_mode(&target.table, partitions);
    }
    assemble(pieces, &works, &target, b);
}

/// Whether a subcommand also applies to (and locks) every partition.
/// (PostgreSQL's `ATPrepCmd`: these subcommands act on the named table only; identity
/// changes recurse from PostgreSQL 17.)
fn recurses_to_partitions(cmd: &AlterTableCmd, version: Option<i32>) -> bool {
    use AlterTableType as T;
    match subtype(cmd) {
        T::AtAttachPartition
        | T::AtDetachPartition
        | T::AtDetachPartitionFinalize
        | T::AtSetCompression
        | T::AtReplicaIdentity
        | T::AtEnableRowSecurity
        | T::AtDisableRowSecurity
        | T::AtForceRowSecurity
        | T::AtNoForceRowSecurity
        | T::AtChangeOwner
        | T::AtSetTableSpace => false,
        T::AtAddIdentity | T::AtSetIdentity | T::AtDropIdentity => {
            version.is_none_or(|v| v >= 170000)
        }
        _ => true,
    }
}

/// Whether a subcommand locks the children even under `ONLY`: dropping a column or a
/// constraint updates the children's inherited copies, and a foreign key's clones on
/// partitions change with it. From PostgreSQL 18, where NOT NULL is a constraint of its
/// own, `DROP NOT NULL` and a `PRIMARY KEY` (which makes its columns NOT NULL) reach the
/// children's inherited NOT NULL constraints too (seen: ACCESS EXCLUSIVE on each child).
fn recurses_even_with_only(cmd: &AlterTableCmd, version: Option<i32>) -> bool {
    use AlterTableType as T;
    let from_18 = version.is_none_or(|v| v >= 180000);
    match subtype(cmd) {
        T::AtDropColumn | T::AtDropConstraint | T::AtAlterConstraint => true,
        T::AtDropNotNull => from_18,
        T::AtAddConstraint => {
            from_18 && constraint_def(cmd).is_some_and(|c| contype(c) == ConstrType::ConstrPrimary)
        }
        _ => false,
    }
}

/// The mode a recursing subcommand takes on each partition: adding a UNIQUE or PRIMARY
/// KEY builds each partition's index under SHARE before PostgreSQL 18; a PRIMARY KEY
/// also makes the children's columns NOT NULL (ACCESS EXCLUSIVE, seen on inheritance
/// children on 15).
fn partition_mode_of(piece: &Piece, version: Option<i32>) -> LockMode {
    if constraint_def(&piece.cmd).is_some_and(|c| contype(c) == ConstrType::ConstrPrimary) {
        return LockMode::AccessExclusive;
    }
    let builds_index = constraint_def(&piece.cmd).is_some_and(|c| {
        matches!(
            contype(c),
            ConstrType::ConstrUnique | ConstrType::ConstrPrimary
        ) && c.indexname.is_empty()
    });
    if builds_index && version.is_some_and(|v| v < 180000) {
        LockMode::Share
    } else {
        piece.mode
    }
}

fn subtype(cmd: &AlterTableCmd) -> AlterTableType {
    AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined)
}

/// One route for the statement from its subcommands' plans.
fn assemble(pieces: Vec<Piece>, works: &[WorkClass], target: &Target<'_>, b: &mut Builder) {
    if target.context.is_new(&target.table) {
        b.reason(format!(
            "{} is created earlier in the same input, so nobody else can be using it; it runs as written",
            target.table
        ));
        b.route(Route::Native);
        return;
    }
    if let Some((cause, message)) = pieces.iter().find_map(|p| match &p.plan {
        Plan::Refused(cause, message) => Some((*cause, message.clone())),
        _ => None,
    }) {
        b.refuse(cause, message);
        return;
    }
    if pieces.iter().any(|p| matches!(p.plan, Plan::CopyAndSwap)) {
        if let Some((cause, message)) = copy_and_swap_blocker(target) {
            b.refuse(cause, message);
        } else {
            b.route(Route::CopyAndSwap);
        }
        return;
    }
    if !pieces.iter().any(|p| matches!(p.plan, Plan::Sequence(_))) {
        b.route(Route::Native);
        return;
    }
    let mut all_steps = Vec::new();
    for (piece, work) in pieces.into_iter().zip(works) {
        match piece.plan {
            Plan::Sequence(steps) => all_steps.extend(steps),
            Plan::AsWritten => match steps::alter_table_one(
                target.relation,
                piece.cmd,
                "run this part of the statement as written",
                piece.mode,
                *work,
            ) {
                Ok(step) => all_steps.push(step),
                Err(StepError(message)) => {
                    b.refuse(RefusalCause::UnclassifiedStatement, message);
                    return;
                }
            },
            Plan::CopyAndSwap | Plan::Refused(..) => {}
        }
    }
    b.route(Route::NativeSequence { steps: all_steps });
}

/// Why copy-and-swap cannot take this table, when facts say so.
fn copy_and_swap_blocker(target: &Target<'_>) -> Option<(RefusalCause, String)> {
    let facts = target.facts?;
    if facts.persistence != Persistence::Permanent {
        return Some((
            RefusalCause::NonPermanentTable,
            format!(
                "{} is {}; copy-and-swap needs a permanent table",
                facts.name,
                if facts.persistence == Persistence::Unlogged {
                    "unlogged"
                } else {
                    "temporary"
                }
            ),
        ));
    }
    if facts.primary_key.is_none() {
        return Some((
            RefusalCause::NoUsableKey,
            format!(
                "{} has no primary key; copy-and-swap copies and verifies in key order and needs one",
                facts.name
            ),
        ));
    }
    None
}

fn classify_cmd(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    use AlterTableType as T;
    let table = Some(&target.table);
    let name = cmd.name.as_str();
    let piece = |mode: LockMode, plan: Plan| Piece {
        cmd: cmd.clone(),
        mode,
        plan,
    };
    let catalog_only = |b: &mut Builder, kind: OperationKind, mode: LockMode| {
        b.operation(kind, table, Some(name), WorkClass::CatalogOnly);
        piece(mode, Plan::AsWritten)
    };
    match subtype(cmd) {
        T::AtAddColumn => add_column(cmd, target, b),
        T::AtColumnDefault => {
            let kind = if cmd.def.is_some() {
                OperationKind::SetDefault
            } else {
                OperationKind::DropDefault
            };
            b.reason("changing a default affects only future rows: no rewrite");
            catalog_only(b, kind, LockMode::AccessExclusive)
        }
        T::AtDropNotNull => catalog_only(b, OperationKind::DropNotNull, LockMode::AccessExclusive),
        T::AtSetNotNull => set_not_null(cmd, target, b),
        T::AtSetExpression => set_expression(cmd, target, b),
        T::AtDropExpression => {
            b.reason("DROP EXPRESSION keeps the stored values: no rewrite");
            catalog_only(b, OperationKind::DropExpression, LockMode::AccessExclusive)
        }
        T::AtSetStatistics => catalog_only(
            b,
            OperationKind::SetStatistics,
            LockMode::ShareUpdateExclusive,
        ),
        T::AtSetOptions | T::AtResetOptions => catalog_only(
            b,
            OperationKind::SetColumnOptions,
            LockMode::ShareUpdateExclusive,
        ),
        T::AtSetStorage => catalog_only(b, OperationKind::SetStorage, LockMode::AccessExclusive),
        T::AtSetCompression => {
            b.reason("SET COMPRESSION applies to new values only: no rewrite");
            catalog_only(b, OperationKind::SetCompression, LockMode::AccessExclusive)
        }
        T::AtDropColumn => {
            if cmd.behavior == 2 {
                cascade(target, b);
            }
            b.operation(
                OperationKind::DropColumn,
                table,
                Some(name),
                WorkClass::CatalogOnly,
            )
            .destructive = true;
            b.reason("DROP COLUMN only marks the column dropped (no rewrite), but its data is gone for good");
            piece(LockMode::AccessExclusive, Plan::AsWritten)
        }
        T::AtAddConstraint => add_constraint(cmd, target, b),
        T::AtAlterConstraint => {
            alter_enforceability(cmd, target, b);
            catalog_only(b, OperationKind::AlterConstraint, LockMode::AccessExclusive)
        }
        T::AtValidateConstraint => validate_constraint(cmd, target, b),
        T::AtDropConstraint => drop_constraint(cmd, target, b),
        T::AtAlterColumnType => alter_column_type(cmd, target, b),
        T::AtChangeOwner => catalog_only(b, OperationKind::ChangeOwner, LockMode::AccessExclusive),
        T::AtClusterOn => catalog_only(b, OperationKind::ClusterOn, LockMode::ShareUpdateExclusive),
        T::AtDropCluster => catalog_only(
            b,
            OperationKind::SetWithoutCluster,
            LockMode::ShareUpdateExclusive,
        ),
        T::AtSetLogged | T::AtSetUnLogged => set_persistence(cmd, target, b),
        T::AtSetAccessMethod => rewrite(b, target, OperationKind::SetAccessMethod, cmd),
        T::AtSetTableSpace => set_tablespace(cmd, target, b),
        T::AtSetRelOptions | T::AtResetRelOptions => storage_parameters(cmd, target, b),
        T::AtEnableTrig
        | T::AtEnableAlwaysTrig
        | T::AtEnableReplicaTrig
        | T::AtDisableTrig
        | T::AtEnableTrigAll
        | T::AtDisableTrigAll
        | T::AtEnableTrigUser
        | T::AtDisableTrigUser => trigger_state(cmd, target, b),
        T::AtEnableRule | T::AtEnableAlwaysRule | T::AtEnableReplicaRule => {
            catalog_only(b, OperationKind::EnableRule, LockMode::AccessExclusive)
        }
        T::AtDisableRule => catalog_only(b, OperationKind::DisableRule, LockMode::AccessExclusive),
        T::AtAddInherit | T::AtDropInherit => {
            // The parent: SHARE UPDATE EXCLUSIVE to add the child, ACCESS SHARE to
            // remove it.
            if let Some(NodeEnum::RangeVar(parent)) =
                cmd.def.as_deref().and_then(|n| n.node.as_ref())
            {
                let adding = subtype(cmd) == T::AtAddInherit;
                b.lock(
                    &range_var_name(parent),
                    ObjectKind::Table,
                    if adding {
                        LockMode::ShareUpdateExclusive
                    } else {
                        LockMode::AccessShare
                    },
                    false,
                );
            }
            let kind = if subtype(cmd) == T::AtAddInherit {
                OperationKind::Inherit
            } else {
                OperationKind::NoInherit
            };
            catalog_only(b, kind, LockMode::AccessExclusive)
        }
        T::AtAddOf => {
            if let Some(NodeEnum::TypeName(type_name)) =
                cmd.def.as_deref().and_then(|n| n.node.as_ref())
            {
                if let Some(name) =
                    crate::classify::names::qualified_from_parts(&strings(&type_name.names), 0)
                {
                    b.lock(&name, ObjectKind::Type, LockMode::AccessShare, false);
                }
            }
            catalog_only(b, OperationKind::OfType, LockMode::AccessExclusive)
        }
        T::AtDropOf => catalog_only(b, OperationKind::NotOfType, LockMode::AccessExclusive),
        T::AtReplicaIdentity => {
            catalog_only(b, OperationKind::ReplicaIdentity, LockMode::AccessExclusive)
        }
        T::AtEnableRowSecurity => catalog_only(
            b,
            OperationKind::EnableRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtDisableRowSecurity => catalog_only(
            b,
            OperationKind::DisableRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtForceRowSecurity => catalog_only(
            b,
            OperationKind::ForceRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtNoForceRowSecurity => catalog_only(
            b,
            OperationKind::NoForceRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtAttachPartition => attach_partition(cmd, target, b),
        T::AtDetachPartition => detach_partition(cmd, target, b),
        T::AtDetachPartitionFinalize => {
            if let Some(partition) = partition_cmd(cmd).and_then(|p| p.name.as_ref()) {
                b.lock(
                    &range_var_name(partition),
                    ObjectKind::Table,
                    LockMode::AccessExclusive,
                    false,
                );
            }
            fk_targets_of(target, b);
            catalog_only(
                b,
                OperationKind::DetachPartitionFinalize,
                LockMode::ShareUpdateExclusive,
            )
        }
        T::AtAddIdentity => {
            b.reason(
                "ADD GENERATED AS IDENTITY on an existing column keeps its values: no rewrite",
            );
            catalog_only(b, OperationKind::AddIdentity, LockMode::AccessExclusive)
        }
        T::AtSetIdentity => catalog_only(b, OperationKind::SetIdentity, LockMode::AccessExclusive),
        T::AtDropIdentity => {
            catalog_only(b, OperationKind::DropIdentity, LockMode::AccessExclusive)
        }
        T::AtGenericOptions | T::AtAlterColumnGenericOptions => catalog_only(
            b,
            OperationKind::OtherCatalogChange,
            LockMode::AccessExclusive,
        ),
        // INV: RF-2 — an unclassified subcommand refuses the whole statement.
        other => {
            b.operation(
                OperationKind::Unclassified,
                table,
                Some(name),
                WorkClass::Opaque,
            );
            piece(
                LockMode::AccessExclusive,
                Plan::Refused(
                    RefusalCause::UnclassifiedStatement,
                    format!(
                        "ALTER TABLE subcommand {} is not classified",
                        other.as_str_name()
                    ),
                ),
            )
        }
    }
}

/// The locks of `DETACH PARTITION … FINALIZE` on related relations: those of a
/// detach.
fn fk_targets_of(target: &Target<'_>, b: &mut Builder) {
    families::detach_partition(b, target.context, &target.table, None);
}

/// `DROP … CASCADE` of a column or constraint: what depends on it goes too (stated for
/// the whole table, a bound).
fn cascade(target: &Target<'_>, b: &mut Builder) {
    b.related(
        target.context,
        crate::lock::Role::CascadeDependents,
        crate::lock::ObjectRef::relation(&target.table),
        ObjectKind::Table,
        LockMode::AccessExclusive,
        true,
    );
}

/// A subcommand that rewrites the table: copy-and-swap.
fn rewrite(
    b: &mut Builder,
    target: &Target<'_>,
    kind: OperationKind,
    cmd: &AlterTableCmd,
) -> Piece {
    b.operation(
        kind,
        Some(&target.table),
        Some(&cmd.name),
        WorkClass::Rewrite,
    );
    b.reason(format!(
        "rewrites every row of {} and rebuilds its indexes under ACCESS EXCLUSIVE; copy-and-swap does the same work without blocking",
        target.table
    ));
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan: Plan::CopyAndSwap,
    }
}

fn column_def(cmd: &AlterTableCmd) -> Option<&ColumnDef> {
    match cmd.def.as_deref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::ColumnDef(def)) => Some(def),
        _ => None,
    }
}

fn constraint_def(cmd: &AlterTableCmd) -> Option<&Constraint> {
    match cmd.def.as_deref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::Constraint(constraint)) => Some(constraint),
        _ => None,
    }
}

fn contype(constraint: &Constraint) -> ConstrType {
    ConstrType::try_from(constraint.contype).unwrap_or(ConstrType::Undefined)
}

/// The internal name and written modifiers of a type name (`varchar`, `[200]`).
pub(crate) fn type_name_parts(type_name: &TypeName) -> (String, Vec<i64>) {
    let names = strings(&type_name.names);
    let base = match names.as_slice() {
        [schema, name] if schema == "pg_catalog" => name.clone(),
        _ => names.join("."),
    };
    let modifiers = type_name
        .typmods
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AConst(constant)) => match &constant.val {
                Some(pgshift_sql::ast::a_const::Val::Ival(i)) => Some(i64::from(i.ival)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let base = if type_name.array_bounds.is_empty() {
        base
    } else {
        format!("{base}[]")
    };
    (base, modifiers)
}

/// `ALTER INDEX …`.
fn alter_index(
    stmt: &AlterTableStmt,
    index: &QualifiedName,
    context: &Context<'_>,
    b: &mut Builder,
) {
    b.statement("alter-index");
    let mut mode = LockMode::ShareUpdateExclusive;
    for cmd in stmt.cmds.iter().filter_map(|node| match &node.node {
        Some(NodeEnum::AlterTableCmd(cmd)) => Some(cmd),
        _ => None,
    }) {
        match subtype(cmd) {
            AlterTableType::AtAttachPartition => {
                let child = partition_cmd(cmd)
                    .and_then(|p| p.name.as_ref())
                    .map(range_var_name);
                if let Some(child) = &child {
                    b.lock(child, ObjectKind::Index, LockMode::AccessExclusive, false);
                    for index in [index, child] {
                        b.related(
                            context,
                            crate::lock::Role::IndexedTable,
                            crate::lock::ObjectRef::relation(index),
                            ObjectKind::Table,
                            LockMode::AccessShare,
                            false,
                        );
                    }
                }
                b.operation(
                    OperationKind::AttachIndexPartition,
                    Some(index),
                    child.as_ref().map(|c| c.name.as_str()),
                    WorkClass::CatalogOnly,
                );
            }
            AlterTableType::AtSetTableSpace => {
                mode = mode.max(LockMode::AccessExclusive);
                b.operation(
                    OperationKind::AlterIndex,
                    Some(index),
                    None,
                    WorkClass::ScanUnderLock,
                )
                .detail = Some("SET TABLESPACE copies the index".to_owned());
            }
            AlterTableType::AtSetRelOptions | AlterTableType::AtResetRelOptions => {
                // Only these index options are changed under SHARE UPDATE EXCLUSIVE
                // (seen on 15 and 18 for B-tree, GIN, GiST, BRIN, hash and SP-GiST);
                // `fastupdate`, `gin_pending_list_limit`, `buffering`,
                // `pages_per_range` and `autosummarize` take ACCESS EXCLUSIVE.
                let light = cmd
                    .def
                    .as_deref()
                    .map(crate::classify::names::list_items)
                    .unwrap_or_default()
                    .iter()
                    .all(|node| {
                        matches!(&node.node, Some(NodeEnum::DefElem(def))
                            if matches!(def.defname.as_str(), "fillfactor" | "deduplicate_items"))
                    });
                if !light {
                    mode = mode.max(LockMode::AccessExclusive);
                }
                b.operation(
                    OperationKind::AlterIndex,
                    Some(index),
                    None,
                    WorkClass::CatalogOnly,
                );
            }
            _ => {
                mode = mode.max(LockMode::AccessExclusive);
                b.operation(
                    OperationKind::AlterIndex,
                    Some(index),
                    None,
                    WorkClass::CatalogOnly,
                );
            }
        }
    }
    b.lock(index, ObjectKind::Index, mode, false);
}

/// `ALTER VIEW`, `ALTER MATERIALIZED VIEW`, `ALTER SEQUENCE` forms of `ALTER TABLE`.
fn alter_other_relation(
    stmt: &AlterTableStmt,
    objtype: ObjectType,
    name: &QualifiedName,
    context: &Context<'_>,
    b: &mut Builder,
) {
    let (statement, object) = match objtype {
        ObjectType::ObjectView => ("alter-view", ObjectKind::View),
        ObjectType::ObjectMatview => ("alter-materialized-view", ObjectKind::View),
        ObjectType::ObjectSequence => ("alter-sequence", ObjectKind::Sequence),
        ObjectType::ObjectType => ("alter-type", ObjectKind::Type),
        _ => ("alter-relation", ObjectKind::Table),
    };
    b.statement(statement);
    b.operation(
        OperationKind::OtherCatalogChange,
        Some(name),
        None,
        WorkClass::CatalogOnly,
    );
    b.lock(name, object, LockMode::AccessExclusive, false);
    // ALTER TYPE … ATTRIBUTE … CASCADE changes every typed table of the type.
    let cascades = stmt
        .cmds
        .iter()
        .any(|node| matches!(&node.node, Some(NodeEnum::AlterTableCmd(cmd)) if cmd.behavior == 2));
    if objtype == ObjectType::ObjectType && cascades {
        b.related(
            context,
            crate::lock::Role::TablesOfType,
            crate::lock::ObjectRef {
                class: crate::lock::ObjectClass::Type,
                name: name.clone(),
            },
            ObjectKind::Table,
            LockMode::AccessExclusive,
            true,
        );
    }
}
