//! A table's changes in place, from both `CREATE TABLE`s' syntax trees: columns,
//! defaults, NOT NULL, generation, checks, storage options and persistence.

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, ColumnDef, ConstrType, Constraint, DropBehavior,
    Node, ObjectType, RangeVar,
};
use pgshift_sql::{quote_ident, NodeEnum};

use super::super::units::{shape_of, Key, Unit};
use super::{q, sql_of, unsupported, Action, Change, DiffError, Facts};

/// A table's column and check changes, from both `CREATE TABLE`s' syntax trees.
pub(super) fn table(
    key: &Key,
    was: &Unit,
    wanted: &Unit,
    facts: &Facts,
) -> Result<Vec<Change>, DiffError> {
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
        )
    };
    if table_level(old) != table_level(new) {
        return unsupported(
            &format!("table {object}"),
            "a change of its partitioning, inheritance, tablespace or access method",
        );
    }
    let relation = new.relation.clone().unwrap_or_default();
    let qualified = q(&key.parts[0], &key.parts[1]);
    let mut out = Vec::new();
    let persistence = |s: &pgshift_sql::ast::CreateStmt| {
        s.relation
            .as_ref()
            .map(|r| r.relpersistence.clone())
            .unwrap_or_default()
    };
    if persistence(old) != persistence(new) {
        // An unlogged table is emptied by a crash: marked destructive.
        let unlogged = persistence(new) == "u";
        out.push(alter_table(
            &relation,
            &format!("table {object}"),
            AtCommand::Logged(!unlogged),
            unlogged,
        )?);
    }
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
                            || k.contype == ConstrType::ConstrNotnull as i32
                            || k.contype == ConstrType::ConstrGenerated as i32)
                })
                .map(shape_of)
                .collect();
            (
                others,
                c.storage.clone(),
                c.compression.clone(),
                c.identity.clone(),
            )
        };
        if rest(before) != rest(column) {
            return unsupported(
                &what,
                "a change of its identity, storage or compression written in the column, \
                 or of its column constraints",
            );
        }
        out.extend(generation(&relation, &what, before, column, facts)?);
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

/// `ALTER TABLE … SET (…)` of the options the desired table sets otherwise, and
/// `RESET (…)` of those it no longer sets.
pub(super) fn options(
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

/// The columns (schema, table, column) whose type or collation differs between the
/// live and the desired `CREATE TABLE`.
pub(super) fn retyped(
    live: &super::super::units::Units,
    desired: &super::super::units::Units,
) -> std::collections::BTreeSet<(String, String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for (key, wanted) in &desired.by_key {
        let Some(was) = live.by_key.get(key) else {
            continue;
        };
        let (NodeEnum::CreateStmt(old), NodeEnum::CreateStmt(new)) =
            (&was.statement.node, &wanted.statement.node)
        else {
            continue;
        };
        for column in columns(new) {
            let changed = columns(old).iter().any(|c| {
                c.colname == column.colname
                    && (shape_of(&c.type_name) != shape_of(&column.type_name)
                        || shape_of(&c.coll_clause) != shape_of(&column.coll_clause))
            });
            if changed {
                out.insert((key.parts[0].clone(), key.parts[1].clone(), column.colname));
            }
        }
    }
    out
}

fn columns(s: &pgshift_sql::ast::CreateStmt) -> Vec<ColumnDef> {
    s.table_elts
        .iter()
        .filter_map(|e| match &e.node {
            Some(NodeEnum::ColumnDef(c)) => Some((**c).clone()),
            _ => None,
        })
        .collect()
}

/// A generated column's expression: dropped (the column keeps its values), or changed
/// where the server can (`SET EXPRESSION`, PostgreSQL 17 and later; a rewrite).
/// PostgreSQL cannot make an existing column generated, nor a stored one virtual.
fn generation(
    relation: &RangeVar,
    what: &str,
    before: &ColumnDef,
    column: &ColumnDef,
    facts: &Facts,
) -> Result<Vec<Change>, DiffError> {
    let generated = |c: &ColumnDef| {
        c.constraints.iter().find_map(|n| match &n.node {
            Some(NodeEnum::Constraint(k)) if k.contype == ConstrType::ConstrGenerated as i32 => {
                Some((**k).clone())
            }
            _ => None,
        })
    };
    let change = |command: AtCommand| alter_table(relation, what, command, false).map(|c| vec![c]);
    match (generated(before), generated(column)) {
        (None, None) => Ok(Vec::new()),
        (Some(a), Some(b)) if shape_of(&a) == shape_of(&b) => Ok(Vec::new()),
        (Some(a), None) if a.generated_kind != "v" => {
            change(AtCommand::DropExpression(column.colname.clone()))
        }
        (Some(_), None) => unsupported(
            what,
            "ending a virtual column's generation (PostgreSQL keeps no values to keep)",
        ),
        (None, Some(_)) => unsupported(
            what,
            "making an existing column generated (PostgreSQL cannot; add a new column)",
        ),
        (Some(a), Some(b)) if a.generated_kind != b.generated_kind => unsupported(
            what,
            "a change between a stored and a virtual generated column",
        ),
        (Some(_), Some(b)) if facts.server_version_num >= 170_000 => change(
            AtCommand::SetExpression(column.colname.clone(), b.raw_expr.clone()),
        ),
        (Some(_), Some(_)) => unsupported(
            what,
            "a changed generation expression (PostgreSQL changes one in place from 17 on)",
        ),
    }
}

pub(super) enum AtCommand {
    Options(AlterTableType, Node),
    Logged(bool),
    DropExpression(String),
    SetExpression(String, Option<Box<Node>>),
    Add(ColumnDef),
    Type(ColumnDef),
    Default(String, Option<Box<Node>>),
    NotNull(String, bool),
    AddConstraint(Constraint),
}

pub(super) fn alter_table(
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
        AtCommand::Logged(logged) => {
            cmd.subtype = if logged {
                AlterTableType::AtSetLogged as i32
            } else {
                AlterTableType::AtSetUnLogged as i32
            };
        }
        AtCommand::DropExpression(name) => {
            cmd.subtype = AlterTableType::AtDropExpression as i32;
            cmd.name = name;
        }
        AtCommand::SetExpression(name, expr) => {
            cmd.subtype = AlterTableType::AtSetExpression as i32;
            cmd.name = name;
            cmd.def = expr;
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
    use std::collections::BTreeSet;

    use super::super::tests::{facts, plan, sql, units};
    use super::super::Facts;
    use super::super::*;

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
    fn a_column_added_anywhere_but_last_is_named() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let err = changes(
            &units("CREATE TABLE app.t (id integer, b text);"),
            &units("CREATE TABLE app.t (id integer, a text, b text);"),
            &managed,
            &facts(),
        )
        .expect_err("PostgreSQL cannot insert a column");
        assert!(
            err.to_string()
                .contains("the desired files have a where PostgreSQL would leave b"),
            "{err}"
        );
    }

    #[test]
    fn column_properties_and_persistence_are_changed_in_place() {
        let got = plan(
            "CREATE TABLE app.t (id integer NOT NULL, body text, g integer GENERATED ALWAYS AS ((id * 2)) STORED, h integer GENERATED ALWAYS AS ((id + 1)) STORED);
             ALTER TABLE app.t ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (SEQUENCE NAME app.t_id_seq START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1 CYCLE);
             ALTER TABLE ONLY app.t ALTER COLUMN body SET STORAGE external;
             ALTER TABLE ONLY app.t ALTER COLUMN body SET (n_distinct='10', n_distinct_inherited='5');
             ALTER TABLE ONLY app.t ALTER COLUMN h SET STATISTICS 500;",
            "CREATE UNLOGGED TABLE app.t (id integer NOT NULL, body text, g integer, h integer GENERATED ALWAYS AS ((id + 2)) STORED);
             ALTER TABLE app.t ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME app.t_id_seq START WITH 1 INCREMENT BY 5 NO MINVALUE NO MAXVALUE CACHE 1);
             ALTER TABLE ONLY app.t ALTER COLUMN body SET (n_distinct='10');
             ALTER TABLE ONLY app.t ALTER COLUMN body SET COMPRESSION pglz;",
        );
        assert_eq!(
            sql(&got),
            [
                // Settings the desired schema lacks, back to their defaults (the
                // storage as the desired database's catalog has it).
                "ALTER TABLE ONLY app.t ALTER COLUMN h SET STATISTICS -1",
                "ALTER TABLE ONLY app.t ALTER COLUMN body SET STORAGE extended",
                "ALTER TABLE app.t SET UNLOGGED",
                "ALTER TABLE app.t ALTER COLUMN g DROP EXPRESSION",
                "ALTER TABLE app.t ALTER COLUMN h SET EXPRESSION AS (id + 2)",
                "ALTER TABLE app.t ALTER id SET GENERATED ALWAYS SET INCREMENT 5 SET NO CYCLE",
                "ALTER TABLE ONLY app.t ALTER COLUMN body RESET (n_distinct_inherited)",
                "ALTER TABLE ONLY app.t ALTER COLUMN body SET (n_distinct='10')",
                "ALTER TABLE ONLY app.t ALTER COLUMN body SET COMPRESSION pglz",
            ]
        );
        let destructive: Vec<&str> = got
            .iter()
            .filter(|c| c.destructive)
            .map(|c| c.sql.as_str())
            .collect();
        assert_eq!(destructive, ["ALTER TABLE app.t SET UNLOGGED"]);
    }

    #[test]
    fn a_generation_postgresql_cannot_change_in_place_is_named() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let on_16 = Facts {
            server_version_num: 160_000,
            ..facts()
        };
        let live = units("CREATE TABLE app.t (id integer, g integer GENERATED ALWAYS AS ((id * 2)) STORED, p integer);");
        let err = changes(
            &live,
            &units("CREATE TABLE app.t (id integer, g integer GENERATED ALWAYS AS ((id * 3)) STORED, p integer);"),
            &managed,
            &on_16,
        )
        .expect_err("no SET EXPRESSION before 17");
        assert!(err.to_string().contains("from 17 on"), "{err}");
        let err = changes(
            &live,
            &units("CREATE TABLE app.t (id integer, g integer GENERATED ALWAYS AS ((id * 2)) STORED, p integer GENERATED ALWAYS AS ((id * 4)) STORED);"),
            &managed,
            &facts(),
        )
        .expect_err("a column cannot become generated");
        assert!(err.to_string().contains("column app.t.p"), "{err}");
    }

    #[test]
    fn a_retyped_column_gets_its_storage_again() {
        // ALTER COLUMN … TYPE takes the storage back to the new type's default: a
        // plan without the second statement left `SET STORAGE` missing (seen on 18).
        let got = plan(
            "CREATE TABLE app.t (c text);
             ALTER TABLE ONLY app.t ALTER COLUMN c SET STORAGE external;",
            "CREATE TABLE app.t (c character varying(200));
             ALTER TABLE ONLY app.t ALTER COLUMN c SET STORAGE external;",
        );
        assert_eq!(
            sql(&got),
            [
                "ALTER TABLE app.t ALTER COLUMN c TYPE varchar(200)",
                "ALTER TABLE ONLY app.t ALTER COLUMN c SET STORAGE external",
            ]
        );
    }
}
