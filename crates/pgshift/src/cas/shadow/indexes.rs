//! Index and constraint planning: what the statement left is planned for after
//! the copy (under temporary names) and dropped from the scratch tree.

use pgshift_sql::{quote_ident, quote_literal, QualifiedName};
use tokio_postgres::Client;

use super::relations::{Relation, SourceIndexFacts};
use super::statement::{constraint_with_storage, retarget_foreign_key, retarget_index};
use super::{checked, db, run};
use crate::cas::error::CasError;
use crate::cas::plan::{Carry, RunPlan, ShadowConstraint, ShadowIndex};

/// Foreign keys the statement added: they would check (and, to the table itself, fail
/// on) every copied row, so they are taken off the scratch table and added after the
/// copy like the source's own — with PostgreSQL's names for them.
pub(super) async fn added_foreign_keys(
    client: &Client,
    plan: &RunPlan,
    scratch: &QualifiedName,
    carry: &mut Carry,
) -> Result<Vec<ShadowConstraint>, CasError> {
    let rows = client
        .query(
            "SELECT con.conname::pg_catalog.text, pg_catalog.pg_get_constraintdef(con.oid), con.convalidated, \
                    con.confrelid OPERATOR(pg_catalog.=) con.conrelid, pg_catalog.obj_description(con.oid, 'pg_constraint') \
               FROM pg_catalog.pg_constraint con \
              WHERE con.conrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) AND con.contype OPERATOR(pg_catalog.=) 'f' \
                AND con.conparentid OPERATOR(pg_catalog.=) 0 ORDER BY con.oid",
            &[&scratch.to_string()],
        )
        .await
        .map_err(db("reading the statement's foreign keys"))?;
    let mut out = Vec::new();
    for row in rows {
        let name: String = row.get(0);
        if plan.source.constraints.iter().any(|c| c.name == name) {
            continue;
        }
        let (definition, validated, itself): (String, bool, bool) =
            (row.get(1), row.get(2), row.get(3));
        let definition = if itself {
            carry.replica_apply = true;
            retarget_foreign_key(&definition, &plan.shadow)?
        } else {
            definition
        };
        if let Some(comment) = row.get::<_, Option<String>>(4) {
            carry.after_swap.push(format!(
                "COMMENT ON CONSTRAINT {} ON {} IS {}",
                quote_ident(&name),
                plan.source.table.name,
                quote_literal(&comment)
            ));
        }
        run(
            client,
            "setting a foreign key aside until after the copy",
            &format!(
                "ALTER TABLE {scratch} DROP CONSTRAINT {}",
                quote_ident(&name)
            ),
        )
        .await?;
        out.push(ShadowConstraint {
            name,
            definition,
            validated,
        });
    }
    Ok(out)
}

/// Reads the scratch tree's indexes after the statement: every index of the table and
/// of a partition's own is planned for after the copy under a temporary name, with the
/// name it takes at the swap and what the swap sets on it, and dropped here — the
/// primary key too (built first, at the start of the indexing phase, under
/// [`RunPlan::shadow_key_name`]: the copy writes an index-free heap).
pub(super) async fn plan_indexes(
    client: &Client,
    plan: &mut RunPlan,
    tree: &[Relation],
    source_indexes: &[SourceIndexFacts],
    scratch_schema: &str,
    carry: &mut Carry,
) -> Result<(), CasError> {
    let names = plan.names();
    let rows = client
        .query(
            "SELECT t.relname::pg_catalog.text, ic.relname::pg_catalog.text, i.indisprimary, pg_catalog.pg_get_indexdef(i.indexrelid), \
                    con.conname::pg_catalog.text, CASE WHEN con.oid IS NOT NULL THEN pg_catalog.pg_get_constraintdef(con.oid) END, \
                    i.indisreplident, i.indisclustered, \
                    (SELECT ts.spcname::pg_catalog.text FROM pg_catalog.pg_tablespace ts WHERE ts.oid OPERATOR(pg_catalog.=) ic.reltablespace), \
                    pg_catalog.obj_description(i.indexrelid, 'pg_class'), \
                    CASE WHEN con.oid IS NOT NULL THEN pg_catalog.obj_description(con.oid, 'pg_constraint') END, \
                    (SELECT p.relname::pg_catalog.text FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) h.inhparent \
                      WHERE h.inhrelid OPERATOR(pg_catalog.=) i.indexrelid), \
                    coalesce(ic.reloptions, '{}')::pg_catalog.text[] \
               FROM pg_catalog.pg_index i \
               JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
               JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.indrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.relnamespace \
               LEFT JOIN pg_catalog.pg_constraint con ON con.conindid OPERATOR(pg_catalog.=) i.indexrelid \
                    AND con.conrelid OPERATOR(pg_catalog.=) i.indrelid AND con.contype OPERATOR(pg_catalog.=) ANY ('{p,u,x}') \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text ORDER BY i.indexrelid",
            &[&scratch_schema],
        )
        .await
        .map_err(db("reading the shadow's indexes"))?;
    struct Found {
        relation: usize,
        name: String,
        primary: bool,
        definition: String,
        constraint: Option<(String, String)>,
        replica_identity: bool,
        clustered: bool,
        tablespace: Option<String>,
        comment: Option<String>,
        constraint_comment: Option<String>,
        parent: Option<String>,
        options: Vec<String>,
    }
    let found: Vec<Found> = rows
        .iter()
        .filter_map(|row| {
            let table: String = row.get(0);
            let relation = tree.iter().position(|r| r.name.name == table)?;
            Some(Found {
                relation,
                name: row.get(1),
                primary: row.get(2),
                definition: row.get(3),
                constraint: match (
                    row.get::<_, Option<String>>(4),
                    row.get::<_, Option<String>>(5),
                ) {
                    (Some(n), Some(d)) => Some((n, d)),
                    _ => None,
                },
                replica_identity: row.get(6),
                clustered: row.get(7),
                tablespace: row.get(8),
                comment: row.get(9),
                constraint_comment: row.get(10),
                parent: row.get(11),
                options: row.get(12),
            })
        })
        .collect();
    // The final name of a partition's index attached to the table's index `parent`:
    // the source's counterpart's, else the one PostgreSQL chose on the scratch tree.
    let child_name = |relation: usize, parent: &str, scratch_name: &str| {
        source_indexes
            .iter()
            .find(|i| i.relation == relation && i.parent.as_deref() == Some(parent))
            .map_or_else(|| scratch_name.to_owned(), |i| i.name.clone())
    };
    let partitions = tree.len() - 1;
    let children_of = |parent: &str| -> Vec<(usize, String)> {
        (1..=partitions)
            .filter_map(|relation| {
                found
                    .iter()
                    .find(|f| f.relation == relation && f.parent.as_deref() == Some(parent))
                    .map(|f| (relation, child_name(relation, parent, &f.name)))
            })
            .collect()
    };
    let mut after = Vec::new();
    let mut set_on = |relation: usize, name: &str, f: &Found| {
        let table = &tree[relation].name;
        let index = QualifiedName {
            schema: table.schema.clone(),
            name: name.to_owned(),
        };
        if let Some(comment) = &f.comment {
            after.push(format!(
                "COMMENT ON INDEX {index} IS {}",
                quote_literal(comment)
            ));
        }
        if let (Some(comment), Some(_)) = (&f.constraint_comment, &f.constraint) {
            after.push(format!(
                "COMMENT ON CONSTRAINT {} ON {table} IS {}",
                quote_ident(name),
                quote_literal(comment)
            ));
        }
        if f.clustered {
            after.push(format!(
                "ALTER TABLE {table} CLUSTER ON {}",
                quote_ident(name)
            ));
        }
        if f.replica_identity {
            after.push(format!(
                "ALTER TABLE ONLY {table} REPLICA IDENTITY USING INDEX {}",
                quote_ident(name)
            ));
        }
    };
    let mut indexes = Vec::new();
    let mut drops = Vec::new();
    let mut n = 0;
    // The table's indexes first (they recurse into the partitions), then the
    // partitions' own.
    for f in found.iter().filter(|f| f.relation == 0).chain(
        found
            .iter()
            .filter(|f| f.relation > 0 && f.parent.is_none()),
    ) {
        let children = if f.relation == 0 {
            children_of(&f.name)
        } else {
            Vec::new()
        };
        if f.primary && f.relation == 0 {
            // The key too is built after the copy (first, at the start of the
            // indexing phase), under the plan's temporary name; the swap renames it
            // and its partitions' indexes as before.
            carry.key_partition_names = children.iter().map(|(_, name)| name.clone()).collect();
            let Some((name, definition)) = &f.constraint else {
                return Err(CasError::Record(format!(
                    "the shadow's primary key index {} has no constraint",
                    f.name
                )));
            };
            plan.key_build = Some(checked(
                format!(
                    "ALTER TABLE {} ADD CONSTRAINT {} {}",
                    tree[0].shadow,
                    quote_ident(&plan.shadow_key_name),
                    constraint_with_storage(definition, &f.options, f.tablespace.as_deref())?
                ),
                1,
            )?);
            set_on(0, &f.name, f);
            for (relation, child_name) in &children {
                if let Some(child) = found.iter().find(|c| {
                    c.relation == *relation && c.parent.as_deref() == Some(f.name.as_str())
                }) {
                    set_on(*relation, child_name, child);
                }
            }
            drops.push(format!(
                "ALTER TABLE {} DROP CONSTRAINT {}",
                tree[0].scratch,
                quote_ident(name)
            ));
            continue;
        }
        n += 1;
        let temp = names.shadow_index(n);
        let target = &tree[f.relation].shadow;
        let sql = match &f.constraint {
            Some((_, definition)) => format!(
                "ALTER TABLE {target} ADD CONSTRAINT {} {}",
                quote_ident(&temp),
                constraint_with_storage(definition, &f.options, f.tablespace.as_deref())?
            ),
            None => retarget_index(&f.definition, target, &temp, f.tablespace.as_deref())?,
        };
        set_on(f.relation, &f.name, f);
        for (relation, name) in &children {
            if let Some(child) = found
                .iter()
                .find(|c| c.relation == *relation && c.parent.as_deref() == Some(f.name.as_str()))
            {
                set_on(*relation, name, child);
            }
        }
        indexes.push(ShadowIndex {
            source_name: f.name.clone(),
            temp_name: temp,
            sql: checked(sql, 1)?,
            constraint: f.constraint.is_some(),
            replica_identity: f.replica_identity,
            partition: (f.relation > 0).then(|| f.relation - 1),
            partition_names: children.into_iter().map(|(_, name)| name).collect(),
        });
        let scratch_table = &tree[f.relation].scratch;
        drops.push(match &f.constraint {
            Some((name, _)) => format!(
                "ALTER TABLE {scratch_table} DROP CONSTRAINT {}",
                quote_ident(name)
            ),
            None => format!(
                "DROP INDEX {}",
                QualifiedName::qualified(scratch_schema, f.name.clone())
            ),
        });
    }
    for statement in drops {
        run(
            client,
            "setting an index aside until after the copy",
            &statement,
        )
        .await?;
    }
    carry.after_swap.extend(after);
    plan.indexes = indexes;
    Ok(())
}
