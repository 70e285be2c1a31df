//! What a plan removes with its table: the parts of a dropped table, and the index
//! partitions of a table that is dropped or detached, need no statement of their own
//! (and some cannot have one: an attached index partition cannot be dropped alone).

use std::collections::{BTreeMap, BTreeSet};

use pgshift_sql::ast::ConstrType;
use pgshift_sql::NodeEnum;

use super::super::objects::{self, Name};
use super::super::units::{Key, Kind, Unit, Units};

fn makes_index(unit: &Unit) -> bool {
    let NodeEnum::AlterTableStmt(stmt) = &unit.statement.node else {
        return false;
    };
    stmt.cmds.iter().any(|c| match &c.node {
        Some(NodeEnum::AlterTableCmd(cmd)) => matches!(
            cmd.def.as_deref().and_then(|d| d.node.as_ref()),
            Some(NodeEnum::Constraint(k)) if [
                ConstrType::ConstrPrimary as i32,
                ConstrType::ConstrUnique as i32,
                ConstrType::ConstrExclusion as i32,
            ].contains(&k.contype)
        ),
        _ => false,
    })
}

/// The live tables a plan drops or detaches, and which table each live index is on.
pub(super) struct Gone {
    dropped: BTreeSet<Name>,
    detached: BTreeSet<Name>,
    index_table: BTreeMap<Name, Name>,
}

impl Gone {
    /// What `live` loses on the way to `desired`, in scope.
    pub(super) fn of(live: &Units, desired: &Units, in_scope: &impl Fn(&Key) -> bool) -> Self {
        let lost = |key: &Key, unit: &Unit| {
            in_scope(key)
                && desired
                    .by_key
                    .get(key)
                    .is_none_or(|d| d.statement.text != unit.statement.text)
        };
        let mut gone = Gone {
            dropped: BTreeSet::new(),
            detached: BTreeSet::new(),
            index_table: BTreeMap::new(),
        };
        for (key, unit) in &live.by_key {
            let name = || (key.parts[0].clone(), key.parts[1].clone());
            match key.kind {
                Kind::Table if in_scope(key) && !desired.by_key.contains_key(key) => {
                    gone.dropped.insert(name());
                }
                Kind::Attach if lost(key, unit) => {
                    gone.detached.insert(name());
                }
                Kind::Index => {
                    if let NodeEnum::IndexStmt(stmt) = &unit.statement.node {
                        if let Some(rv) = stmt.relation.as_ref() {
                            gone.index_table.insert(name(), objects::name_of(rv));
                        }
                    }
                }
                // A key's index has the constraint's name, in the table's schema.
                Kind::Constraint if makes_index(unit) => {
                    gone.index_table
                        .insert((key.parts[0].clone(), key.parts[2].clone()), name());
                }
                _ => {}
            }
        }
        gone
    }

    /// Whether `key` goes with its table, needing no statement.
    pub(super) fn takes(&self, key: &Key) -> bool {
        let index_on = |parts: &[String]| {
            self.index_table
                .get(&(parts[0].clone(), parts[1].clone()))
                .cloned()
        };
        match key.kind {
            Kind::Table | Kind::Attach => false,
            Kind::Index => index_on(&key.parts).is_some_and(|t| self.dropped.contains(&t)),
            Kind::IndexAttach => index_on(&key.parts)
                .is_some_and(|t| self.dropped.contains(&t) || self.detached.contains(&t)),
            _ => key.relation().is_some_and(|t| self.dropped.contains(&t)),
        }
    }
}
