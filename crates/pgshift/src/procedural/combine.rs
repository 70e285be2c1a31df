//! The statements a block executed, combined where running them one by one would
//! leave the live table without something users read: consecutive `ALTER TABLE`s of
//! one table become one `ALTER TABLE` with all their subcommands (built on the syntax
//! tree and deparsed), so that copy-and-swap rewrites them at once, as the block did
//! in one transaction (`DROP COLUMN c, ALTER COLUMN k TYPE bigint, ADD COLUMN c …`).
//!
//! A column dropped by one statement and added back by a later, separate one (another
//! statement between them) cannot be combined: that is an error, and the block is
//! refused rather than run with the column missing in between.

use pgshift_sql::ast::{AlterTableType, Node};
use pgshift_sql::{deparse, parse, NodeEnum, QualifiedName};

use crate::classify::names::range_var_name;

/// `executed` as the statements to run, in order.
pub fn combine(executed: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<(
        Option<(QualifiedName, pgshift_sql::ast::AlterTableStmt)>,
        String,
    )> = Vec::new();
    for sql in executed {
        let statements = parse(sql).map_err(|err| format!("`{sql}` does not parse: {err}"))?;
        for statement in statements {
            let alter = match &statement.node {
                NodeEnum::AlterTableStmt(alter) => alter
                    .relation
                    .as_ref()
                    .map(|rv| (range_var_name(rv), alter.clone())),
                _ => None,
            };
            match (alter, out.last_mut()) {
                (Some((table, alter)), Some((Some((previous_table, previous)), text)))
                    if *previous_table == table && previous.objtype == alter.objtype =>
                {
                    previous.cmds.extend(alter.cmds);
                    *text = deparse(&NodeEnum::AlterTableStmt(previous.clone()))
                        .map_err(|err| err.to_string())?;
                }
                (alter, _) => out.push((alter, statement.text.clone())),
            }
        }
    }
    check_no_gap(&out)?;
    Ok(out.into_iter().map(|(_, text)| text).collect())
}

/// Refuses a column dropped in one statement and added back in a later one.
fn check_no_gap(
    statements: &[(
        Option<(QualifiedName, pgshift_sql::ast::AlterTableStmt)>,
        String,
    )],
) -> Result<(), String> {
    for (index, (alter, _)) in statements.iter().enumerate() {
        let Some((table, alter)) = alter else {
            continue;
        };
        for dropped in columns(&alter.cmds, AlterTableType::AtDropColumn) {
            let added_later = statements[index + 1..].iter().any(|(later, _)| {
                later.as_ref().is_some_and(|(t, a)| {
                    t == table && columns(&a.cmds, AlterTableType::AtAddColumn).contains(&dropped)
                })
            });
            if added_later {
                return Err(format!(
                    "it drops column {dropped} of {table} and adds it back in a later statement, with other statements between, so the two cannot be combined into one ALTER TABLE and running them apart would leave the table without the column"
                ));
            }
        }
    }
    Ok(())
}

/// The columns the subcommands of one type name.
fn columns(cmds: &[Node], kind: AlterTableType) -> Vec<String> {
    cmds.iter()
        .filter_map(|cmd| match &cmd.node {
            Some(NodeEnum::AlterTableCmd(cmd)) if cmd.subtype() == kind => {
                if kind == AlterTableType::AtAddColumn {
                    match cmd.def.as_ref().and_then(|d| d.node.as_ref()) {
                        Some(NodeEnum::ColumnDef(def)) => Some(def.colname.clone()),
                        _ => None,
                    }
                } else {
                    Some(cmd.name.clone())
                }
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_alters_of_one_table_become_one() {
        let out = combine(&[
            "ALTER TABLE events DROP COLUMN search_tsv".to_owned(),
            "ALTER TABLE events ALTER COLUMN kind TYPE bigint".to_owned(),
            "ALTER TABLE events ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED".to_owned(),
            "CREATE INDEX ON events (kind)".to_owned(),
        ])
        .expect("combines");
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].starts_with("ALTER TABLE events DROP search_tsv, ALTER COLUMN kind TYPE bigint, ADD COLUMN search_tsv"), "{out:?}");
        assert_eq!(out[1], "CREATE INDEX ON events (kind)");
    }

    #[test]
    fn a_drop_and_a_later_separate_add_are_refused() {
        let err = combine(&[
            "ALTER TABLE events DROP COLUMN c".to_owned(),
            "CREATE INDEX ON other (x)".to_owned(),
            "ALTER TABLE events ADD COLUMN c int".to_owned(),
        ])
        .expect_err("cannot combine");
        assert!(err.contains("drops column c"), "{err}");
    }

    #[test]
    fn alters_of_different_tables_stay_apart() {
        let out = combine(&[
            "ALTER TABLE a ADD COLUMN x int".to_owned(),
            "ALTER TABLE b ADD COLUMN x int".to_owned(),
        ])
        .expect("combines");
        assert_eq!(out.len(), 2);
    }
}
