//! Constraint subcommands: `ADD CONSTRAINT` (with `NOT VALID` + `VALIDATE` and concurrent
//! unique indexes as the safer forms), `VALIDATE CONSTRAINT`, `DROP CONSTRAINT`.

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableType, ConstrType, Constraint, IndexElem, IndexStmt, Node, RangeVar,
};
use pgshift_sql::NodeEnum;

use crate::classify::expr::referenced_columns;
use crate::classify::names::{
    choose_constraint_name, constraint_name_for, range_var_name, strings,
};
use crate::classify::steps::{self, StepError};
use crate::classify::{families, Builder, ObjectKind, OperationKind, WorkClass};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::Step;

use super::*;

/// `ADD CONSTRAINT … NOT VALID` then `VALIDATE CONSTRAINT`, for a named CHECK, FOREIGN
/// KEY or (PostgreSQL 18) NOT NULL constraint.
pub(super) fn not_valid_then_validate(
    constraint: &Constraint,
    target: &Target<'_>,
) -> Result<Vec<Step>, StepError> {
    let mut not_valid = constraint.clone();
    not_valid.skip_validation = true;
    not_valid.initially_valid = false;
    let mode = if contype(constraint) == ConstrType::ConstrForeign {
        LockMode::ShareRowExclusive
    } else {
        LockMode::AccessExclusive
    };
    let add = AlterTableCmd {
        subtype: AlterTableType::AtAddConstraint as i32,
        def: Some(Box::new(Node {
            node: Some(NodeEnum::Constraint(Box::new(not_valid))),
        })),
        behavior: 1,
        ..Default::default()
    };
    Ok(vec![
        steps::alter_table_one(
            target.relation,
            add,
            "add the constraint NOT VALID: enforced for new rows at once, existing rows not scanned",
            mode,
            WorkClass::CatalogOnly,
        )?,
        steps::validate_constraint(&target.table, &constraint.conname),
    ])
}

/// The name PostgreSQL gives a `CHECK` or foreign key that `ALTER TABLE … ADD` leaves
/// unnamed, on table `table` whose live facts are `facts`: `None` when the constraint
/// is named, or of another kind. Without facts, names held elsewhere in the schema are
/// unknown and the first candidate is given.
pub(crate) fn unnamed_constraint_name(
    constraint: &Constraint,
    table: &str,
    facts: Option<&RelationFacts>,
) -> Option<String> {
    if !constraint.conname.is_empty() {
        return None;
    }
    let taken = |name: &str| {
        facts.is_some_and(|f| {
            f.schema_constraint_names.iter().any(|n| n == name)
                || f.constraints.iter().any(|c| c.name == name)
        })
    };
    match contype(constraint) {
        ConstrType::ConstrCheck => {
            let columns = constraint
                .raw_expr
                .as_deref()
                .map(referenced_columns)
                .unwrap_or_default();
            let column: Vec<&str> = if columns.len() == 1 {
                vec![columns[0].as_str()]
            } else {
                Vec::new()
            };
            Some(choose_constraint_name(table, &column, "check", taken))
        }
        ConstrType::ConstrForeign => {
            let columns = strings(&constraint.fk_attrs);
            let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
            Some(choose_constraint_name(table, &columns, "fkey", taken))
        }
        _ => None,
    }
}

pub(super) fn add_constraint(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let table = Some(&target.table);
    let Some(constraint) = constraint_def(cmd) else {
        b.operation(OperationKind::Unclassified, table, None, WorkClass::Opaque);
        return Piece {
            cmd: cmd.clone(),
            mode: LockMode::AccessExclusive,
            plan: Plan::Refused(
                RefusalCause::UnclassifiedStatement,
                "ADD CONSTRAINT without a constraint".to_owned(),
            ),
        };
    };
    let not_valid = constraint.skip_validation;
    let using_index = !constraint.indexname.is_empty();
    let mut named = constraint.clone();
    let (kind, mode) = match contype(constraint) {
        ConstrType::ConstrCheck => {
            if let Some(name) =
                unnamed_constraint_name(constraint, &target.table.name, target.facts)
            {
                named.conname = name;
            }
            (OperationKind::AddCheck, LockMode::AccessExclusive)
        }
        ConstrType::ConstrForeign => {
            if let Some(pktable) = &constraint.pktable {
                families::new_foreign_key(b, &range_var_name(pktable));
            }
            if let Some(name) =
                unnamed_constraint_name(constraint, &target.table.name, target.facts)
            {
                named.conname = name;
            }
            (OperationKind::AddForeignKey, LockMode::ShareRowExclusive)
        }
        ConstrType::ConstrPrimary if using_index => (
            OperationKind::AddConstraintUsingIndex,
            LockMode::AccessExclusive,
        ),
        ConstrType::ConstrUnique if using_index => (
            OperationKind::AddConstraintUsingIndex,
            LockMode::AccessExclusive,
        ),
        ConstrType::ConstrPrimary => (OperationKind::AddPrimaryKey, LockMode::AccessExclusive),
        ConstrType::ConstrUnique => (OperationKind::AddUnique, LockMode::AccessExclusive),
        ConstrType::ConstrExclusion => (OperationKind::AddExclusion, LockMode::AccessExclusive),
        ConstrType::ConstrNotnull => (
            OperationKind::AddNotNullConstraint,
            LockMode::AccessExclusive,
        ),
        _ => (OperationKind::Unclassified, LockMode::AccessExclusive),
    };
    let piece = |plan: Plan| Piece {
        cmd: cmd.clone(),
        mode,
        plan,
    };
    let name = named.conname.clone();
    match kind {
        OperationKind::AddCheck
        | OperationKind::AddForeignKey
        | OperationKind::AddNotNullConstraint => {
            if not_valid {
                b.operation(kind, table, Some(&name), WorkClass::CatalogOnly);
                b.reason("NOT VALID: existing rows are not scanned; run VALIDATE CONSTRAINT later (it does not block writes)");
                return piece(Plan::AsWritten);
            }
            b.operation(kind, table, Some(&name), WorkClass::ScanUnderLock);
            b.reason(format!(
                "validating the constraint scans every row of {} while holding {}",
                target.table,
                mode.sql_name()
            ));
            if kind == OperationKind::AddNotNullConstraint
                && target
                    .context
                    .server_version_num()
                    .is_some_and(|v| v < 180000)
            {
                return piece(Plan::AsWritten);
            }
            if kind == OperationKind::AddForeignKey {
                return match foreign_key_steps(&named, target) {
                    Ok(steps) => piece(Plan::Sequence(steps)),
                    Err(plan) => piece(plan),
                };
            }
            match not_valid_then_validate(&named, target) {
                Ok(steps) => piece(Plan::Sequence(steps)),
                Err(StepError(message)) => {
                    piece(Plan::Refused(RefusalCause::UnclassifiedStatement, message))
                }
            }
        }
        OperationKind::AddConstraintUsingIndex => {
            b.operation(kind, table, Some(&name), WorkClass::CatalogOnly);
            b.reason("USING INDEX adopts an existing unique index: no build");
            if contype(constraint) == ConstrType::ConstrPrimary {
                b.reason("a primary key needs NOT NULL columns; any column not yet NOT NULL is scanned under ACCESS EXCLUSIVE");
            }
            piece(Plan::AsWritten)
        }
        OperationKind::AddPrimaryKey | OperationKind::AddUnique => {
            b.operation(kind, table, Some(&name), WorkClass::ScanUnderLock);
            b.reason(format!(
                "builds a unique index on {} under ACCESS EXCLUSIVE",
                target.table
            ));
            unique_via_concurrent_index(constraint, kind, target, b, &[])
                .map_or_else(&piece, |steps| piece(Plan::Sequence(steps)))
        }
        OperationKind::AddExclusion => {
            b.operation(kind, table, Some(&name), WorkClass::ScanUnderLock);
            b.reason("an exclusion constraint has no concurrent form; copy-and-swap builds it on the shadow instead");
            piece(Plan::CopyAndSwap)
        }
        _ => {
            b.operation(kind, table, Some(&name), WorkClass::Opaque);
            piece(Plan::Refused(
                RefusalCause::UnclassifiedStatement,
                "this constraint form is not classified".to_owned(),
            ))
        }
    }
}

/// `UNIQUE`/`PRIMARY KEY` as a concurrent unique index, then `ADD CONSTRAINT … USING
/// INDEX` (and, for a primary key, NOT NULL on its columns first without a scan under
/// lock). On a partitioned table: a concurrent index per partition, then the
/// constraint on the parent, which adopts them.
pub(super) fn unique_via_concurrent_index(
    constraint: &Constraint,
    kind: OperationKind,
    target: &Target<'_>,
    b: &mut Builder,
    not_null_already: &[&str],
) -> Result<Vec<Step>, Plan> {
    let columns = strings(&constraint.keys);
    let column_refs: Vec<&str> = columns.iter().map(String::as_str).collect();
    let name = if !constraint.conname.is_empty() {
        constraint.conname.clone()
    } else if kind == OperationKind::AddPrimaryKey {
        constraint_name_for(&target.table.name, &[], "pkey")
    } else {
        constraint_name_for(&target.table.name, &column_refs, "key")
    };
    let refuse = |message: String| Plan::Refused(RefusalCause::UnclassifiedStatement, message);
    let mut result = Vec::new();
    if kind == OperationKind::AddPrimaryKey {
        for column in &columns {
            let already = not_null_already.contains(&column.as_str())
                || target
                    .facts
                    .and_then(|facts| facts.column(column))
                    .is_some_and(|c| c.not_null);
            if !already {
                result.extend(not_null_scaffold(&target.table, column));
            }
        }
        if target.facts.is_none() {
            b.reason("offline, every key column is assumed nullable, so each gets NOT NULL through a validated check first");
        }
    }
    let index = IndexStmt {
        idxname: name.clone(),
        relation: Some(target.relation.clone()),
        access_method: "btree".to_owned(),
        table_space: constraint.indexspace.clone(),
        index_params: columns
            .iter()
            .map(|column| Node {
                node: Some(NodeEnum::IndexElem(Box::new(IndexElem {
                    name: column.clone(),
                    ordering: 1,
                    nulls_ordering: 1,
                    ..Default::default()
                }))),
            })
            .collect(),
        index_including_params: strings(&constraint.including)
            .into_iter()
            .map(|column| Node {
                node: Some(NodeEnum::IndexElem(Box::new(IndexElem {
                    name: column,
                    ordering: 1,
                    nulls_ordering: 1,
                    ..Default::default()
                }))),
            })
            .collect(),
        options: constraint.options.clone(),
        unique: true,
        nulls_not_distinct: constraint.nulls_not_distinct,
        concurrent: true,
        ..Default::default()
    };
    if target.is_partitioned() == Some(true) {
        let facts = target
            .facts
            .map(|f| f.partitions.clone())
            .unwrap_or_default();
        for partition in &facts {
            let partition_relation = RangeVar {
                schemaname: partition.name.schema.clone().unwrap_or_default(),
                relname: partition.name.name.clone(),
                inh: true,
                relpersistence: "p".to_owned(),
                ..Default::default()
            };
            let index_name = constraint_name_for(&partition.name.name, &column_refs, "key");
            result.push(
                steps::create_index_concurrently(
                    &index,
                    &partition_relation,
                    &index_name,
                    "build the partition's unique index without blocking writes",
                )
                .map_err(|StepError(m)| refuse(m))?,
            );
        }
        let add = AlterTableCmd {
            subtype: AlterTableType::AtAddConstraint as i32,
            def: Some(Box::new(Node {
                node: Some(NodeEnum::Constraint(Box::new(Constraint {
                    conname: name,
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
                "add the constraint on the parent; it adopts the partitions' indexes instead of building",
                LockMode::AccessExclusive,
                WorkClass::CatalogOnly,
            )
            .map_err(|StepError(m)| refuse(m))?,
        );
        return Ok(result);
    }
    if target.is_partitioned().is_none() {
        b.reason("offline, the table is assumed not partitioned; a partitioned table gets one concurrent index per partition (plan against the server to see them)");
    }
    result.push(
        steps::create_index_concurrently(
            &index,
            target.relation,
            &name,
            "build the unique index without blocking writes",
        )
        .map_err(|StepError(m)| refuse(m))?,
    );
    let using = AlterTableCmd {
        subtype: AlterTableType::AtAddConstraint as i32,
        def: Some(Box::new(Node {
            node: Some(NodeEnum::Constraint(Box::new(Constraint {
                contype: constraint.contype,
                conname: name.clone(),
                indexname: name,
                deferrable: constraint.deferrable,
                initdeferred: constraint.initdeferred,
                ..Default::default()
            }))),
        })),
        behavior: 1,
        ..Default::default()
    };
    result.push(
        steps::alter_table_one(
            target.relation,
            using,
            "turn the index into the constraint (catalog only)",
            LockMode::AccessExclusive,
            WorkClass::CatalogOnly,
        )
        .map_err(|StepError(m)| refuse(m))?,
    );
    Ok(result)
}

pub(super) fn validate_constraint(
    cmd: &AlterTableCmd,
    target: &Target<'_>,
    b: &mut Builder,
) -> Piece {
    b.operation(
        OperationKind::ValidateConstraint,
        Some(&target.table),
        Some(&cmd.name),
        WorkClass::ConcurrentBuild,
    );
    b.reason("VALIDATE CONSTRAINT scans under SHARE UPDATE EXCLUSIVE: reads and writes continue");
    referenced_by(cmd, target, b, LockMode::RowShare);
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::ShareUpdateExclusive,
        plan: Plan::AsWritten,
    }
}

pub(super) fn drop_constraint(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    b.operation(
        OperationKind::DropConstraint,
        Some(&target.table),
        Some(&cmd.name),
        WorkClass::CatalogOnly,
    );
    referenced_by(cmd, target, b, LockMode::AccessExclusive);
    if cmd.behavior == 2 {
        cascade(target, b);
    }
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan: Plan::AsWritten,
    }
}

/// `ALTER CONSTRAINT … [NOT] ENFORCED` (PostgreSQL 18): a foreign key's triggers on the
/// referenced table are dropped or made again (and its rows checked when enforced
/// again), under ACCESS EXCLUSIVE there at most (seen: ACCESS EXCLUSIVE for `NOT
/// ENFORCED`, SHARE ROW EXCLUSIVE and the key's index for `ENFORCED`).
pub(super) fn alter_enforceability(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) {
    let Some(NodeEnum::AtalterConstraint(alter)) = cmd.def.as_deref().and_then(|n| n.node.as_ref())
    else {
        return;
    };
    if alter.alter_enforceability {
        referenced_by_name(&alter.conname, target, b, LockMode::AccessExclusive);
    }
}

/// The table the constraint `cmd` names references, if it is a foreign key, locked in
/// `mode` (with its partitions): named with facts, by role without.
fn referenced_by(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder, mode: LockMode) {
    referenced_by_name(&cmd.name, target, b, mode);
}

/// [`referenced_by`] for the constraint `name`.
fn referenced_by_name(name: &str, target: &Target<'_>, b: &mut Builder, mode: LockMode) {
    let Some(facts) = target.facts.filter(|_| !target.declared()) else {
        b.related(
            target.context,
            crate::lock::Role::ReferencedTables,
            crate::lock::ObjectRef::relation(&target.table),
            ObjectKind::Table,
            mode,
            true,
        );
        return;
    };
    for fk in facts.foreign_keys_out.iter().filter(|fk| fk.name == name) {
        b.lock(&fk.referenced, ObjectKind::Table, mode, true);
    }
}

/// The partners of the foreign keys through `column` of the target, either way: a type
/// change drops each such key and makes it again, under ACCESS EXCLUSIVE on the partner
/// (seen on 15 and 18). Named with facts (a key whose definition names the column on
/// the target's side), by role without.
pub(super) fn foreign_key_partners(column: &str, target: &Target<'_>, b: &mut Builder) {
    let mode = LockMode::AccessExclusive;
    let Some(facts) = target.facts.filter(|_| !target.declared()) else {
        for role in [
            crate::lock::Role::ReferencedTables,
            crate::lock::Role::ReferencingTables,
        ] {
            b.related(
                target.context,
                role,
                crate::lock::ObjectRef::relation(&target.table),
                ObjectKind::Table,
                mode,
                true,
            );
        }
        return;
    };
    for fk in &facts.foreign_keys_out {
        if names_column(&fk.definition, KeySide::Referencing, column) {
            b.lock(&fk.referenced, ObjectKind::Table, mode, true);
        }
    }
    for fk in &facts.foreign_keys_in {
        if names_column(&fk.definition, KeySide::Referenced, column) {
            b.lock(&fk.referencing, ObjectKind::Table, mode, true);
        }
    }
}

/// The other tables whose index, constraint or statistics expressions use the target's
/// row type: a type change rebuilds those indexes and constraints under ACCESS EXCLUSIVE
/// on their tables (seen on 14 and 18; 15.20 refuses the change instead).
pub(super) fn row_type_users(target: &Target<'_>, b: &mut Builder) {
    b.related(
        target.context,
        crate::lock::Role::RowTypeUsers,
        crate::lock::ObjectRef::relation(&target.table),
        ObjectKind::Table,
        LockMode::AccessExclusive,
        false,
    );
}

/// Whether one side of a foreign key's definition names `column` (or may: `*`).
fn names_column(definition: &str, side: KeySide, column: &str) -> bool {
    key_columns(definition, side)
        .iter()
        .any(|c| c == "*" || c == column)
}

/// Which column list of a foreign key's definition.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeySide {
    /// `FOREIGN KEY (…)`.
    Referencing,
    /// `REFERENCES t(…)`.
    Referenced,
}

/// The columns of one side of `FOREIGN KEY (a, "B") REFERENCES t(x, y) …`
/// (`pg_get_constraintdef`), parsed by PostgreSQL's grammar as the constraint of an
/// `ALTER TABLE`. A definition that does not parse names every column (`*`), so the
/// partner is locked.
fn key_columns(definition: &str, side: KeySide) -> Vec<String> {
    let sql = format!("ALTER TABLE t ADD {definition}");
    let parsed = pgshift_sql::parse(&sql).ok();
    let constraint = parsed.as_ref().and_then(|statements| {
        let Some(NodeEnum::AlterTableStmt(stmt)) = statements.first().map(|s| &s.node) else {
            return None;
        };
        let cmd = match stmt.cmds.first().and_then(|c| c.node.as_ref()) {
            Some(NodeEnum::AlterTableCmd(cmd)) => cmd,
            _ => return None,
        };
        match cmd.def.as_deref().and_then(|d| d.node.as_ref()) {
            Some(NodeEnum::Constraint(c)) => Some(c.clone()),
            _ => None,
        }
    });
    let Some(constraint) = constraint else {
        return vec!["*".to_owned()];
    };
    let list = match side {
        KeySide::Referencing => &constraint.fk_attrs,
        KeySide::Referenced => &constraint.pk_attrs,
    };
    let mut columns = crate::classify::names::strings(list);
    if columns.is_empty() {
        // `REFERENCES t` without a list: the referenced table's primary key, not known
        // here; every column counts.
        columns.push("*".to_owned());
    }
    columns
}
