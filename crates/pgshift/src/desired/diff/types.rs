//! A domain or a composite type changed in place: a domain's default, NOT NULL and
//! named checks (`ALTER DOMAIN`), a composite type's attributes (`ALTER TYPE … ADD`,
//! `DROP`, `ALTER ATTRIBUTE … TYPE`). A domain's base type, or an attribute placed
//! before existing ones, has no statement and is named.

use pgshift_sql::ast::{
    AlterDomainStmt, AlterTableCmd, AlterTableStmt, AlterTableType, ColumnDef, CompositeTypeStmt,
    ConstrType, Constraint, CreateDomainStmt, DropBehavior, Node, ObjectType,
};
use pgshift_sql::NodeEnum;

use super::super::units::shape_of;
use super::{sql_of, unsupported, Action, Change, DiffError};

fn constraints(stmt: &CreateDomainStmt) -> Vec<&Constraint> {
    stmt.constraints
        .iter()
        .filter_map(|n| match &n.node {
            Some(NodeEnum::Constraint(c)) => Some(&**c),
            _ => None,
        })
        .collect()
}

/// The `ALTER DOMAIN`s that take `old` to `new`.
pub(super) fn domain(
    object: &str,
    old: &CreateDomainStmt,
    new: &CreateDomainStmt,
) -> Result<Vec<Change>, DiffError> {
    if shape_of(&old.type_name) != shape_of(&new.type_name)
        || shape_of(&old.coll_clause) != shape_of(&new.coll_clause)
    {
        return unsupported(object, "a change of its base type or collation");
    }
    let (was, wanted) = (constraints(old), constraints(new));
    let of = |list: &[&Constraint], kind: ConstrType| {
        list.iter()
            .find(|c| c.contype == kind as i32)
            .map(|c| (*c).clone())
    };
    let mut out = Vec::new();
    let mut alter = |subtype: &str, name: &str, def: Option<NodeEnum>, destructive: bool| {
        let stmt = AlterDomainStmt {
            subtype: subtype.to_owned(),
            type_name: new.domainname.clone(),
            name: name.to_owned(),
            def: def.map(|d| Box::new(Node { node: Some(d) })),
            behavior: DropBehavior::DropRestrict as i32,
            missing_ok: false,
        };
        sql_of(NodeEnum::AlterDomainStmt(Box::new(stmt)), object).map(|sql| {
            out.push(Change {
                sql,
                action: Action::Alter,
                object: object.to_owned(),
                destructive,
            });
        })
    };
    // Checks dropped or changed first, then the default and NOT NULL, then new checks.
    let checks = |list: &[&Constraint]| -> Vec<Constraint> {
        list.iter()
            .filter(|c| c.contype == ConstrType::ConstrCheck as i32)
            .map(|c| (*c).clone())
            .collect()
    };
    let (old_checks, new_checks) = (checks(&was), checks(&wanted));
    for check in &old_checks {
        if !new_checks.iter().any(|c| shape_of(c) == shape_of(check)) {
            alter("X", &check.conname, None, false)?;
        }
    }
    let default =
        |list: &[&Constraint]| of(list, ConstrType::ConstrDefault).and_then(|c| c.raw_expr);
    if shape_of(&default(&was)) != shape_of(&default(&wanted)) {
        alter("T", "", default(&wanted).and_then(|d| d.node), false)?;
    }
    let not_null = |list: &[&Constraint]| of(list, ConstrType::ConstrNotnull).is_some();
    match (not_null(&was), not_null(&wanted)) {
        (false, true) => alter("O", "", None, false)?,
        (true, false) => alter("N", "", None, false)?,
        _ => {}
    }
    for check in &new_checks {
        if !old_checks.iter().any(|c| shape_of(c) == shape_of(check)) {
            alter(
                "C",
                "",
                Some(NodeEnum::Constraint(Box::new(check.clone()))),
                false,
            )?;
        }
    }
    if out.is_empty() {
        return unsupported(object, "a change of its definition");
    }
    Ok(out)
}

fn attributes(stmt: &CompositeTypeStmt) -> Vec<&ColumnDef> {
    stmt.coldeflist
        .iter()
        .filter_map(|n| match &n.node {
            Some(NodeEnum::ColumnDef(c)) => Some(&**c),
            _ => None,
        })
        .collect()
}

/// The `ALTER TYPE`s that take the composite type `old` to `new`: attributes dropped,
/// retyped, then added (last, as PostgreSQL adds them).
pub(super) fn composite(
    object: &str,
    old: &CompositeTypeStmt,
    new: &CompositeTypeStmt,
) -> Result<Vec<Change>, DiffError> {
    let (was, wanted) = (attributes(old), attributes(new));
    let kept: Vec<&str> = was
        .iter()
        .map(|a| a.colname.as_str())
        .filter(|n| wanted.iter().any(|a| a.colname == *n))
        .collect();
    let in_order: Vec<&str> = wanted
        .iter()
        .map(|a| a.colname.as_str())
        .filter(|n| kept.contains(n))
        .collect();
    let added_last = wanted
        .iter()
        .skip_while(|a| kept.contains(&a.colname.as_str()))
        .all(|a| !kept.contains(&a.colname.as_str()));
    if kept != in_order || !added_last {
        return unsupported(
            object,
            "the attributes' order (PostgreSQL only adds an attribute last)",
        );
    }
    let mut out = Vec::new();
    let mut alter = |subtype: AlterTableType, name: &str, def: Option<ColumnDef>, destructive| {
        let cmd = AlterTableCmd {
            subtype: subtype as i32,
            name: name.to_owned(),
            def: def.map(|d| {
                Box::new(Node {
                    node: Some(NodeEnum::ColumnDef(Box::new(d))),
                })
            }),
            behavior: DropBehavior::DropRestrict as i32,
            ..Default::default()
        };
        let stmt = AlterTableStmt {
            relation: new.typevar.clone(),
            cmds: vec![Node {
                node: Some(NodeEnum::AlterTableCmd(Box::new(cmd))),
            }],
            objtype: ObjectType::ObjectType as i32,
            missing_ok: false,
        };
        sql_of(NodeEnum::AlterTableStmt(stmt), object).map(|sql| {
            out.push(Change {
                sql,
                action: Action::Alter,
                object: format!("{object}.{name}"),
                destructive,
            });
        })
    };
    for attribute in &was {
        if !kept.contains(&attribute.colname.as_str()) {
            alter(AlterTableType::AtDropColumn, &attribute.colname, None, true)?;
        }
    }
    for attribute in &wanted {
        match was.iter().find(|a| a.colname == attribute.colname) {
            Some(before)
                if shape_of(&before.type_name) != shape_of(&attribute.type_name)
                    || shape_of(&before.coll_clause) != shape_of(&attribute.coll_clause) =>
            {
                let only_type = ColumnDef {
                    type_name: attribute.type_name.clone(),
                    coll_clause: attribute.coll_clause.clone(),
                    ..Default::default()
                };
                alter(
                    AlterTableType::AtAlterColumnType,
                    &attribute.colname,
                    Some(only_type),
                    true,
                )?;
            }
            Some(_) => {}
            None => alter(
                AlterTableType::AtAddColumn,
                "",
                Some((*attribute).clone()),
                false,
            )?,
        }
    }
    if out.is_empty() {
        return unsupported(object, "a change of its definition");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{plan, sql};

    #[test]
    fn domains_and_composite_types_are_altered_in_place() {
        let got = plan(
            "CREATE DOMAIN app.d AS integer DEFAULT 0 NOT NULL CONSTRAINT d_check CHECK ((VALUE >= 0)) CONSTRAINT d_small CHECK ((VALUE < 100));
             CREATE TYPE app.c AS (a integer, gone text, b text);",
            "CREATE DOMAIN app.d AS integer CONSTRAINT d_check CHECK ((VALUE >= 1)) CONSTRAINT d_small CHECK ((VALUE < 100));
             CREATE TYPE app.c AS (a bigint, b text, added date);",
        );
        assert_eq!(
            sql(&got),
            [
                "ALTER DOMAIN app.d DROP CONSTRAINT d_check",
                "ALTER DOMAIN app.d DROP DEFAULT",
                "ALTER DOMAIN app.d DROP NOT NULL",
                "ALTER DOMAIN app.d ADD CONSTRAINT d_check CHECK (value >= 1)",
                "ALTER TYPE app.c DROP ATTRIBUTE gone",
                "ALTER TYPE app.c ALTER ATTRIBUTE a TYPE bigint",
                "ALTER TYPE app.c ADD ATTRIBUTE added date",
            ]
        );
    }
}
