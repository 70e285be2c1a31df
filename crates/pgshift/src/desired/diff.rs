//! The statements that take a schema from one dump to another, unit by unit
//! ([`super::units`]), written from syntax trees or quoted identifiers, never by editing
//! text: what only the live side has is dropped (in reverse dump order), what only
//! the desired side has is created with the desired dump's own statement (in its dump
//! order), and what differs is altered where a change is mechanical (a table's
//! columns, defaults, NOT NULL and checks; `CREATE OR REPLACE` of views and
//! functions) or dropped and created again (an index, a constraint, a trigger, a
//! policy, a rule, statistics). Anything else is an error that names it. Renames are
//! never guessed: a table of another name is a drop and a create.

use std::collections::BTreeSet;

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, ColumnDef, ConstrType, Constraint, DropBehavior,
    DropStmt, Node, ObjectType, ObjectWithArgs, RangeVar,
};
use pgshift_sql::{deparse, quote_ident, NodeEnum, QualifiedName, Statement};

use super::units::{shape_of, Key, Kind, NotCovered, Unit, Units};

/// What a change does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Creates what only the desired schema has.
    Create,
    /// Drops what only the live schema has.
    Drop,
    /// Alters what both have.
    Alter,
}

/// One statement of the plan.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// Its SQL.
    pub sql: String,
    /// What it does.
    pub action: Action,
    /// The object, in words (`index app.a_note`).
    pub object: String,
    /// Whether it may lose data or something the database holds (a drop of a table,
    /// column, view, function, type, sequence; a type change).
    pub destructive: bool,
}

/// Why no plan could be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    /// A statement of a kind the comparison does not cover.
    #[error(transparent)]
    NotCovered(#[from] NotCovered),
    /// A difference pgshift does not write a change for.
    #[error("{object}: {what} is not covered by desired state yet")]
    Unsupported {
        /// The object.
        object: String,
        /// The difference.
        what: String,
    },
    /// SQL could not be written from a syntax tree.
    #[error("cannot write the SQL for {object}: {reason}")]
    Deparse {
        /// The object.
        object: String,
        /// The deparser's words.
        reason: String,
    },
}

/// The changes from `live` to `desired`, managing only the schemas in `managed` (and
/// extensions only where the desired schema has some).
pub fn changes(
    live: &Units,
    desired: &Units,
    managed: &BTreeSet<String>,
) -> Result<Vec<Change>, DiffError> {
    let in_scope = scope(desired, managed);
    let mut drops: Vec<(usize, Change)> = Vec::new();
    for (key, unit) in &live.by_key {
        if !in_scope(key) {
            continue;
        }
        match desired.by_key.get(key) {
            None => drops.push((unit.position, drop(key, unit)?)),
            Some(wanted) if wanted.statement.text != unit.statement.text => {
                if recreated(key.kind) {
                    drops.push((unit.position, drop(key, unit)?));
                }
            }
            Some(_) => {}
        }
    }
    drops.sort_by_key(|d| std::cmp::Reverse(d.0));
    let mut out: Vec<Change> = drops.into_iter().map(|(_, c)| c).collect();
    // A partition's columns and checks follow its parent's: PostgreSQL refuses most
    // column changes on a partition itself, and the parent's recurse. What else
    // differs on a partition is left to the convergence check to find.
    let partition = |key: &Key| {
        key.kind == Kind::Table
            && live.by_key.contains_key(&Key {
                kind: Kind::Attach,
                parts: key.parts.clone(),
            })
    };
    let mut creates: Vec<(&Key, &Unit)> = desired.by_key.iter().collect();
    creates.sort_by_key(|(_, u)| u.position);
    for (key, unit) in creates {
        if !in_scope(key) {
            continue;
        }
        match live.by_key.get(key) {
            None => out.extend(with_settings(create(key, unit), unit)),
            Some(was) if was.statement.text != unit.statement.text => {
                if recreated(key.kind) {
                    out.extend(with_settings(create(key, unit), unit));
                } else if partition(key) {
                    continue;
                } else {
                    out.extend(alter(key, was, unit)?);
                }
            }
            Some(_) => {}
        }
    }
    Ok(out)
}

/// Whether a key is managed: in a schema the desired files name (extensions only when
/// they create some; comments and grants always, their objects being managed).
fn scope<'a>(desired: &'a Units, managed: &'a BTreeSet<String>) -> impl Fn(&Key) -> bool + 'a {
    let manages_extensions = desired.by_key.keys().any(|k| k.kind == Kind::Extension);
    let manages_publications = desired.by_key.keys().any(|k| k.kind == Kind::Publication);
    move |key: &Key| match key.kind {
        Kind::Extension => manages_extensions,
        Kind::Schema => managed.contains(&key.parts[0]),
        Kind::Comment | Kind::Grant | Kind::DefaultPrivileges => true,
        // A publication is the database's, not a schema's: managed where the desired
        // files have some.
        Kind::Publication | Kind::PublicationMember => manages_publications,
        _ => key.schema().is_some_and(|s| managed.contains(s)),
    }
}

/// How a change may move who can read or write what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impact {
    /// Someone may be able to see or change more (a grant, a permissive policy
    /// added; row security turned off; a restrictive policy dropped).
    MayWiden,
    /// Someone may see or change less.
    MayNarrow,
    /// A policy's definition changed: either way.
    Changed,
}

/// One change of access, for review.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AccessChange {
    /// The object, in words (`policy app.a.p_read`, the grant's text).
    pub object: String,
    /// Its impact.
    pub impact: Impact,
    /// The statement as it is on the side that has it (the desired one when both do).
    pub sql: String,
}

/// The changes of row-level security, policies and grants between `live` and
/// `desired`, each with its access impact.
pub fn access_changes(
    live: &Units,
    desired: &Units,
    managed: &BTreeSet<String>,
) -> Vec<AccessChange> {
    let in_scope = scope(desired, managed);
    let keys: BTreeSet<&Key> = live
        .by_key
        .keys()
        .chain(desired.by_key.keys())
        .filter(|k| {
            in_scope(k)
                && matches!(
                    k.kind,
                    Kind::Policy | Kind::RowSecurity | Kind::ForceRowSecurity | Kind::Grant
                )
        })
        .collect();
    let permissive = |unit: &Unit| match &unit.statement.node {
        NodeEnum::CreatePolicyStmt(p) => p.permissive,
        _ => true,
    };
    keys.into_iter()
        .filter_map(|key| {
            let (was, wanted) = (live.by_key.get(key), desired.by_key.get(key));
            let impact = match (key.kind, was, wanted) {
                (_, Some(a), Some(b)) if a.statement.text == b.statement.text => return None,
                (_, Some(_), Some(_)) => Impact::Changed,
                (Kind::Grant, None, Some(_)) => Impact::MayWiden,
                (Kind::Grant, Some(_), None) => Impact::MayNarrow,
                (Kind::RowSecurity | Kind::ForceRowSecurity, None, Some(_)) => Impact::MayNarrow,
                (Kind::RowSecurity | Kind::ForceRowSecurity, Some(_), None) => Impact::MayWiden,
                (_, None, Some(unit)) if permissive(unit) => Impact::MayWiden,
                (_, None, Some(_)) => Impact::MayNarrow,
                (_, Some(unit), None) if permissive(unit) => Impact::MayNarrow,
                (_, Some(_), None) => Impact::MayWiden,
                (_, None, None) => return None,
            };
            let sql = wanted.or(was).map(|u| u.statement.text.clone())?;
            Some(AccessChange {
                object: describe(key),
                impact,
                sql,
            })
        })
        .collect()
}

/// What still differs between `after` and `desired` in the managed scope, in words:
/// empty when a plan converged.
pub fn leftover(after: &Units, desired: &Units, managed: &BTreeSet<String>) -> Vec<String> {
    let in_scope = scope(desired, managed);
    let keys: BTreeSet<&Key> = after
        .by_key
        .keys()
        .chain(desired.by_key.keys())
        .filter(|k| in_scope(k))
        .collect();
    keys.into_iter()
        .filter_map(|key| {
            let (a, d) = (after.by_key.get(key), desired.by_key.get(key));
            match (a, d) {
                (Some(a), Some(d)) if a.statement.text == d.statement.text => None,
                (Some(a), Some(_)) => {
                    Some(format!("{} differs: {}", describe(key), a.statement.text))
                }
                (Some(_), None) => Some(format!("{} is left over", describe(key))),
                (None, _) => Some(format!("{} is missing", describe(key))),
            }
        })
        .collect()
}

/// Kinds changed by dropping the live one and creating the desired one.
fn recreated(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Constraint
            | Kind::Index
            | Kind::Trigger
            | Kind::Policy
            | Kind::Rule
            | Kind::Statistics
            | Kind::MaterializedView
            | Kind::DomainConstraint
    )
}

fn describe(key: &Key) -> String {
    let kind = match key.kind {
        Kind::Schema => "schema",
        Kind::Extension => "extension",
        Kind::Type => "type",
        Kind::DomainConstraint => "domain constraint",
        Kind::Function => "function",
        Kind::Aggregate => "aggregate",
        Kind::Sequence => "sequence",
        Kind::SequenceOwnedBy => "ownership of sequence",
        Kind::Table => "table",
        Kind::View => "view",
        Kind::MaterializedView => "materialized view",
        Kind::Default => "default of",
        Kind::Identity => "identity of",
        Kind::Constraint => "constraint",
        Kind::Index => "index",
        Kind::IndexAttach => "attachment of index",
        Kind::Trigger => "trigger",
        Kind::TriggerState => "enable state of trigger",
        Kind::Policy => "policy",
        Kind::Rule => "rule",
        Kind::RowSecurity => "row level security of",
        Kind::ForceRowSecurity => "forced row level security of",
        Kind::Statistics => "statistics",
        Kind::StatisticsTarget => "statistics target of",
        Kind::Attach => "attachment of partition",
        Kind::TableSetting => "setting of",
        Kind::Publication => "publication",
        Kind::PublicationMember => "tables of publication",
        Kind::Comment | Kind::Grant | Kind::DefaultPrivileges => "",
    };
    match key.kind {
        Kind::Grant | Kind::DefaultPrivileges => key.parts[0].clone(),
        Kind::Comment => format!(
            "comment on {}",
            key.parts[0].trim_start_matches("OBJECT_").to_lowercase()
        ),
        Kind::Function => format!("function {}.{}", key.parts[0], key.parts[1]),
        Kind::PublicationMember => format!("{kind} {}", key.parts[0]),
        Kind::TableSetting => format!(
            "{kind} {}.{} ({})",
            key.parts[0], key.parts[1], key.parts[2]
        ),
        _ => format!("{kind} {}", key.parts.join(".")),
    }
}

fn create(key: &Key, unit: &Unit) -> Change {
    Change {
        sql: unit.statement.text.clone(),
        action: Action::Create,
        object: describe(key),
        destructive: false,
    }
}

/// `unit`'s `SET default_tablespace …` around its change, then the defaults back.
fn with_settings(change: Change, unit: &Unit) -> Vec<Change> {
    if unit.settings.is_empty() {
        return vec![change];
    }
    let setting = |sql: String| Change {
        sql,
        action: Action::Create,
        object: change.object.clone(),
        destructive: false,
    };
    let mut out: Vec<Change> = unit.settings.iter().cloned().map(setting).collect();
    out.push(change.clone());
    out.push(setting("SET default_tablespace = ''".to_owned()));
    out.push(setting("SET default_table_access_method = heap".to_owned()));
    out
}

fn q(schema: &str, name: &str) -> QualifiedName {
    QualifiedName::qualified(schema, name)
}

fn drop(key: &Key, unit: &Unit) -> Result<Change, DiffError> {
    let p = &key.parts;
    let object = describe(key);
    let plain = |sql: String, destructive: bool| {
        Ok(Change {
            sql,
            action: Action::Drop,
            object: object.clone(),
            destructive,
        })
    };
    match key.kind {
        Kind::Table => plain(format!("DROP TABLE {}", q(&p[0], &p[1])), true),
        Kind::View => plain(format!("DROP VIEW {}", q(&p[0], &p[1])), true),
        Kind::MaterializedView => {
            plain(format!("DROP MATERIALIZED VIEW {}", q(&p[0], &p[1])), true)
        }
        Kind::Sequence => plain(format!("DROP SEQUENCE {}", q(&p[0], &p[1])), true),
        Kind::Type => {
            let word = if matches!(unit.statement.node, NodeEnum::CreateDomainStmt(_)) {
                "DOMAIN"
            } else {
                "TYPE"
            };
            plain(format!("DROP {word} {}", q(&p[0], &p[1])), true)
        }
        Kind::Extension => plain(format!("DROP EXTENSION {}", quote_ident(&p[0])), true),
        Kind::Schema => plain(format!("DROP SCHEMA {}", quote_ident(&p[0])), true),
        Kind::Publication => plain(format!("DROP PUBLICATION {}", quote_ident(&p[0])), false),
        Kind::PublicationMember => match &unit.statement.node {
            NodeEnum::AlterPublicationStmt(stmt)
                if stmt.action == pgshift_sql::ast::AlterPublicationAction::ApAddObjects as i32 =>
            {
                let mut dropped = stmt.clone();
                dropped.action = pgshift_sql::ast::AlterPublicationAction::ApDropObjects as i32;
                // DROP takes the tables without their row filters and column lists.
                for object in &mut dropped.pubobjects {
                    if let Some(NodeEnum::PublicationObjSpec(spec)) = &mut object.node {
                        if let Some(table) = spec.pubtable.as_mut() {
                            table.where_clause = None;
                            table.columns.clear();
                        }
                    }
                }
                plain(
                    sql_of(NodeEnum::AlterPublicationStmt(dropped), &object)?,
                    false,
                )
            }
            _ => unsupported(&object, "removing it"),
        },
        Kind::Function => plain(drop_function(&unit.statement, &object)?, true),
        Kind::Constraint => plain(
            format!(
                "ALTER TABLE {} DROP CONSTRAINT {}",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::DomainConstraint => plain(
            format!(
                "ALTER DOMAIN {} DROP CONSTRAINT {}",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::Index => plain(format!("DROP INDEX {}", q(&p[0], &p[1])), false),
        Kind::Trigger => plain(
            format!("DROP TRIGGER {} ON {}", quote_ident(&p[2]), q(&p[0], &p[1])),
            false,
        ),
        Kind::TriggerState => plain(
            format!(
                "ALTER TABLE {} ENABLE TRIGGER {}",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::Policy => plain(
            format!("DROP POLICY {} ON {}", quote_ident(&p[2]), q(&p[0], &p[1])),
            false,
        ),
        Kind::Rule => plain(
            format!("DROP RULE {} ON {}", quote_ident(&p[2]), q(&p[0], &p[1])),
            false,
        ),
        Kind::Statistics => plain(format!("DROP STATISTICS {}", q(&p[0], &p[1])), false),
        Kind::Default => plain(
            format!(
                "ALTER TABLE {} ALTER COLUMN {} DROP DEFAULT",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::Identity => plain(
            format!(
                "ALTER TABLE {} ALTER COLUMN {} DROP IDENTITY",
                q(&p[0], &p[1]),
                quote_ident(&p[2])
            ),
            false,
        ),
        Kind::SequenceOwnedBy => plain(
            format!("ALTER SEQUENCE {} OWNED BY NONE", q(&p[0], &p[1])),
            false,
        ),
        Kind::RowSecurity => plain(
            format!("ALTER TABLE {} DISABLE ROW LEVEL SECURITY", q(&p[0], &p[1])),
            false,
        ),
        Kind::ForceRowSecurity => plain(
            format!(
                "ALTER TABLE {} NO FORCE ROW LEVEL SECURITY",
                q(&p[0], &p[1])
            ),
            false,
        ),
        Kind::Comment => match &unit.statement.node {
            NodeEnum::CommentStmt(stmt) => {
                let mut cleared = stmt.clone();
                cleared.comment = String::new();
                plain(sql_of(NodeEnum::CommentStmt(cleared), &object)?, false)
            }
            _ => unsupported(&object, "removing it"),
        },
        Kind::Grant => match &unit.statement.node {
            NodeEnum::GrantStmt(stmt) => {
                let mut revoke = stmt.clone();
                revoke.is_grant = false;
                revoke.grant_option = false;
                plain(sql_of(NodeEnum::GrantStmt(revoke), &object)?, false)
            }
            _ => unsupported(&object, "revoking it"),
        },
        Kind::Attach => {
            let Some(parent) = attached_to(&unit.statement) else {
                return unsupported(&object, "detaching it");
            };
            plain(
                format!("ALTER TABLE {parent} DETACH PARTITION {}", q(&p[0], &p[1])),
                false,
            )
        }
        Kind::Aggregate
        | Kind::IndexAttach
        | Kind::TableSetting
        | Kind::StatisticsTarget
        | Kind::DefaultPrivileges => unsupported(&object, "removing it"),
    }
}

fn unsupported<T>(object: &str, what: &str) -> Result<T, DiffError> {
    Err(DiffError::Unsupported {
        object: object.to_owned(),
        what: what.to_owned(),
    })
}

fn sql_of(node: NodeEnum, object: &str) -> Result<String, DiffError> {
    deparse(&node).map_err(|err| DiffError::Deparse {
        object: object.to_owned(),
        reason: err.to_string(),
    })
}

fn attached_to(statement: &Statement) -> Option<QualifiedName> {
    match &statement.node {
        NodeEnum::AlterTableStmt(stmt) => stmt.relation.as_ref().map(|rv| {
            let (s, n) = super::objects::name_of(rv);
            q(&s, &n)
        }),
        _ => None,
    }
}

/// `DROP FUNCTION f(types)` (or `PROCEDURE`) from the live `CREATE`'s syntax tree.
fn drop_function(statement: &Statement, object: &str) -> Result<String, DiffError> {
    let NodeEnum::CreateFunctionStmt(stmt) = &statement.node else {
        return unsupported(object, "dropping it");
    };
    let args: Vec<Node> = stmt
        .parameters
        .iter()
        .filter_map(|p| match &p.node {
            Some(NodeEnum::FunctionParameter(p))
                if p.mode != pgshift_sql::ast::FunctionParameterMode::FuncParamOut as i32
                    && p.mode != pgshift_sql::ast::FunctionParameterMode::FuncParamTable as i32 =>
            {
                p.arg_type.clone().map(|t| Node {
                    node: Some(NodeEnum::TypeName(t)),
                })
            }
            _ => None,
        })
        .collect();
    let drop = DropStmt {
        objects: vec![Node {
            node: Some(NodeEnum::ObjectWithArgs(ObjectWithArgs {
                objname: stmt.funcname.clone(),
                objargs: args,
                objfuncargs: Vec::new(),
                args_unspecified: false,
            })),
        }],
        remove_type: if stmt.is_procedure {
            ObjectType::ObjectProcedure as i32
        } else {
            ObjectType::ObjectFunction as i32
        },
        behavior: DropBehavior::DropRestrict as i32,
        missing_ok: false,
        concurrent: false,
    };
    sql_of(NodeEnum::DropStmt(drop), object)
}

/// The change of a unit both sides have, where it is not dropped and created again.
fn alter(key: &Key, was: &Unit, wanted: &Unit) -> Result<Vec<Change>, DiffError> {
    let object = describe(key);
    let desired_text = |destructive: bool| {
        vec![Change {
            sql: wanted.statement.text.clone(),
            action: Action::Alter,
            object: object.clone(),
            destructive,
        }]
    };
    match key.kind {
        Kind::Table => {
            let altered = table(key, was, wanted)?;
            if altered.is_empty() {
                // The texts differ in something no column change makes: the columns'
                // order, say.
                return unsupported(
                    &object,
                    "a change no column statement makes (the columns' order?)",
                );
            }
            Ok(altered)
        }
        Kind::View | Kind::Function => {
            let mut node = wanted.statement.node.clone();
            match &mut node {
                NodeEnum::ViewStmt(v) => v.replace = true,
                NodeEnum::CreateFunctionStmt(f) => f.replace = true,
                _ => return unsupported(&object, "a change"),
            }
            Ok(vec![Change {
                sql: sql_of(node, &object)?,
                action: Action::Alter,
                object,
                destructive: false,
            }])
        }
        Kind::Type => match (&was.statement.node, &wanted.statement.node) {
            (NodeEnum::CreateEnumStmt(old), NodeEnum::CreateEnumStmt(new)) => {
                enum_values(&object, old, new)
            }
            _ => unsupported(&object, "a change of its definition"),
        },
        Kind::Sequence => match (&was.statement.node, &wanted.statement.node) {
            (NodeEnum::CreateSeqStmt(_), NodeEnum::CreateSeqStmt(new)) => {
                let alter = pgshift_sql::ast::AlterSeqStmt {
                    sequence: new.sequence.clone(),
                    options: new.options.clone(),
                    for_identity: false,
                    missing_ok: false,
                };
                Ok(vec![Change {
                    sql: sql_of(NodeEnum::AlterSeqStmt(alter), &object)?,
                    action: Action::Alter,
                    object,
                    destructive: false,
                }])
            }
            _ => unsupported(&object, "a change of its definition"),
        },
        // Statements that set what they set, whatever was there.
        Kind::Default
        | Kind::TriggerState
        | Kind::Comment
        | Kind::SequenceOwnedBy
        | Kind::StatisticsTarget
        | Kind::TableSetting => Ok(desired_text(false)),
        _ => unsupported(&object, "a change of its definition"),
    }
}

/// `ALTER TYPE … ADD VALUE` for each label the desired enum has that the live one
/// lacks, placed by its neighbour; a label removed or moved is not covered (PostgreSQL
/// cannot do either in place).
fn enum_values(
    object: &str,
    old: &pgshift_sql::ast::CreateEnumStmt,
    new: &pgshift_sql::ast::CreateEnumStmt,
) -> Result<Vec<Change>, DiffError> {
    let (was, wanted) = (strings(&old.vals), strings(&new.vals));
    let kept: Vec<&String> = wanted.iter().filter(|v| was.contains(v)).collect();
    if kept.len() != was.len() || kept.iter().zip(&was).any(|(a, b)| *a != b) {
        return unsupported(object, "a label removed or moved");
    }
    let mut out = Vec::new();
    for (i, value) in wanted.iter().enumerate() {
        if was.contains(value) {
            continue;
        }
        // Before the next label the live type has, else after the one before it.
        let (neighbor, after) = match wanted[i + 1..].iter().find(|v| was.contains(v)) {
            Some(next) => (next.clone(), false),
            None => (wanted[..i].last().cloned().unwrap_or_default(), true),
        };
        let stmt = pgshift_sql::ast::AlterEnumStmt {
            type_name: new.type_name.clone(),
            old_val: String::new(),
            new_val: value.clone(),
            new_val_neighbor: neighbor,
            new_val_is_after: after,
            skip_if_new_val_exists: false,
        };
        out.push(Change {
            sql: sql_of(NodeEnum::AlterEnumStmt(stmt), object)?,
            action: Action::Alter,
            object: object.to_owned(),
            destructive: false,
        });
    }
    Ok(out)
}

fn strings(nodes: &[Node]) -> Vec<String> {
    crate::classify::names::strings(nodes)
}

/// `ALTER TABLE … SET (…)` of the options the desired table sets otherwise, and
/// `RESET (…)` of those it no longer sets.
fn options(
    relation: &RangeVar,
    object: &str,
    old: &[Node],
    new: &[Node],
) -> Result<Vec<Change>, DiffError> {
    let name = |n: &Node| match &n.node {
        Some(NodeEnum::DefElem(d)) => Some((d.defnamespace.clone(), d.defname.clone())),
        _ => None,
    };
    let set: Vec<Node> = new
        .iter()
        .filter(|n| !old.iter().any(|o| shape_of(o) == shape_of(*n)))
        .cloned()
        .collect();
    let reset: Vec<Node> = old
        .iter()
        .filter(|o| !new.iter().any(|n| name(n) == name(o)))
        .map(|o| match &o.node {
            Some(NodeEnum::DefElem(d)) => Node {
                node: Some(NodeEnum::DefElem(Box::new(pgshift_sql::ast::DefElem {
                    defnamespace: d.defnamespace.clone(),
                    defname: d.defname.clone(),
                    arg: None,
                    defaction: d.defaction,
                    location: 0,
                    arg_location: 0,
                }))),
            },
            _ => o.clone(),
        })
        .collect();
    let mut out = Vec::new();
    for (items, command) in [
        (set, AlterTableType::AtSetRelOptions),
        (reset, AlterTableType::AtResetRelOptions),
    ] {
        if items.is_empty() {
            continue;
        }
        let list = Node {
            node: Some(NodeEnum::List(pgshift_sql::ast::List { items })),
        };
        out.push(alter_table(
            relation,
            object,
            AtCommand::Options(command, list),
            false,
        )?);
    }
    Ok(out)
}

/// A table's column and check changes, from both `CREATE TABLE`s' syntax trees.
fn table(key: &Key, was: &Unit, wanted: &Unit) -> Result<Vec<Change>, DiffError> {
    let object = key.parts.join(".");
    let (NodeEnum::CreateStmt(old), NodeEnum::CreateStmt(new)) =
        (&was.statement.node, &wanted.statement.node)
    else {
        return unsupported(&object, "a change of a foreign table");
    };
    let table_level = |s: &pgshift_sql::ast::CreateStmt| {
        (
            shape_of(&s.inh_relations),
            shape_of(&s.partbound),
            shape_of(&s.partspec),
            shape_of(&s.of_typename),
            s.oncommit,
            s.tablespacename.clone(),
            s.access_method.clone(),
            s.relation.as_ref().map(|r| r.relpersistence.clone()),
        )
    };
    if table_level(old) != table_level(new) {
        return unsupported(
            &format!("table {object}"),
            "a change of its partitioning, inheritance, persistence, tablespace or access method",
        );
    }
    let relation = new.relation.clone().unwrap_or_default();
    let qualified = q(&key.parts[0], &key.parts[1]);
    let mut out = Vec::new();
    let columns = |s: &pgshift_sql::ast::CreateStmt| -> Vec<ColumnDef> {
        s.table_elts
            .iter()
            .filter_map(|e| match &e.node {
                Some(NodeEnum::ColumnDef(c)) => Some((**c).clone()),
                _ => None,
            })
            .collect()
    };
    let checks = |s: &pgshift_sql::ast::CreateStmt| -> Vec<Constraint> {
        s.table_elts
            .iter()
            .chain(s.constraints.iter())
            .filter_map(|e| match &e.node {
                Some(NodeEnum::Constraint(c)) => Some((**c).clone()),
                _ => None,
            })
            .collect()
    };
    out.extend(options(
        &relation,
        &format!("options of table {object}"),
        &old.options,
        &new.options,
    )?);
    let (old_columns, new_columns) = (columns(old), columns(new));
    // PostgreSQL only appends a column: the order the changes leave is the kept
    // columns in their live order, then the new ones.
    let kept: Vec<&str> = old_columns
        .iter()
        .map(|c| c.colname.as_str())
        .filter(|n| new_columns.iter().any(|c| c.colname == *n))
        .collect();
    let left: Vec<&str> = kept
        .iter()
        .copied()
        .chain(
            new_columns
                .iter()
                .map(|c| c.colname.as_str())
                .filter(|n| !kept.contains(n)),
        )
        .collect();
    let wanted: Vec<&str> = new_columns.iter().map(|c| c.colname.as_str()).collect();
    if let Some(at) = left.iter().zip(&wanted).position(|(a, b)| a != b) {
        return unsupported(
            &format!("table {object}"),
            &format!(
                "the column order (the desired files have {} where PostgreSQL would leave {}: \
                 it only adds a column last, so put new columns last)",
                wanted[at], left[at]
            ),
        );
    }
    let (old_checks, new_checks) = (checks(old), checks(new));
    // Checks dropped or changed first: a check may read a column dropped below.
    for check in &old_checks {
        let kept = new_checks
            .iter()
            .find(|c| c.conname == check.conname)
            .is_some_and(|c| shape_of(c) == shape_of(check));
        if !kept {
            out.push(Change {
                sql: format!(
                    "ALTER TABLE {qualified} DROP CONSTRAINT {}",
                    quote_ident(&check.conname)
                ),
                action: Action::Alter,
                object: format!("constraint {object}.{}", check.conname),
                destructive: false,
            });
        }
    }
    for column in &old_columns {
        if !new_columns.iter().any(|c| c.colname == column.colname) {
            out.push(Change {
                sql: format!(
                    "ALTER TABLE {qualified} DROP COLUMN {}",
                    quote_ident(&column.colname)
                ),
                action: Action::Alter,
                object: format!("column {object}.{}", column.colname),
                destructive: true,
            });
        }
    }
    for column in &new_columns {
        let what = format!("column {object}.{}", column.colname);
        let Some(before) = old_columns.iter().find(|c| c.colname == column.colname) else {
            out.push(alter_table(
                &relation,
                &what,
                AtCommand::Add(column.clone()),
                false,
            )?);
            continue;
        };
        let rest = |c: &ColumnDef| {
            let others: Vec<String> = c
                .constraints
                .iter()
                .filter(|n| {
                    !matches!(&n.node, Some(NodeEnum::Constraint(k))
                        if k.contype == ConstrType::ConstrDefault as i32
                            || k.contype == ConstrType::ConstrNotnull as i32)
                })
                .map(shape_of)
                .collect();
            (
                others,
                c.storage.clone(),
                c.compression.clone(),
                c.generated.clone(),
                c.identity.clone(),
            )
        };
        if rest(before) != rest(column) {
            return unsupported(
                &what,
                "a change of its generation, identity, storage, compression or column constraints",
            );
        }
        if shape_of(&before.type_name) != shape_of(&column.type_name)
            || shape_of(&before.coll_clause) != shape_of(&column.coll_clause)
        {
            out.push(alter_table(
                &relation,
                &what,
                AtCommand::Type(column.clone()),
                true,
            )?);
        }
        let default = |c: &ColumnDef| {
            c.constraints.iter().find_map(|n| match &n.node {
                Some(NodeEnum::Constraint(k)) if k.contype == ConstrType::ConstrDefault as i32 => {
                    k.raw_expr.clone()
                }
                _ => None,
            })
        };
        let (old_default, new_default) = (default(before), default(column));
        if shape_of(&old_default) != shape_of(&new_default) {
            out.push(alter_table(
                &relation,
                &what,
                AtCommand::Default(column.colname.clone(), new_default),
                false,
            )?);
        }
        let not_null = |c: &ColumnDef| {
            c.is_not_null
                || c.constraints.iter().any(|n| {
                    matches!(&n.node, Some(NodeEnum::Constraint(k))
                        if k.contype == ConstrType::ConstrNotnull as i32)
                })
        };
        if not_null(before) != not_null(column) {
            out.push(alter_table(
                &relation,
                &what,
                AtCommand::NotNull(column.colname.clone(), not_null(column)),
                false,
            )?);
        }
    }
    for check in &new_checks {
        let kept = old_checks
            .iter()
            .find(|c| c.conname == check.conname)
            .is_some_and(|c| shape_of(c) == shape_of(check));
        if !kept {
            out.push(alter_table(
                &relation,
                &format!("constraint {object}.{}", check.conname),
                AtCommand::AddConstraint(check.clone()),
                false,
            )?);
        }
    }
    Ok(out)
}

enum AtCommand {
    Options(AlterTableType, Node),
    Add(ColumnDef),
    Type(ColumnDef),
    Default(String, Option<Box<Node>>),
    NotNull(String, bool),
    AddConstraint(Constraint),
}

fn alter_table(
    relation: &RangeVar,
    object: &str,
    command: AtCommand,
    destructive: bool,
) -> Result<Change, DiffError> {
    let node = |n: NodeEnum| Some(Box::new(Node { node: Some(n) }));
    let mut cmd = AlterTableCmd {
        behavior: DropBehavior::DropRestrict as i32,
        ..Default::default()
    };
    match command {
        AtCommand::Options(subtype, list) => {
            cmd.subtype = subtype as i32;
            cmd.def = Some(Box::new(list));
        }
        AtCommand::Add(column) => {
            cmd.subtype = AlterTableType::AtAddColumn as i32;
            cmd.def = node(NodeEnum::ColumnDef(Box::new(column)));
        }
        AtCommand::Type(column) => {
            cmd.subtype = AlterTableType::AtAlterColumnType as i32;
            cmd.name = column.colname.clone();
            let only_type = ColumnDef {
                type_name: column.type_name,
                coll_clause: column.coll_clause,
                ..Default::default()
            };
            cmd.def = node(NodeEnum::ColumnDef(Box::new(only_type)));
        }
        AtCommand::Default(name, expr) => {
            cmd.subtype = AlterTableType::AtColumnDefault as i32;
            cmd.name = name;
            cmd.def = expr;
        }
        AtCommand::NotNull(name, set) => {
            cmd.subtype = if set {
                AlterTableType::AtSetNotNull as i32
            } else {
                AlterTableType::AtDropNotNull as i32
            };
            cmd.name = name;
        }
        AtCommand::AddConstraint(constraint) => {
            cmd.subtype = AlterTableType::AtAddConstraint as i32;
            cmd.def = node(NodeEnum::Constraint(Box::new(constraint)));
        }
    }
    let stmt = AlterTableStmt {
        relation: Some(relation.clone()),
        cmds: vec![Node {
            node: Some(NodeEnum::AlterTableCmd(Box::new(cmd))),
        }],
        objtype: ObjectType::ObjectTable as i32,
        missing_ok: false,
    };
    Ok(Change {
        sql: sql_of(NodeEnum::AlterTableStmt(stmt), object)?,
        action: Action::Alter,
        object: object.to_owned(),
        destructive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(sql: &str) -> Units {
        Units::read(&pgshift_sql::parse(sql).expect("parses")).expect("covered")
    }

    fn plan(live: &str, desired: &str) -> Vec<Change> {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        changes(&units(live), &units(desired), &managed).expect("a plan")
    }

    fn sql(changes: &[Change]) -> Vec<&str> {
        changes.iter().map(|c| c.sql.as_str()).collect()
    }

    #[test]
    fn columns_defaults_not_null_and_checks_are_altered_in_place() {
        let got = plan(
            "CREATE TABLE app.t (id integer NOT NULL, gone text, n integer, CONSTRAINT c CHECK ((n > 0)));",
            "CREATE TABLE app.t (id bigint NOT NULL, n integer DEFAULT 1 NOT NULL, added text, CONSTRAINT c CHECK ((n > 1)));",
        );
        assert_eq!(
            sql(&got),
            [
                r#"ALTER TABLE "app"."t" DROP CONSTRAINT "c""#,
                r#"ALTER TABLE "app"."t" DROP COLUMN "gone""#,
                "ALTER TABLE app.t ALTER COLUMN id TYPE bigint",
                "ALTER TABLE app.t ALTER COLUMN n SET DEFAULT 1",
                "ALTER TABLE app.t ALTER COLUMN n SET NOT NULL",
                "ALTER TABLE app.t ADD COLUMN added text",
                "ALTER TABLE app.t ADD CONSTRAINT c CHECK (n > 1)",
            ]
        );
        assert_eq!(
            got.iter().filter(|c| c.destructive).count(),
            2,
            "a dropped column and a type change"
        );
    }

    #[test]
    fn what_only_one_side_has_is_dropped_or_created_in_dump_order() {
        let got = plan(
            "CREATE TABLE app.t (id integer);
             CREATE INDEX t_old ON app.t USING btree (id);
             CREATE VIEW app.v AS SELECT t.id FROM app.t;
             GRANT SELECT ON TABLE app.t TO r;
             CREATE FUNCTION app.f(a integer, OUT b integer) RETURNS integer LANGUAGE sql AS 'SELECT 1';",
            "CREATE TABLE app.t (id integer);
             CREATE INDEX t_new ON app.t USING btree (id DESC);
             CREATE TABLE app.u (id integer);",
        );
        assert_eq!(
            sql(&got),
            [
                "DROP FUNCTION app.f(int)",
                "REVOKE select ON app.t FROM r",
                r#"DROP VIEW "app"."v""#,
                r#"DROP INDEX "app"."t_old""#,
                "CREATE INDEX t_new ON app.t USING btree (id DESC)",
                "CREATE TABLE app.u (id integer)",
            ]
        );
    }

    #[test]
    fn access_changes_carry_their_impact() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let got = access_changes(
            &units(
                "CREATE TABLE app.t (id integer);
                 GRANT SELECT ON TABLE app.t TO old_reader;
                 CREATE POLICY keep ON app.t USING (true);
                 CREATE POLICY gone ON app.t AS RESTRICTIVE USING (id > 0);",
            ),
            &units(
                "CREATE TABLE app.t (id integer);
                 GRANT SELECT ON TABLE app.t TO new_reader;
                 ALTER TABLE app.t ENABLE ROW LEVEL SECURITY;
                 CREATE POLICY keep ON app.t USING (id > 1);",
            ),
            &managed,
        );
        let impacts: Vec<(&str, Impact)> =
            got.iter().map(|c| (c.object.as_str(), c.impact)).collect();
        assert_eq!(
            impacts,
            [
                ("policy app.t.gone", Impact::MayWiden),
                ("policy app.t.keep", Impact::Changed),
                ("row level security of app.t", Impact::MayNarrow),
                (
                    "GRANT SELECT ON TABLE app.t TO new_reader",
                    Impact::MayWiden
                ),
                (
                    "GRANT SELECT ON TABLE app.t TO old_reader",
                    Impact::MayNarrow
                ),
            ]
        );
    }

    #[test]
    fn a_partitions_columns_follow_its_parent() {
        let got = plan(
            "CREATE TABLE app.p (id integer, t integer) PARTITION BY RANGE (t);
             CREATE TABLE app.p_0 (id integer, t integer);
             ALTER TABLE ONLY app.p ATTACH PARTITION app.p_0 FOR VALUES FROM (0) TO (10);",
            "CREATE TABLE app.p (id bigint, t integer) PARTITION BY RANGE (t);
             CREATE TABLE app.p_0 (id bigint, t integer);
             ALTER TABLE ONLY app.p ATTACH PARTITION app.p_0 FOR VALUES FROM (0) TO (10);",
        );
        assert_eq!(sql(&got), ["ALTER TABLE app.p ALTER COLUMN id TYPE bigint"]);
    }

    #[test]
    fn publication_tables_are_added_and_dropped() {
        let got = plan(
            "CREATE TABLE app.t (id integer);
             CREATE PUBLICATION p WITH (publish = 'insert');
             ALTER PUBLICATION p ADD TABLE ONLY app.t WHERE ((id > 0));",
            "CREATE TABLE app.t (id integer);
             CREATE TABLE app.u (id integer);
             CREATE PUBLICATION p WITH (publish = 'insert');
             ALTER PUBLICATION p ADD TABLE ONLY app.u;",
        );
        assert_eq!(
            sql(&got),
            [
                "ALTER PUBLICATION p DROP TABLE ONLY app.t",
                "CREATE TABLE app.u (id integer)",
                "ALTER PUBLICATION p ADD TABLE ONLY app.u",
            ]
        );
    }

    #[test]
    fn unmanaged_schemas_are_left_alone() {
        let got = plan(
            "CREATE TABLE other.t (id integer); CREATE TABLE app.t (id integer);",
            "CREATE TABLE app.t (id integer); CREATE TABLE elsewhere.u (id integer);",
        );
        assert!(got.is_empty(), "neither dropped nor created: {got:?}");
    }

    #[test]
    fn a_change_without_a_mechanical_statement_is_named() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let err = changes(
            &units("CREATE TABLE app.t (id integer) PARTITION BY RANGE (id);"),
            &units("CREATE TABLE app.t (id integer) PARTITION BY LIST (id);"),
            &managed,
        )
        .expect_err("partitioning is not covered");
        assert!(err.to_string().contains("table app.t"), "{err}");
        let err = changes(
            &units("CREATE TYPE app.e AS ENUM ('a', 'b');"),
            &units("CREATE TYPE app.e AS ENUM ('b', 'a');"),
            &managed,
        )
        .expect_err("moving a label is not covered");
        assert!(err.to_string().contains("moved"), "{err}");
    }

    #[test]
    fn a_column_added_anywhere_but_last_is_named() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let err = changes(
            &units("CREATE TABLE app.t (id integer, b text);"),
            &units("CREATE TABLE app.t (id integer, a text, b text);"),
            &managed,
        )
        .expect_err("PostgreSQL cannot insert a column");
        assert!(
            err.to_string()
                .contains("the desired files have a where PostgreSQL would leave b"),
            "{err}"
        );
    }

    #[test]
    fn options_enum_labels_and_sequences_are_altered_in_place() {
        let got = plan(
            "CREATE TABLE app.t (id integer) WITH (fillfactor='80', autovacuum_enabled='false');
             CREATE TYPE app.e AS ENUM ('a', 'c');
             CREATE SEQUENCE app.s START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1;",
            "CREATE TABLE app.t (id integer) WITH (fillfactor='90');
             CREATE TYPE app.e AS ENUM ('0', 'a', 'b', 'c', 'd');
             CREATE SEQUENCE app.s START WITH 1 INCREMENT BY 5 NO MINVALUE NO MAXVALUE CACHE 1;",
        );
        assert_eq!(
            sql(&got),
            [
                "ALTER TABLE app.t SET (fillfactor='90')",
                "ALTER TABLE app.t RESET (autovacuum_enabled)",
                "ALTER TYPE app.e ADD VALUE '0' BEFORE 'a'",
                "ALTER TYPE app.e ADD VALUE 'b' BEFORE 'c'",
                "ALTER TYPE app.e ADD VALUE 'd' AFTER 'c'",
                "ALTER SEQUENCE app.s START 1 INCREMENT 5 NO MINVALUE NO MAXVALUE CACHE 1",
            ]
        );
    }
}
