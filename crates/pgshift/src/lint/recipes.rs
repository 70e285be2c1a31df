//! Plain-SQL help for findings whose safe form is not a sequence pgshift runs itself
//! (a column that must be filled in batches): the statements, built from the
//! statement's own syntax tree, for users of any migration runner.

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableType, ColumnDef, ConstrType, Constraint, DropBehavior, Node,
};
use pgshift_sql::{quote_ident, NodeEnum, QualifiedName};

use super::Help;
use crate::classify::names::constraint_name_for;
use crate::classify::steps;
use crate::classify::WorkClass;
use crate::lock::LockMode;
use crate::script::AnalyzedStatement;

/// The `ADD COLUMN` subcommand of `column` in the statement, with its column.
fn add_column<'a>(
    item: &'a AnalyzedStatement,
    column: &str,
) -> Option<(
    &'a pgshift_sql::ast::RangeVar,
    &'a AlterTableCmd,
    &'a ColumnDef,
)> {
    let NodeEnum::AlterTableStmt(stmt) = &item.statement.node else {
        return None;
    };
    let relation = stmt.relation.as_ref()?;
    stmt.cmds.iter().find_map(|node| {
        let Some(NodeEnum::AlterTableCmd(cmd)) = &node.node else {
            return None;
        };
        if cmd.subtype() != AlterTableType::AtAddColumn {
            return None;
        }
        let Some(NodeEnum::ColumnDef(def)) = cmd.def.as_ref().and_then(|d| d.node.as_ref()) else {
            return None;
        };
        (def.colname == column).then_some((relation, cmd.as_ref(), def.as_ref()))
    })
}

fn constraints(def: &ColumnDef) -> impl Iterator<Item = &Constraint> {
    def.constraints.iter().filter_map(|node| match &node.node {
        Some(NodeEnum::Constraint(c)) => Some(c.as_ref()),
        _ => None,
    })
}

/// Whether `ADD COLUMN column` is `NOT NULL` with nothing that fills existing rows (no
/// default, identity or generated expression): PostgreSQL rejects it on a table with rows.
pub(super) fn not_null_without_default(item: &AnalyzedStatement, column: &str) -> bool {
    let Some((_, _, def)) = add_column(item, column) else {
        return false;
    };
    let kinds: Vec<ConstrType> = constraints(def).map(Constraint::contype).collect();
    let not_null = def.is_not_null || kinds.contains(&ConstrType::ConstrNotnull);
    let filled = kinds.iter().any(|kind| {
        matches!(
            kind,
            ConstrType::ConstrDefault | ConstrType::ConstrIdentity | ConstrType::ConstrGenerated
        )
    });
    not_null && !filled
}

/// `ADD COLUMN` of the same column without the constraints `drop` names.
fn bare_add(
    relation: &pgshift_sql::ast::RangeVar,
    cmd: &AlterTableCmd,
    def: &ColumnDef,
    drop: &[ConstrType],
) -> Option<String> {
    let mut bare = def.clone();
    bare.is_not_null = false;
    bare.constraints.retain(
        |node| !matches!(&node.node, Some(NodeEnum::Constraint(c)) if drop.contains(&c.contype())),
    );
    let mut bare_cmd = cmd.clone();
    bare_cmd.def = Some(Box::new(Node {
        node: Some(NodeEnum::ColumnDef(Box::new(bare))),
    }));
    steps::alter_table_one(
        relation,
        bare_cmd,
        "add the column",
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
    )
    .ok()
    .map(|step| step.sql)
}

/// `ALTER TABLE … ALTER COLUMN column SET DEFAULT expr`.
fn set_default(relation: &pgshift_sql::ast::RangeVar, column: &str, expr: &Node) -> Option<String> {
    let cmd = AlterTableCmd {
        subtype: AlterTableType::AtColumnDefault as i32,
        name: column.to_owned(),
        def: Some(Box::new(expr.clone())),
        behavior: DropBehavior::DropRestrict as i32,
        ..AlterTableCmd::default()
    };
    steps::alter_table_one(
        relation,
        cmd,
        "a default for new rows",
        LockMode::AccessExclusive,
        WorkClass::CatalogOnly,
    )
    .ok()
    .map(|step| step.sql)
}

/// `ADD COLUMN … NOT NULL` without a default: add it nullable, backfill, prove NOT NULL
/// with a validated check, then `SET NOT NULL` without a scan.
pub(super) fn not_null_help(
    item: &AnalyzedStatement,
    table: &QualifiedName,
    column: &str,
) -> Option<Help> {
    let (relation, cmd, def) = add_column(item, column)?;
    let add = bare_add(relation, cmd, def, &[ConstrType::ConstrNotnull])?;
    let check = constraint_name_for(&table.name, &[column], "not_null");
    Some(Help {
        text: format!(
            "with any runner: add the column nullable, fill {} for every existing row in batches (UPDATE … WHERE a key range, each batch committed on its own; a default for new rows first), then prove NOT NULL with a validated check and set it without a scan; or give it a constant default, which is catalog only",
            quote_ident(column)
        ),
        sql: vec![
            add,
            steps::add_not_null_check(table, column, &check).sql,
            steps::validate_constraint(table, &check).sql,
            steps::set_not_null(table, column).sql,
            steps::drop_constraint(table, &check, "").sql,
        ],
    })
}

/// `ADD COLUMN` with a volatile default: add it without, set the default for new
/// rows, and fill existing rows in batches.
pub(super) fn volatile_default_help(item: &AnalyzedStatement, column: &str) -> Option<Help> {
    let (relation, cmd, def) = add_column(item, column)?;
    let expr = constraints(def)
        .find(|c| c.contype() == ConstrType::ConstrDefault)
        .and_then(|c| c.raw_expr.as_deref())?;
    let add = bare_add(
        relation,
        cmd,
        def,
        &[ConstrType::ConstrDefault, ConstrType::ConstrNotnull],
    )?;
    let default = set_default(relation, column, expr)?;
    Some(Help {
        text: format!(
            "with any runner: add the column without the default, set the default for new rows, then fill {} for existing rows in batches (UPDATE … SET {} = the default WHERE a key range AND {} IS NULL, each batch committed on its own){}; `pgshift apply` instead runs it online through copy-and-swap",
            quote_ident(column),
            quote_ident(column),
            quote_ident(column),
            if def.is_not_null || constraints(def).any(|c| c.contype() == ConstrType::ConstrNotnull) {
                ", then add NOT NULL through a validated check (`pgshift explain set-not-null`)"
            } else {
                ""
            }
        ),
        sql: vec![add, default],
    })
}
