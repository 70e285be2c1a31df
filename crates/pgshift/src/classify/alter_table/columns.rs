//! Column subcommands: `SET NOT NULL`, `ALTER COLUMN … TYPE`, `SET EXPRESSION` (and the
//! NOT NULL scaffold `ADD COLUMN` shares).

use pgshift_sql::ast::AlterTableCmd;
use pgshift_sql::{quote_ident, QualifiedName};

use crate::classify::coercion::{is_binary_coercible, typmod_for};
use crate::classify::names::constraint_name_for;
use crate::classify::steps;
use crate::classify::{Builder, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::Step;

use super::*;

/// The name of the temporary `CHECK (col IS NOT NULL)` used to set NOT NULL without a
/// scan under lock.
pub(super) fn scaffold_name(column: &str) -> String {
    constraint_name_for("pgshift", &[column], "not_null")
}

/// Check `NOT VALID`, validate, `SET NOT NULL` (no scan thanks to the check), drop the
/// check.
pub(super) fn not_null_scaffold(table: &QualifiedName, column: &str) -> Vec<Step> {
    let name = scaffold_name(column);
    vec![
        steps::add_not_null_check(table, column, &name),
        steps::validate_constraint(table, &name),
        steps::set_not_null(table, column),
        steps::drop_constraint(table, &name, "remove the scaffold check, no longer needed"),
    ]
}

pub(super) fn set_not_null(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let column = cmd.name.as_str();
    let piece = |work: WorkClass, plan: Plan, b: &mut Builder| {
        b.operation(
            OperationKind::SetNotNull,
            Some(&target.table),
            Some(column),
            work,
        );
        Piece {
            cmd: cmd.clone(),
            mode: LockMode::AccessExclusive,
            plan,
        }
    };
    if let Some(facts) = target.facts {
        match facts.column(column) {
            None if target.absence_unproven(column) => {}
            None => {
                return piece(
                    WorkClass::CatalogOnly,
                    Plan::Refused(
                        RefusalCause::ColumnMissing,
                        format!(
                            "column {} does not exist in {}",
                            quote_ident(column),
                            facts.name
                        ),
                    ),
                    b,
                )
            }
            Some(c) if c.not_null => {
                b.reason(format!(
                    "{} is already NOT NULL: nothing to scan",
                    quote_ident(column)
                ));
                return piece(WorkClass::CatalogOnly, Plan::AsWritten, b);
            }
            Some(_) if facts.has_validated_not_null_check(column) => {
                b.reason(
                    "a validated CHECK (column IS NOT NULL) exists, so PostgreSQL skips the scan",
                );
                return piece(WorkClass::CatalogOnly, Plan::AsWritten, b);
            }
            Some(_) => {}
        }
    }
    b.reason(format!(
        "SET NOT NULL scans every row of {} under ACCESS EXCLUSIVE; a validated CHECK lets PostgreSQL skip that scan",
        target.table
    ));
    piece(
        WorkClass::ScanUnderLock,
        Plan::Sequence(not_null_scaffold(&target.table, column)),
        b,
    )
}

pub(super) fn set_expression(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let column = target.facts.and_then(|facts| facts.column(&cmd.name));
    if target
        .context
        .server_version_num()
        .is_some_and(|v| v < 170000)
    {
        b.operation(
            OperationKind::SetExpression,
            Some(&target.table),
            Some(&cmd.name),
            WorkClass::Rewrite,
        );
        return Piece {
            cmd: cmd.clone(),
            mode: LockMode::AccessExclusive,
            plan: Plan::Refused(
                RefusalCause::ServerTooOld,
                "ALTER COLUMN … SET EXPRESSION needs PostgreSQL 17; drop and re-add the generated column instead".to_owned(),
            ),
        };
    }
    if column.is_some_and(|c| c.generated == Some('v')) {
        b.operation(
            OperationKind::SetExpression,
            Some(&target.table),
            Some(&cmd.name),
            WorkClass::CatalogOnly,
        );
        b.reason("the column is a virtual generated column: no rewrite");
        return Piece {
            cmd: cmd.clone(),
            mode: LockMode::AccessExclusive,
            plan: Plan::AsWritten,
        };
    }
    rewrite(b, target, OperationKind::SetExpression, cmd)
}

pub(super) fn alter_column_type(
    cmd: &AlterTableCmd,
    target: &Target<'_>,
    b: &mut Builder,
) -> Piece {
    let column = cmd.name.as_str();
    foreign_key_partners(column, target, b);
    row_type_users(target, b);
    let def = column_def(cmd);
    let (new_base, modifiers) = def
        .and_then(|d| d.type_name.as_ref())
        .map(type_name_parts)
        .unwrap_or_default();
    let has_using = def.is_some_and(|d| d.raw_default.is_some());
    let has_collate = def.is_some_and(|d| d.coll_clause.is_some());
    let detail = Some(format!("to {new_base}{}", modifiers_text(&modifiers)));
    let facts_column = target.facts.map(|facts| facts.column(column));
    match facts_column {
        Some(None) if !target.absence_unproven(column) => {
            b.operation(
                OperationKind::AlterColumnType,
                Some(&target.table),
                Some(column),
                WorkClass::CatalogOnly,
            )
            .detail = detail;
            return Piece {
                cmd: cmd.clone(),
                mode: LockMode::AccessExclusive,
                plan: Plan::Refused(
                    RefusalCause::ColumnMissing,
                    format!(
                        "column {} does not exist in {}",
                        quote_ident(column),
                        target.table
                    ),
                ),
            };
        }
        Some(Some(existing))
            if existing
                .used_by_generated
                .iter()
                .any(|g| !target.dropped.contains(g)) =>
        {
            b.operation(
                OperationKind::AlterColumnType,
                Some(&target.table),
                Some(column),
                WorkClass::CatalogOnly,
            )
            .detail = detail;
            let users: Vec<String> = existing
                .used_by_generated
                .iter()
                .filter(|g| !target.dropped.contains(g))
                .map(|g| quote_ident(g))
                .collect();
            return Piece {
                cmd: cmd.clone(),
                mode: LockMode::AccessExclusive,
                plan: Plan::Refused(
                    RefusalCause::ColumnUsedByGenerated,
                    format!(
                        "column {} of {} is used by the generated column{} {}: PostgreSQL refuses to change its type (cannot alter type of a column used by a generated column)",
                        quote_ident(column),
                        target.table,
                        if users.len() == 1 { "" } else { "s" },
                        users.join(", ")
                    ),
                ),
            };
        }
        Some(Some(existing)) if !has_using && !has_collate => {
            let coercible = typmod_for(&new_base, &modifiers).is_some_and(|new_typmod| {
                is_binary_coercible(&existing.type_name, existing.typmod, &new_base, new_typmod)
            });
            if coercible {
                b.operation(
                    OperationKind::AlterColumnType,
                    Some(&target.table),
                    Some(column),
                    WorkClass::CatalogOnly,
                )
                .detail = Some(format!(
                    "{} -> {new_base}{}",
                    existing.type_sql,
                    modifiers_text(&modifiers)
                ));
                b.reason(format!(
                    "{} to {new_base}{} is binary-coercible: no rewrite, catalog only",
                    existing.type_sql,
                    modifiers_text(&modifiers)
                ));
                return Piece {
                    cmd: cmd.clone(),
                    mode: LockMode::AccessExclusive,
                    plan: Plan::AsWritten,
                };
            }
        }
        _ => {}
    }
    // INV: CO-3 — without facts a type change is assumed to rewrite.
    if target.facts.is_none() {
        b.reason("offline, the column's current type is unknown, so the change is assumed to rewrite (plan against the server to check for a binary-coercible change)");
    }
    if has_using {
        b.reason("a USING clause is treated as a rewrite");
    }
    let piece = rewrite(b, target, OperationKind::AlterColumnType, cmd);
    if let Some(op) = b.operations.last_mut() {
        op.detail = detail;
    }
    piece
}

pub(super) fn modifiers_text(modifiers: &[i64]) -> String {
    if modifiers.is_empty() {
        String::new()
    } else {
        let parts: Vec<String> = modifiers.iter().map(i64::to_string).collect();
        format!("({})", parts.join(","))
    }
}
