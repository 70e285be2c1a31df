//! The exchange of names at the swap, as statements of the swap's batch: the source
//! tree's indexes, sequences and statistics to `_pgshift_old_…` names, the shadow
//! tree's to their final ones, then the tables. Built from the plan and from the
//! catalog read under the lock ([`super::locked`]).

use std::collections::HashMap;

use super::{CasError, RunPlan};
use pgshift_sql::{quote_ident, QualifiedName};

/// Indexes attached to partitioned indexes, keyed by `(parent index name, table)`.
pub(super) type Children = HashMap<(String, QualifiedName), QualifiedName>;

/// The parents and tables of one read of [`Children`]: partitioned index names (in
/// the table's schema) and the partitions whose attached indexes are wanted.
pub(super) struct ChildrenOf {
    pub parents: Vec<String>,
    pub tables: Vec<QualifiedName>,
}

/// The table's schema (the plan's names are qualified).
pub(super) fn schema(plan: &RunPlan) -> String {
    plan.source.table.name.schema.clone().unwrap_or_default()
}

/// `name` with its schema spelled out (`schema` when it has none).
pub(super) fn qualify(name: &QualifiedName, schema: &str) -> QualifiedName {
    QualifiedName::qualified(
        name.schema.clone().unwrap_or_else(|| schema.to_owned()),
        name.name.clone(),
    )
}

fn in_schema(schema: &Option<String>, name: &str) -> QualifiedName {
    QualifiedName {
        schema: schema.clone(),
        name: name.to_owned(),
    }
}

fn shadow_tables(plan: &RunPlan) -> Vec<QualifiedName> {
    let schema = schema(plan);
    plan.shadow_partitions
        .iter()
        .map(|p| qualify(p, &schema))
        .collect()
}

/// A plan with every final name known: the shadow's partitioned indexes (planned
/// ones, then the key), each with the final names of its partitions' indexes.
fn shadow_parents(plan: &RunPlan) -> Vec<(&str, &[String])> {
    let mut parents: Vec<(&str, &[String])> = plan
        .indexes
        .iter()
        .filter(|i| i.partition.is_none())
        .map(|i| (i.temp_name.as_str(), i.partition_names.as_slice()))
        .collect();
    parents.push((
        plan.shadow_key_name.as_str(),
        plan.source.carry.key_partition_names.as_slice(),
    ));
    parents
}

/// What [`complete`] needs read: the shadow partitions' indexes attached to the
/// shadow's partitioned indexes.
pub(super) fn complete_children(plan: &RunPlan) -> ChildrenOf {
    ChildrenOf {
        parents: shadow_parents(plan)
            .iter()
            .map(|(p, _)| (*p).to_owned())
            .collect(),
        tables: shadow_tables(plan),
    }
}

/// The renames of a plan whose shadow was made with every final name known: every
/// index of the source tree (`source_indexes`, as read under the lock) and each
/// source sequence or statistics object whose name a shadow one takes (`holders`:
/// for each of the plan's renames, whether the final name is taken by the source's
/// object, by another, or free) goes to an `_pgshift_old_…` name; the shadow's key,
/// planned indexes, their partitions' indexes (`children`), sequences and statistics
/// take their final names; then the tables exchange names.
pub(super) fn complete(
    plan: &RunPlan,
    source_indexes: &[QualifiedName],
    holders: &[Option<bool>],
    children: &Children,
) -> Result<Vec<String>, CasError> {
    let names = plan.names();
    let schema = schema(plan);
    let carry = &plan.source.carry;
    let mut sql = Vec::new();
    for index in source_indexes {
        sql.push(format!(
            "ALTER INDEX {index} RENAME TO {}",
            quote_ident(&names.old_index(&index.name))
        ));
    }
    for (rename, holder) in carry.renames.iter().zip(holders) {
        let final_name = QualifiedName::qualified(
            rename.temp.schema.clone().unwrap_or_default(),
            rename.final_name.clone(),
        );
        match holder {
            Some(true) => sql.push(format!(
                "ALTER {} {final_name} RENAME TO {}",
                kind(&rename.kind),
                quote_ident(&names.old_index(&rename.final_name))
            )),
            Some(false) => {
                return Err(CasError::Record(format!(
                "{final_name} is taken by an object that is not the source's; rename it and resume"
            )))
            }
            None => {}
        }
    }
    // The partitions' indexes first, found through their parents' temporary names.
    for (parent, finals) in shadow_parents(plan) {
        for (shadow_partition, final_name) in plan.shadow_partitions.iter().zip(finals) {
            if let Some(child) =
                children.get(&(parent.to_owned(), qualify(shadow_partition, &schema)))
            {
                sql.push(format!(
                    "ALTER INDEX {child} RENAME TO {}",
                    quote_ident(final_name)
                ));
            }
        }
    }
    if let Some(key) = plan.source.indexes.iter().find(|i| i.primary) {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(&plan.source.table.name.schema, &plan.shadow_key_name),
            quote_ident(&key.name)
        ));
    }
    for index in &plan.indexes {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(&plan.source.table.name.schema, &index.temp_name),
            quote_ident(&index.source_name)
        ));
    }
    for rename in &carry.renames {
        sql.push(format!(
            "ALTER {} {} RENAME TO {}",
            kind(&rename.kind),
            rename.temp,
            quote_ident(&rename.final_name)
        ));
    }
    sql.extend(tables(plan));
    Ok(sql)
}

/// `ALTER …`'s object kind for a planned rename.
pub(super) fn kind(kind: &str) -> &'static str {
    if kind == "statistics" {
        "STATISTICS"
    } else {
        "SEQUENCE"
    }
}

/// The partitioned indexes of a plan recorded before the shadow had every final
/// name: `(source parent, shadow parent)` pairs, the key's included.
fn tree_parents(plan: &RunPlan) -> Vec<(String, String)> {
    let mut parents: Vec<(String, String)> = plan
        .indexes
        .iter()
        .map(|i| (i.source_name.clone(), i.temp_name.clone()))
        .collect();
    if let Some(key) = &plan.source.key_name {
        let pk_index = plan
            .source
            .indexes
            .iter()
            .find(|i| i.primary)
            .map_or_else(|| key.clone(), |i| i.name.clone());
        parents.push((pk_index, plan.shadow_key_name.clone()));
    }
    parents
}

/// What [`tree`] needs read: the source partitions' indexes attached to the source's
/// partitioned indexes, and the same of the shadow.
pub(super) fn tree_children(plan: &RunPlan) -> (ChildrenOf, ChildrenOf) {
    let schema = schema(plan);
    let parents = tree_parents(plan);
    let source = ChildrenOf {
        parents: parents.iter().map(|(s, _)| s.clone()).collect(),
        tables: plan
            .source
            .partitions
            .iter()
            .map(|p| qualify(&p.relation.name, &schema))
            .collect(),
    };
    let shadow = ChildrenOf {
        parents: parents.iter().map(|(_, t)| t.clone()).collect(),
        tables: shadow_tables(plan),
    };
    (source, shadow)
}

/// The renames of a plan recorded before the shadow had every final name: the
/// source tree to `_pgshift_old_…` names, the shadow tree to the source's names, each
/// partition's index taking its counterpart's name.
pub(super) fn tree(
    plan: &RunPlan,
    source_children: &Children,
    shadow_children: &Children,
) -> Vec<String> {
    let names = plan.names();
    let schema_name = schema(plan);
    let mut pairs = Vec::new();
    for (source_partition, shadow_partition) in
        plan.source.partitions.iter().zip(&plan.shadow_partitions)
    {
        for (source_parent, shadow_parent) in tree_parents(plan) {
            let source_child = source_children.get(&(
                source_parent,
                qualify(&source_partition.relation.name, &schema_name),
            ));
            let shadow_child =
                shadow_children.get(&(shadow_parent, qualify(shadow_partition, &schema_name)));
            if let (Some(s), Some(t)) = (source_child, shadow_child) {
                pairs.push((s.clone(), t.clone()));
            }
        }
    }
    let schema = &plan.source.table.name.schema;
    let mut sql = Vec::new();
    // Indexes first, while the tables still have their names.
    for index in &plan.source.indexes {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(schema, &index.name),
            quote_ident(&names.old_index(&index.name))
        ));
    }
    for (source_index, _) in &pairs {
        sql.push(format!(
            "ALTER INDEX {source_index} RENAME TO {}",
            quote_ident(&names.old_index(&source_index.name))
        ));
    }
    if let Some(pk) = plan.source.indexes.iter().find(|i| i.primary) {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(schema, &plan.shadow_key_name),
            quote_ident(&pk.name)
        ));
    }
    for index in &plan.indexes {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(schema, &index.temp_name),
            quote_ident(&index.source_name)
        ));
    }
    for (source_index, shadow_index) in &pairs {
        sql.push(format!(
            "ALTER INDEX {shadow_index} RENAME TO {}",
            quote_ident(&source_index.name)
        ));
    }
    sql.extend(tables(plan));
    sql
}

/// The tables' exchange of names, after their indexes': the source tree to
/// `_pgshift_old_…` names, then the shadow tree to the source's.
fn tables(plan: &RunPlan) -> Vec<String> {
    let names = plan.names();
    let mut sql = vec![format!(
        "ALTER TABLE {} RENAME TO {}",
        plan.source.table.name,
        quote_ident(&names.old(&plan.source.table.name).name)
    )];
    for partition in &plan.source.partitions {
        sql.push(format!(
            "ALTER TABLE {} RENAME TO {}",
            partition.relation.name,
            quote_ident(&names.old(&partition.relation.name).name)
        ));
    }
    sql.push(format!(
        "ALTER TABLE {} RENAME TO {}",
        plan.shadow,
        quote_ident(&plan.source.table.name.name)
    ));
    for (shadow_partition, source_partition) in
        plan.shadow_partitions.iter().zip(&plan.source.partitions)
    {
        sql.push(format!(
            "ALTER TABLE {shadow_partition} RENAME TO {}",
            quote_ident(&source_partition.relation.name.name)
        ));
    }
    sql
}
