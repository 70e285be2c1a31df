//! Data statements: `INSERT`, `UPDATE`, `DELETE`, `MERGE`, `SELECT`, `COPY`.

use pgshift_sql::ast::Node;
use pgshift_sql::{NodeEnum, NodeRef, QualifiedName};

use super::names::range_var_name;
use super::{families, Builder, Context, Effect, ObjectKind, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;

/// Every relation a statement reads or writes (`RangeVar`s), minus the names of its
/// common table expressions.
pub(crate) fn referenced_relations(node: &Node) -> Vec<QualifiedName> {
    let Some(inner) = &node.node else {
        return Vec::new();
    };
    relations_of(inner)
}

pub(crate) fn relations_of(node: &NodeEnum) -> Vec<QualifiedName> {
    let mut ctes = Vec::new();
    let mut found: Vec<QualifiedName> = Vec::new();
    for (node, _, _, _) in node.nodes() {
        match node {
            NodeRef::CommonTableExpr(cte) => ctes.push(cte.ctename.clone()),
            NodeRef::RangeVar(rv) => {
                let name = range_var_name(rv);
                if !found.contains(&name) {
                    found.push(name);
                }
            }
            _ => {}
        }
    }
    found.retain(|name| name.schema.is_some() || !ctes.contains(&name.name));
    found
}

/// The detail of an `UPDATE` or `DELETE` without `WHERE`.
pub const WHOLE_TABLE: &str = "every row";

pub(crate) fn classify(node: &NodeEnum, context: &Context<'_>, b: &mut Builder) {
    let (statement, kind, target, whole_table) = match node {
        NodeEnum::InsertStmt(stmt) => (
            "insert",
            OperationKind::Insert,
            stmt.relation.as_ref().map(range_var_name),
            false,
        ),
        NodeEnum::UpdateStmt(stmt) => (
            "update",
            OperationKind::Update,
            stmt.relation.as_ref().map(range_var_name),
            stmt.where_clause.is_none(),
        ),
        NodeEnum::DeleteStmt(stmt) => (
            "delete",
            OperationKind::Delete,
            stmt.relation.as_ref().map(range_var_name),
            stmt.where_clause.is_none(),
        ),
        NodeEnum::MergeStmt(stmt) => (
            "merge",
            OperationKind::Merge,
            stmt.relation.as_ref().map(range_var_name),
            false,
        ),
        NodeEnum::CopyStmt(stmt) => return classify_copy(stmt, context, b),
        _ => ("select", OperationKind::Select, None, false),
    };
    b.statement(statement);
    let mut read_mode = LockMode::AccessShare;
    if let NodeEnum::SelectStmt(select) = node {
        if !select.locking_clause.is_empty() {
            read_mode = LockMode::RowShare;
        }
        if let Some(into) = select.into_clause.as_ref().and_then(|i| i.rel.as_ref()) {
            b.effect(Effect::Creates {
                relation: range_var_name(into),
            });
        }
    }
    let mut written: Vec<QualifiedName> = Vec::new();
    if let Some(target) = &target {
        // UPDATE, DELETE and MERGE open every partition they may touch; INSERT the
        // partitions its rows are routed to (any of them, as far as the statement says).
        let recurses = kind == OperationKind::Insert || target_inherits(node);
        b.lock(target, ObjectKind::Table, LockMode::RowExclusive, recurses);
        written.push(target.clone());
    }
    for nested in nested_targets(node) {
        if !written.contains(&nested) {
            b.lock(&nested, ObjectKind::Table, LockMode::RowExclusive, true);
            written.push(nested);
        }
    }
    for relation in &written {
        families::data_target(b, context, relation);
    }
    super::related_families::sequence_calls(node, b);
    for relation in relations_of(node) {
        if !written.contains(&relation) {
            // Without ONLY a read scans every partition (as far as the statement says).
            b.lock(&relation, ObjectKind::Table, read_mode, true);
            families::data_read(b, context, &relation, read_mode);
        }
    }
    let work = if kind == OperationKind::Select {
        WorkClass::Read
    } else {
        WorkClass::DataChange
    };
    let operation = b.operation(kind, target.as_ref(), None, work);
    if whole_table {
        operation.detail = Some(WHOLE_TABLE.to_owned());
        b.reason("no WHERE clause: every row is changed in one transaction, holding its row locks until the end");
    }
}

/// The targets of data statements nested in `node` (writable common table
/// expressions), the outer statement's own target included.
fn nested_targets(node: &NodeEnum) -> Vec<QualifiedName> {
    let mut found = Vec::new();
    for (node, _, _, _) in node.nodes() {
        let relation = match node {
            NodeRef::InsertStmt(stmt) => stmt.relation.as_ref(),
            NodeRef::UpdateStmt(stmt) => stmt.relation.as_ref(),
            NodeRef::DeleteStmt(stmt) => stmt.relation.as_ref(),
            NodeRef::MergeStmt(stmt) => stmt.relation.as_ref(),
            _ => None,
        };
        if let Some(relation) = relation {
            found.push(range_var_name(relation));
        }
    }
    found
}

/// Whether the target of a data statement is written without `ONLY`.
fn target_inherits(node: &NodeEnum) -> bool {
    let relation = match node {
        NodeEnum::UpdateStmt(stmt) => stmt.relation.as_ref(),
        NodeEnum::DeleteStmt(stmt) => stmt.relation.as_ref(),
        NodeEnum::MergeStmt(stmt) => stmt.relation.as_ref(),
        _ => None,
    };
    relation.is_some_and(|r| r.inh)
}

fn classify_copy(stmt: &pgshift_sql::ast::CopyStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("copy");
    let Some(relation) = stmt.relation.as_ref().map(range_var_name) else {
        b.operation(OperationKind::Copy, None, None, WorkClass::Read);
        return;
    };
    if stmt.is_from {
        b.lock(&relation, ObjectKind::Table, LockMode::RowExclusive, true);
        families::data_target(b, context, &relation);
        b.operation(
            OperationKind::Copy,
            Some(&relation),
            None,
            WorkClass::DataChange,
        );
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "COPY … FROM needs a data stream pgshift does not have; load data with INSERT … SELECT or outside the migration",
        );
    } else {
        b.lock(&relation, ObjectKind::Table, LockMode::AccessShare, false);
        families::data_read(b, context, &relation, LockMode::AccessShare);
        b.operation(OperationKind::Copy, Some(&relation), None, WorkClass::Read);
    }
}
