//! Everything else: procedural blocks, comments, grants, views, policies, sequences,
//! publications, and catalog objects that do not touch a table. Anything not listed is
//! refused as unclassified.

use pgshift_sql::ast::{CommentStmt, GrantStmt, ObjectType};
use pgshift_sql::{NodeEnum, QualifiedName};

use super::dml::referenced_relations;
use super::names::{list_items, qualified_from_parts, range_var_name, strings};
use super::{related_families, Builder, Context, Effect, ObjectKind, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;

pub(crate) fn classify(node: &NodeEnum, context: &Context<'_>, b: &mut Builder) {
    match node {
        NodeEnum::DoStmt(_) | NodeEnum::CallStmt(_) => {
            let (statement, kind) = if matches!(node, NodeEnum::DoStmt(_)) {
                ("do", OperationKind::Do)
            } else {
                ("call", OperationKind::Call)
            };
            b.statement(statement);
            b.operation(kind, None, None, WorkClass::Opaque);
            b.refuse(
                RefusalCause::OpaqueProceduralCode,
                "procedural code can take any lock and do any amount of work; pgshift cannot bound it. Write the statements it runs as plain SQL",
            );
        }
        NodeEnum::CommentStmt(stmt) => comment(stmt, b),
        NodeEnum::GrantStmt(stmt) => grant(stmt, context, b),
        NodeEnum::ViewStmt(stmt) => {
            b.statement("create-view");
            let view = stmt.view.as_ref().map(range_var_name);
            if let Some(query) = &stmt.query {
                for relation in referenced_relations(query) {
                    b.lock(&relation, ObjectKind::Table, LockMode::AccessShare, false);
                }
            }
            if let Some(view) = &view {
                if stmt.replace {
                    b.lock(view, ObjectKind::View, LockMode::AccessExclusive, false);
                } else {
                    b.effect(Effect::Creates {
                        relation: view.clone(),
                    });
                }
            }
            b.operation(
                OperationKind::CreateView,
                view.as_ref(),
                None,
                WorkClass::CatalogOnly,
            );
        }
        NodeEnum::RefreshMatViewStmt(stmt) => {
            b.statement("refresh-materialized-view");
            let view = stmt.relation.as_ref().map(range_var_name);
            let (mode, kind, work) = if stmt.concurrent {
                (
                    LockMode::Exclusive,
                    OperationKind::RefreshMaterializedViewConcurrently,
                    WorkClass::DataChange,
                )
            } else {
                (
                    LockMode::AccessExclusive,
                    OperationKind::RefreshMaterializedView,
                    WorkClass::Rewrite,
                )
            };
            if let Some(view) = &view {
                b.lock(view, ObjectKind::View, mode, false);
                super::families::data_read(b, context, view, LockMode::AccessShare);
            }
            b.operation(kind, view.as_ref(), None, work);
            if !stmt.concurrent {
                b.reason("REFRESH MATERIALIZED VIEW blocks reads of the view until it finishes; CONCURRENTLY (which needs a unique index on the view) lets reads continue");
            }
        }
        NodeEnum::CreatePolicyStmt(stmt) => {
            b.statement("create-policy");
            policy(
                stmt.table.as_ref().map(range_var_name),
                OperationKind::CreatePolicy,
                &stmt.policy_name,
                b,
            );
            related_families::policy_expressions(&[&stmt.qual, &stmt.with_check], b);
        }
        NodeEnum::AlterPolicyStmt(stmt) => {
            b.statement("alter-policy");
            policy(
                stmt.table.as_ref().map(range_var_name),
                OperationKind::AlterPolicy,
                &stmt.policy_name,
                b,
            );
            related_families::policy_expressions(&[&stmt.qual, &stmt.with_check], b);
            if let Some(table) = stmt.table.as_ref().map(range_var_name) {
                related_families::altered_policy(context, &table, b);
            }
        }
        NodeEnum::CreateSeqStmt(stmt) => {
            b.statement("create-sequence");
            let sequence = stmt.sequence.as_ref().map(range_var_name);
            b.operation(
                OperationKind::CreateSequence,
                sequence.as_ref(),
                None,
                WorkClass::CatalogOnly,
            );
            if let Some(sequence) = sequence {
                if super::table::creates_new(stmt.if_not_exists, &sequence, context, b) {
                    b.effect(Effect::Creates { relation: sequence });
                }
            }
        }
        NodeEnum::AlterSeqStmt(stmt) => {
            b.statement("alter-sequence");
            let sequence = stmt.sequence.as_ref().map(range_var_name);
            if let Some(sequence) = &sequence {
                b.lock(
                    sequence,
                    ObjectKind::Sequence,
                    LockMode::ShareRowExclusive,
                    false,
                );
            }
            related_families::owned_by(&stmt.options, b);
            b.operation(
                OperationKind::AlterSequence,
                sequence.as_ref(),
                None,
                WorkClass::CatalogOnly,
            );
        }
        NodeEnum::CreateStatsStmt(stmt) => {
            b.statement("create-statistics");
            for relation in stmt.relations.iter().filter_map(|n| match &n.node {
                Some(NodeEnum::RangeVar(rv)) => Some(range_var_name(rv)),
                _ => None,
            }) {
                b.lock(
                    &relation,
                    ObjectKind::Table,
                    LockMode::ShareUpdateExclusive,
                    false,
                );
                b.operation(
                    OperationKind::CreateStatistics,
                    Some(&relation),
                    None,
                    WorkClass::CatalogOnly,
                );
            }
        }
        NodeEnum::CreatePublicationStmt(stmt) => {
            b.statement("create-publication");
            publication_tables(&stmt.pubobjects, OperationKind::CreatePublication, b);
        }
        NodeEnum::AlterPublicationStmt(stmt) => {
            b.statement("alter-publication");
            publication_tables(&stmt.pubobjects, OperationKind::AlterPublication, b);
            related_families::alter_publication(stmt, context, b);
        }
        NodeEnum::CreateSchemaStmt(_) => catalog(b, "create-schema", OperationKind::CreateSchema),
        NodeEnum::CreateEnumStmt(_)
        | NodeEnum::CompositeTypeStmt(_)
        | NodeEnum::CreateDomainStmt(_)
        | NodeEnum::CreateRangeStmt(_)
        | NodeEnum::AlterEnumStmt(_) => catalog(b, "create-type", OperationKind::CreateType),
        NodeEnum::CreateExtensionStmt(_) | NodeEnum::AlterExtensionStmt(_) => {
            catalog(b, "create-extension", OperationKind::CreateExtension)
        }
        NodeEnum::DefineStmt(_)
        | NodeEnum::AlterFunctionStmt(_)
        | NodeEnum::AlterOwnerStmt(_)
        | NodeEnum::CreateRoleStmt(_)
        | NodeEnum::AlterRoleStmt(_)
        | NodeEnum::AlterRoleSetStmt(_)
        | NodeEnum::DropRoleStmt(_)
        | NodeEnum::GrantRoleStmt(_)
        | NodeEnum::AlterDefaultPrivilegesStmt(_)
        | NodeEnum::CreateCastStmt(_)
        | NodeEnum::CreateConversionStmt(_)
        | NodeEnum::CreateOpClassStmt(_)
        | NodeEnum::CreateOpFamilyStmt(_)
        | NodeEnum::AlterOpFamilyStmt(_)
        | NodeEnum::AlterTypeStmt(_)
        | NodeEnum::AlterCollationStmt(_)
        | NodeEnum::CreateEventTrigStmt(_)
        | NodeEnum::AlterEventTrigStmt(_)
        | NodeEnum::AlterTsconfigurationStmt(_)
        | NodeEnum::AlterTsdictionaryStmt(_)
        | NodeEnum::CreateTransformStmt(_)
        | NodeEnum::CreateAmStmt(_)
        | NodeEnum::CreatePlangStmt(_) => {
            catalog(b, "catalog-change", OperationKind::OtherCatalogChange)
        }
        NodeEnum::RuleStmt(stmt) => {
            catalog(b, "create-rule", OperationKind::OtherCatalogChange);
            related_families::rule(stmt, context, b);
        }
        NodeEnum::AlterDomainStmt(stmt) => {
            catalog(b, "alter-domain", OperationKind::OtherCatalogChange);
            related_families::alter_domain(stmt, context, b);
        }
        // INV: RF-2 — an unclassified statement is refused, never run.
        other => {
            b.statement("unclassified");
            b.operation(OperationKind::Unclassified, None, None, WorkClass::Opaque);
            // Its locks are not known: stated as the open-ended bound (`DROP OWNED`,
            // `REASSIGN OWNED` and `ALTER TABLE ALL IN TABLESPACE` take ACCESS EXCLUSIVE
            // on every relation they reach).
            b.related(
                context,
                crate::lock::Role::UnknownDependents,
                crate::lock::ObjectRef {
                    class: crate::lock::ObjectClass::Other,
                    name: QualifiedName::bare(statement_name(other)),
                },
                ObjectKind::Table,
                LockMode::AccessExclusive,
                true,
            );
            b.refuse(
                RefusalCause::UnclassifiedStatement,
                format!(
                    "{} statements are not classified, so their locks cannot be bounded",
                    statement_name(other)
                ),
            );
        }
    }
}

/// A catalog change that touches no table.
fn catalog(b: &mut Builder, statement: &'static str, kind: OperationKind) {
    b.statement(statement);
    b.operation(kind, None, None, WorkClass::CatalogOnly);
}

fn policy(table: Option<QualifiedName>, kind: OperationKind, name: &str, b: &mut Builder) {
    if let Some(table) = &table {
        b.lock(table, ObjectKind::Table, LockMode::AccessExclusive, false);
    }
    b.operation(kind, table.as_ref(), Some(name), WorkClass::CatalogOnly);
}

fn publication_tables(objects: &[pgshift_sql::ast::Node], kind: OperationKind, b: &mut Builder) {
    let mut any = false;
    for object in objects {
        if let Some(NodeEnum::PublicationObjSpec(spec)) = &object.node {
            if let Some(table) = spec.pubtable.as_ref().and_then(|t| t.relation.as_ref()) {
                let table = range_var_name(table);
                b.lock(
                    &table,
                    ObjectKind::Table,
                    LockMode::ShareUpdateExclusive,
                    false,
                );
                b.operation(kind, Some(&table), None, WorkClass::CatalogOnly);
                any = true;
            }
        }
    }
    if !any {
        b.operation(kind, None, None, WorkClass::CatalogOnly);
    }
}

fn comment(stmt: &CommentStmt, b: &mut Builder) {
    b.statement("comment");
    let object = ObjectType::try_from(stmt.objtype).unwrap_or(ObjectType::Undefined);
    let parts = stmt
        .object
        .as_deref()
        .map(|node| strings(list_items(node)))
        .unwrap_or_default();
    let (relation, kind) = match object {
        ObjectType::ObjectTable | ObjectType::ObjectForeignTable => {
            (qualified_from_parts(&parts, 0), ObjectKind::Table)
        }
        ObjectType::ObjectColumn => (qualified_from_parts(&parts, 1), ObjectKind::Table),
        ObjectType::ObjectIndex => (qualified_from_parts(&parts, 0), ObjectKind::Index),
        ObjectType::ObjectView | ObjectType::ObjectMatview => {
            (qualified_from_parts(&parts, 0), ObjectKind::View)
        }
        ObjectType::ObjectSequence => (qualified_from_parts(&parts, 0), ObjectKind::Sequence),
        _ => (None, ObjectKind::Table),
    };
    if let Some(relation) = &relation {
        b.lock(relation, kind, LockMode::ShareUpdateExclusive, false);
    }
    // A comment on a rule, trigger, policy or constraint reads its table.
    if matches!(
        object,
        ObjectType::ObjectRule
            | ObjectType::ObjectTrigger
            | ObjectType::ObjectPolicy
            | ObjectType::ObjectTabconstraint
    ) {
        if let Some(table) = qualified_from_parts(&parts, 1) {
            b.lock(&table, ObjectKind::Table, LockMode::AccessShare, false);
        }
    }
    b.operation(
        OperationKind::Comment,
        relation.as_ref(),
        None,
        WorkClass::CatalogOnly,
    );
}

fn grant(stmt: &GrantStmt, context: &Context<'_>, b: &mut Builder) {
    let kind = if stmt.is_grant {
        OperationKind::Grant
    } else {
        OperationKind::Revoke
    };
    b.statement(if stmt.is_grant { "grant" } else { "revoke" });
    let mut any = false;
    for object in &stmt.objects {
        if let Some(NodeEnum::RangeVar(rv)) = &object.node {
            let relation = range_var_name(rv);
            // PostgreSQL 18 locks the relation (ACCESS SHARE) while changing its ACL.
            if related_families::since(context, 180000) {
                b.lock(&relation, ObjectKind::Table, LockMode::AccessShare, false);
            }
            b.operation(kind, Some(&relation), None, WorkClass::CatalogOnly);
            any = true;
        }
    }
    if !any {
        b.operation(kind, None, None, WorkClass::CatalogOnly);
    }
}

/// The statement's node name without the `Stmt` suffix, for messages.
fn statement_name(node: &NodeEnum) -> String {
    let debug = format!("{node:?}");
    let name = debug.split('(').next().unwrap_or("this");
    name.trim_end_matches("Stmt").to_owned()
}
