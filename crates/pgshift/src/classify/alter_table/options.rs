//! Table-wide options: persistence, tablespace, storage parameters, trigger enable states.

use pgshift_sql::ast::{AlterTableCmd, AlterTableType};
use pgshift_sql::NodeEnum;

use crate::catalog::TriggerEnabled;
use crate::classify::{Builder, Effect, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;

use super::*;

pub(super) fn set_persistence(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let logged = subtype(cmd) == AlterTableType::AtSetLogged;
    let kind = if logged {
        OperationKind::SetLogged
    } else {
        OperationKind::SetUnlogged
    };
    b.operation(kind, Some(&target.table), None, WorkClass::Rewrite);
    b.reason("changing persistence rewrites the table under ACCESS EXCLUSIVE");
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan: Plan::Refused(
            RefusalCause::RewriteUnsupported,
            format!(
                "SET {} is a rewrite that copy-and-swap does not carry through (unlogged tables are not copied online); run it in a maintenance window",
                if logged { "LOGGED" } else { "UNLOGGED" }
            ),
        ),
    }
}

pub(super) fn set_tablespace(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    if target.is_partitioned() == Some(true) {
        b.operation(
            OperationKind::SetTablespace,
            Some(&target.table),
            Some(&cmd.name),
            WorkClass::CatalogOnly,
        );
        b.reason("on a partitioned table SET TABLESPACE only sets the default for future partitions: no data moves");
        return Piece {
            cmd: cmd.clone(),
            mode: LockMode::AccessExclusive,
            plan: Plan::AsWritten,
        };
    }
    rewrite(b, target, OperationKind::SetTablespace, cmd)
}

/// Storage parameters PostgreSQL changes under SHARE UPDATE EXCLUSIVE (the
/// `lockmode` of each entry in its reloptions tables); any other takes ACCESS
/// EXCLUSIVE.
pub(super) const LIGHT_STORAGE_PARAMETERS: &[&str] = &[
    "fillfactor",
    "toast_tuple_target",
    "parallel_workers",
    "autovacuum_enabled",
    "vacuum_index_cleanup",
    "vacuum_truncate",
    "log_autovacuum_min_duration",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_analyze_threshold",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_vacuum_cost_limit",
    "autovacuum_freeze_min_age",
    "autovacuum_multixact_freeze_min_age",
    "autovacuum_freeze_max_age",
    "autovacuum_multixact_freeze_max_age",
    "autovacuum_freeze_table_age",
    "autovacuum_multixact_freeze_table_age",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_analyze_scale_factor",
    "autovacuum_vacuum_max_threshold",
];

pub(super) fn storage_parameters(
    cmd: &AlterTableCmd,
    target: &Target<'_>,
    b: &mut Builder,
) -> Piece {
    let kind = if subtype(cmd) == AlterTableType::AtSetRelOptions {
        OperationKind::SetStorageParameters
    } else {
        OperationKind::ResetStorageParameters
    };
    let names: Vec<String> = cmd
        .def
        .as_deref()
        .map(crate::classify::names::list_items)
        .unwrap_or_default()
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::DefElem(def)) => Some(def.defname.clone()),
            _ => None,
        })
        .collect();
    let all_light = !names.is_empty()
        && names
            .iter()
            .all(|name| LIGHT_STORAGE_PARAMETERS.contains(&name.as_str()));
    let mode = if all_light {
        LockMode::ShareUpdateExclusive
    } else {
        LockMode::AccessExclusive
    };
    b.operation(kind, Some(&target.table), None, WorkClass::CatalogOnly)
        .detail = Some(names.join(", "));
    Piece {
        cmd: cmd.clone(),
        mode,
        plan: Plan::AsWritten,
    }
}

pub(super) fn trigger_state(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    use AlterTableType as T;
    let (kind, state, name) = match subtype(cmd) {
        T::AtEnableTrig => (
            OperationKind::EnableTrigger,
            TriggerEnabled::Origin,
            Some(cmd.name.clone()),
        ),
        T::AtEnableAlwaysTrig => (
            OperationKind::EnableAlwaysTrigger,
            TriggerEnabled::Always,
            Some(cmd.name.clone()),
        ),
        T::AtEnableReplicaTrig => (
            OperationKind::EnableReplicaTrigger,
            TriggerEnabled::Replica,
            Some(cmd.name.clone()),
        ),
        T::AtDisableTrig => (
            OperationKind::DisableTrigger,
            TriggerEnabled::Disabled,
            Some(cmd.name.clone()),
        ),
        T::AtEnableTrigAll | T::AtEnableTrigUser => {
            (OperationKind::EnableTrigger, TriggerEnabled::Origin, None)
        }
        _ => (
            OperationKind::DisableTrigger,
            TriggerEnabled::Disabled,
            None,
        ),
    };
    b.operation(
        kind,
        Some(&target.table),
        name.as_deref(),
        WorkClass::CatalogOnly,
    );
    b.effect(Effect::SetsTriggerState {
        table: target.table.clone(),
        name,
        state,
    });
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::ShareRowExclusive,
        plan: Plan::AsWritten,
    }
}
