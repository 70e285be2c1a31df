//! Retargeting the user's statement (and catalog-rendered definitions) at the
//! scratch tree or the shadow, in the syntax tree, never by editing text.

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, Node, ResTarget, SelectStmt,
};
use pgshift_sql::{deparse, NodeEnum, QualifiedName, Statement};
use tokio_postgres::Client;

use super::{checked, db, run, set_search_path};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;

/// The user's statement retargeted at `shadow`, as SQL, when it is an `ALTER TABLE`.
pub fn retarget(statement: &Statement, shadow: &QualifiedName) -> Result<Option<String>, CasError> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return Ok(None);
    };
    retarget_alter(stmt, shadow, &|_| false)
}

/// An `ALTER TABLE` retargeted at `target`, without the subcommands `skip` selects;
/// `None` when no subcommand is left.
pub(super) fn retarget_alter(
    stmt: &AlterTableStmt,
    target: &QualifiedName,
    skip: &dyn Fn(&AlterTableCmd) -> bool,
) -> Result<Option<String>, CasError> {
    retarget_alter_with(stmt, target, skip, &[])
}

/// The tables the foreign keys of an `ALTER TABLE` reference (`ADD CONSTRAINT …
/// FOREIGN KEY`, a column's `REFERENCES`), as written.
pub(super) fn referenced_tables(stmt: &AlterTableStmt) -> Vec<QualifiedName> {
    let mut out = Vec::new();
    let mut visit = |constraint: &pgshift_sql::ast::Constraint| {
        if let Some(pktable) = &constraint.pktable {
            out.push(QualifiedName {
                schema: (!pktable.schemaname.is_empty()).then(|| pktable.schemaname.clone()),
                name: pktable.relname.clone(),
            });
        }
    };
    for node in &stmt.cmds {
        let Some(NodeEnum::AlterTableCmd(cmd)) = &node.node else {
            continue;
        };
        match cmd.def.as_deref().and_then(|d| d.node.as_ref()) {
            Some(NodeEnum::Constraint(constraint)) => visit(constraint),
            Some(NodeEnum::ColumnDef(def)) => {
                for node in &def.constraints {
                    if let Some(NodeEnum::Constraint(constraint)) = &node.node {
                        visit(constraint);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// [`retarget_alter`], also pointing the foreign keys that reference one of `selves`
/// (names, as written, that denote the table itself) at `target`.
pub(super) fn retarget_alter_with(
    stmt: &AlterTableStmt,
    target: &QualifiedName,
    skip: &dyn Fn(&AlterTableCmd) -> bool,
    selves: &[QualifiedName],
) -> Result<Option<String>, CasError> {
    let mut retargeted: AlterTableStmt = stmt.clone();
    if let Some(relation) = retargeted.relation.as_mut() {
        relation.schemaname = target.schema.clone().unwrap_or_default();
        relation.relname = target.name.clone();
        relation.inh = true;
    }
    retargeted.cmds.retain(|node| match &node.node {
        Some(NodeEnum::AlterTableCmd(cmd)) => !skip(cmd),
        _ => true,
    });
    let point = |constraint: &mut pgshift_sql::ast::Constraint| {
        if let Some(pktable) = constraint.pktable.as_mut() {
            let written = QualifiedName {
                schema: (!pktable.schemaname.is_empty()).then(|| pktable.schemaname.clone()),
                name: pktable.relname.clone(),
            };
            if selves.contains(&written) {
                pktable.schemaname = target.schema.clone().unwrap_or_default();
                pktable.relname = target.name.clone();
            }
        }
    };
    for node in &mut retargeted.cmds {
        let Some(NodeEnum::AlterTableCmd(cmd)) = node.node.as_mut() else {
            continue;
        };
        match cmd.def.as_deref_mut().and_then(|d| d.node.as_mut()) {
            Some(NodeEnum::Constraint(constraint)) => point(constraint),
            Some(NodeEnum::ColumnDef(def)) => {
                for node in &mut def.constraints {
                    if let Some(NodeEnum::Constraint(constraint)) = node.node.as_mut() {
                        point(constraint);
                    }
                }
            }
            _ => {}
        }
    }
    if retargeted.cmds.is_empty() {
        return Ok(None);
    }
    let sql = deparse(&NodeEnum::AlterTableStmt(retargeted))
        .map_err(|e| CasError::Record(e.to_string()))?;
    Ok(Some(sql))
}

/// The subcommands of an `ALTER TABLE`.
pub(super) fn commands(statement: &Statement) -> Vec<&AlterTableCmd> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return Vec::new();
    };
    stmt.cmds
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AlterTableCmd(cmd)) => Some(&**cmd),
            _ => None,
        })
        .collect()
}

pub(super) fn is(cmd: &AlterTableCmd, subtype: AlterTableType) -> bool {
    cmd.subtype == subtype as i32
}

/// The `USING` expression given for column `column` by an `ALTER COLUMN … TYPE`.
pub(super) fn using_expression(statement: &Statement, column: &str) -> Option<Node> {
    commands(statement).into_iter().find_map(|cmd| {
        if !is(cmd, AlterTableType::AtAlterColumnType) || cmd.name != column {
            return None;
        }
        let Some(NodeEnum::ColumnDef(def)) = cmd.def.as_deref().and_then(|d| d.node.as_ref())
        else {
            return None;
        };
        def.raw_default.as_deref().cloned()
    })
}

/// The columns an `ALTER TABLE` drops. A column of the same name added again by the
/// statement is a new column: it is not copied from the source.
pub(super) fn dropped_columns(statement: &Statement) -> Vec<String> {
    commands(statement)
        .into_iter()
        .filter(|cmd| is(cmd, AlterTableType::AtDropColumn))
        .map(|cmd| cmd.name.clone())
        .collect()
}

/// An expression written back as SQL (through `SELECT <expr>`).
pub(super) fn deparse_expression(expression: &Node) -> Option<String> {
    let select = SelectStmt {
        target_list: vec![Node {
            node: Some(NodeEnum::ResTarget(Box::new(ResTarget {
                val: Some(Box::new(expression.clone())),
                location: -1,
                ..Default::default()
            }))),
        }],
        limit_option: 1,
        op: 1,
        ..Default::default()
    };
    deparse(&NodeEnum::SelectStmt(Box::new(select)))
        .ok()
        .and_then(|sql| sql.strip_prefix("SELECT ").map(str::to_owned))
}

/// `CREATE INDEX` from a definition, on `target` (recursing into its partitions)
/// under `name`, in `tablespace` when given.
pub(super) fn retarget_index(
    definition: &str,
    target: &QualifiedName,
    name: &str,
    tablespace: Option<&str>,
) -> Result<String, CasError> {
    let bad = || {
        CasError::Record(format!(
            "index definition does not parse back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(definition).map_err(|_| bad())?;
    let Some(NodeEnum::IndexStmt(index)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut index = index.clone();
    index.idxname = name.to_owned();
    if let Some(relation) = index.relation.as_mut() {
        relation.schemaname = target.schema.clone().unwrap_or_default();
        relation.relname = target.name.clone();
        relation.inh = true;
    }
    if let Some(tablespace) = tablespace {
        index.table_space = tablespace.to_owned();
    }
    deparse(&NodeEnum::IndexStmt(index)).map_err(|e| CasError::Record(e.to_string()))
}

/// An index-backed constraint's definition (`pg_get_constraintdef`, which leaves them
/// out) with its index's storage parameters and tablespace, set in the syntax tree.
pub(super) fn constraint_with_storage(
    definition: &str,
    options: &[String],
    tablespace: Option<&str>,
) -> Result<String, CasError> {
    if options.is_empty() && tablespace.is_none() {
        return Ok(definition.to_owned());
    }
    edit_constraint(definition, "constraint", |constraint| {
        if let Some(tablespace) = tablespace {
            constraint.indexspace = tablespace.to_owned();
        }
        constraint.options = options
            .iter()
            .filter_map(|o| o.split_once('='))
            .map(|(name, value)| Node {
                node: Some(NodeEnum::DefElem(Box::new(pgshift_sql::ast::DefElem {
                    defname: name.to_owned(),
                    arg: Some(Box::new(Node {
                        node: Some(NodeEnum::String(pgshift_sql::ast::String {
                            sval: value.to_owned(),
                        })),
                    })),
                    defaction: pgshift_sql::ast::DefElemAction::DefelemUnspec as i32,
                    location: -1,
                    ..Default::default()
                }))),
            })
            .collect();
        true
    })
}

/// A foreign key definition (`pg_get_constraintdef`) that references `target` instead.
pub(super) fn retarget_foreign_key(
    definition: &str,
    target: &QualifiedName,
) -> Result<String, CasError> {
    edit_constraint(definition, "foreign key", |constraint| {
        let Some(pktable) = constraint.pktable.as_mut() else {
            return false;
        };
        pktable.schemaname = target.schema.clone().unwrap_or_default();
        pktable.relname = target.name.clone();
        true
    })
}

/// A constraint definition (`pg_get_constraintdef`) changed by `edit` in its syntax
/// tree and written back; `edit` says whether it found what it changes. `what` names
/// the definition in the error.
fn edit_constraint(
    definition: &str,
    what: &str,
    mut edit: impl FnMut(&mut pgshift_sql::ast::Constraint) -> bool,
) -> Result<String, CasError> {
    const PREFIX: &str = "ALTER TABLE t ADD CONSTRAINT c ";
    let bad = || CasError::Record(format!("{what} does not parse back: {definition}"));
    let statements = pgshift_sql::parse(&format!("{PREFIX}{definition}")).map_err(|_| bad())?;
    let Some(NodeEnum::AlterTableStmt(stmt)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut stmt = stmt.clone();
    let mut found = false;
    for node in &mut stmt.cmds {
        if let Some(NodeEnum::AlterTableCmd(cmd)) = node.node.as_mut() {
            if let Some(NodeEnum::Constraint(constraint)) =
                cmd.def.as_deref_mut().and_then(|d| d.node.as_mut())
            {
                found |= edit(constraint);
            }
        }
    }
    if !found {
        return Err(bad());
    }
    let sql =
        deparse(&NodeEnum::AlterTableStmt(stmt)).map_err(|e| CasError::Record(e.to_string()))?;
    sql.strip_prefix(PREFIX).map(str::to_owned).ok_or_else(bad)
}

/// `CREATE STATISTICS` from a definition, as `name` on `target`.
pub(super) fn retarget_statistics(
    definition: &str,
    name: &QualifiedName,
    target: &QualifiedName,
) -> Result<String, CasError> {
    let bad = || {
        CasError::Record(format!(
            "statistics definition does not parse back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(definition).map_err(|_| bad())?;
    let Some(NodeEnum::CreateStatsStmt(stats)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut stats = stats.clone();
    let string = |s: &str| Node {
        node: Some(NodeEnum::String(pgshift_sql::ast::String {
            sval: s.to_owned(),
        })),
    };
    stats.defnames = vec![
        string(name.schema.as_deref().unwrap_or_default()),
        string(&name.name),
    ];
    for relation in &mut stats.relations {
        if let Some(NodeEnum::RangeVar(range)) = relation.node.as_mut() {
            range.schemaname = target.schema.clone().unwrap_or_default();
            range.relname = target.name.clone();
        }
    }
    deparse(&NodeEnum::CreateStatsStmt(stats)).map_err(|e| CasError::Record(e.to_string()))
}

/// A user trigger's definition retargeted at `target`.
pub(super) fn retarget_trigger(
    definition: &str,
    target: &QualifiedName,
) -> Result<String, CasError> {
    let bad = || {
        CasError::Record(format!(
            "trigger definition does not parse back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(definition).map_err(|_| bad())?;
    let Some(NodeEnum::CreateTrigStmt(trigger)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut trigger = trigger.clone();
    if let Some(relation) = trigger.relation.as_mut() {
        relation.schemaname = target.schema.clone().unwrap_or_default();
        relation.relname = target.name.clone();
    }
    deparse(&NodeEnum::CreateTrigStmt(trigger)).map_err(|e| CasError::Record(e.to_string()))
}

/// A `USING` expression with every name resolved as the statement's `search_path`
/// resolves it, written with the names qualified (read back through a temporary view
/// over the source aliased `s`), so that the copy sessions evaluate the same thing.
pub(super) async fn resolve_using(
    client: &Client,
    plan: &RunPlan,
    scratch_schema: &str,
    path: &str,
    expression: &Node,
    n: usize,
) -> Result<String, CasError> {
    let view = QualifiedName::qualified(scratch_schema, format!("using_{n}"));
    // A fixed shape of quoted names, with the expression put in in the syntax tree.
    let template = format!(
        "CREATE VIEW {view} AS SELECT NULL AS v FROM {} s",
        plan.source.table.name
    );
    let bad_template = || CasError::Record(format!("does not parse: {template}"));
    let parsed = pgshift_sql::parse(&template).map_err(|_| bad_template())?;
    let Some(NodeEnum::ViewStmt(mut create)) = parsed.into_iter().next().map(|s| s.node) else {
        return Err(bad_template());
    };
    let Some(NodeEnum::SelectStmt(select)) =
        create.query.as_deref_mut().and_then(|q| q.node.as_mut())
    else {
        return Err(bad_template());
    };
    let Some(NodeEnum::ResTarget(target)) =
        select.target_list.first_mut().and_then(|t| t.node.as_mut())
    else {
        return Err(bad_template());
    };
    target.val = Some(Box::new(expression.clone()));
    let sql = checked(
        deparse(&NodeEnum::ViewStmt(create)).map_err(|e| CasError::Record(e.to_string()))?,
        1,
    )?;
    set_search_path(client, path).await?;
    let created = client.batch_execute(&sql).await;
    set_search_path(client, "pg_catalog, pg_temp").await?;
    created.map_err(db("resolving a USING expression"))?;
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_get_viewdef(pg_catalog.to_regclass($1))",
            &[&view.to_string()],
        )
        .await
        .map_err(db("resolving a USING expression"))?;
    run(
        client,
        "resolving a USING expression",
        &format!("DROP VIEW {view}"),
    )
    .await?;
    let definition: String = row.get(0);
    let bad = || {
        CasError::Record(format!(
            "the USING expression does not read back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(&definition).map_err(|_| bad())?;
    let Some(NodeEnum::SelectStmt(select)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let Some(NodeEnum::ResTarget(target)) =
        select.target_list.first().and_then(|t| t.node.as_ref())
    else {
        return Err(bad());
    };
    target
        .val
        .as_deref()
        .and_then(deparse_expression)
        .ok_or_else(bad)
}

/// Whether every column a statement refers to is among `columns`: column references
/// anywhere in its tree (expressions of checks included), index elements, and the
/// key columns of constraints.
pub(super) fn columns_exist(sql: &str, columns: &[String]) -> bool {
    fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
        if let Some(items) = value.as_array() {
            for item in items {
                if let Some(s) = item.pointer("/node/String/sval").and_then(|s| s.as_str()) {
                    out.push(s.to_owned());
                }
            }
        }
    }
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    match key.as_str() {
                        "ColumnRef" => {
                            if let Some(last) = inner
                                .get("fields")
                                .and_then(|f| f.as_array())
                                .and_then(|f| f.last())
                                .and_then(|f| f.pointer("/node/String/sval"))
                                .and_then(|s| s.as_str())
                            {
                                out.push(last.to_owned());
                            }
                        }
                        "IndexElem" => {
                            if let Some(name) = inner.get("name").and_then(|n| n.as_str()) {
                                if !name.is_empty() {
                                    out.push(name.to_owned());
                                }
                            }
                        }
                        "Constraint" => {
                            if let Some(keys) = inner.get("keys") {
                                strings(keys, out);
                            }
                            if let Some(keys) = inner.get("fk_attrs") {
                                strings(keys, out);
                            }
                        }
                        _ => {}
                    }
                    walk(inner, out);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    walk(item, out);
                }
            }
            _ => {}
        }
    }
    let Ok(statements) = pgshift_sql::parse(sql) else {
        return false;
    };
    let Ok(tree) = serde_json::to_value(&statements[0].node) else {
        return false;
    };
    let mut referenced = Vec::new();
    walk(&tree, &mut referenced);
    referenced.iter().all(|r| columns.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_found_anywhere_in_a_constraint() {
        let kept = ["id".to_owned(), "qty".to_owned()];
        assert!(!columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c CHECK ((length(note) < 100000)) NOT VALID",
            &kept
        ));
        assert!(columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c CHECK ((qty > 0))",
            &kept
        ));
        assert!(!columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c FOREIGN KEY (owner) REFERENCES o(id)",
            &kept
        ));
        assert!(columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c FOREIGN KEY (qty) REFERENCES o(id)",
            &kept
        ));
    }

    #[test]
    fn foreign_keys_to_the_table_itself_are_retargeted_in_the_tree() {
        let shadow = QualifiedName::qualified("public", "_pgshift_7_item");
        let sql = retarget_foreign_key(
            "FOREIGN KEY (parent_id) REFERENCES public.item(id) ON DELETE CASCADE",
            &shadow,
        )
        .expect("retargets");
        assert!(
            sql.starts_with("FOREIGN KEY (parent_id) REFERENCES"),
            "{sql}"
        );
        assert!(sql.contains("_pgshift_7_item"), "{sql}");
        assert!(sql.contains("ON DELETE CASCADE"), "{sql}");
    }

    #[test]
    fn statistics_and_triggers_are_retargeted_in_the_tree() {
        let sql = retarget_statistics(
            "CREATE STATISTICS public.acct_stats (ndistinct) ON region, qty FROM public.acct",
            &QualifiedName::qualified("public", "_pgshift_1_x1"),
            &QualifiedName::qualified("_pgshift_1_scratch", "acct"),
        )
        .expect("retargets");
        assert!(
            sql.contains("_pgshift_1_x1") && sql.contains("_pgshift_1_scratch"),
            "{sql}"
        );
        let sql = retarget_trigger(
            "CREATE TRIGGER t AFTER UPDATE OF qty ON public.acct FOR EACH ROW WHEN ((old.qty <> new.qty)) EXECUTE FUNCTION f()",
            &QualifiedName::qualified("_pgshift_1_scratch", "acct"),
        )
        .expect("retargets");
        assert!(sql.contains("_pgshift_1_scratch"), "{sql}");
    }
}
