//! Whole-table statements: `CREATE TABLE`, `DROP`, `TRUNCATE`, `RENAME`, `SET SCHEMA`,
//! `VACUUM`, `CLUSTER`, `LOCK TABLE`.

use pgshift_sql::ast::{
    AlterObjectSchemaStmt, ClusterStmt, ConstrType, CreateStmt, CreateTableAsStmt, DropStmt,
    LockStmt, Node, ObjectType, RenameStmt, TruncateStmt, VacuumStmt,
};
use pgshift_sql::{NodeEnum, QualifiedName};

use super::dml::referenced_relations;
use super::names::{list_items, qualified_from_parts, range_var_name, strings};
use super::{
    families, index, trigger, Builder, Context, Effect, ObjectKind, OperationKind, WorkClass,
};
use crate::catalog::{Lookup, RelationFacts, RelationKind};
use crate::lock::{LockMode, ObjectClass, ObjectRef, Role};
use crate::refusal::RefusalCause;
use crate::route::Route;

pub(crate) fn classify_create(stmt: &CreateStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("create-table");
    let Some(relation) = &stmt.relation else {
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "CREATE TABLE without a name",
        );
        return;
    };
    let table = range_var_name(relation);
    let partition_of = stmt.partbound.is_some();
    for parent in stmt
        .inh_relations
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::RangeVar(rv)) => Some(range_var_name(rv)),
            _ => None,
        })
    {
        let mode = if partition_of {
            LockMode::AccessExclusive
        } else {
            LockMode::ShareUpdateExclusive
        };
        b.lock(&parent, ObjectKind::Table, mode, false);
        if partition_of {
            b.reason(format!(
                "CREATE TABLE … PARTITION OF takes ACCESS EXCLUSIVE on {parent}: every query on it waits while it waits for and holds the lock"
            ));
            families::new_partition(b, context, &parent);
            if let Some(default) = context
                .relation(&parent)
                .and_then(RelationFacts::default_partition)
            {
                b.reason(format!(
                    "the default partition {} is scanned under ACCESS EXCLUSIVE to check none of its rows belong to the new partition",
                    default.name
                ));
            }
        }
    }
    for element in &stmt.table_elts {
        foreign_key_locks(element, b);
    }
    if let Some(type_name) = &stmt.of_typename {
        if let Some(name) = qualified_from_parts(&strings(&type_name.names), 0) {
            b.lock(&name, ObjectKind::Type, LockMode::AccessShare, false);
        }
    }
    let kind = if partition_of {
        OperationKind::CreatePartition
    } else {
        OperationKind::CreateTable
    };
    b.operation(kind, Some(&table), None, WorkClass::CatalogOnly);
    if creates_new(stmt.if_not_exists, &table, context, b) {
        b.effect(Effect::Creates { relation: table });
    }
}

/// Whether a `CREATE … [IF NOT EXISTS]` makes a new relation that later statements
/// may treat as nobody else's. Without `IF NOT EXISTS` it does (or fails). With it, the
/// relation is new only when the facts say it is missing (or an earlier statement of
/// the input created it): an existing relation is left as it is, so the statements
/// after it work on the existing one. With no facts that is unknown; with declared
/// facts (lint: the earlier files and `--schema`), a relation none declares is new.
pub(crate) fn creates_new(
    if_not_exists: bool,
    name: &QualifiedName,
    context: &Context<'_>,
    b: &mut Builder,
) -> bool {
    if !if_not_exists || context.is_new(name) {
        return true;
    }
    match context.lookup(name) {
        Lookup::Missing => true,
        Lookup::Found(_) => {
            b.reason(format!(
                "{name} already exists, so IF NOT EXISTS leaves it as it is: the statements after this one work on the existing relation"
            ));
            false
        }
        // Lint's facts are what the files before this one and `--schema` declare: the
        // history the files write. A relation none of them declares is created here.
        Lookup::Unknown if context.facts.is_some_and(|f| f.is_declared()) => {
            b.reason(format!(
                "IF NOT EXISTS: no earlier file (nor --schema) declares {name}, so it is judged new here; on a database that already has it, the statements after this one work on the existing relation (plan against the server to know)"
            ));
            true
        }
        Lookup::Unknown => {
            b.reason(format!(
                "IF NOT EXISTS: {name} may already exist, so the statements after this one are judged as working on an existing relation (plan against the server to know)"
            ));
            false
        }
    }
}

/// Foreign keys declared in a new table lock the referenced tables in SHARE ROW
/// EXCLUSIVE (they get triggers).
fn foreign_key_locks(element: &Node, b: &mut Builder) {
    let constraints: Vec<&Node> = match &element.node {
        Some(NodeEnum::ColumnDef(def)) => def.constraints.iter().collect(),
        Some(NodeEnum::Constraint(_)) => vec![element],
        Some(NodeEnum::TableLikeClause(like)) => {
            if let Some(source) = &like.relation {
                b.lock(
                    &range_var_name(source),
                    ObjectKind::Table,
                    LockMode::AccessShare,
                    false,
                );
            }
            Vec::new()
        }
        _ => Vec::new(),
    };
    for node in constraints {
        if let Some(NodeEnum::Constraint(constraint)) = &node.node {
            if constraint.contype == ConstrType::ConstrForeign as i32 {
                if let Some(pktable) = &constraint.pktable {
                    families::new_foreign_key(b, &range_var_name(pktable));
                }
            }
        }
    }
}

pub(crate) fn classify_create_as(stmt: &CreateTableAsStmt, context: &Context<'_>, b: &mut Builder) {
    let materialized = stmt.objtype == ObjectType::ObjectMatview as i32;
    b.statement(if materialized {
        "create-materialized-view"
    } else {
        "create-table-as"
    });
    let target = stmt
        .into
        .as_ref()
        .and_then(|into| into.rel.as_ref())
        .map(range_var_name);
    if let Some(query) = &stmt.query {
        for relation in referenced_relations(query) {
            b.lock(&relation, ObjectKind::Table, LockMode::AccessShare, true);
            families::data_read(b, context, &relation, LockMode::AccessShare);
        }
    }
    let kind = if materialized {
        OperationKind::CreateMaterializedView
    } else {
        OperationKind::CreateTableAs
    };
    b.operation(kind, target.as_ref(), None, WorkClass::DataChange);
    if let Some(target) = target {
        if creates_new(stmt.if_not_exists, &target, context, b) {
            b.effect(Effect::Creates { relation: target });
        }
    }
}

pub(crate) fn classify_drop(stmt: &DropStmt, context: &Context<'_>, b: &mut Builder) {
    let remove = ObjectType::try_from(stmt.remove_type).unwrap_or(ObjectType::Undefined);
    match remove {
        ObjectType::ObjectIndex => return index::classify_drop(stmt, context, b),
        ObjectType::ObjectTrigger => return trigger::classify_drop(stmt, b),
        _ => {}
    }
    let names: Vec<Vec<String>> = stmt.objects.iter().map(object_name_parts).collect();
    let cascade = stmt.behavior == 2;
    let (statement, object, kind, destructive) = match remove {
        ObjectType::ObjectTable | ObjectType::ObjectForeignTable => (
            "drop-table",
            Some(ObjectKind::Table),
            OperationKind::DropTable,
            true,
        ),
        ObjectType::ObjectView => (
            "drop-view",
            Some(ObjectKind::View),
            OperationKind::DropView,
            false,
        ),
        ObjectType::ObjectMatview => (
            "drop-materialized-view",
            Some(ObjectKind::View),
            OperationKind::DropView,
            true,
        ),
        ObjectType::ObjectSequence => (
            "drop-sequence",
            Some(ObjectKind::Sequence),
            OperationKind::DropSequence,
            true,
        ),
        ObjectType::ObjectFunction | ObjectType::ObjectProcedure | ObjectType::ObjectRoutine => {
            ("drop-function", None, OperationKind::DropFunction, false)
        }
        ObjectType::ObjectPolicy => {
            b.statement("drop-policy");
            for parts in &names {
                if let Some(table) = qualified_from_parts(parts, 1) {
                    b.lock(&table, ObjectKind::Table, LockMode::AccessExclusive, false);
                    b.operation(
                        OperationKind::DropPolicy,
                        Some(&table),
                        parts.last().map(String::as_str),
                        WorkClass::CatalogOnly,
                    );
                }
            }
            return;
        }
        ObjectType::ObjectRule => {
            b.statement("drop-rule");
            for parts in &names {
                if let Some(table) = qualified_from_parts(parts, 1) {
                    b.lock(&table, ObjectKind::Table, LockMode::AccessExclusive, false);
                    b.operation(
                        OperationKind::OtherCatalogChange,
                        Some(&table),
                        parts.last().map(String::as_str),
                        WorkClass::CatalogOnly,
                    );
                    if cascade {
                        families::drop_relation(b, context, &table, true);
                    }
                }
            }
            return;
        }
        ObjectType::ObjectSchema => (
            "drop-schema",
            None,
            OperationKind::OtherCatalogChange,
            stmt.behavior == 2,
        ),
        _ => ("drop", None, OperationKind::OtherCatalogChange, false),
    };
    let class = match remove {
        ObjectType::ObjectType | ObjectType::ObjectDomain => ObjectClass::Type,
        ObjectType::ObjectSchema => ObjectClass::Schema,
        ObjectType::ObjectStatisticExt => ObjectClass::Statistics,
        ObjectType::ObjectPublication => ObjectClass::Publication,
        _ => ObjectClass::Other,
    };
    b.statement(statement);
    for parts in &names {
        let name = qualified_from_parts(parts, 0);
        if let (Some(object), Some(name)) = (object, &name) {
            b.lock(
                name,
                object,
                LockMode::AccessExclusive,
                object == ObjectKind::Table,
            );
            families::drop_relation(b, context, name, cascade);
            if let Lookup::Missing = context.lookup(name) {
                if !stmt.missing_ok && !context.is_new(name) {
                    b.refuse(
                        RefusalCause::TableMissing,
                        format!("{name} does not exist in the search path"),
                    );
                }
            }
        }
        if let (None, Some(name)) = (object, &name) {
            let of = ObjectRef {
                class,
                name: name.clone(),
            };
            match class {
                ObjectClass::Statistics => b.related(
                    context,
                    Role::StatisticsTable,
                    of,
                    ObjectKind::Table,
                    LockMode::ShareUpdateExclusive,
                    false,
                ),
                ObjectClass::Publication => {}
                _ => families::drop_object(b, context, of, cascade),
            }
        }
        let label = name
            .as_ref()
            .map(|n| n.name.clone())
            .or_else(|| parts.last().cloned());
        b.operation(
            kind,
            name.as_ref().filter(|_| object.is_some()),
            label.as_deref(),
            WorkClass::CatalogOnly,
        )
        .destructive = destructive;
    }
    if destructive {
        b.reason("dropping it destroys its data; no later migration can bring it back");
    }
}

/// The name parts of a dropped object: a list of names, a type name, or a bare name
/// (a schema, a publication).
fn object_name_parts(node: &Node) -> Vec<String> {
    match &node.node {
        Some(NodeEnum::TypeName(type_name)) => strings(&type_name.names),
        Some(NodeEnum::String(name)) => vec![name.sval.clone()],
        Some(NodeEnum::ObjectWithArgs(function)) => strings(&function.objname),
        _ => strings(list_items(node)),
    }
}

pub(crate) fn classify_truncate(stmt: &TruncateStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("truncate");
    for relation in stmt.relations.iter().filter_map(|node| match &node.node {
        Some(NodeEnum::RangeVar(rv)) => Some(rv),
        _ => None,
    }) {
        let table = range_var_name(relation);
        b.lock(
            &table,
            ObjectKind::Table,
            LockMode::AccessExclusive,
            relation.inh,
        );
        b.index_mode(&table, LockMode::AccessExclusive);
        if stmt.behavior == 2 {
            families::truncate_cascade(b, context, &table);
        }
        b.operation(
            OperationKind::Truncate,
            Some(&table),
            None,
            WorkClass::DataChange,
        )
        .destructive = true;
    }
    b.reason("TRUNCATE removes every row under ACCESS EXCLUSIVE; the data is gone for good");
}

pub(crate) fn classify_rename(stmt: &RenameStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("rename");
    let rename = ObjectType::try_from(stmt.rename_type).unwrap_or(ObjectType::Undefined);
    let relation = stmt.relation.as_ref().map(range_var_name);
    let recurses = stmt.relation.as_ref().is_some_and(|rv| rv.inh);
    match (rename, relation) {
        (ObjectType::ObjectTable | ObjectType::ObjectForeignTable, Some(table)) => {
            b.lock(&table, ObjectKind::Table, LockMode::AccessExclusive, false);
            b.operation(
                OperationKind::RenameTable,
                Some(&table),
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("{} -> {}", table.name, stmt.newname));
        }
        (ObjectType::ObjectColumn, Some(table)) => {
            let object = relation_object(stmt.relation_type);
            b.lock(&table, object, LockMode::AccessExclusive, recurses);
            b.operation(
                OperationKind::RenameColumn,
                Some(&table),
                Some(&stmt.subname),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("{} -> {}", stmt.subname, stmt.newname));
        }
        (ObjectType::ObjectTabconstraint, Some(table)) => {
            b.lock(
                &table,
                ObjectKind::Table,
                LockMode::AccessExclusive,
                recurses,
            );
            b.operation(
                OperationKind::RenameConstraint,
                Some(&table),
                Some(&stmt.subname),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("{} -> {}", stmt.subname, stmt.newname));
        }
        (ObjectType::ObjectIndex, Some(index)) => {
            // ALTER INDEX accepts any relation; on anything but an index it takes ACCESS
            // EXCLUSIVE, and offline the name may be anything.
            let is_index = context.relation(&index).is_some_and(|f| {
                matches!(f.kind, RelationKind::Index | RelationKind::PartitionedIndex)
            });
            b.lock(
                &index,
                ObjectKind::Index,
                if is_index {
                    LockMode::ShareUpdateExclusive
                } else {
                    LockMode::AccessExclusive
                },
                false,
            );
            if !is_index {
                b.reason("ALTER INDEX … RENAME takes ACCESS EXCLUSIVE unless the name is an index (then SHARE UPDATE EXCLUSIVE); offline it may be a table");
            }
            b.operation(
                OperationKind::RenameIndex,
                Some(&index),
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("{} -> {}", index.name, stmt.newname));
        }
        (ObjectType::ObjectView | ObjectType::ObjectMatview, Some(view)) => {
            b.lock(&view, ObjectKind::View, LockMode::AccessExclusive, false);
            b.operation(
                OperationKind::RenameTable,
                Some(&view),
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("{} -> {}", view.name, stmt.newname));
        }
        (ObjectType::ObjectSequence, Some(sequence)) => {
            b.lock(
                &sequence,
                ObjectKind::Sequence,
                LockMode::AccessExclusive,
                false,
            );
            b.operation(
                OperationKind::OtherCatalogChange,
                Some(&sequence),
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            );
        }
        (ObjectType::ObjectTrigger, Some(table)) => {
            // From PostgreSQL 15 the partitions' clones are renamed too.
            let recurses = recurses && context.server_version_num().is_none_or(|v| v >= 150000);
            b.lock(
                &table,
                ObjectKind::Table,
                LockMode::AccessExclusive,
                recurses,
            );
            b.operation(
                OperationKind::RenameTrigger,
                Some(&table),
                Some(&stmt.subname),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("{} -> {}", stmt.subname, stmt.newname));
        }
        (ObjectType::ObjectRule | ObjectType::ObjectPolicy, _) => {
            let parts = stmt
                .object
                .as_deref()
                .map(|node| strings(list_items(node)))
                .unwrap_or_default();
            let table = stmt
                .relation
                .as_ref()
                .map(range_var_name)
                .or_else(|| qualified_from_parts(&parts, 1));
            if let Some(table) = &table {
                b.lock(table, ObjectKind::Table, LockMode::AccessExclusive, false);
            }
            b.operation(
                OperationKind::OtherCatalogChange,
                table.as_ref(),
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            );
        }
        (ObjectType::ObjectAttribute, Some(composite)) => {
            // A composite type's attribute: ACCESS EXCLUSIVE on the type's relation,
            // and with CASCADE on every typed table of it.
            b.lock(
                &composite,
                ObjectKind::Type,
                LockMode::AccessExclusive,
                false,
            );
            if stmt.behavior == 2 {
                b.related(
                    context,
                    Role::TablesOfType,
                    ObjectRef {
                        class: ObjectClass::Type,
                        name: composite.clone(),
                    },
                    ObjectKind::Table,
                    LockMode::AccessExclusive,
                    true,
                );
            }
            b.operation(
                OperationKind::OtherCatalogChange,
                None,
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            );
        }
        _ => {
            b.operation(
                OperationKind::OtherCatalogChange,
                None,
                Some(&stmt.newname),
                WorkClass::CatalogOnly,
            );
        }
    }
}

fn relation_object(relation_type: i32) -> ObjectKind {
    match ObjectType::try_from(relation_type) {
        Ok(ObjectType::ObjectView | ObjectType::ObjectMatview) => ObjectKind::View,
        _ => ObjectKind::Table,
    }
}

pub(crate) fn classify_set_schema(
    stmt: &AlterObjectSchemaStmt,
    context: &Context<'_>,
    b: &mut Builder,
) {
    b.statement("set-schema");
    let _ = context;
    let object = ObjectType::try_from(stmt.object_type).unwrap_or(ObjectType::Undefined);
    match (object, stmt.relation.as_ref().map(range_var_name)) {
        (
            ObjectType::ObjectTable
            | ObjectType::ObjectView
            | ObjectType::ObjectMatview
            | ObjectType::ObjectSequence
            | ObjectType::ObjectForeignTable,
            Some(relation),
        ) => {
            let kind = match object {
                ObjectType::ObjectView | ObjectType::ObjectMatview => ObjectKind::View,
                ObjectType::ObjectSequence => ObjectKind::Sequence,
                _ => ObjectKind::Table,
            };
            b.lock(&relation, kind, LockMode::AccessExclusive, false);
            b.operation(
                OperationKind::SetSchema,
                Some(&relation),
                Some(&stmt.newschema),
                WorkClass::CatalogOnly,
            )
            .detail = Some(format!("-> schema {}", stmt.newschema));
        }
        _ => {
            b.operation(
                OperationKind::OtherCatalogChange,
                None,
                Some(&stmt.newschema),
                WorkClass::CatalogOnly,
            );
        }
    }
}

fn vacuum_option(stmt: &VacuumStmt, name: &str) -> bool {
    stmt.options.iter().any(|node| match &node.node {
        Some(NodeEnum::DefElem(def)) if def.defname == name => {
            match def.arg.as_deref().and_then(|a| a.node.as_ref()) {
                None => true,
                Some(NodeEnum::Boolean(value)) => value.boolval,
                Some(NodeEnum::String(value)) => {
                    !matches!(value.sval.as_str(), "false" | "off" | "0")
                }
                Some(NodeEnum::Integer(value)) => value.ival != 0,
                _ => true,
            }
        }
        _ => false,
    })
}

pub(crate) fn classify_vacuum(stmt: &VacuumStmt, context: &Context<'_>, b: &mut Builder) {
    let full = stmt.is_vacuumcmd && vacuum_option(stmt, "full");
    b.statement(if !stmt.is_vacuumcmd {
        "analyze"
    } else if full {
        "vacuum-full"
    } else {
        "vacuum"
    });
    if stmt.is_vacuumcmd {
        b.outside_transaction_only();
    }
    let tables: Vec<QualifiedName> = stmt
        .rels
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::VacuumRelation(rel)) => rel.relation.as_ref().map(range_var_name),
            _ => None,
        })
        .collect();
    if tables.is_empty() {
        b.operation(
            if full {
                OperationKind::VacuumFull
            } else {
                OperationKind::Vacuum
            },
            None,
            None,
            WorkClass::ConcurrentBuild,
        );
        if full {
            b.refuse(
                RefusalCause::UnclassifiedStatement,
                "VACUUM FULL without a table rewrites every table of the database; name the tables",
            );
        }
        return;
    }
    for table in &tables {
        if full {
            b.lock(table, ObjectKind::Table, LockMode::AccessExclusive, true);
            b.operation(
                OperationKind::VacuumFull,
                Some(table),
                None,
                WorkClass::Rewrite,
            );
        } else {
            b.lock(
                table,
                ObjectKind::Table,
                LockMode::ShareUpdateExclusive,
                true,
            );
            let kind = if stmt.is_vacuumcmd {
                OperationKind::Vacuum
            } else {
                OperationKind::Analyze
            };
            b.operation(
                kind,
                Some(table),
                None,
                if stmt.is_vacuumcmd {
                    WorkClass::ConcurrentBuild
                } else {
                    WorkClass::Read
                },
            );
        }
    }
    if full {
        b.reason("VACUUM FULL rewrites the table under ACCESS EXCLUSIVE; copy-and-swap rebuilds it online instead");
        if tables.iter().all(|t| context.is_new(t)) {
            b.route(Route::Native);
        } else {
            b.route(Route::CopyAndSwap);
        }
    } else {
        b.reason("VACUUM and ANALYZE take SHARE UPDATE EXCLUSIVE: reads and writes continue");
    }
}

pub(crate) fn classify_cluster(stmt: &ClusterStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("cluster");
    let Some(relation) = &stmt.relation else {
        b.operation(OperationKind::Cluster, None, None, WorkClass::Rewrite);
        b.outside_transaction_only();
        b.refuse(RefusalCause::UnclassifiedStatement, "CLUSTER without a table re-clusters every clustered table of the database; name the table");
        return;
    };
    let table = range_var_name(relation);
    b.lock(&table, ObjectKind::Table, LockMode::AccessExclusive, true);
    if context
        .relation(&table)
        .is_some_and(|f| f.kind == crate::catalog::RelationKind::PartitionedTable)
    {
        b.outside_transaction_only();
    }
    b.operation(
        OperationKind::Cluster,
        Some(&table),
        Some(&stmt.indexname),
        WorkClass::Rewrite,
    );
    b.reason("CLUSTER rewrites the table in index order under ACCESS EXCLUSIVE; copy-and-swap rebuilds it online, in primary-key order (the order of another index is not kept)");
    if context.is_new(&table) {
        b.route(Route::Native);
    } else {
        b.route(Route::CopyAndSwap);
    }
}

pub(crate) fn classify_lock(stmt: &LockStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("lock-table");
    b.inside_transaction_only();
    let mode = LockMode::from_pg_number(stmt.mode).unwrap_or(LockMode::AccessExclusive);
    for relation in stmt.relations.iter().filter_map(|node| match &node.node {
        Some(NodeEnum::RangeVar(rv)) => Some(rv),
        _ => None,
    }) {
        let table = range_var_name(relation);
        b.lock(&table, ObjectKind::Table, mode, relation.inh);
        families::lock_view(b, context, &table, mode);
        b.operation(
            OperationKind::LockTable,
            Some(&table),
            None,
            WorkClass::None,
        )
        .detail = Some(format!("IN {} MODE", mode.sql_name()));
    }
    b.reason(format!(
        "LOCK TABLE holds {} until the transaction ends: it {}",
        mode.sql_name(),
        mode.blocks_description()
    ));
}
