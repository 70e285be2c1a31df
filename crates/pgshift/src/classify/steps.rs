//! The SQL of safer native sequences, written from syntax trees or quoted identifiers.
//!
//! Nothing here edits user SQL as text: a step either deparses a modified copy of the
//! parsed statement, or fills a fixed statement shape with quoted identifiers. Tests
//! parse every step back with the real grammar.

use pgshift_sql::ast::{AlterTableCmd, AlterTableStmt, IndexStmt, Node, ObjectType, RangeVar};
use pgshift_sql::{deparse, quote_ident, NodeEnum, QualifiedName};

use super::WorkClass;
use crate::lock::LockMode;
use crate::route::{Step, StepLock};

/// A step whose SQL could not be written (a deparser limitation).
#[derive(Debug)]
pub(crate) struct StepError(pub(crate) String);

fn step(
    sql: String,
    purpose: &str,
    relation: &QualifiedName,
    mode: LockMode,
    work: WorkClass,
    transactional: bool,
) -> Step {
    Step {
        sql,
        purpose: purpose.to_owned(),
        lock: Some(StepLock {
            relation: relation.clone(),
            mode,
        }),
        work,
        transactional,
    }
}

/// `CREATE [UNIQUE] INDEX CONCURRENTLY …`, from the user's own `CREATE INDEX`, with
/// `relation` as the table (a partition, in the per-partition flow) and `name` as the
/// index name.
pub(crate) fn create_index_concurrently(
    original: &IndexStmt,
    relation: &RangeVar,
    name: &str,
    purpose: &str,
) -> Result<Step, StepError> {
    let mut index = original.clone();
    index.concurrent = true;
    index.idxname = name.to_owned();
    index.relation = Some(relation.clone());
    let sql = deparse_node(NodeEnum::IndexStmt(Box::new(index)))?;
    Ok(step(
        sql,
        purpose,
        &super::names::range_var_name(relation),
        LockMode::ShareUpdateExclusive,
        WorkClass::ConcurrentBuild,
        false,
    ))
}

/// `CREATE INDEX … ON ONLY parent …`: an invalid partitioned index that partitions'
/// indexes are attached to.
pub(crate) fn create_index_on_only(original: &IndexStmt, name: &str) -> Result<Step, StepError> {
    let mut index = original.clone();
    index.concurrent = false;
    index.idxname = name.to_owned();
    let mut relation = index.relation.clone().unwrap_or_default();
    relation.inh = false;
    index.relation = Some(relation.clone());
    let sql = deparse_node(NodeEnum::IndexStmt(Box::new(index)))?;
    Ok(step(
        sql,
        "create the partitioned index on the parent only (no build, invalid until every partition's index is attached)",
        &super::names::range_var_name(&relation),
        LockMode::Share,
        WorkClass::CatalogOnly,
        true,
    ))
}

/// `ALTER INDEX parent_index ATTACH PARTITION partition_index`.
pub(crate) fn attach_index(parent_index: &QualifiedName, partition_index: &QualifiedName) -> Step {
    step(
        format!("ALTER INDEX {parent_index} ATTACH PARTITION {partition_index}"),
        "attach the partition's index to the partitioned index",
        parent_index,
        LockMode::ShareUpdateExclusive,
        WorkClass::CatalogOnly,
        true,
    )
}

/// `ALTER TABLE relation <cmd>` with one subcommand, from a syntax tree.
pub(crate) fn alter_table_one(
    relation: &RangeVar,
    cmd: AlterTableCmd,
    purpose: &str,
    mode: LockMode,
    work: WorkClass,
) -> Result<Step, StepError> {
    let stmt = AlterTableStmt {
        relation: Some(relation.clone()),
        cmds: vec![Node {
            node: Some(NodeEnum::AlterTableCmd(Box::new(cmd))),
        }],
        objtype: ObjectType::ObjectTable as i32,
        missing_ok: false,
    };
    let sql = deparse_node(NodeEnum::AlterTableStmt(stmt))?;
    Ok(step(
        sql,
        purpose,
        &super::names::range_var_name(relation),
        mode,
        work,
        true,
    ))
}

/// `ALTER TABLE t VALIDATE CONSTRAINT c`.
pub(crate) fn validate_constraint(table: &QualifiedName, name: &str) -> Step {
    step(
        format!(
            "ALTER TABLE {table} VALIDATE CONSTRAINT {}",
            quote_ident(name)
        ),
        "validate existing rows while reads and writes continue",
        table,
        LockMode::ShareUpdateExclusive,
        WorkClass::ConcurrentBuild,
        true,
    )
}

/// `ALTER TABLE t ADD CONSTRAINT c CHECK (col IS NOT NULL) NOT VALID`.
pub(crate) fn add_not_null_check(table: &QualifiedName, column: &str, name: &str) -> Step {
    step(
        format!(
            "ALTER TABLE {table} ADD CONSTRAINT {} CHECK ({} IS NOT NULL) NOT VALID",
            quote_ident(name),
            quote_ident(column)
        ),
        "add a NOT VALID check that new rows already satisfy (catalog only)",
        table,
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
        true,
    )
}

/// `ALTER TABLE t ALTER COLUMN col SET NOT NULL`, run once a validated check proves it.
pub(crate) fn set_not_null(table: &QualifiedName, column: &str) -> Step {
    step(
        format!(
            "ALTER TABLE {table} ALTER COLUMN {} SET NOT NULL",
            quote_ident(column)
        ),
        "set NOT NULL; the validated check lets PostgreSQL skip the scan",
        table,
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
        true,
    )
}

/// `ALTER TABLE t DROP CONSTRAINT c`.
pub(crate) fn drop_constraint(table: &QualifiedName, name: &str, purpose: &str) -> Step {
    step(
        format!("ALTER TABLE {table} DROP CONSTRAINT {}", quote_ident(name)),
        purpose,
        table,
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
        true,
    )
}

/// `ALTER TABLE p DETACH PARTITION c CONCURRENTLY`.
pub(crate) fn detach_concurrently(parent: &QualifiedName, partition: &QualifiedName) -> Step {
    step(
        format!("ALTER TABLE {parent} DETACH PARTITION {partition} CONCURRENTLY"),
        "detach without blocking queries on the parent (two internal transactions)",
        parent,
        LockMode::ShareUpdateExclusive,
        WorkClass::CatalogOnly,
        false,
    )
}

/// `DROP INDEX CONCURRENTLY [IF EXISTS] i`.
pub(crate) fn drop_index_concurrently(index: &QualifiedName, if_exists: bool) -> Step {
    let if_exists = if if_exists { "IF EXISTS " } else { "" };
    step(
        format!("DROP INDEX CONCURRENTLY {if_exists}{index}"),
        "drop the index without blocking reads and writes",
        index,
        LockMode::ShareUpdateExclusive,
        WorkClass::CatalogOnly,
        false,
    )
}

/// A statement node written back as SQL.
// INV: CO-2 — steps are deparsed syntax trees or fixed shapes with quoted identifiers.
pub(crate) fn deparse_node(node: NodeEnum) -> Result<String, StepError> {
    deparse(&node).map_err(|err| StepError(err.to_string()))
}
