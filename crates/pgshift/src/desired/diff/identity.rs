//! An identity column changed in place: `ALTER COLUMN … SET GENERATED …` and `SET`
//! of its sequence's options, never a drop and re-add (which would start its
//! sequence again and hand out values the table already holds).

use pgshift_sql::ast::{AlterTableCmd, AlterTableType, Constraint, DefElem, Node};
use pgshift_sql::NodeEnum;

use super::super::units::{shape_of, Unit};
use super::{sql_of, unsupported, Action, Change, DiffError};

/// The `ADD GENERATED … AS IDENTITY` of an identity unit.
fn identity(
    unit: &Unit,
) -> Option<(
    &pgshift_sql::ast::AlterTableStmt,
    &AlterTableCmd,
    &Constraint,
)> {
    let (stmt, cmd) = super::settings::command(unit)?;
    match cmd.def.as_deref().and_then(|d| d.node.as_ref()) {
        Some(NodeEnum::Constraint(c)) => Some((stmt, cmd, c)),
        _ => None,
    }
}

fn options(c: &Constraint) -> Vec<&DefElem> {
    c.options
        .iter()
        .filter_map(|o| match &o.node {
            Some(NodeEnum::DefElem(d)) => Some(&**d),
            _ => None,
        })
        .collect()
}

/// The statement that takes the live identity of a column to the desired one.
pub(super) fn alter(object: &str, was: &Unit, wanted: &Unit) -> Result<Vec<Change>, DiffError> {
    let (Some((stmt, cmd, old)), Some((_, _, new))) = (identity(was), identity(wanted)) else {
        return unsupported(object, "a change of its definition");
    };
    let (old_options, new_options) = (options(old), options(new));
    let named = |list: &[&DefElem], name: &str| {
        list.iter()
            .find(|d| d.defname == name)
            .map(|d| shape_of(&d.arg))
    };
    for fixed in ["sequence_name", "as"] {
        if named(&old_options, fixed) != named(&new_options, fixed) {
            return unsupported(
                object,
                "its sequence's name or type (renames are never guessed)",
            );
        }
    }
    let mut set: Vec<Node> = Vec::new();
    if old.generated_when != new.generated_when {
        let when = new.generated_when.bytes().next().map_or(0, i32::from);
        set.push(def_elem(
            "generated",
            Some(NodeEnum::Integer(pgshift_sql::ast::Integer { ival: when })),
        ));
    }
    for option in &new_options {
        if matches!(option.defname.as_str(), "sequence_name" | "as") {
            continue;
        }
        if named(&old_options, &option.defname) != Some(shape_of(&option.arg)) {
            set.push(Node {
                node: Some(NodeEnum::DefElem(Box::new((*option).clone()))),
            });
        }
    }
    // pg_dump writes CYCLE only when it is set.
    if named(&old_options, "cycle").is_some() && named(&new_options, "cycle").is_none() {
        set.push(def_elem(
            "cycle",
            Some(NodeEnum::Boolean(pgshift_sql::ast::Boolean {
                boolval: false,
            })),
        ));
    }
    if set.is_empty() {
        return unsupported(object, "a change of its definition");
    }
    let mut stmt = stmt.clone();
    stmt.cmds = vec![Node {
        node: Some(NodeEnum::AlterTableCmd(Box::new(AlterTableCmd {
            subtype: AlterTableType::AtSetIdentity as i32,
            name: cmd.name.clone(),
            behavior: cmd.behavior,
            def: Some(Box::new(Node {
                node: Some(NodeEnum::List(pgshift_sql::ast::List { items: set })),
            })),
            ..Default::default()
        }))),
    }];
    Ok(vec![Change {
        sql: sql_of(NodeEnum::AlterTableStmt(stmt), object)?,
        action: Action::Alter,
        object: object.to_owned(),
        destructive: false,
    }])
}

fn def_elem(name: &str, arg: Option<NodeEnum>) -> Node {
    Node {
        node: Some(NodeEnum::DefElem(Box::new(DefElem {
            defname: name.to_owned(),
            arg: arg.map(|a| Box::new(Node { node: Some(a) })),
            defaction: pgshift_sql::ast::DefElemAction::DefelemUnspec as i32,
            ..Default::default()
        }))),
    }
}
