//! `ADD COLUMN`, with the inline constraints that make PostgreSQL scan or build under
//! ACCESS EXCLUSIVE split off into safer steps.
//!
//! What the server does for a new column (measured with `pg_stat_xact_user_tables` on
//! PostgreSQL 14, 15 and 18; `tests/classify_add_column.rs` keeps the measurement):
//! - `CHECK` is evaluated for every existing row (a scan), with or without a default;
//! - `REFERENCES` is validated by a scan only when the column has a (non-NULL) default:
//!   without one every existing row is NULL and PostgreSQL skips the validation;
//! - `UNIQUE` and `PRIMARY KEY` build an index (a scan and a sort);
//! - `NOT NULL` without a default is checked by a scan; with a non-NULL default it is
//!   not (the default is known not to be NULL);
//! - a volatile default, `serial`, identity and stored generated columns write every
//!   row (a rewrite: copy-and-swap).
//!
//! The safer sequence adds the bare column (catalog only), then NOT NULL through a
//! validated check, each `CHECK`/`REFERENCES` as `NOT VALID` + `VALIDATE`, and each
//! key as a concurrent unique index (per partition on a partitioned table) turned
//! into the constraint.

use pgshift_sql::ast::{AlterTableCmd, ColumnDef, ConstrType, Constraint, Node};
use pgshift_sql::quote_ident;
use pgshift_sql::NodeEnum;

use crate::classify::expr::{volatility, Volatility};
use crate::classify::names::{constraint_name_for, range_var_name};
use crate::classify::steps::{self, StepError};
use crate::classify::{families, Builder, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;

use super::*;

/// The inline constraints of a column definition.
fn inline_constraints(def: &ColumnDef) -> impl Iterator<Item = &Constraint> {
    def.constraints.iter().filter_map(|n| match &n.node {
        Some(NodeEnum::Constraint(c)) => Some(c.as_ref()),
        _ => None,
    })
}

/// Whether a `DEFAULT` gives existing rows a value (`DEFAULT NULL` does not).
fn gives_a_value(constraint: &Constraint) -> bool {
    let null_literal = matches!(
        constraint.raw_expr.as_deref().and_then(|n| n.node.as_ref()),
        Some(NodeEnum::AConst(c)) if c.isnull
    );
    !null_literal
}

/// What the inline constraints of a new column ask of the server.
#[derive(Default)]
struct Inline {
    /// `CHECK`s, and `REFERENCES` with a default: `NOT VALID` + `VALIDATE`.
    validated: Vec<Constraint>,
    /// `UNIQUE` and `PRIMARY KEY`: a concurrent unique index.
    keys: Vec<Constraint>,
    /// `NOT NULL` without a default: through a validated check.
    not_null_scan: bool,
    /// `NOT NULL` with a default: set by the bare `ADD COLUMN` itself.
    not_null_free: bool,
    /// Whether `NOT NULL` is written (a primary key implies it without it).
    not_null_written: bool,
}

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
    let has_default = inline_constraints(def)
        .any(|c| contype(c) == ConstrType::ConstrDefault && gives_a_value(c));
    let mut not_null = def.is_not_null;
    let mut inline = Inline {
        not_null_written: def.is_not_null
            || inline_constraints(def).any(|c| contype(c) == ConstrType::ConstrNotnull),
        ..Inline::default()
    };
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
    for constraint in inline_constraints(def) {
        match contype(constraint) {
            ConstrType::ConstrDefault => match constraint.raw_expr.as_deref().map(volatility) {
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
            },
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
                b.reason(format!("the inline CHECK on {column} is evaluated for every existing row under ACCESS EXCLUSIVE; it is added NOT VALID and validated without blocking writes"));
                inline.validated.push(constraint.clone());
            }
            ConstrType::ConstrForeign => {
                if let Some(pktable) = &constraint.pktable {
                    families::new_foreign_key(b, &range_var_name(pktable));
                }
                if has_default {
                    work = work.max(WorkClass::ScanUnderLock);
                    b.reason(format!("with a default, the inline REFERENCES on {column} is validated by a scan under ACCESS EXCLUSIVE; it is added NOT VALID and validated without blocking writes"));
                    inline.validated.push(constraint.clone());
                } else {
                    b.reason(format!("without a default every existing row has NULL in {column}, so PostgreSQL adds the inline REFERENCES without a validation scan"));
                }
            }
            ConstrType::ConstrPrimary | ConstrType::ConstrUnique => {
                work = work.max(WorkClass::ScanUnderLock);
                b.reason(format!("the inline UNIQUE/PRIMARY KEY on {column} builds an index under ACCESS EXCLUSIVE; the column is added first and the key built CONCURRENTLY, then adopted with USING INDEX"));
                if contype(constraint) == ConstrType::ConstrPrimary {
                    not_null = true;
                }
                inline.keys.push(constraint.clone());
            }
            _ => {}
        }
    }
    if not_null && !has_default && work < WorkClass::Rewrite {
        work = work.max(WorkClass::ScanUnderLock);
        inline.not_null_scan = true;
        b.reason(format!("NOT NULL without a default: PostgreSQL scans {} to check it (and it fails unless the table is empty); NOT NULL is set through a validated check instead", target.table));
        if let Some(rows) = live_rows(target) {
            plan = Plan::Refused(
                RefusalCause::NullInExistingRows,
                format!("ADD COLUMN {} NOT NULL has no default, and {} has rows ({rows}): every existing row would hold NULL, so PostgreSQL will fail the statement (column contains null values, SQLSTATE 23502)", quote_ident(column), target.table),
            );
        }
    }
    inline.not_null_free = not_null && has_default;
    b.operation(OperationKind::AddColumn, Some(table), Some(column), work)
        .detail = detail;
    let split = !inline.validated.is_empty() || !inline.keys.is_empty() || inline.not_null_scan;
    if split && matches!(plan, Plan::AsWritten) {
        plan = inline_sequence(cmd, def, &inline, target, b);
    }
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan,
    }
}

/// The bare `ADD COLUMN` (catalog only), then each part the server would have scanned
/// or built under ACCESS EXCLUSIVE, as steps that do not block writes.
fn inline_sequence(
    cmd: &AlterTableCmd,
    def: &ColumnDef,
    inline: &Inline,
    target: &Target<'_>,
    b: &mut Builder,
) -> Plan {
    let refuse = |StepError(message)| Plan::Refused(RefusalCause::UnclassifiedStatement, message);
    let column = def.colname.as_str();
    let mut bare = def.clone();
    bare.constraints.retain(
        |node| !matches!(&node.node, Some(NodeEnum::Constraint(c)) if split_off(c, inline)),
    );
    if inline.not_null_scan {
        bare.is_not_null = false;
    }
    if inline.not_null_free && !inline.not_null_written {
        // A primary key implies NOT NULL; with a default it costs no scan.
        bare.constraints.push(Node {
            node: Some(NodeEnum::Constraint(Box::new(Constraint {
                contype: ConstrType::ConstrNotnull as i32,
                location: -1,
                ..Constraint::default()
            }))),
        });
    }
    let mut bare_cmd = cmd.clone();
    bare_cmd.def = Some(Box::new(Node {
        node: Some(NodeEnum::ColumnDef(Box::new(bare))),
    }));
    let mut result = match steps::alter_table_one(
        target.relation,
        bare_cmd,
        "add the column without the parts that scan or build (catalog only)",
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
    ) {
        Ok(step) => vec![step],
        Err(error) => return refuse(error),
    };
    if inline.not_null_scan {
        result.extend(not_null_scaffold(&target.table, column));
    }
    for constraint in &inline.validated {
        let mut table_constraint = constraint.clone();
        let suffix = if contype(constraint) == ConstrType::ConstrForeign {
            table_constraint.fk_attrs = vec![string_node(column)];
            "fkey"
        } else {
            "check"
        };
        if table_constraint.conname.is_empty() {
            table_constraint.conname = constraint_name_for(&target.table.name, &[column], suffix);
        }
        let steps = if suffix == "fkey" {
            foreign_key_steps(&table_constraint, target)
        } else {
            not_valid_then_validate(&table_constraint, target).map_err(refuse)
        };
        match steps {
            Ok(steps) => result.extend(steps),
            Err(plan) => return plan,
        }
    }
    let not_null_already = inline.not_null_scan || inline.not_null_free;
    for key in &inline.keys {
        let table_constraint = Constraint {
            keys: vec![string_node(column)],
            ..key.clone()
        };
        let kind = if contype(key) == ConstrType::ConstrPrimary {
            OperationKind::AddPrimaryKey
        } else {
            OperationKind::AddUnique
        };
        let known: &[&str] = if not_null_already { &[column] } else { &[] };
        match unique_via_concurrent_index(&table_constraint, kind, target, b, known) {
            Ok(steps) => result.extend(steps),
            Err(plan) => return plan,
        }
    }
    Plan::Sequence(result)
}

/// Whether an inline constraint moves out of the bare `ADD COLUMN` into its own steps.
fn split_off(constraint: &Constraint, inline: &Inline) -> bool {
    match contype(constraint) {
        ConstrType::ConstrCheck | ConstrType::ConstrPrimary | ConstrType::ConstrUnique => true,
        ConstrType::ConstrForeign => inline.validated.iter().any(|c| c == constraint),
        ConstrType::ConstrNotnull => inline.not_null_scan,
        _ => false,
    }
}

fn string_node(value: &str) -> Node {
    Node {
        node: Some(NodeEnum::String(pgshift_sql::ast::String {
            sval: value.to_owned(),
        })),
    }
}

/// When live facts (not declared ones) say the table holds rows, how they say it: the
/// row estimate, or, for a table never analysed, the size of its heap.
fn live_rows(target: &Target<'_>) -> Option<String> {
    let facts = target.facts.filter(|_| !target.declared())?;
    if facts.row_estimate > 0 {
        Some(format!("about {} by its statistics", facts.row_estimate))
    } else if facts.row_estimate < 0 && facts.sizes.heap_bytes > 0 {
        Some(format!(
            "never analysed, {} bytes of heap",
            facts.sizes.heap_bytes
        ))
    } else {
        None
    }
}
