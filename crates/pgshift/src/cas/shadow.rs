//! Creating the shadow: `CREATE TABLE … (LIKE source INCLUDING …)`, one shadow
//! partition per source partition with the same bound, the user's statement applied
//! to it (retargeted in the syntax tree, never by editing text), its primary key,
//! grants, policies, comments and settings — and, from the result, how each shadow
//! column is filled from the source.
//!
//! User triggers are **not** created on the shadow (copied rows must not fire them);
//! other indexes and foreign keys are built after the copy.

use pgshift_sql::ast::{AlterTableStmt, AlterTableType, Node, ResTarget, SelectStmt};
use pgshift_sql::{deparse, quote_ident, quote_literal, NodeEnum, QualifiedName, Statement};
use tokio_postgres::Client;

use super::error::CasError;
use super::plan::{CopyColumn, RunPlan, ShadowConstraint, ShadowIndex};
use crate::refusal::{Refusal, RefusalCause};

/// Runs `sql` (one or more statements pgshift wrote).
async fn run(client: &Client, what: &str, sql: &str) -> Result<(), CasError> {
    client
        .batch_execute(sql)
        .await
        .map_err(|e| CasError::db(what.to_owned(), e))
}

/// Checks that text pgshift is about to run parses as `expected` statements, so that
/// catalog-rendered fragments (bounds, key definitions) cannot carry anything else.
fn checked(sql: String, expected: usize) -> Result<String, CasError> {
    match pgshift_sql::parse(&sql) {
        Ok(statements) if statements.len() == expected => Ok(sql),
        _ => Err(CasError::Record(format!(
            "generated SQL does not parse as expected: {sql}"
        ))),
    }
}

/// The user's statement retargeted at `shadow`, as SQL, when it is an `ALTER TABLE`.
pub fn retarget(statement: &Statement, shadow: &QualifiedName) -> Result<Option<String>, CasError> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return Ok(None);
    };
    let mut retargeted: AlterTableStmt = stmt.clone();
    if let Some(relation) = retargeted.relation.as_mut() {
        relation.schemaname = shadow.schema.clone().unwrap_or_default();
        relation.relname = shadow.name.clone();
        relation.inh = true;
    }
    let sql = deparse(&NodeEnum::AlterTableStmt(retargeted))
        .map_err(|e| CasError::Record(e.to_string()))?;
    Ok(Some(sql))
}

/// The `USING` expression given for column `column` by an `ALTER COLUMN … TYPE`, as SQL.
fn using_expression(statement: &Statement, column: &str) -> Option<String> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return None;
    };
    stmt.cmds.iter().find_map(|node| {
        let Some(NodeEnum::AlterTableCmd(cmd)) = &node.node else {
            return None;
        };
        if cmd.subtype != AlterTableType::AtAlterColumnType as i32 || cmd.name != column {
            return None;
        }
        let Some(NodeEnum::ColumnDef(def)) = cmd.def.as_deref().and_then(|d| d.node.as_ref())
        else {
            return None;
        };
        let expression = def.raw_default.as_deref()?;
        deparse_expression(expression)
    })
}

/// The columns an `ALTER TABLE` drops. What depends on them (indexes, foreign keys,
/// column grants, statistics targets) goes with them, even when the statement adds a
/// column of the same name again.
fn dropped_columns(statement: &Statement) -> Vec<String> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return Vec::new();
    };
    stmt.cmds
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AlterTableCmd(cmd))
                if cmd.subtype == AlterTableType::AtDropColumn as i32 =>
            {
                Some(cmd.name.clone())
            }
            _ => None,
        })
        .collect()
}

/// An expression written back as SQL (through `SELECT <expr>`).
fn deparse_expression(expression: &Node) -> Option<String> {
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

/// Creates the shadow tree, applies the statement, and fills in the plan's columns,
/// indexes and constraints. Runs in one transaction: nothing is left half made.
pub async fn create(
    client: &Client,
    plan: &mut RunPlan,
    statement: &Statement,
) -> Result<(), CasError> {
    client
        .batch_execute("BEGIN; SET LOCAL lock_timeout = 5000")
        .await
        .map_err(|e| CasError::db("starting the shadow", e))?;
    let result = create_in_transaction(client, plan, statement).await;
    match result {
        Ok(()) => run(client, "committing the shadow", "COMMIT").await,
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

async fn create_in_transaction(
    client: &Client,
    plan: &mut RunPlan,
    statement: &Statement,
) -> Result<(), CasError> {
    let source = plan.source.table.name.clone();
    let shadow = plan.shadow.clone();
    let partitioned = plan.source.partition_key.is_some();
    let partition_by = match &plan.source.partition_key {
        Some(key) => format!(" PARTITION BY {key}"),
        None => String::new(),
    };
    let create = checked(
        format!(
            "CREATE TABLE {shadow} (LIKE {source} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY \
             INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS INCLUDING STATISTICS){partition_by}"
        ),
        1,
    )?;
    run(client, "creating the shadow", &create).await?;
    for (source_partition, shadow_partition) in
        plan.source.partitions.iter().zip(&plan.shadow_partitions)
    {
        let sql = checked(
            format!(
                "CREATE TABLE {shadow_partition} PARTITION OF {shadow} {}",
                source_partition.bound
            ),
            1,
        )?;
        run(client, "creating a shadow partition", &sql).await?;
    }
    // NOT VALID checks would reject copied rows: they are added again, NOT VALID,
    // after the copy.
    for constraint in plan
        .source
        .constraints
        .iter()
        .filter(|c| c.kind == "c" && !c.validated)
    {
        run(
            client,
            "setting aside a NOT VALID check",
            &format!(
                "ALTER TABLE {shadow} DROP CONSTRAINT {}",
                quote_ident(&constraint.name)
            ),
        )
        .await?;
    }
    if let Some(sql) = &plan.shadow_statement {
        run(client, "applying the statement to the shadow", sql).await?;
    }
    let shadow_columns = read_columns(client, &shadow).await?;
    for key in plan.key.columns() {
        if !shadow_columns.iter().any(|c| c.0 == key.name) {
            return Err(CasError::Refused(Refusal::new(
                RefusalCause::NoUsableKey,
                format!(
                    "the statement removes key column {} of {source}",
                    quote_ident(&key.name)
                ),
            )));
        }
    }
    let key_columns: Vec<String> = plan
        .key
        .columns()
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    run(
        client,
        "adding the shadow's primary key",
        &format!(
            "ALTER TABLE {shadow} ADD CONSTRAINT {} PRIMARY KEY ({})",
            quote_ident(&plan.shadow_key_name),
            key_columns.join(", ")
        ),
    )
    .await?;
    plan.columns = shadow_columns
        .iter()
        .filter(|(name, _, generated)| {
            generated.is_empty() && plan.source.columns.iter().any(|c| &c.name == name)
        })
        .map(|(name, type_sql, _)| CopyColumn {
            name: name.clone(),
            type_sql: type_sql.clone(),
            expression: using_expression(statement, name)
                .map(|e| format!("({e})"))
                .unwrap_or_else(|| format!("s.{}", quote_ident(name))),
        })
        .collect();
    // Columns the statement dropped count as absent, even if added again.
    let dropped = dropped_columns(statement);
    let kept_columns: Vec<(String, String, String)> = shadow_columns
        .iter()
        .filter(|c| !dropped.contains(&c.0))
        .cloned()
        .collect();
    plan.indexes = shadow_indexes(plan, &kept_columns);
    plan.constraints = plan
        .source
        .constraints
        .iter()
        .filter(|c| c.kind == "f" || (c.kind == "c" && !c.validated))
        .filter(|c| {
            columns_exist(
                &format!("ALTER TABLE t ADD CONSTRAINT c {}", c.definition),
                &kept_columns,
            )
        })
        .map(|c| ShadowConstraint {
            name: c.name.clone(),
            definition: c.definition.clone(),
            validated: c.validated,
        })
        .collect();
    settings(client, plan, &shadow, partitioned, &kept_columns).await?;
    Ok(())
}

/// `(name, format_type, attgenerated)` of the shadow's columns.
async fn read_columns(
    client: &Client,
    table: &QualifiedName,
) -> Result<Vec<(String, String, String)>, CasError> {
    let rows = client
        .query(
            "SELECT a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attgenerated::pg_catalog.text \
               FROM pg_catalog.pg_attribute a \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table.schema.clone().unwrap_or_default(), &table.name],
        )
        .await
        .map_err(|e| CasError::db("reading the shadow's columns", e))?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect())
}

/// The indexes and index-backed constraints to build on the shadow, from the source's
/// definitions retargeted in the syntax tree. An index on a column the statement
/// removed is left out, as PostgreSQL drops it with the column.
fn shadow_indexes(plan: &RunPlan, shadow_columns: &[(String, String, String)]) -> Vec<ShadowIndex> {
    let names = plan.names();
    let mut out = Vec::new();
    for (n, index) in plan.source.indexes.iter().enumerate() {
        if index.primary || !index.valid {
            continue;
        }
        let temp = names.shadow_index(n + 1);
        let sql = match &index.constraint {
            Some((_, _, definition)) => Some(format!(
                "ALTER TABLE {} ADD CONSTRAINT {} {definition}",
                plan.shadow,
                quote_ident(&temp)
            )),
            None => retarget_index(&index.definition, &plan.shadow, &temp),
        };
        let Some(sql) = sql else { continue };
        if !columns_exist(&sql, shadow_columns) {
            continue;
        }
        out.push(ShadowIndex {
            source_name: index.name.clone(),
            temp_name: temp,
            sql,
            constraint: index.constraint.is_some(),
            replica_identity: index.replica_identity,
        });
    }
    out
}

/// `CREATE INDEX` from the source's definition, on the shadow (recursing into its
/// partitions) under a temporary name.
fn retarget_index(definition: &str, shadow: &QualifiedName, name: &str) -> Option<String> {
    let statements = pgshift_sql::parse(definition).ok()?;
    let NodeEnum::IndexStmt(index) = &statements.first()?.node else {
        return None;
    };
    let mut index = index.clone();
    index.idxname = name.to_owned();
    if let Some(relation) = index.relation.as_mut() {
        relation.schemaname = shadow.schema.clone().unwrap_or_default();
        relation.relname = shadow.name.clone();
        relation.inh = true;
    }
    deparse(&NodeEnum::IndexStmt(index)).ok()
}

/// Whether every column an index statement refers to exists on the shadow.
fn columns_exist(sql: &str, shadow_columns: &[(String, String, String)]) -> bool {
    let Ok(statements) = pgshift_sql::parse(sql) else {
        return false;
    };
    let mut referenced = Vec::new();
    for (node, _, _, _) in statements[0].node.nodes() {
        match node {
            pgshift_sql::NodeRef::IndexElem(elem) if !elem.name.is_empty() => {
                referenced.push(elem.name.clone())
            }
            pgshift_sql::NodeRef::ColumnRef(column) => {
                if let Some(Some(NodeEnum::String(s))) =
                    column.fields.last().map(|f| f.node.as_ref())
                {
                    referenced.push(s.sval.clone());
                }
            }
            pgshift_sql::NodeRef::Constraint(constraint) => {
                for key in constraint.keys.iter().chain(&constraint.fk_attrs) {
                    if let Some(NodeEnum::String(s)) = &key.node {
                        referenced.push(s.sval.clone());
                    }
                }
            }
            _ => {}
        }
    }
    referenced
        .iter()
        .all(|r| shadow_columns.iter().any(|c| &c.0 == r))
}

/// Grants, policies, the table comment, storage parameters, statistics targets,
/// replica identity and owner of the source, on the shadow.
async fn settings(
    client: &Client,
    plan: &RunPlan,
    shadow: &QualifiedName,
    partitioned: bool,
    shadow_columns: &[(String, String, String)],
) -> Result<(), CasError> {
    let source = &plan.source;
    let mut sql = grant_statements(&source.grants, shadow, shadow_columns);
    if source.rls.0 {
        sql.push(format!("ALTER TABLE {shadow} ENABLE ROW LEVEL SECURITY"));
    }
    if source.rls.1 {
        sql.push(format!("ALTER TABLE {shadow} FORCE ROW LEVEL SECURITY"));
    }
    for policy in &source.policies {
        let command = match policy.command.as_str() {
            "r" => "SELECT",
            "a" => "INSERT",
            "w" => "UPDATE",
            "d" => "DELETE",
            _ => "ALL",
        };
        let roles: Vec<String> = policy
            .roles
            .iter()
            .map(|r| {
                if r == "public" {
                    "PUBLIC".to_owned()
                } else {
                    quote_ident(r)
                }
            })
            .collect();
        let mut statement = format!(
            "CREATE POLICY {} ON {shadow} AS {} FOR {command} TO {}",
            quote_ident(&policy.name),
            if policy.permissive {
                "PERMISSIVE"
            } else {
                "RESTRICTIVE"
            },
            roles.join(", ")
        );
        if let Some(using) = &policy.using {
            statement.push_str(&format!(" USING ({using})"));
        }
        if let Some(check) = &policy.check {
            statement.push_str(&format!(" WITH CHECK ({check})"));
        }
        sql.push(checked(statement, 1)?);
    }
    if let Some(comment) = &source.comment {
        sql.push(format!(
            "COMMENT ON TABLE {shadow} IS {}",
            quote_literal(comment)
        ));
    }
    if !partitioned {
        sql.extend(storage_parameters(&source.table.reloptions, shadow));
    }
    for (partition, shadow_partition) in source.partitions.iter().zip(&plan.shadow_partitions) {
        sql.extend(grant_statements(
            &partition.grants,
            shadow_partition,
            shadow_columns,
        ));
        if let Some(comment) = &partition.comment {
            sql.push(format!(
                "COMMENT ON TABLE {shadow_partition} IS {}",
                quote_literal(comment)
            ));
        }
        sql.extend(storage_parameters(
            &partition.relation.reloptions,
            shadow_partition,
        ));
    }
    for column in &source.columns {
        if let Some(target) = column.statistics {
            if shadow_columns.iter().any(|c| c.0 == column.name) {
                sql.push(format!(
                    "ALTER TABLE {shadow} ALTER COLUMN {} SET STATISTICS {target}",
                    quote_ident(&column.name)
                ));
            }
        }
    }
    match source.replica_identity.as_str() {
        "f" => sql.push(format!("ALTER TABLE {shadow} REPLICA IDENTITY FULL")),
        "n" => sql.push(format!("ALTER TABLE {shadow} REPLICA IDENTITY NOTHING")),
        _ => {}
    }
    for statement in sql {
        run(client, "carrying settings to the shadow", &statement).await?;
    }
    Ok(())
}

/// `GRANT`s reproducing `grants` on `target`; column grants only for columns the
/// shadow keeps.
fn grant_statements(
    grants: &[super::source::SourceGrant],
    target: &QualifiedName,
    shadow_columns: &[(String, String, String)],
) -> Vec<String> {
    grants
        .iter()
        .filter(|grant| {
            grant
                .column
                .as_ref()
                .is_none_or(|column| shadow_columns.iter().any(|c| &c.0 == column))
        })
        .map(|grant| {
            let privilege = match &grant.column {
                Some(column) => format!("{} ({})", grant.privilege, quote_ident(column)),
                None => grant.privilege.clone(),
            };
            let grantee = if grant.grantee == "PUBLIC" {
                "PUBLIC".to_owned()
            } else {
                quote_ident(&grant.grantee)
            };
            format!(
                "GRANT {privilege} ON {target} TO {grantee}{}",
                if grant.grantable {
                    " WITH GRANT OPTION"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// `ALTER TABLE … SET (…)` reproducing storage parameters (`name=value`), if any.
fn storage_parameters(reloptions: &[String], target: &QualifiedName) -> Option<String> {
    let options: Vec<String> = reloptions
        .iter()
        .filter_map(|o| o.split_once('='))
        .map(|(name, value)| format!("{} = {}", quote_ident(name), quote_literal(value)))
        .collect();
    (!options.is_empty()).then(|| format!("ALTER TABLE {target} SET ({})", options.join(", ")))
}
