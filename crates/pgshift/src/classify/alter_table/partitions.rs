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
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::ShareUpdateExclusive,
        plan: Plan::AsWritten,
    }
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
