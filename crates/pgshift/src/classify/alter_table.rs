//! `ALTER TABLE` (and `ALTER INDEX`, `ALTER VIEW`, …, which share its syntax tree):
//! one classification per subcommand, then one route for the statement.
//!
//! Lock levels follow PostgreSQL's `AlterTableGetLockLevel`: the statement takes the
//! strongest level among its subcommands, on the table and (without `ONLY`) on every
//! partition.

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, ColumnDef, ConstrType, Constraint, IndexElem,
    IndexStmt, Node, ObjectType, RangeVar, TypeName,
};
use pgshift_sql::{quote_ident, NodeEnum, QualifiedName};

use super::coercion::{is_binary_coercible, typmod_for};
use super::expr::{referenced_columns, volatility, Volatility};
use super::names::{constraint_name_for, range_var_name, strings};
use super::steps::{self, StepError};
use super::{Builder, Context, Effect, ObjectKind, OperationKind, WorkClass};
use crate::catalog::{Lookup, Persistence, RelationFacts, RelationKind, TriggerEnabled};
use crate::lock::LockMode;
use crate::refusal::RefusalCause;
use crate::route::{Route, Step};

/// The operation detail of a `DETACH PARTITION` whose table has a default partition.
pub const HAS_DEFAULT_PARTITION: &str = "the table has a default partition";

/// How one subcommand would run.
enum Plan {
    /// As written.
    AsWritten,
    /// Replaced by these steps.
    Sequence(Vec<Step>),
    /// Through copy-and-swap.
    CopyAndSwap,
    /// Not at all.
    Refused(RefusalCause, String),
}

/// One classified subcommand.
struct Piece {
    cmd: AlterTableCmd,
    mode: LockMode,
    plan: Plan,
}

/// What every subcommand classifier needs.
struct Target<'a> {
    relation: &'a RangeVar,
    table: QualifiedName,
    facts: Option<&'a RelationFacts>,
    context: &'a Context<'a>,
}

impl Target<'_> {
    /// Whether the facts are declared by SQL (partial) rather than read live: then an
    /// absent column proves nothing.
    fn declared(&self) -> bool {
        self.context.facts.is_some_and(|facts| facts.is_declared())
    }

    fn is_partitioned(&self) -> Option<bool> {
        self.facts
            .map(|facts| facts.kind == RelationKind::PartitionedTable)
    }
}

pub(crate) fn classify(stmt: &AlterTableStmt, context: &Context<'_>, b: &mut Builder) {
    let Some(relation) = &stmt.relation else {
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "ALTER without a relation name is not understood",
        );
        return;
    };
    let objtype = ObjectType::try_from(stmt.objtype).unwrap_or(ObjectType::Undefined);
    let table = range_var_name(relation);
    match objtype {
        ObjectType::ObjectTable | ObjectType::ObjectForeignTable => {}
        ObjectType::ObjectIndex => return alter_index(stmt, &table, b),
        _ => return alter_other_relation(stmt, objtype, &table, b),
    }
    b.statement("alter-table");
    if let Lookup::Missing = context.lookup(&table) {
        if !context.is_new(&table) && !stmt.missing_ok {
            b.refuse(
                RefusalCause::TableMissing,
                format!("table {table} does not exist in the search path"),
            );
        }
    }
    let target = Target {
        relation,
        facts: context.relation(&table),
        table,
        context,
    };
    let pieces: Vec<Piece> = stmt
        .cmds
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AlterTableCmd(cmd)) => Some(classify_cmd(cmd, &target, b)),
            _ => None,
        })
        .collect();
    let mode = pieces
        .iter()
        .map(|piece| piece.mode)
        .max()
        .unwrap_or(LockMode::AccessExclusive);
    let recurses = relation.inh && pieces.iter().any(|p| recurses_to_partitions(&p.cmd));
    b.lock(&target.table, ObjectKind::Table, mode, recurses);
    assemble(pieces, &target, b);
}

/// Whether a subcommand also applies to (and locks) every partition.
fn recurses_to_partitions(cmd: &AlterTableCmd) -> bool {
    !matches!(
        subtype(cmd),
        AlterTableType::AtAttachPartition
            | AlterTableType::AtDetachPartition
            | AlterTableType::AtDetachPartitionFinalize
    )
}

fn subtype(cmd: &AlterTableCmd) -> AlterTableType {
    AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined)
}

/// One route for the statement from its subcommands' plans.
fn assemble(pieces: Vec<Piece>, target: &Target<'_>, b: &mut Builder) {
    if target.context.is_new(&target.table) {
        b.reason(format!(
            "{} is created earlier in the same input, so nobody else can be using it; it runs as written",
            target.table
        ));
        b.route(Route::Native);
        return;
    }
    if let Some((cause, message)) = pieces.iter().find_map(|p| match &p.plan {
        Plan::Refused(cause, message) => Some((*cause, message.clone())),
        _ => None,
    }) {
        b.refuse(cause, message);
        return;
    }
    if pieces.iter().any(|p| matches!(p.plan, Plan::CopyAndSwap)) {
        if let Some((cause, message)) = copy_and_swap_blocker(target) {
            b.refuse(cause, message);
        } else {
            b.route(Route::CopyAndSwap);
        }
        return;
    }
    if !pieces.iter().any(|p| matches!(p.plan, Plan::Sequence(_))) {
        b.route(Route::Native);
        return;
    }
    let mut all_steps = Vec::new();
    for piece in pieces {
        match piece.plan {
            Plan::Sequence(steps) => all_steps.extend(steps),
            Plan::AsWritten => match steps::alter_table_one(
                target.relation,
                piece.cmd,
                "run this part of the statement as written",
                piece.mode,
                WorkClass::CatalogOnly,
            ) {
                Ok(step) => all_steps.push(step),
                Err(StepError(message)) => {
                    b.refuse(RefusalCause::UnclassifiedStatement, message);
                    return;
                }
            },
            Plan::CopyAndSwap | Plan::Refused(..) => {}
        }
    }
    b.route(Route::NativeSequence { steps: all_steps });
}

/// Why copy-and-swap cannot take this table, when facts say so.
fn copy_and_swap_blocker(target: &Target<'_>) -> Option<(RefusalCause, String)> {
    let facts = target.facts?;
    if facts.persistence != Persistence::Permanent {
        return Some((
            RefusalCause::NonPermanentTable,
            format!(
                "{} is {}; copy-and-swap needs a permanent table",
                facts.name,
                if facts.persistence == Persistence::Unlogged {
                    "unlogged"
                } else {
                    "temporary"
                }
            ),
        ));
    }
    if facts.primary_key.is_none() {
        return Some((
            RefusalCause::NoUsableKey,
            format!(
                "{} has no primary key; copy-and-swap copies and verifies in key order and needs one",
                facts.name
            ),
        ));
    }
    None
}

fn classify_cmd(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    use AlterTableType as T;
    let table = Some(&target.table);
    let name = cmd.name.as_str();
    let piece = |mode: LockMode, plan: Plan| Piece {
        cmd: cmd.clone(),
        mode,
        plan,
    };
    let catalog_only = |b: &mut Builder, kind: OperationKind, mode: LockMode| {
        b.operation(kind, table, Some(name), WorkClass::CatalogOnly);
        piece(mode, Plan::AsWritten)
    };
    match subtype(cmd) {
        T::AtAddColumn => add_column(cmd, target, b),
        T::AtColumnDefault => {
            let kind = if cmd.def.is_some() {
                OperationKind::SetDefault
            } else {
                OperationKind::DropDefault
            };
            b.reason("changing a default affects only future rows: no rewrite");
            catalog_only(b, kind, LockMode::AccessExclusive)
        }
        T::AtDropNotNull => catalog_only(b, OperationKind::DropNotNull, LockMode::AccessExclusive),
        T::AtSetNotNull => set_not_null(cmd, target, b),
        T::AtSetExpression => set_expression(cmd, target, b),
        T::AtDropExpression => {
            b.reason("DROP EXPRESSION keeps the stored values: no rewrite");
            catalog_only(b, OperationKind::DropExpression, LockMode::AccessExclusive)
        }
        T::AtSetStatistics => catalog_only(
            b,
            OperationKind::SetStatistics,
            LockMode::ShareUpdateExclusive,
        ),
        T::AtSetOptions | T::AtResetOptions => catalog_only(
            b,
            OperationKind::SetColumnOptions,
            LockMode::ShareUpdateExclusive,
        ),
        T::AtSetStorage => catalog_only(b, OperationKind::SetStorage, LockMode::AccessExclusive),
        T::AtSetCompression => {
            b.reason("SET COMPRESSION applies to new values only: no rewrite");
            catalog_only(b, OperationKind::SetCompression, LockMode::AccessExclusive)
        }
        T::AtDropColumn => {
            b.operation(
                OperationKind::DropColumn,
                table,
                Some(name),
                WorkClass::CatalogOnly,
            )
            .destructive = true;
            b.reason("DROP COLUMN only marks the column dropped (no rewrite), but its data is gone for good");
            piece(LockMode::AccessExclusive, Plan::AsWritten)
        }
        T::AtAddConstraint => add_constraint(cmd, target, b),
        T::AtAlterConstraint => {
            catalog_only(b, OperationKind::AlterConstraint, LockMode::AccessExclusive)
        }
        T::AtValidateConstraint => validate_constraint(cmd, target, b),
        T::AtDropConstraint => drop_constraint(cmd, target, b),
        T::AtAlterColumnType => alter_column_type(cmd, target, b),
        T::AtChangeOwner => catalog_only(b, OperationKind::ChangeOwner, LockMode::AccessExclusive),
        T::AtClusterOn => catalog_only(b, OperationKind::ClusterOn, LockMode::ShareUpdateExclusive),
        T::AtDropCluster => catalog_only(
            b,
            OperationKind::SetWithoutCluster,
            LockMode::ShareUpdateExclusive,
        ),
        T::AtSetLogged | T::AtSetUnLogged => set_persistence(cmd, target, b),
        T::AtSetAccessMethod => rewrite(b, target, OperationKind::SetAccessMethod, cmd),
        T::AtSetTableSpace => set_tablespace(cmd, target, b),
        T::AtSetRelOptions | T::AtResetRelOptions => storage_parameters(cmd, target, b),
        T::AtEnableTrig
        | T::AtEnableAlwaysTrig
        | T::AtEnableReplicaTrig
        | T::AtDisableTrig
        | T::AtEnableTrigAll
        | T::AtDisableTrigAll
        | T::AtEnableTrigUser
        | T::AtDisableTrigUser => trigger_state(cmd, target, b),
        T::AtEnableRule | T::AtEnableAlwaysRule | T::AtEnableReplicaRule => {
            catalog_only(b, OperationKind::EnableRule, LockMode::AccessExclusive)
        }
        T::AtDisableRule => catalog_only(b, OperationKind::DisableRule, LockMode::AccessExclusive),
        T::AtAddInherit => catalog_only(b, OperationKind::Inherit, LockMode::AccessExclusive),
        T::AtDropInherit => catalog_only(b, OperationKind::NoInherit, LockMode::AccessExclusive),
        T::AtAddOf => catalog_only(b, OperationKind::OfType, LockMode::AccessExclusive),
        T::AtDropOf => catalog_only(b, OperationKind::NotOfType, LockMode::AccessExclusive),
        T::AtReplicaIdentity => {
            catalog_only(b, OperationKind::ReplicaIdentity, LockMode::AccessExclusive)
        }
        T::AtEnableRowSecurity => catalog_only(
            b,
            OperationKind::EnableRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtDisableRowSecurity => catalog_only(
            b,
            OperationKind::DisableRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtForceRowSecurity => catalog_only(
            b,
            OperationKind::ForceRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtNoForceRowSecurity => catalog_only(
            b,
            OperationKind::NoForceRowSecurity,
            LockMode::AccessExclusive,
        ),
        T::AtAttachPartition => attach_partition(cmd, target, b),
        T::AtDetachPartition => detach_partition(cmd, target, b),
        T::AtDetachPartitionFinalize => {
            b.outside_transaction_only();
            catalog_only(
                b,
                OperationKind::DetachPartitionFinalize,
                LockMode::ShareUpdateExclusive,
            )
        }
        T::AtAddIdentity => {
            b.reason(
                "ADD GENERATED AS IDENTITY on an existing column keeps its values: no rewrite",
            );
            catalog_only(b, OperationKind::AddIdentity, LockMode::AccessExclusive)
        }
        T::AtSetIdentity => catalog_only(b, OperationKind::SetIdentity, LockMode::AccessExclusive),
        T::AtDropIdentity => {
            catalog_only(b, OperationKind::DropIdentity, LockMode::AccessExclusive)
        }
        T::AtGenericOptions | T::AtAlterColumnGenericOptions => catalog_only(
            b,
            OperationKind::OtherCatalogChange,
            LockMode::AccessExclusive,
        ),
        other => {
            b.operation(
                OperationKind::Unclassified,
                table,
                Some(name),
                WorkClass::Opaque,
            );
            piece(
                LockMode::AccessExclusive,
                Plan::Refused(
                    RefusalCause::UnclassifiedStatement,
                    format!(
                        "ALTER TABLE subcommand {} is not classified",
                        other.as_str_name()
                    ),
                ),
            )
        }
    }
}

/// A subcommand that rewrites the table: copy-and-swap.
fn rewrite(
    b: &mut Builder,
    target: &Target<'_>,
    kind: OperationKind,
    cmd: &AlterTableCmd,
) -> Piece {
    b.operation(
        kind,
        Some(&target.table),
        Some(&cmd.name),
        WorkClass::Rewrite,
    );
    b.reason(format!(
        "rewrites every row of {} and rebuilds its indexes under ACCESS EXCLUSIVE; copy-and-swap does the same work without blocking",
        target.table
    ));
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan: Plan::CopyAndSwap,
    }
}

fn column_def(cmd: &AlterTableCmd) -> Option<&ColumnDef> {
    match cmd.def.as_deref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::ColumnDef(def)) => Some(def),
        _ => None,
    }
}

fn constraint_def(cmd: &AlterTableCmd) -> Option<&Constraint> {
    match cmd.def.as_deref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::Constraint(constraint)) => Some(constraint),
        _ => None,
    }
}

fn contype(constraint: &Constraint) -> ConstrType {
    ConstrType::try_from(constraint.contype).unwrap_or(ConstrType::Undefined)
}

/// The internal name and written modifiers of a type name (`varchar`, `[200]`).
pub(crate) fn type_name_parts(type_name: &TypeName) -> (String, Vec<i64>) {
    let names = strings(&type_name.names);
    let base = match names.as_slice() {
        [schema, name] if schema == "pg_catalog" => name.clone(),
        _ => names.join("."),
    };
    let modifiers = type_name
        .typmods
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AConst(constant)) => match &constant.val {
                Some(pgshift_sql::ast::a_const::Val::Ival(i)) => Some(i64::from(i.ival)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let base = if type_name.array_bounds.is_empty() {
        base
    } else {
        format!("{base}[]")
    };
    (base, modifiers)
}

fn add_column(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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
                    b.lock(
                        &range_var_name(pktable),
                        ObjectKind::Table,
                        LockMode::ShareRowExclusive,
                        false,
                    );
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
fn split_inline_constraints(
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

/// `ADD CONSTRAINT … NOT VALID` then `VALIDATE CONSTRAINT`, for a named CHECK, FOREIGN
/// KEY or (PostgreSQL 18) NOT NULL constraint.
fn not_valid_then_validate(
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

fn add_constraint(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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
            if named.conname.is_empty() {
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
                named.conname = constraint_name_for(&target.table.name, &column, "check");
            }
            (OperationKind::AddCheck, LockMode::AccessExclusive)
        }
        ConstrType::ConstrForeign => {
            if let Some(pktable) = &constraint.pktable {
                b.lock(
                    &range_var_name(pktable),
                    ObjectKind::Table,
                    LockMode::ShareRowExclusive,
                    false,
                );
            }
            if named.conname.is_empty() {
                let columns = strings(&constraint.fk_attrs);
                let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
                named.conname = constraint_name_for(&target.table.name, &columns, "fkey");
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
            unique_via_concurrent_index(constraint, kind, target, b)
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
fn unique_via_concurrent_index(
    constraint: &Constraint,
    kind: OperationKind,
    target: &Target<'_>,
    b: &mut Builder,
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
            let already = target
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

/// The name of the temporary `CHECK (col IS NOT NULL)` used to set NOT NULL without a
/// scan under lock.
fn scaffold_name(column: &str) -> String {
    constraint_name_for("pgshift", &[column], "not_null")
}

/// Check `NOT VALID`, validate, `SET NOT NULL` (no scan thanks to the check), drop the
/// check.
fn not_null_scaffold(table: &QualifiedName, column: &str) -> Vec<Step> {
    let name = scaffold_name(column);
    vec![
        steps::add_not_null_check(table, column, &name),
        steps::validate_constraint(table, &name),
        steps::set_not_null(table, column),
        steps::drop_constraint(table, &name, "remove the scaffold check, no longer needed"),
    ]
}

fn set_not_null(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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

fn set_expression(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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

fn alter_column_type(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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

fn modifiers_text(modifiers: &[i64]) -> String {
    if modifiers.is_empty() {
        String::new()
    } else {
        let parts: Vec<String> = modifiers.iter().map(i64::to_string).collect();
        format!("({})", parts.join(","))
    }
}

fn set_persistence(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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

fn set_tablespace(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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
const LIGHT_STORAGE_PARAMETERS: &[&str] = &[
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

fn storage_parameters(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    let kind = if subtype(cmd) == AlterTableType::AtSetRelOptions {
        OperationKind::SetStorageParameters
    } else {
        OperationKind::ResetStorageParameters
    };
    let names: Vec<String> = cmd
        .def
        .as_deref()
        .map(super::names::list_items)
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

fn trigger_state(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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

fn validate_constraint(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    b.operation(
        OperationKind::ValidateConstraint,
        Some(&target.table),
        Some(&cmd.name),
        WorkClass::ConcurrentBuild,
    );
    b.reason("VALIDATE CONSTRAINT scans under SHARE UPDATE EXCLUSIVE: reads and writes continue");
    if let Some(fk) = target
        .facts
        .and_then(|facts| facts.foreign_keys_out.iter().find(|fk| fk.name == cmd.name))
    {
        b.lock(&fk.referenced, ObjectKind::Table, LockMode::RowShare, false);
    }
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::ShareUpdateExclusive,
        plan: Plan::AsWritten,
    }
}

fn drop_constraint(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
    b.operation(
        OperationKind::DropConstraint,
        Some(&target.table),
        Some(&cmd.name),
        WorkClass::CatalogOnly,
    );
    if let Some(fk) = target
        .facts
        .and_then(|facts| facts.foreign_keys_out.iter().find(|fk| fk.name == cmd.name))
    {
        b.lock(
            &fk.referenced,
            ObjectKind::Table,
            LockMode::AccessExclusive,
            false,
        );
    }
    Piece {
        cmd: cmd.clone(),
        mode: LockMode::AccessExclusive,
        plan: Plan::AsWritten,
    }
}

fn partition_cmd(cmd: &AlterTableCmd) -> Option<&pgshift_sql::ast::PartitionCmd> {
    match cmd.def.as_deref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::PartitionCmd(partition)) => Some(partition),
        _ => None,
    }
}

fn attach_partition(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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
    }
    let default = target.facts.and_then(RelationFacts::default_partition);
    if let Some(default) = default {
        b.lock(
            &default.name,
            ObjectKind::Table,
            LockMode::AccessExclusive,
            false,
        );
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

fn detach_partition(cmd: &AlterTableCmd, target: &Target<'_>, b: &mut Builder) -> Piece {
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
        b.lock(partition, ObjectKind::Table, mode, false);
    }
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

/// `ALTER INDEX …`.
fn alter_index(stmt: &AlterTableStmt, index: &QualifiedName, b: &mut Builder) {
    b.statement("alter-index");
    let mut mode = LockMode::ShareUpdateExclusive;
    for cmd in stmt.cmds.iter().filter_map(|node| match &node.node {
        Some(NodeEnum::AlterTableCmd(cmd)) => Some(cmd),
        _ => None,
    }) {
        match subtype(cmd) {
            AlterTableType::AtAttachPartition => {
                let child = partition_cmd(cmd)
                    .and_then(|p| p.name.as_ref())
                    .map(range_var_name);
                if let Some(child) = &child {
                    b.lock(
                        child,
                        ObjectKind::Index,
                        LockMode::ShareUpdateExclusive,
                        false,
                    );
                }
                b.operation(
                    OperationKind::AttachIndexPartition,
                    Some(index),
                    child.as_ref().map(|c| c.name.as_str()),
                    WorkClass::CatalogOnly,
                );
            }
            AlterTableType::AtSetTableSpace => {
                mode = mode.max(LockMode::AccessExclusive);
                b.operation(
                    OperationKind::AlterIndex,
                    Some(index),
                    None,
                    WorkClass::ScanUnderLock,
                )
                .detail = Some("SET TABLESPACE copies the index".to_owned());
            }
            AlterTableType::AtSetRelOptions | AlterTableType::AtResetRelOptions => {
                b.operation(
                    OperationKind::AlterIndex,
                    Some(index),
                    None,
                    WorkClass::CatalogOnly,
                );
            }
            _ => {
                mode = mode.max(LockMode::AccessExclusive);
                b.operation(
                    OperationKind::AlterIndex,
                    Some(index),
                    None,
                    WorkClass::CatalogOnly,
                );
            }
        }
    }
    b.lock(index, ObjectKind::Index, mode, false);
}

/// `ALTER VIEW`, `ALTER MATERIALIZED VIEW`, `ALTER SEQUENCE` forms of `ALTER TABLE`.
fn alter_other_relation(
    stmt: &AlterTableStmt,
    objtype: ObjectType,
    name: &QualifiedName,
    b: &mut Builder,
) {
    let (statement, object) = match objtype {
        ObjectType::ObjectView => ("alter-view", ObjectKind::View),
        ObjectType::ObjectMatview => ("alter-materialized-view", ObjectKind::View),
        ObjectType::ObjectSequence => ("alter-sequence", ObjectKind::Sequence),
        _ => ("alter-relation", ObjectKind::Table),
    };
    b.statement(statement);
    let _ = stmt;
    b.operation(
        OperationKind::OtherCatalogChange,
        Some(name),
        None,
        WorkClass::CatalogOnly,
    );
    b.lock(name, object, LockMode::AccessExclusive, false);
}
