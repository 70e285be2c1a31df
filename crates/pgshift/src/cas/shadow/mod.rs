//! Creating the shadow.
//!
//! The shadow is first made in a scratch schema of its own under the source's **own
//! names** (table and partitions), as a faithful, empty copy of the source: columns
//! (`LIKE … INCLUDING …`), partitions with their bounds, owners, tablespaces, the
//! primary key, every index and index-backed constraint (with the source's names),
//! the partitions' own indexes and checks, extended statistics, grants, row security
//! and policies, comments, storage parameters (of the tables and their TOAST tables),
//! statistics targets and column options, replica identity and the clustered index.
//! Then the user's statement is applied to it — retargeted in the syntax tree, never
//! by editing text, with the `search_path` it was written for — so PostgreSQL itself
//! decides what the statement does to all of that, and names what it adds exactly as
//! it would on the real table. User triggers are created on it and dropped again (in a
//! savepoint) to prove the statement leaves them valid; they are not kept: copied rows
//! must not fire them.
//!
//! What the statement left is read back: the columns and how each is filled from the
//! source (a `USING` expression is resolved to fully qualified names through a
//! temporary view), the indexes and index-backed constraints, the primary key
//! included (dropped here and built again after the copy, under temporary names,
//! taking their final names at the swap: the copy writes an index-free heap),
//! sequences and extended statistics (renamed at the swap), and what the swap must set
//! by name (comments, clustered and replica-identity indexes, publication
//! membership). Then every relation takes a temporary name, the
//! tables move to the source's schema under the shadow's names, and the scratch schema
//! is dropped. All of it in one transaction: nothing is left half made.

mod checks;
mod indexes;
mod naming;
mod publications;
mod relations;
mod sequences;
mod settings;
mod statement;

use std::collections::HashMap;

use pgshift_sql::ast::{AlterTableCmd, AlterTableType};
use pgshift_sql::{quote_ident, quote_literal, NodeEnum, QualifiedName, Statement};
use tokio_postgres::Client;

use super::error::CasError;
use super::plan::{CopyColumn, PlannedRename, RunPlan, ShadowConstraint};
use crate::refusal::{Refusal, RefusalCause};

use checks::{check_key, check_replica_role, check_triggers};
use indexes::{added_foreign_keys, plan_indexes};
use naming::choose_names;
use publications::publications;
use relations::{
    read_children, read_columns, read_relations, read_source_indexes, Relation, ShadowColumn,
    SourceIndexFacts,
};
use sequences::sequences;
use settings::settings;
pub use statement::retarget;
use statement::{
    columns_exist, commands, constraint_with_storage, dropped_columns, is, referenced_tables,
    resolve_using, retarget_alter_with, retarget_foreign_key, retarget_index, retarget_statistics,
    using_expression,
};

/// Runs `sql` (one or more statements pgshift wrote).
async fn run(client: &Client, what: &str, sql: &str) -> Result<(), CasError> {
    client
        .batch_execute(sql)
        .await
        .map_err(|e| CasError::db(what.to_owned(), e))
}

fn db(what: &str) -> impl FnOnce(tokio_postgres::Error) -> CasError + '_ {
    move |e| CasError::db(what, e)
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

fn refuse(message: String) -> CasError {
    CasError::Refused(Refusal::new(RefusalCause::RewriteUnsupported, message))
}

/// Creates the shadow tree, applies the statement, and fills in the plan's columns,
/// indexes, constraints and what the swap carries. Runs in one transaction: nothing
/// is left half made.
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

async fn set_search_path(client: &Client, value: &str) -> Result<(), CasError> {
    client
        .execute(
            "SELECT pg_catalog.set_config('search_path', $1, true)",
            &[&value],
        )
        .await
        .map_err(db("setting the search_path"))?;
    Ok(())
}

/// What the swap renames: `(final name)` of an index of the shadow tree by the
/// relation it is on and its scratch name.
type ChildNames = HashMap<(usize, String), String>;

async fn create_in_transaction(
    client: &Client,
    plan: &mut RunPlan,
    statement: &Statement,
) -> Result<(), CasError> {
    let names = plan.names();
    let schema = plan
        .source
        .table
        .name
        .schema
        .clone()
        .ok_or_else(|| CasError::Record("the source has no schema on record".to_owned()))?;
    let scratch_schema = names.scratch_schema();
    let tree = read_relations(client, plan, &scratch_schema).await?;
    let source_indexes = read_source_indexes(client, &tree).await?;
    let scratch = tree[0].scratch.clone();
    let partitioned = plan.source.partition_key.is_some();

    run(
        client,
        "creating the scratch schema",
        &format!("CREATE SCHEMA {}", quote_ident(&scratch_schema)),
    )
    .await?;
    // The tables are given their owners here, and a new owner must be allowed to
    // create in the schema: a role that runs as a member of the owner role (not as
    // the owner itself) would otherwise fail to hand the scratch tables over.
    let mut owners: Vec<&str> = tree.iter().map(|r| r.owner.as_str()).collect();
    owners.sort_unstable();
    owners.dedup();
    for owner in owners {
        run(
            client,
            "letting the owners create in the scratch schema",
            &format!(
                "GRANT CREATE ON SCHEMA {} TO {}",
                quote_ident(&scratch_schema),
                quote_ident(owner)
            ),
        )
        .await?;
    }

    // 1. Tables, under the source's names, in the source's tablespaces.
    let tablespace = |relation: &Relation| {
        relation
            .tablespace
            .as_ref()
            .map_or_else(String::new, |t| format!(" TABLESPACE {}", quote_ident(t)))
    };
    let partition_by = match &plan.source.partition_key {
        Some(key) => format!(" PARTITION BY {key}"),
        None => String::new(),
    };
    let create = checked(
        format!(
            "CREATE TABLE {scratch} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY \
             INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS){partition_by}{}",
            plan.source.table.name,
            tablespace(&tree[0])
        ),
        1,
    )?;
    run(client, "creating the shadow", &create).await?;
    sequences::restore_identity_types(client, plan, &scratch).await?;
    for (partition, relation) in plan.source.partitions.iter().zip(&tree[1..]) {
        let sql = checked(
            format!(
                "CREATE TABLE {} PARTITION OF {scratch} {}{}",
                relation.scratch,
                partition.bound,
                tablespace(relation)
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
                "ALTER TABLE {scratch} DROP CONSTRAINT {}",
                quote_ident(&constraint.name)
            ),
        )
        .await?;
    }
    for relation in &tree {
        run(
            client,
            "giving the shadow the source's owner",
            &format!(
                "ALTER TABLE {} OWNER TO {}",
                relation.scratch,
                quote_ident(&relation.owner)
            ),
        )
        .await?;
    }

    // 2. The primary key, indexes and index-backed constraints, with the source's
    // names: those of the table first (they recurse into the partitions), then the
    // partitions' own.
    let mut ordered: Vec<&SourceIndexFacts> = source_indexes
        .iter()
        .filter(|i| i.valid && i.relation == 0)
        .collect();
    ordered.sort_by_key(|i| {
        !plan
            .source
            .indexes
            .iter()
            .any(|s| s.name == i.name && s.primary)
    });
    ordered.extend(
        source_indexes
            .iter()
            .filter(|i| i.valid && i.relation > 0 && i.parent.is_none()),
    );
    for index in &ordered {
        let target = &tree[index.relation].scratch;
        let sql = match &index.constraint {
            Some((name, definition)) => format!(
                "ALTER TABLE {target} ADD CONSTRAINT {} {}",
                quote_ident(name),
                constraint_with_storage(definition, &index.options, index.tablespace.as_deref())?
            ),
            None => retarget_index(
                &index.definition,
                target,
                &index.name,
                index.tablespace.as_deref(),
            )?,
        };
        run(client, "copying an index to the shadow", &checked(sql, 1)?).await?;
    }
    // Scratch children of the table's indexes, by (partition, parent name).
    let scratch_children = read_children(client, &scratch_schema, &tree).await?;
    let scratch_child = |relation: usize, parent: &str| {
        scratch_children
            .get(&(relation, parent.to_owned()))
            .cloned()
    };
    // Their comments, on the copies (the statement may drop them with their index).
    for index in source_indexes.iter().filter(|i| i.valid) {
        let table = &tree[index.relation].scratch;
        let Some(name) = (match &index.parent {
            Some(parent) => scratch_child(index.relation, parent),
            None => Some(index.name.clone()),
        }) else {
            continue;
        };
        if let Some(comment) = &index.comment {
            run(
                client,
                "copying an index's comment",
                &format!(
                    "COMMENT ON INDEX {} IS {}",
                    QualifiedName::qualified(scratch_schema.clone(), name.clone()),
                    quote_literal(comment)
                ),
            )
            .await?;
        }
        if let (Some(comment), Some(_)) = (&index.constraint_comment, &index.constraint) {
            run(
                client,
                "copying a constraint's comment",
                &format!(
                    "COMMENT ON CONSTRAINT {} ON {table} IS {}",
                    quote_ident(&name),
                    quote_literal(comment)
                ),
            )
            .await?;
        }
    }
    // The partitions' own checks (those inherited come with the partition).
    for (position, relation) in tree.iter().enumerate().skip(1) {
        let rows = client
            .query(
                "SELECT con.conname::pg_catalog.text, pg_catalog.pg_get_constraintdef(con.oid) FROM pg_catalog.pg_constraint con \
                  WHERE con.conrelid OPERATOR(pg_catalog.=) $1 AND con.contype OPERATOR(pg_catalog.=) 'c' AND con.conislocal \
                    AND con.coninhcount OPERATOR(pg_catalog.=) 0 AND con.convalidated ORDER BY con.oid",
                &[&relation.oid],
            )
            .await
            .map_err(db("reading a partition's checks"))?;
        for row in rows {
            let (name, definition): (String, String) = (row.get(0), row.get(1));
            let sql = checked(
                format!(
                    "ALTER TABLE {} ADD CONSTRAINT {} {definition}",
                    tree[position].scratch,
                    quote_ident(&name)
                ),
                1,
            )?;
            run(client, "copying a partition's check", &sql).await?;
        }
    }

    // 3. Extended statistics, under temporary names in their own schemas.
    let mut statistics: Vec<(QualifiedName, String)> = Vec::new();
    {
        let oids: Vec<u32> = tree.iter().map(|r| r.oid).collect();
        let rows = client
            .query(
                "SELECT s.stxrelid, n.nspname::pg_catalog.text, s.stxname::pg_catalog.text, pg_catalog.pg_get_statisticsobjdef(s.oid), \
                        NULLIF(s.stxstattarget::pg_catalog.int4, -1), pg_catalog.obj_description(s.oid, 'pg_statistic_ext'), \
                        CASE WHEN s.stxowner OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) \
                             THEN pg_catalog.pg_get_userbyid(s.stxowner)::pg_catalog.text END \
                   FROM pg_catalog.pg_statistic_ext s JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace \
                  WHERE s.stxrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) ORDER BY s.oid",
                &[&oids],
            )
            .await
            .map_err(db("reading extended statistics"))?;
        for (n, row) in rows.iter().enumerate() {
            let relid: u32 = row.get(0);
            let position = oids.iter().position(|o| *o == relid).unwrap_or(0);
            let temp =
                QualifiedName::qualified(row.get::<_, String>(1), names.shadow_object('x', n + 1));
            let mut sql = vec![retarget_statistics(
                &row.get::<_, String>(3),
                &temp,
                &tree[position].scratch,
            )?];
            if let Some(target) = row.get::<_, Option<i32>>(4) {
                sql.push(format!("ALTER STATISTICS {temp} SET STATISTICS {target}"));
            }
            if let Some(comment) = row.get::<_, Option<String>>(5) {
                sql.push(format!(
                    "COMMENT ON STATISTICS {temp} IS {}",
                    quote_literal(&comment)
                ));
            }
            // Made by the role running pgshift; the source's may belong to another.
            if let Some(owner) = row.get::<_, Option<String>>(6) {
                sql.push(format!(
                    "ALTER STATISTICS {temp} OWNER TO {}",
                    quote_ident(&owner)
                ));
            }
            for statement in sql {
                run(
                    client,
                    "copying extended statistics",
                    &checked(statement, 1)?,
                )
                .await?;
            }
            statistics.push((temp, row.get(2)));
        }
    }

    // 4. Grants, row security, policies, comments, storage parameters, statistics
    // targets, column options, replica identity, the clustered index.
    settings(client, plan, &tree, &source_indexes, &scratch_children).await?;
    if let NodeEnum::ClusterStmt(cluster) = &statement.node {
        if !cluster.indexname.is_empty() && !partitioned {
            run(
                client,
                "marking the clustered index",
                &format!(
                    "ALTER TABLE {scratch} CLUSTER ON {}",
                    quote_ident(&cluster.indexname)
                ),
            )
            .await?;
        } else if !cluster.indexname.is_empty() {
            // On a partitioned table PostgreSQL marks each partition's index attached
            // to the one named (a partitioned index itself cannot be marked).
            for (position, relation) in tree.iter().enumerate().skip(1) {
                if let Some(child) = scratch_children.get(&(position, cluster.indexname.clone())) {
                    run(
                        client,
                        "marking a partition's clustered index",
                        &format!(
                            "ALTER TABLE {} CLUSTER ON {}",
                            relation.scratch,
                            quote_ident(child)
                        ),
                    )
                    .await?;
                }
            }
        }
    }

    // 5. The statement, with the search_path it was written for. Subcommands that
    // name foreign keys or NOT VALID checks (built after the copy, so not on the
    // scratch table) are carried out on the plan instead.
    let late: Vec<&str> = plan
        .source
        .constraints
        .iter()
        .filter(|c| c.kind == "f" || (c.kind == "c" && !c.validated))
        .map(|c| c.name.as_str())
        .collect();
    let late_cmd = |cmd: &AlterTableCmd| {
        (is(cmd, AlterTableType::AtDropConstraint) || is(cmd, AlterTableType::AtValidateConstraint))
            && late.contains(&cmd.name.as_str())
    };
    let dropped_late: Vec<String> = commands(statement)
        .into_iter()
        .filter(|c| late_cmd(c) && is(c, AlterTableType::AtDropConstraint))
        .map(|c| c.name.clone())
        .collect();
    let validated_late: Vec<String> = commands(statement)
        .into_iter()
        .filter(|c| late_cmd(c) && is(c, AlterTableType::AtValidateConstraint))
        .map(|c| c.name.clone())
        .collect();
    let path = crate::cas::session::statement_search_path(client, plan).await?;
    if let NodeEnum::AlterTableStmt(stmt) = &statement.node {
        // A foreign key the statement adds to the table itself references the
        // scratch table (the name, resolved as the statement resolves it, is the
        // source's).
        set_search_path(client, &path).await?;
        let mut selves = Vec::new();
        for name in referenced_tables(stmt) {
            let row = client
                .query_one(
                    "SELECT pg_catalog.to_regclass($1) OPERATOR(pg_catalog.=) $2::pg_catalog.oid",
                    &[&name.to_string(), &plan.source.table.oid],
                )
                .await
                .map_err(db("resolving a referenced table"))?;
            if row.get::<_, Option<bool>>(0) == Some(true) {
                selves.push(name);
            }
        }
        let sql = retarget_alter_with(stmt, &scratch, &late_cmd, &selves)?;
        if let Some(sql) = &sql {
            run(client, "applying the statement to the shadow", sql).await?;
        }
        set_search_path(client, "pg_catalog, pg_temp").await?;
        plan.shadow_statement = sql;
    }

    // 6. What the statement left: the names it chose, the key, the triggers, the
    // columns.
    choose_names(
        client,
        plan,
        &tree,
        &source_indexes,
        &scratch_schema,
        &schema,
    )
    .await?;
    let columns = read_columns(client, &scratch).await?;
    check_key(client, plan, &scratch).await?;
    crate::cas::preflight::check_shadow_row_security(client, &scratch, &plan.source.table.name)
        .await?;
    check_triggers(client, plan, &tree).await?;
    let dropped = dropped_columns(statement);
    let copied: Vec<&ShadowColumn> = columns
        .iter()
        .filter(|c| {
            !c.generated
                && !dropped.contains(&c.name)
                && plan.source.columns.iter().any(|s| s.name == c.name)
        })
        .collect();
    let mut copy_columns = Vec::new();
    for (n, column) in copied.into_iter().enumerate() {
        let expression = match using_expression(statement, &column.name) {
            Some(using) => {
                let resolved =
                    resolve_using(client, plan, &scratch_schema, &path, &using, n).await?;
                format!("({resolved})")
            }
            None => format!("s.{}", quote_ident(&column.name)),
        };
        copy_columns.push(CopyColumn {
            name: column.name.clone(),
            type_sql: column.type_sql.clone(),
            expression,
            not_null: column.not_null,
        });
    }
    plan.columns = copy_columns;

    // 7. Indexes: read back, planned for after the copy, dropped here.
    let mut carry = super::plan::Carry {
        complete: true,
        ..Default::default()
    };
    // (Foreign keys the statement added first: they may depend on its indexes.)
    let added = added_foreign_keys(client, plan, &scratch, &mut carry).await?;
    plan_indexes(
        client,
        plan,
        &tree,
        &source_indexes,
        &scratch_schema,
        &mut carry,
    )
    .await?;

    // 8. Constraints added after the copy: foreign keys (to the table itself: to the
    // new table) and NOT VALID checks, unless the statement dropped them or their
    // columns.
    let kept: Vec<String> = columns
        .iter()
        .filter(|c| !dropped.contains(&c.name))
        .map(|c| c.name.clone())
        .collect();
    let mut constraints = added;
    for constraint in plan
        .source
        .constraints
        .iter()
        .filter(|c| c.kind == "f" || (c.kind == "c" && !c.validated))
        .filter(|c| !dropped_late.contains(&c.name))
        .filter(|c| {
            columns_exist(
                &format!("ALTER TABLE t ADD CONSTRAINT c {}", c.definition),
                &kept,
            )
        })
    {
        let definition = if constraint.references_self {
            carry.replica_apply = true;
            retarget_foreign_key(&constraint.definition, &plan.shadow)?
        } else {
            constraint.definition.clone()
        };
        if let Some(comment) = &constraint.comment {
            carry.after_swap.push(format!(
                "COMMENT ON CONSTRAINT {} ON {} IS {}",
                quote_ident(&constraint.name),
                plan.source.table.name,
                quote_literal(comment)
            ));
        }
        constraints.push(ShadowConstraint {
            name: constraint.name.clone(),
            definition,
            validated: constraint.validated || validated_late.contains(&constraint.name),
        });
    }
    plan.constraints = constraints;
    if carry.replica_apply {
        check_replica_role(client, plan).await?;
    }

    // 9. Sequences, publications; then temporary names, the move, the end of the
    // scratch schema.
    sequences(client, plan, &scratch_schema, &mut carry).await?;
    for (temp, final_name) in &statistics {
        let exists = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_statistic_ext s JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace \
                  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND s.stxname OPERATOR(pg_catalog.=) $2::pg_catalog.text)",
                &[&temp.schema.clone().unwrap_or_default(), &temp.name],
            )
            .await
            .map_err(db("reading extended statistics"))?;
        if exists.get::<_, bool>(0) {
            carry.renames.push(PlannedRename {
                kind: "statistics".to_owned(),
                temp: temp.clone(),
                final_name: final_name.clone(),
            });
        }
    }
    publications(client, plan, &tree, &kept, &mut carry).await?;
    move_to_schema(client, plan, &tree, &scratch_schema, &schema).await?;
    plan.source.carry = carry;
    check_key_mapping(client, plan).await?;
    check_incoming_foreign_keys(client, plan).await
}

/// A foreign key pointing at a column whose type the statement changed must still be
/// implementable against the new type: PostgreSQL checks this when it runs the
/// statement (and fails with 42804); the swap re-points the key, so it is checked
/// here, before anything is copied, with the comparison the key would need.
async fn check_incoming_foreign_keys(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    for fk in &plan.source.incoming {
        let pairs = client
            .query(
                "SELECT pg_catalog.format_type(fa.atttypid, fa.atttypmod), pa.attname::pg_catalog.text \
                   FROM pg_catalog.pg_constraint c \
                   CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(c.conkey), pg_catalog.unnest(c.confkey)) AS k(f, p) \
                   JOIN pg_catalog.pg_attribute fa ON fa.attrelid OPERATOR(pg_catalog.=) c.conrelid AND fa.attnum OPERATOR(pg_catalog.=) k.f \
                   JOIN pg_catalog.pg_attribute pa ON pa.attrelid OPERATOR(pg_catalog.=) c.confrelid AND pa.attnum OPERATOR(pg_catalog.=) k.p \
                  WHERE c.conrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) AND c.conname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                    AND c.contype OPERATOR(pg_catalog.=) 'f'",
                &[&fk.table.to_string(), &fk.name],
            )
            .await
            .map_err(db("reading a foreign key pointing at the table"))?;
        for pair in pairs {
            let (referencing, column): (String, String) = (pair.get(0), pair.get(1));
            let before = plan.source.columns.iter().find(|c| c.name == column);
            let after = plan.columns.iter().find(|c| c.name == column);
            let (Some(before), Some(after)) = (before, after) else {
                continue;
            };
            if before.type_sql == after.type_sql {
                continue;
            }
            let probe = format!(
                "SELECT NULL::{referencing} OPERATOR(pg_catalog.=) NULL::{}",
                after.type_sql
            );
            if client.prepare(&probe).await.is_err() {
                return Err(CasError::Database {
                    what: "checking the foreign keys pointing at the table".to_owned(),
                    message: format!(
                        "foreign key constraint {} of {} cannot be implemented: key columns {} are of incompatible types: {referencing} and {}",
                        quote_ident(&fk.name),
                        fk.table,
                        quote_ident(&column),
                        after.type_sql
                    ),
                    sqlstate: Some("42804".to_owned()),
                });
            }
        }
    }
    Ok(())
}

/// The copy, the applier and verification find a row of the shadow by the source's
/// key (chunks are ranges of it): the statement may change the key's type, into one
/// that compares with the old type, but not compute new key values (`USING` anything
/// but the column itself). Checked here, in the shadow's transaction, by that rule and
/// by preparing the applier's delete and verification's comparison.
async fn check_key_mapping(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let refuse = |why: String| {
        Err(CasError::Refused(crate::refusal::Refusal::new(
            crate::refusal::RefusalCause::RewriteUnsupported,
            format!(
                "copy-and-swap finds rows of {} by their key, and {why}; run the statement in a maintenance window",
                plan.source.table.name
            ),
        )))
    };
    for key in plan.key.columns() {
        let Some(column) = plan.columns.iter().find(|c| c.name == key.name) else {
            continue;
        };
        if !column.copied_as_is() {
            return refuse(format!(
                "the statement computes new values of key column {} ({})",
                quote_ident(&key.name),
                column.expression
            ));
        }
    }
    // Chunks of the shadow are cut with the source's key values.
    let mut probes = vec![crate::cas::statements::Statements::new(plan).delete_keys()];
    for key in plan.key.columns() {
        if let Some(column) = plan.columns.iter().find(|c| c.name == key.name) {
            if column.type_sql != key.type_sql {
                probes.push(format!(
                    "SELECT NULL::{new} OPERATOR(pg_catalog.<) NULL::{old}, NULL::{new} OPERATOR(pg_catalog.=) NULL::{old}",
                    new = column.type_sql,
                    old = key.type_sql
                ));
            }
        }
    }
    for sql in probes {
        if let Err(e) = client.prepare(&sql).await {
            return refuse(format!(
                "the key's new type does not compare with its old one ({})",
                e.as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.message().to_owned())
            ));
        }
    }
    Ok(())
}

/// Gives every relation left in the scratch schema a temporary name (the primary
/// key's index the plan's), moves the tables to the source's schema under the
/// shadow's names, and drops the scratch schema (which must then be empty).
async fn move_to_schema(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
    scratch_schema: &str,
    schema: &str,
) -> Result<(), CasError> {
    let names = plan.names();
    let rows = client
        .query(
            "SELECT c.relname::pg_catalog.text, c.relkind::pg_catalog.text, \
                    EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.indrelid \
                             WHERE i.indexrelid OPERATOR(pg_catalog.=) c.oid AND i.indisprimary AND t.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text) \
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text ORDER BY c.oid",
            &[&scratch_schema, &tree[0].name.name],
        )
        .await
        .map_err(db("reading the scratch schema"))?;
    let mut sql = Vec::new();
    let mut n = 0;
    for row in rows {
        let (name, kind, key): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        let relation = QualifiedName::qualified(scratch_schema, name.clone());
        match kind.as_str() {
            "i" | "I" => {
                let temp = if key {
                    plan.shadow_key_name.clone()
                } else {
                    n += 1;
                    names.shadow_object('r', n)
                };
                sql.push(format!(
                    "ALTER INDEX {relation} RENAME TO {}",
                    quote_ident(&temp)
                ));
            }
            "r" | "p" | "S" => {}
            _ => {
                return Err(CasError::Record(format!(
                    "unexpected relation {relation} (kind {kind}) in the scratch schema"
                )))
            }
        }
    }
    for relation in tree {
        sql.push(format!(
            "ALTER TABLE {} RENAME TO {}",
            relation.scratch,
            quote_ident(&relation.shadow.name)
        ));
    }
    for relation in tree {
        sql.push(format!(
            "ALTER TABLE {} SET SCHEMA {}",
            QualifiedName::qualified(scratch_schema, relation.shadow.name.clone()),
            quote_ident(schema)
        ));
    }
    sql.push(format!("DROP SCHEMA {}", quote_ident(scratch_schema)));
    for statement in sql {
        run(client, "moving the shadow into place", &statement).await?;
    }
    Ok(())
}
