//! Partition subcommands: `ATTACH PARTITION`, `DETACH PARTITION [CONCURRENTLY]`.

use pgshift_sql::ast::AlterTableCmd;
use pgshift_sql::NodeEnum;

use crate::catalog::RelationFacts;
use crate::classify::names::range_var_name;
use crate::classify::steps::{self};
use crate::classify::{families, Builder, ObjectKind, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;

use super::*;

pub(super) fn partition_cmd(cmd: &AlterTableCmd) -> Option<&pgshift_sql::ast::PartitionCmd> {
    match cmd.def.as_deref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::PartitionCmd(partition)) => Some(partition),
        _ => None,
    }
}

pub(super) fn attach_partition(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let partition = partition_cmd(cmd)
        .and_then(|p| p.name.as_ref())
        .map(range_var_name);
    if let Some(partition) = &partition {
        b.lock(
            partition,
            ObjectKind::Table,
            LockMode::AccessExclusive,
            false,
        );
        families::attached_table(b, target.context, &target.table, partition);
    }
    families::new_partition(b, target.context, &target.table);
    let default = target.facts.and_then(RelationFacts::default_partition);
    if let Some(default) = default {
        b.reason(format!(
            "the default partition {} is scanned under ACCESS EXCLUSIVE to prove none of its rows belong to the new partition",
            default.name
        ));
    }
    b.operation(
        OperationKind::AttachPartition,
        Some(&target.table),
        partition.as_ref().map(|p| p.name.as_str()),
        WorkClass::ScanUnderLock,
    );
    b.reason("ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on the parent and scans the attached table under ACCESS EXCLUSIVE, unless a validated CHECK constraint already implies the bound");
    let piece = |plan: Plan| Piece {
        cmd: cmd.clone(),
        mode: LockMode::ShareUpdateExclusive,
        plan,
    };
    // A partition created earlier in the input holds nothing to scan; with a default
    // partition, ATTACH scans that one too, which no check on the new partition spares.
    let scaffold = partition_cmd(cmd)
        .filter(|_| default.is_none())
        .filter(|p| {
            p.name
                .as_ref()
                .is_some_and(|rv| !target.context.is_new(&range_var_name(rv)))
        })
        .and_then(|p| bound_scaffold(p, target));
    match scaffold {
        Some(steps) => {
            b.reason("a CHECK implying the bound is added NOT VALID and validated while reads and writes continue, so the ATTACH itself does not scan");
            piece(Plan::Sequence(steps))
        }
        None => piece(Plan::AsWritten),
    }
}

/// Check `NOT VALID` on the partition that implies its bound, validate it, ATTACH
/// (PostgreSQL proves the bound from the check and skips its scan), drop the check.
/// Only for a parent ranged or listed on one plain column (the common case) whose key
/// the live catalog gives; otherwise none.
fn bound_scaffold(
    partition: &pgshift_sql::ast::PartitionCmd,
    target: &Target<'_>,
) -> Option<Vec<crate::route::Step>> {
    let relation = partition.name.as_ref()?;
    let bound = partition.bound.as_ref()?;
    let column = key_column(target.facts?.partition_key.as_deref()?)?;
    let check = bound_check(&column, bound)?;
    let table = range_var_name(relation);
    let name = crate::classify::names::constraint_name_for(&table.name, &[], "pgshift_bound");
    let add = pgshift_sql::ast::AlterTableCmd {
        subtype: pgshift_sql::ast::AlterTableType::AtAddConstraint as i32,
        def: Some(Box::new(node(NodeEnum::Constraint(Box::new(
            pgshift_sql::ast::Constraint {
                contype: pgshift_sql::ast::ConstrType::ConstrCheck as i32,
                conname: name.clone(),
                raw_expr: Some(Box::new(check)),
                skip_validation: true,
                initially_valid: false,
                is_enforced: true,
                ..Default::default()
            },
        ))))),
        behavior: pgshift_sql::ast::DropBehavior::DropRestrict as i32,
        ..Default::default()
    };
    Some(vec![
        steps::alter_table_one(
            relation,
            add,
            "add a NOT VALID check implying the partition's bound (catalog only)",
            LockMode::AccessExclusive,
            WorkClass::CatalogOnly,
        )
        .ok()?,
        steps::validate_constraint(&table, &name),
        steps::alter_table_one(
            target.relation,
            partition_cmd_only(partition),
            "attach: the validated check implies the bound, so PostgreSQL skips the scan",
            LockMode::ShareUpdateExclusive,
            WorkClass::CatalogOnly,
        )
        .ok()?,
        steps::drop_constraint(&table, &name, "remove the scaffold check, no longer needed"),
    ])
}

fn partition_cmd_only(partition: &pgshift_sql::ast::PartitionCmd) -> AlterTableCmd {
    AlterTableCmd {
        subtype: pgshift_sql::ast::AlterTableType::AtAttachPartition as i32,
        def: Some(Box::new(node(NodeEnum::PartitionCmd(partition.clone())))),
        behavior: pgshift_sql::ast::DropBehavior::DropRestrict as i32,
        ..Default::default()
    }
}

fn node(n: NodeEnum) -> pgshift_sql::ast::Node {
    pgshift_sql::ast::Node { node: Some(n) }
}

/// The one plain column a `RANGE (…)` or `LIST (…)` key (as `pg_get_partkeydef`
/// prints it) is on, read with the real grammar.
fn key_column(key: &str) -> Option<String> {
    let sql = format!("CREATE TABLE pgshift_key () PARTITION BY {key}");
    let statements = pgshift_sql::parse(&sql).ok()?;
    let NodeEnum::CreateStmt(stmt) = &statements.first()?.node else {
        return None;
    };
    let spec = stmt.partspec.as_ref()?;
    let strategy = pgshift_sql::ast::PartitionStrategy::try_from(spec.strategy).ok()?;
    if !matches!(
        strategy,
        pgshift_sql::ast::PartitionStrategy::Range | pgshift_sql::ast::PartitionStrategy::List
    ) {
        return None;
    }
    match spec.part_params.as_slice() {
        [pgshift_sql::ast::Node {
            node: Some(NodeEnum::PartitionElem(elem)),
        }] if !elem.name.is_empty() && elem.collation.is_empty() && elem.opclass.is_empty() => {
            Some(elem.name.clone())
        }
        _ => None,
    }
}

/// `column IS NOT NULL AND column >= lower AND column < upper` for a range bound,
/// `column IS NOT NULL AND column IN (…)` for a list without NULL: the expression
/// PostgreSQL itself derives as the partition's constraint for a one-column key.
fn bound_check(
    column: &str,
    bound: &pgshift_sql::ast::PartitionBoundSpec,
) -> Option<pgshift_sql::ast::Node> {
    use pgshift_sql::ast::{AExpr, AExprKind, BoolExpr, BoolExprType, ColumnRef, NullTest};
    let column_ref = || {
        Some(Box::new(node(NodeEnum::ColumnRef(ColumnRef {
            fields: vec![node(NodeEnum::String(pgshift_sql::ast::String {
                sval: column.to_owned(),
            }))],
            location: -1,
        }))))
    };
    let op = |kind: AExprKind, name: &str, right: pgshift_sql::ast::Node| {
        node(NodeEnum::AExpr(Box::new(AExpr {
            kind: kind as i32,
            name: vec![node(NodeEnum::String(pgshift_sql::ast::String {
                sval: name.to_owned(),
            }))],
            lexpr: column_ref(),
            rexpr: Some(Box::new(right)),
            ..Default::default()
        })))
    };
    let mut args = vec![node(NodeEnum::NullTest(Box::new(NullTest {
        arg: column_ref(),
        nulltesttype: pgshift_sql::ast::NullTestType::IsNotNull as i32,
        argisrow: false,
        ..Default::default()
    })))];
    if bound.is_default {
        return None;
    }
    match bound.strategy.as_str() {
        "r" => {
            // The raw tree holds each bound's expressions; MINVALUE and MAXVALUE are
            // column references by those names until parse analysis.
            for (list, name) in [(&bound.lowerdatums, ">="), (&bound.upperdatums, "<")] {
                let [value] = list.as_slice() else {
                    return None;
                };
                match &value.node {
                    Some(NodeEnum::ColumnRef(c))
                        if matches!(c.fields.as_slice(), [pgshift_sql::ast::Node {
                            node: Some(NodeEnum::String(s)),
                        }] if s.sval == "minvalue" || s.sval == "maxvalue") => {}
                    Some(NodeEnum::ColumnRef(_)) => return None,
                    _ if is_null(value) => return None,
                    _ => args.push(op(AExprKind::AexprOp, name, value.clone())),
                }
            }
        }
        "l" if !bound.listdatums.is_empty() && !bound.listdatums.iter().any(is_null) => {
            let list = node(NodeEnum::List(pgshift_sql::ast::List {
                items: bound.listdatums.clone(),
            }));
            args.push(op(AExprKind::AexprIn, "=", list));
        }
        _ => return None,
    }
    Some(node(NodeEnum::BoolExpr(Box::new(BoolExpr {
        boolop: BoolExprType::AndExpr as i32,
        args,
        ..Default::default()
    }))))
}

fn is_null(value: &pgshift_sql::ast::Node) -> bool {
    matches!(&value.node, Some(NodeEnum::AConst(c)) if c.isnull)
}

pub(super) fn detach_partition(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let partition_cmd = partition_cmd(cmd);
    let concurrent = partition_cmd.is_some_and(|p| p.concurrent);
    let partition = partition_cmd
        .and_then(|p| p.name.as_ref())
        .map(range_var_name);
    let mode = if concurrent {
        LockMode::ShareUpdateExclusive
    } else {
        LockMode::AccessExclusive
    };
    if let Some(partition) = &partition {
        // DETACH … CONCURRENTLY takes ACCESS EXCLUSIVE on the partition in its second
        // transaction, like the plain form.
        b.lock(
            partition,
            ObjectKind::Table,
            LockMode::AccessExclusive,
            false,
        );
    }
    families::detach_partition(b, target.context, &target.table, partition.as_ref());
    let kind = if concurrent {
        OperationKind::DetachPartitionConcurrently
    } else {
        OperationKind::DetachPartition
    };
    let default = target.facts.and_then(RelationFacts::default_partition);
    b.operation(
        kind,
        Some(&target.table),
        partition.as_ref().map(|p| p.name.as_str()),
        WorkClass::CatalogOnly,
    )
    .detail = default.map(|_| HAS_DEFAULT_PARTITION.to_owned());
    let piece = |plan: Plan| Piece {
        cmd: cmd.clone(),
        mode,
        plan,
    };
    if concurrent {
        b.outside_transaction_only();
        if let Some(default) = default {
            return piece(Plan::Refused(
                RefusalCause::DetachConcurrentlyWithDefault,
                format!(
                    "{} has a default partition ({}); PostgreSQL does not allow DETACH PARTITION CONCURRENTLY then",
                    target.table, default.name
                ),
            ));
        }
        return piece(Plan::AsWritten);
    }
    if default.is_some() {
        b.reason("the table has a default partition, so DETACH CONCURRENTLY is not possible; the detach runs as written under a short lock budget");
        return piece(Plan::AsWritten);
    }
    let Some(partition) = partition else {
        return piece(Plan::AsWritten);
    };
    b.reason("DETACH PARTITION takes ACCESS EXCLUSIVE on the parent; DETACH … CONCURRENTLY needs only SHARE UPDATE EXCLUSIVE");
    if target.facts.is_none() {
        b.reason("offline, the table is assumed to have no default partition (CONCURRENTLY is not allowed with one)");
    }
    piece(Plan::Sequence(vec![steps::detach_concurrently(
        &target.table,
        &partition,
    )]))
}
