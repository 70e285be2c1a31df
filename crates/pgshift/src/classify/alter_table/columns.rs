//! Column subcommands: `ADD COLUMN`, `SET NOT NULL`, `ALTER COLUMN … TYPE`, `SET EXPRESSION`.

use pgshift_sql::ast::{AlterTableCmd, ColumnDef, ConstrType, Constraint, Node};
use pgshift_sql::{quote_ident, NodeEnum, QualifiedName};

use crate::classify::coercion::{is_binary_coercible, typmod_for};
use crate::classify::expr::{volatility, Volatility};
use crate::classify::names::{constraint_name_for, range_var_name};
use crate::classify::steps::{self, StepError};
use crate::classify::{families, Builder, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::Step;

use super::*;

pub(super) fn add_column(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let table = &target.table;
    let Some(def) = column_def(cmd) else {
        b.operation(
            OperationKind::AddColumn,
            Some(table),
            None,
            WorkClass::Opaque,
        );
        return Piece {
            cmd: cmd.clone(),
            mode: LockMode::AccessExclusive,
            plan: Plan::Refused(
                RefusalCause::UnclassifiedStatement,
                "ADD COLUMN without a column definition".to_owned(),
            ),
        };
    };
    let column = def.colname.as_str();
    let (type_base, _) = def
        .type_name
        .as_ref()
        .map(type_name_parts)
        .unwrap_or_default();
    let mut work = WorkClass::CatalogOnly;
    let mut plan = Plan::AsWritten;
    let mut detail = None;
    let mut has_default = false;
    let mut not_null = def.is_not_null;
    let mut split = Vec::new();
    if matches!(
        type_base.as_str(),
        "serial" | "bigserial" | "smallserial" | "serial4" | "serial8" | "serial2"
    ) {
        work = WorkClass::Rewrite;
        plan = Plan::CopyAndSwap;
        detail = Some("serial: every existing row gets a value from a new sequence".to_owned());
        b.reason(format!(
            "adding serial column {column} fills every existing row from a sequence: a rewrite"
        ));
    }
    for constraint in def.constraints.iter().filter_map(|n| match &n.node {
        Some(NodeEnum::Constraint(c)) => Some(c.as_ref()),
        _ => None,
    }) {
        match contype(constraint) {
            ConstrType::ConstrDefault => {
                has_default = true;
                match constraint.raw_expr.as_deref().map(volatility) {
                    Some(Volatility::Volatile) => {
                        work = WorkClass::Rewrite;
                        plan = Plan::CopyAndSwap;
                        detail = Some("volatile default".to_owned());
                        b.reason(format!("the default of {column} is volatile, so every existing row gets its own value: a rewrite"));
                    }
                    Some(Volatility::Unknown) => {
                        work = WorkClass::Rewrite;
                        plan = Plan::CopyAndSwap;
                        detail = Some("default of unknown volatility".to_owned());
                        b.reason(format!("the default of {column} calls a function whose volatility is not known offline; assumed volatile (a rewrite)"));
                    }
                    _ => b.reason(format!("the default of {column} is not volatile: PostgreSQL 11+ stores it once in the catalog, no rewrite")),
                }
            }
            ConstrType::ConstrGenerated => {
                if constraint.generated_kind == "s" {
                    work = WorkClass::Rewrite;
                    plan = Plan::CopyAndSwap;
                    detail = Some("stored generated column".to_owned());
                    b.reason(format!("stored generated column {column} is computed and written for every existing row: a rewrite"));
                } else if target
                    .context
                    .server_version_num()
                    .is_some_and(|v| v < 180000)
                {
                    plan = Plan::Refused(RefusalCause::ServerTooOld, "virtual generated columns need PostgreSQL 18; write STORED on older servers".to_owned());
                } else {
                    b.reason(format!("virtual generated column {column} is computed on read (PostgreSQL 18+): no rewrite"));
                }
            }
            ConstrType::ConstrIdentity => {
                work = WorkClass::Rewrite;
                plan = Plan::CopyAndSwap;
                detail = Some("identity column".to_owned());
                b.reason(format!(
                    "identity column {column} gives every existing row a value: a rewrite"
                ));
            }
            ConstrType::ConstrNotnull => not_null = true,
            ConstrType::ConstrCheck => {
                work = work.max(WorkClass::ScanUnderLock);
                split.push(constraint.clone());
            }
            ConstrType::ConstrForeign => {
                if let Some(pktable) = &constraint.pktable {
                    families::new_foreign_key(b, &range_var_name(pktable));
                }
                work = work.max(WorkClass::ScanUnderLock);
                split.push(constraint.clone());
            }
            ConstrType::ConstrPrimary | ConstrType::ConstrUnique => {
                work = work.max(WorkClass::ScanUnderLock);
                b.reason(format!("the inline UNIQUE/PRIMARY KEY on {column} builds an index under ACCESS EXCLUSIVE; add the column first, then the key as a separate ADD CONSTRAINT for a concurrent build"));
            }
            _ => {}
        }
    }
    if not_null && !has_default && work < WorkClass::Rewrite {
        work = work.max(WorkClass::ScanUnderLock);
        b.reason(format!("NOT NULL without a default: PostgreSQL scans {} to check it, and it fails unless the table is empty", target.table));
    }
    b.operation(OperationKind::AddColumn, Some(table), Some(column), work)
        .detail = detail;
    if !split.is_empty() && matches!(plan, Plan::AsWritten) {
        plan = split_inline_constraints(cmd, def, &split, target);
    }
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan,
    }
}

/// `ADD COLUMN c … CHECK (…) REFERENCES …` as: add the bare column, then each inline
/// constraint `NOT VALID`, then `VALIDATE`.
pub(super) fn split_inline_constraints(
    cmd: &AlterTableCmd,
    def: &ColumnDef,
    inline: &[Constraint],
    target: &Target<'_>,
) -> Plan {
    let mut bare = def.clone();
    bare.constraints.retain(|node| {
        !matches!(&node.node, Some(NodeEnum::Constraint(c))
            if matches!(contype(c), ConstrType::ConstrCheck | ConstrType::ConstrForeign))
    });
    let mut bare_cmd = cmd.clone();
    bare_cmd.def = Some(Box::new(Node {
        node: Some(NodeEnum::ColumnDef(Box::new(bare))),
    }));
    let mut result = Vec::new();
    let add = steps::alter_table_one(
        target.relation,
        bare_cmd,
        "add the column without its constraints (catalog only)",
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
    );
    match add {
        Ok(step) => result.push(step),
        Err(StepError(message)) => {
            return Plan::Refused(RefusalCause::UnclassifiedStatement, message)
        }
    }
    for constraint in inline {
        let mut table_constraint = constraint.clone();
        let column_node = Node {
            node: Some(NodeEnum::String(pgshift_sql::ast::String {
                sval: def.colname.clone(),
            })),
        };
        let suffix = if contype(constraint) == ConstrType::ConstrForeign {
            table_constraint.fk_attrs = vec![column_node];
            "fkey"
        } else {
            "check"
        };
        if table_constraint.conname.is_empty() {
            table_constraint.conname =
                constraint_name_for(&target.table.name, &[def.colname.as_str()], suffix);
        }
        match not_valid_then_validate(&table_constraint, target) {
            Ok(steps) => result.extend(steps),
            Err(StepError(message)) => {
                return Plan::Refused(RefusalCause::UnclassifiedStatement, message)
            }
        }
    }
    Plan::Sequence(result)
}

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
            None if target.declared() => {}
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
        Some(None) if !target.declared() => {
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
