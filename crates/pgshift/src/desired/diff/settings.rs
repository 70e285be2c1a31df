//! One-command `ALTER TABLE`s that pg_dump writes for a table's settings (a column's
//! storage, compression, statistics target and options, the replica identity, the
//! clustering index): each taken back to PostgreSQL's default when the desired schema
//! no longer sets it.

use pgshift_sql::ast::{AlterTableCmd, AlterTableStmt, AlterTableType, DefElem, Node};
use pgshift_sql::NodeEnum;

use super::super::units::{Key, Unit};
use super::{sql_of, unsupported, Action, Change, DiffError, Facts};

/// The one command of a one-command `ALTER TABLE` (a setting, an identity).
pub(super) fn command(unit: &Unit) -> Option<(&AlterTableStmt, &AlterTableCmd)> {
    let NodeEnum::AlterTableStmt(stmt) = &unit.statement.node else {
        return None;
    };
    match stmt.cmds.as_slice() {
        [Node {
            node: Some(NodeEnum::AlterTableCmd(cmd)),
        }] => Some((stmt, cmd)),
        _ => None,
    }
}

fn with_command(stmt: &AlterTableStmt, cmd: AlterTableCmd) -> NodeEnum {
    let mut stmt = stmt.clone();
    stmt.cmds = vec![Node {
        node: Some(NodeEnum::AlterTableCmd(Box::new(cmd))),
    }];
    NodeEnum::AlterTableStmt(stmt)
}

fn node(n: NodeEnum) -> Option<Box<Node>> {
    Some(Box::new(Node { node: Some(n) }))
}

fn string(s: &str) -> Option<Box<Node>> {
    node(NodeEnum::String(pgshift_sql::ast::String {
        sval: s.to_owned(),
    }))
}

/// The statement that takes a setting the desired schema lacks back to the default;
/// none where the column is not in the desired schema (it is dropped).
pub(super) fn reset(
    key: &Key,
    unit: &Unit,
    facts: &Facts,
    object: &str,
) -> Result<Option<Change>, DiffError> {
    let Some((stmt, cmd)) = command(unit) else {
        return unsupported(object, "removing it");
    };
    let mut reset = AlterTableCmd {
        subtype: cmd.subtype,
        name: cmd.name.clone(),
        behavior: cmd.behavior,
        ..Default::default()
    };
    match AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined) {
        AlterTableType::AtSetStorage => {
            let column = (key.parts[0].clone(), key.parts[1].clone(), cmd.name.clone());
            let Some(storage) = facts.storage.get(&column) else {
                return Ok(None);
            };
            reset.def = string(storage);
        }
        AlterTableType::AtSetCompression => reset.def = string("default"),
        AlterTableType::AtSetStatistics => {
            reset.def = node(NodeEnum::Integer(pgshift_sql::ast::Integer { ival: -1 }));
        }
        AlterTableType::AtSetOptions => {
            reset.subtype = AlterTableType::AtResetOptions as i32;
            reset.def = names_of(cmd.def.as_deref(), |_| true);
        }
        AlterTableType::AtReplicaIdentity => {
            reset.def = node(NodeEnum::ReplicaIdentityStmt(
                pgshift_sql::ast::ReplicaIdentityStmt {
                    identity_type: "d".to_owned(),
                    name: String::new(),
                },
            ));
        }
        AlterTableType::AtClusterOn => {
            reset.subtype = AlterTableType::AtDropCluster as i32;
            reset.name = String::new();
        }
        _ => return unsupported(object, "removing it"),
    }
    Ok(Some(Change {
        sql: sql_of(with_command(stmt, reset), object)?,
        action: Action::Drop,
        object: object.to_owned(),
        destructive: false,
    }))
}

/// Before a changed `SET (…)` of a column's options: `RESET (…)` of the options only
/// the live one sets. Nothing for other settings, which the desired statement
/// replaces whole.
pub(super) fn unset(key: &Key, was: &Unit, wanted: &Unit) -> Result<Vec<Change>, DiffError> {
    let object = super::describe(key);
    let (Some((stmt, old)), Some((_, new))) = (command(was), command(wanted)) else {
        return Ok(Vec::new());
    };
    if old.subtype != AlterTableType::AtSetOptions as i32 {
        return Ok(Vec::new());
    }
    let kept = option_names(new.def.as_deref());
    let def = names_of(old.def.as_deref(), |name| !kept.contains(&name.to_owned()));
    let empty = matches!(def.as_deref().and_then(|d| d.node.as_ref()),
        Some(NodeEnum::List(l)) if l.items.is_empty());
    if empty {
        return Ok(Vec::new());
    }
    let reset = AlterTableCmd {
        subtype: AlterTableType::AtResetOptions as i32,
        name: old.name.clone(),
        behavior: old.behavior,
        def,
        ..Default::default()
    };
    Ok(vec![Change {
        sql: sql_of(with_command(stmt, reset), &object)?,
        action: Action::Alter,
        object,
        destructive: false,
    }])
}

fn option_names(def: Option<&Node>) -> Vec<String> {
    match def.and_then(|d| d.node.as_ref()) {
        Some(NodeEnum::List(list)) => list
            .items
            .iter()
            .filter_map(|i| match &i.node {
                Some(NodeEnum::DefElem(d)) => Some(d.defname.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The options of a `SET (…)` list that `keep` keeps, as names for `RESET (…)`.
fn names_of(def: Option<&Node>, keep: impl Fn(&str) -> bool) -> Option<Box<Node>> {
    let items = option_names(def)
        .into_iter()
        .filter(|n| keep(n))
        .map(|defname| Node {
            node: Some(NodeEnum::DefElem(Box::new(DefElem {
                defname,
                defaction: pgshift_sql::ast::DefElemAction::DefelemUnspec as i32,
                ..Default::default()
            }))),
        })
        .collect();
    node(NodeEnum::List(pgshift_sql::ast::List { items }))
}
