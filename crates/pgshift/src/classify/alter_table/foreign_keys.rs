//! `ADD FOREIGN KEY` without a validation scan under lock, per server version.
//!
//! The safer form is `NOT VALID`, then `VALIDATE CONSTRAINT` (SHARE UPDATE EXCLUSIVE:
//! reads and writes go on). Before PostgreSQL 18 the server refuses `NOT VALID` on a
//! partitioned table (SQLSTATE 42809, "cannot add NOT VALID foreign key on partitioned
//! table"), so there each partition gets the key `NOT VALID` under the parent's
//! constraint name and is validated on its own; the key added to the parent last
//! adopts the partitions' validated keys instead of scanning them (measured on 14 and
//! 15: no sequential scan, under a millisecond on 300,000 rows, against 177 ms for the
//! plain form). PostgreSQL 18 takes `NOT VALID` on the parent and validates every
//! partition with one `VALIDATE`.

use pgshift_sql::ast::{AlterTableCmd, AlterTableType, Constraint, Node, RangeVar};
use pgshift_sql::NodeEnum;

use crate::classify::steps::{self, StepError};
use crate::classify::WorkClass;
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::Step;

use super::*;

/// The first server version that takes `ADD FOREIGN KEY … NOT VALID` on a partitioned
/// table.
const NOT_VALID_ON_PARTITIONED: i32 = 180000;

/// The steps adding the named foreign key `constraint` to the target without a scan
/// under a lock that blocks writes.
pub(super) fn foreign_key_steps(
    constraint: &Constraint,
    target: &Target<'_>,
) -> Result<Vec<Step>, Plan> {
    let refuse = |StepError(message)| Plan::Refused(RefusalCause::UnclassifiedStatement, message);
    let partitioned = target.is_partitioned() == Some(true);
    let old_server = target
        .context
        .server_version_num()
        .is_none_or(|v| v < NOT_VALID_ON_PARTITIONED);
    let Some(facts) = target.facts.filter(|_| partitioned && old_server) else {
        return not_valid_then_validate(constraint, target).map_err(refuse);
    };
    if let Some(nested) = facts.partitions.iter().find(|p| p.is_partitioned) {
        return Err(Plan::Refused(
            RefusalCause::NestedPartitioning,
            format!(
                "partition {} is itself partitioned; the per-partition foreign-key flow (needed before PostgreSQL 18, which refuses NOT VALID on a partitioned table) handles one level",
                nested.name
            ),
        ));
    }
    let mut result = Vec::new();
    for partition in &facts.partitions {
        let relation = RangeVar {
            schemaname: partition.name.schema.clone().unwrap_or_default(),
            relname: partition.name.name.clone(),
            inh: true,
            relpersistence: "p".to_owned(),
            ..Default::default()
        };
        let partition_target = Target {
            relation: &relation,
            table: partition.name.clone(),
            facts: None,
            context: target.context,
            dropped: target.dropped.clone(),
        };
        result.extend(not_valid_then_validate(constraint, &partition_target).map_err(refuse)?);
    }
    let add = AlterTableCmd {
        subtype: AlterTableType::AtAddConstraint as i32,
        def: Some(Box::new(Node {
            node: Some(NodeEnum::Constraint(Box::new(Constraint {
                skip_validation: false,
                initially_valid: true,
                ..constraint.clone()
            }))),
        })),
        behavior: 1,
        ..Default::default()
    };
    result.push(
        steps::alter_table_one(
            target.relation,
            add,
            "add the key to the parent; it adopts the partitions' validated keys instead of scanning",
            LockMode::ShareRowExclusive,
            WorkClass::CatalogOnly,
        )
        .map_err(refuse)?,
    );
    Ok(result)
}
