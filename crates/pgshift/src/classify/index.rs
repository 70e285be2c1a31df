//! Index statements: `CREATE INDEX`, `DROP INDEX`, `REINDEX`.

use pgshift_sql::ast::{
    DefElem, DropStmt, IndexStmt, Node, RangeVar, ReindexObjectType, ReindexStmt,
};
use pgshift_sql::{NodeEnum, QualifiedName};

use super::names::{
    constraint_name_for, list_items, qualified_from_parts, range_var_name, strings,
};
use super::steps::{self, StepError};
use super::{Builder, Context, ObjectKind, OperationKind, WorkClass};
use crate::catalog::{Lookup, RelationFacts, RelationKind};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::{Route, Step};

pub(crate) fn classify_create(stmt: &IndexStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("create-index");
    let Some(relation) = &stmt.relation else {
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "CREATE INDEX without a table",
        );
        return;
    };
    let table = range_var_name(relation);
    let name = stmt.idxname.as_str();
    let facts = context.relation(&table);
    if let Lookup::Missing = context.lookup(&table) {
        if !context.is_new(&table) {
            b.refuse(
                RefusalCause::TableMissing,
                format!("table {table} does not exist in the search path"),
            );
        }
    }
    if let Some(facts) = facts {
        if !facts.kind.is_table() && facts.kind != RelationKind::MaterializedView {
            b.refuse(
                RefusalCause::WrongRelationKind,
                format!("{} is not a table", facts.name),
            );
        }
    }
    let partitioned = facts.map(|f| f.kind == RelationKind::PartitionedTable);
    if stmt.concurrent {
        b.outside_transaction_only();
        b.lock(
            &table,
            ObjectKind::Table,
            LockMode::ShareUpdateExclusive,
            false,
        );
        b.operation(
            OperationKind::CreateIndexConcurrently,
            Some(&table),
            Some(name),
            WorkClass::ConcurrentBuild,
        );
        b.reason("CONCURRENTLY builds while reads and writes continue (two table scans, waits for running transactions)");
        if partitioned == Some(true) {
            b.reason("PostgreSQL cannot build an index CONCURRENTLY on a partitioned table; pgshift builds it partition by partition instead");
            per_partition(stmt, relation, facts, b);
        } else {
            if partitioned.is_none() {
                b.reason("offline, the table is assumed not partitioned (CONCURRENTLY fails on a partitioned parent)");
            }
            b.route(Route::Native);
        }
        return;
    }
    b.lock(&table, ObjectKind::Table, LockMode::Share, relation.inh);
    if !relation.inh {
        b.operation(
            OperationKind::CreateIndex,
            Some(&table),
            Some(name),
            WorkClass::CatalogOnly,
        )
        .detail = Some("ON ONLY: no build on the partitions".to_owned());
        b.reason("ON ONLY creates an invalid partitioned index without building anything");
        return;
    }
    b.operation(
        OperationKind::CreateIndex,
        Some(&table),
        Some(name),
        WorkClass::ScanUnderLock,
    );
    if context.is_new(&table) {
        b.reason(format!(
            "{table} is created earlier in the same input; the build runs as written"
        ));
        b.route(Route::Native);
        return;
    }
    b.reason(format!(
        "CREATE INDEX builds under SHARE on {table}{}: every write waits for the whole build",
        if partitioned == Some(true) {
            " and every partition"
        } else {
            ""
        }
    ));
    if partitioned == Some(true) {
        per_partition(stmt, relation, facts, b);
        return;
    }
    if partitioned.is_none() {
        b.reason("offline, the table is assumed not partitioned; a partitioned table gets the per-partition flow (plan against the server to see it)");
    }
    let index_name = index_name_for(stmt, &table.name);
    match steps::create_index_concurrently(
        stmt,
        relation,
        &index_name,
        "build the index without blocking writes",
    ) {
        Ok(step) => b.route(Route::NativeSequence { steps: vec![step] }),
        Err(StepError(message)) => b.refuse(RefusalCause::UnclassifiedStatement, message),
    }
}

/// The name PostgreSQL would give the index: the written one, or
/// `<table>_<columns>_idx` (`_key` for a unique index).
fn index_name_for(stmt: &IndexStmt, table: &str) -> String {
    if !stmt.idxname.is_empty() {
        return stmt.idxname.clone();
    }
    let columns = index_columns(stmt);
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    constraint_name_for(table, &columns, if stmt.unique { "key" } else { "idx" })
}

fn index_columns(stmt: &IndexStmt) -> Vec<String> {
    stmt.index_params
        .iter()
        .map(|node| match &node.node {
            Some(NodeEnum::IndexElem(elem)) if !elem.name.is_empty() => elem.name.clone(),
            _ => "expr".to_owned(),
        })
        .collect()
}

/// The partitioned-parent flow: an invalid index `ON ONLY` the parent, a concurrent
/// build on each partition, then each attached; the parent index becomes valid when the
/// last one is attached.
fn per_partition(
    stmt: &IndexStmt,
    relation: &RangeVar,
    facts: Option<&RelationFacts>,
    b: &mut Builder,
) {
    let Some(facts) = facts else { return };
    if let Some(nested) = facts.partitions.iter().find(|p| p.is_partitioned) {
        b.refuse(
            RefusalCause::NestedPartitioning,
            format!(
                "partition {} is itself partitioned; the per-partition index flow handles one level",
                nested.name
            ),
        );
        return;
    }
    let parent_name = index_name_for(stmt, &facts.name.name);
    let parent_index = QualifiedName {
        schema: facts.name.schema.clone(),
        name: parent_name.clone(),
    };
    let columns = index_columns(stmt);
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut all: Vec<Step> = Vec::new();
    let mut parent_stmt = stmt.clone();
    parent_stmt.relation = Some(RangeVar {
        schemaname: facts.name.schema.clone().unwrap_or_default(),
        relname: facts.name.name.clone(),
        inh: false,
        relpersistence: "p".to_owned(),
        ..relation.clone()
    });
    let on_only = steps::create_index_on_only(&parent_stmt, &parent_name);
    match on_only {
        Ok(step) => all.push(step),
        Err(StepError(message)) => return b.refuse(RefusalCause::UnclassifiedStatement, message),
    }
    for partition in &facts.partitions {
        let partition_relation = RangeVar {
            schemaname: partition.name.schema.clone().unwrap_or_default(),
            relname: partition.name.name.clone(),
            inh: true,
            relpersistence: "p".to_owned(),
            ..Default::default()
        };
        let child_name = constraint_name_for(
            &partition.name.name,
            &columns,
            if stmt.unique { "key" } else { "idx" },
        );
        let child_index = QualifiedName {
            schema: partition.name.schema.clone(),
            name: child_name.clone(),
        };
        let mut child_stmt = stmt.clone();
        child_stmt.if_not_exists = false;
        match steps::create_index_concurrently(
            &child_stmt,
            &partition_relation,
            &child_name,
            "build the partition's index without blocking writes",
        ) {
            Ok(step) => all.push(step),
            Err(StepError(message)) => {
                return b.refuse(RefusalCause::UnclassifiedStatement, message)
            }
        }
        all.push(steps::attach_index(&parent_index, &child_index));
    }
    b.route(Route::NativeSequence { steps: all });
}

fn reindex_concurrently(stmt: &ReindexStmt) -> bool {
    stmt.params.iter().any(
        |node| matches!(&node.node, Some(NodeEnum::DefElem(def)) if def.defname == "concurrently"),
    )
}

pub(crate) fn classify_reindex(stmt: &ReindexStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("reindex");
    let kind = ReindexObjectType::try_from(stmt.kind).unwrap_or(ReindexObjectType::Undefined);
    let Some(relation) = stmt.relation.as_ref().filter(|_| {
        matches!(
            kind,
            ReindexObjectType::ReindexObjectIndex | ReindexObjectType::ReindexObjectTable
        )
    }) else {
        b.operation(
            OperationKind::Reindex,
            None,
            Some(&stmt.name),
            WorkClass::ScanUnderLock,
        );
        b.outside_transaction_only();
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "REINDEX SCHEMA, DATABASE or SYSTEM touches every table at once; name the tables or indexes instead",
        );
        return;
    };
    let name = range_var_name(relation);
    let object = if kind == ReindexObjectType::ReindexObjectIndex {
        ObjectKind::Index
    } else {
        ObjectKind::Table
    };
    let partitioned = context.relation(&name).is_some_and(|facts| {
        matches!(
            facts.kind,
            RelationKind::PartitionedIndex | RelationKind::PartitionedTable
        )
    });
    if partitioned {
        b.outside_transaction_only();
        b.reason("REINDEX of a partitioned index or table rebuilds each partition's indexes in its own transaction, so it cannot run inside a transaction block");
    }
    if reindex_concurrently(stmt) {
        b.outside_transaction_only();
        b.lock(
            &name,
            object,
            LockMode::ShareUpdateExclusive,
            object == ObjectKind::Table,
        );
        b.operation(
            OperationKind::ReindexConcurrently,
            Some(&name),
            None,
            WorkClass::ConcurrentBuild,
        );
        return;
    }
    let mode = if object == ObjectKind::Index {
        LockMode::AccessExclusive
    } else {
        LockMode::Share
    };
    b.lock(&name, object, mode, true);
    if object == ObjectKind::Table {
        b.index_mode(&name, LockMode::AccessExclusive);
    }
    if object == ObjectKind::Index {
        indexed_table(b, context, &name, LockMode::Share, true);
    }
    b.operation(
        OperationKind::Reindex,
        Some(&name),
        None,
        WorkClass::ScanUnderLock,
    );
    b.reason(if object == ObjectKind::Index {
        "REINDEX INDEX rebuilds under ACCESS EXCLUSIVE on the index (queries using it wait) and SHARE on its table (writes wait)"
    } else {
        "REINDEX TABLE rebuilds every index under SHARE on the table: writes wait for the whole rebuild"
    });
    let mut concurrent = stmt.clone();
    concurrent.params.push(Node {
        node: Some(NodeEnum::DefElem(Box::new(DefElem {
            defname: "concurrently".to_owned(),
            defaction: 1,
            location: -1,
            arg_location: -1,
            ..Default::default()
        }))),
    });
    match steps::deparse_node(NodeEnum::ReindexStmt(concurrent)) {
        Ok(sql) => b.route(Route::NativeSequence {
            steps: vec![Step {
                sql,
                purpose: "rebuild without blocking reads and writes".to_owned(),
                lock: Some(crate::route::StepLock {
                    relation: name,
                    mode: LockMode::ShareUpdateExclusive,
                }),
                work: WorkClass::ConcurrentBuild,
                transactional: false,
            }],
        }),
        Err(StepError(message)) => b.refuse(RefusalCause::UnclassifiedStatement, message),
    }
}

/// `DROP INDEX [CONCURRENTLY] …`.
pub(crate) fn classify_drop(stmt: &DropStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("drop-index");
    let names: Vec<QualifiedName> = stmt
        .objects
        .iter()
        .filter_map(|node| qualified_from_parts(&strings(list_items(node)), 0))
        .collect();
    // Plain DROP INDEX takes ACCESS EXCLUSIVE on the index's table (and on each
    // partition's index, for a partitioned index); CONCURRENTLY takes SHARE UPDATE
    // EXCLUSIVE on the table and, at the very end, ACCESS EXCLUSIVE on the index.
    let table_mode = if stmt.concurrent {
        LockMode::ShareUpdateExclusive
    } else {
        LockMode::AccessExclusive
    };
    for name in &names {
        b.lock(
            name,
            ObjectKind::Index,
            LockMode::AccessExclusive,
            !stmt.concurrent,
        );
        indexed_table(b, context, name, table_mode, !stmt.concurrent);
        let kind = if stmt.concurrent {
            OperationKind::DropIndexConcurrently
        } else {
            OperationKind::DropIndex
        };
        b.operation(kind, None, Some(&name.name), WorkClass::CatalogOnly);
    }
    if stmt.concurrent {
        b.outside_transaction_only();
        return;
    }
    b.reason("DROP INDEX takes ACCESS EXCLUSIVE on the index's table: every query on it waits, however brief the drop");
    let partitioned = names.iter().any(|name| {
        context
            .relation(name)
            .is_some_and(|facts| facts.kind == RelationKind::PartitionedIndex)
    });
    let cascade = stmt.behavior == 2;
    if partitioned || cascade || names.iter().any(|n| context.is_new(n)) {
        if partitioned {
            b.reason("a partitioned index cannot be dropped CONCURRENTLY; it runs as written under a short lock budget");
        }
        return;
    }
    let steps = names
        .iter()
        .map(|name| steps::drop_index_concurrently(name, stmt.missing_ok))
        .collect();
    b.route(Route::NativeSequence { steps });
}

/// The table of index `index` (and, recursing, each partition of it), in `mode`: named
/// with facts, by role without.
fn indexed_table(
    b: &mut Builder,
    context: &Context<'_>,
    index: &QualifiedName,
    mode: LockMode,
    recurses: bool,
) {
    b.related(
        context,
        crate::lock::Role::IndexedTable,
        crate::lock::ObjectRef::relation(index),
        ObjectKind::Table,
        mode,
        recurses,
    );
}
