//! Grants, row security, policies and the other per-relation settings of the
//! source, on the scratch tree.

use pgshift_sql::{quote_ident, quote_literal, QualifiedName};
use tokio_postgres::Client;

use super::relations::{ColumnSettings, Relation, SourceIndexFacts};
use super::{checked, db, run, ChildNames};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;
use crate::cas::source::{self, SourceGrant};

/// Grants, row security and policies, comments, storage parameters, statistics
/// targets, column options, replica identity and the clustered index of each relation
/// of the source, on its scratch counterpart.
pub(super) async fn settings(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
    source_indexes: &[SourceIndexFacts],
    scratch_children: &ChildNames,
) -> Result<(), CasError> {
    let scratch_child = |relation: usize, parent: &str| {
        scratch_children
            .get(&(relation, parent.to_owned()))
            .cloned()
    };
    let source = &plan.source;
    let mut sql = Vec::new();
    for (position, relation) in tree.iter().enumerate() {
        let target = &relation.scratch;
        let (grants, comment, reloptions, policies) = if position == 0 {
            (
                source.grants.clone(),
                source.comment.clone(),
                source.table.reloptions.clone(),
                source.policies.clone(),
            )
        } else {
            let partition = &source.partitions[position - 1];
            (
                partition.grants.clone(),
                partition.comment.clone(),
                partition.relation.reloptions.clone(),
                source::policies(client, relation.oid).await?,
            )
        };
        // Default privileges of the role running pgshift do not apply: the grants are the
        // source's.
        let defaults = client
            .query(
                "SELECT DISTINCT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' \
                        ELSE pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text END \
                   FROM pg_catalog.pg_class c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a \
                  WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) AND a.grantee OPERATOR(pg_catalog.<>) c.relowner",
                &[&target.to_string()],
            )
            .await
            .map_err(db("reading the shadow's grants"))?;
        for row in defaults {
            let grantee: String = row.get(0);
            sql.push(format!(
                "REVOKE ALL ON {target} FROM {}",
                if grantee == "PUBLIC" {
                    grantee.clone()
                } else {
                    quote_ident(&grantee)
                }
            ));
        }
        sql.extend(grant_statements(&grants, target));
        // A partition's own defaults and NOT NULL columns (PARTITION OF gives it the
        // table's).
        if position > 0 {
            for (column, default, not_null) in &relation.defaults {
                let Some((_, parent_default, parent_not_null)) =
                    tree[0].defaults.iter().find(|d| &d.0 == column)
                else {
                    continue;
                };
                if default != parent_default {
                    sql.push(match default {
                        Some(default) => checked(
                            format!(
                                "ALTER TABLE ONLY {target} ALTER COLUMN {} SET DEFAULT {default}",
                                quote_ident(column)
                            ),
                            1,
                        )?,
                        None => format!(
                            "ALTER TABLE ONLY {target} ALTER COLUMN {} DROP DEFAULT",
                            quote_ident(column)
                        ),
                    });
                }
                if *not_null && !parent_not_null {
                    sql.push(format!(
                        "ALTER TABLE ONLY {target} ALTER COLUMN {} SET NOT NULL",
                        quote_ident(column)
                    ));
                }
            }
        }
        if relation.rls.0 {
            sql.push(format!("ALTER TABLE {target} ENABLE ROW LEVEL SECURITY"));
        }
        if relation.rls.1 {
            sql.push(format!("ALTER TABLE {target} FORCE ROW LEVEL SECURITY"));
        }
        for policy in &policies {
            sql.push(policy_statement(policy, target)?);
        }
        if let Some(comment) = &comment {
            sql.push(format!(
                "COMMENT ON TABLE {target} IS {}",
                quote_literal(comment)
            ));
        }
        let mut options: Vec<(String, String)> = reloptions
            .iter()
            .filter_map(|o| o.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        options.extend(
            relation
                .toast_options
                .iter()
                .filter_map(|o| o.split_once('='))
                .map(|(k, v)| (format!("toast.{k}"), v.to_owned())),
        );
        if !options.is_empty() {
            let options: Vec<String> = options
                .iter()
                .map(|(name, value)| {
                    let name = match name.split_once('.') {
                        Some((namespace, name)) => {
                            format!("{}.{}", quote_ident(namespace), quote_ident(name))
                        }
                        None => quote_ident(name),
                    };
                    format!("{name} = {}", quote_literal(value))
                })
                .collect();
            sql.push(format!("ALTER TABLE {target} SET ({})", options.join(", ")));
        }
        for ColumnSettings {
            name: column,
            statistics,
            options,
            comment,
            compression,
        } in &relation.columns
        {
            // A partition made with PARTITION OF takes the table's compression; the
            // source's partition may have another.
            let table_compression = tree[0]
                .columns
                .iter()
                .find(|c| &c.name == column)
                .map(|c| c.compression.as_str());
            if position > 0 && table_compression.is_some_and(|c| c != compression) {
                let method = match compression.as_str() {
                    "p" => "pglz",
                    "l" => "lz4",
                    _ => "default",
                };
                sql.push(format!(
                    "ALTER TABLE ONLY {target} ALTER COLUMN {} SET COMPRESSION {method}",
                    quote_ident(column)
                ));
            }
            if let Some(statistics) = statistics {
                sql.push(format!(
                    "ALTER TABLE ONLY {target} ALTER COLUMN {} SET STATISTICS {statistics}",
                    quote_ident(column)
                ));
            }
            let options: Vec<String> = options
                .iter()
                .filter_map(|o| o.split_once('='))
                .map(|(k, v)| format!("{} = {}", quote_ident(k), quote_literal(v)))
                .collect();
            if !options.is_empty() {
                sql.push(format!(
                    "ALTER TABLE ONLY {target} ALTER COLUMN {} SET ({})",
                    quote_ident(column),
                    options.join(", ")
                ));
            }
            if position > 0 {
                if let Some(comment) = comment {
                    sql.push(format!(
                        "COMMENT ON COLUMN {target}.{} IS {}",
                        quote_ident(column),
                        quote_literal(comment)
                    ));
                }
            }
        }
        // Which index replica identity and CLUSTER use, by its scratch name.
        let scratch_name = |index: &SourceIndexFacts| match &index.parent {
            Some(parent) => scratch_child(position, parent),
            None => Some(index.name.clone()),
        };
        match relation.replica_identity.as_str() {
            "f" => sql.push(format!("ALTER TABLE ONLY {target} REPLICA IDENTITY FULL")),
            "n" => sql.push(format!(
                "ALTER TABLE ONLY {target} REPLICA IDENTITY NOTHING"
            )),
            "i" => {
                if let Some(name) = source_indexes
                    .iter()
                    .filter(|i| i.relation == position && i.replica_identity)
                    .find_map(scratch_name)
                {
                    sql.push(format!(
                        "ALTER TABLE ONLY {target} REPLICA IDENTITY USING INDEX {}",
                        quote_ident(&name)
                    ));
                }
            }
            _ => {}
        }
        // Statistics targets of index columns (the table's indexes before its
        // partitions', whose own targets come after).
        for index in source_indexes.iter().filter(|i| i.relation == position) {
            if let Some(name) = scratch_name(index) {
                for (column, statistics) in &index.statistics {
                    sql.push(format!(
                        "ALTER INDEX {} ALTER COLUMN {column} SET STATISTICS {statistics}",
                        QualifiedName {
                            schema: target.schema.clone(),
                            name: name.clone(),
                        }
                    ));
                }
            }
        }
        if let Some(name) = source_indexes
            .iter()
            .filter(|i| i.relation == position && i.clustered)
            .find_map(scratch_name)
        {
            sql.push(format!(
                "ALTER TABLE {target} CLUSTER ON {}",
                quote_ident(&name)
            ));
        }
    }
    for statement in sql {
        run(client, "carrying settings to the shadow", &statement).await?;
    }
    Ok(())
}

pub(super) fn policy_statement(
    policy: &source::SourcePolicy,
    target: &QualifiedName,
) -> Result<String, CasError> {
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
        "CREATE POLICY {} ON {target} AS {} FOR {command} TO {}",
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
    let mut statement = checked(statement, 1)?;
    if let Some(comment) = &policy.comment {
        statement = format!(
            "{statement}; COMMENT ON POLICY {} ON {target} IS {}",
            quote_ident(&policy.name),
            quote_literal(comment)
        );
    }
    Ok(statement)
}

/// `GRANT`s reproducing `grants` on `target`. Where the owner's own entry is listed,
/// it is set exactly (revoked, then granted as listed): what the owner holds, and
/// which of it with a grant option, is part of the table's ACL.
pub(super) fn grant_statements(grants: &[SourceGrant], target: &QualifiedName) -> Vec<String> {
    let mut statements: Vec<String> = grants
        .iter()
        .find(|grant| grant.owner)
        .map(|owner| {
            format!(
                "REVOKE ALL ON {target} FROM {}",
                quote_ident(&owner.grantee)
            )
        })
        .into_iter()
        .collect();
    statements.extend(grants.iter().map(|grant| {
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
    }));
    statements
}
