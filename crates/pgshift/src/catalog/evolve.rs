//! The catalog as the statements before a statement leave it.
//!
//! A file is judged one statement at a time, and each statement must be judged in the
//! state the statements before it leave (issue 32): `ALTER TABLE t RENAME COLUMN c TO d`
//! makes `d` the column a later `ALTER COLUMN d TYPE …` changes; a `DROP VIEW v` makes a
//! later `CREATE TABLE v` a new table; a `DROP VIEW … CASCADE` removes the views that a
//! later rewrite would otherwise have to carry.
//!
//! Two ways were possible: read the state from a throwaway clone where the file's
//! earlier statements already ran, or evolve the one live snapshot by each statement's
//! effect. This module does the second, from the statement's syntax tree: the clone
//! holds no rows (so every size would still come from live), restoring a schema into it
//! costs seconds per plan, and the statements whose effects matter to judging (renames,
//! drops, type changes) are few and their effects on the facts exact. What it does not
//! model (a dropped column's dependent views, a `SET SCHEMA`) it leaves as live said.
//!
//! [`evolve`] is pure: it changes the snapshot in memory only.

use std::collections::BTreeSet;

use pgshift_sql::ast::{AlterTableCmd, AlterTableType, DropStmt, ObjectType, RenameStmt};
use pgshift_sql::{NodeEnum, QualifiedName, Statement};

use super::facts::CatalogSnapshot;

/// What evolving the snapshot by one statement tells the judging of later ones beyond
/// the snapshot itself.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Evolved {
    /// Columns whose type the statement changed (table as written, column): they exist,
    /// but their type is no longer the one live facts say.
    pub retyped_columns: Vec<(QualifiedName, String)>,
}

/// Applies what `statement` does to the catalog to `snapshot`. `created` is what the
/// input created before it (a name it creates again is new, whatever the snapshot
/// said).
pub fn evolve(
    snapshot: &mut CatalogSnapshot,
    statement: &Statement,
    created: &BTreeSet<QualifiedName>,
) -> Evolved {
    let mut evolved = Evolved::default();
    match &statement.node {
        NodeEnum::RenameStmt(stmt) => rename(snapshot, stmt),
        NodeEnum::DropStmt(stmt) => drop(snapshot, stmt),
        NodeEnum::AlterTableStmt(stmt) => {
            if let Some(relation) = &stmt.relation {
                let table = range_var_name(relation);
                for cmd in stmt.cmds.iter().filter_map(|node| match &node.node {
                    Some(NodeEnum::AlterTableCmd(cmd)) => Some(cmd),
                    _ => None,
                }) {
                    alter_table_cmd(snapshot, &table, cmd, &mut evolved);
                }
            }
        }
        _ => {}
    }
    // A relation the statement creates did not exist when it ran: whatever the
    // snapshot said of the name is stale (a relation created, dropped and created
    // again in the input).
    for name in created_by(statement) {
        if created.iter().any(|c| c.matches(&name)) {
            forget_name(snapshot, &name);
        }
    }
    evolved
}

/// Whether [`evolve`] can change anything for `statement`: the statements it reads,
/// so that a caller holding a borrowed snapshot copies it only for those.
pub fn may_change(statement: &Statement) -> bool {
    matches!(
        statement.node,
        NodeEnum::RenameStmt(_) | NodeEnum::DropStmt(_) | NodeEnum::AlterTableStmt(_)
    ) || !created_by(statement).is_empty()
}

/// The relations a `CREATE` statement (without `IF NOT EXISTS`) makes.
fn created_by(statement: &Statement) -> Vec<QualifiedName> {
    let name = match &statement.node {
        NodeEnum::CreateStmt(stmt) if !stmt.if_not_exists => stmt.relation.as_ref(),
        NodeEnum::ViewStmt(stmt) if !stmt.replace => stmt.view.as_ref(),
        NodeEnum::CreateTableAsStmt(stmt) if !stmt.if_not_exists => {
            stmt.into.as_ref().and_then(|into| into.rel.as_ref())
        }
        NodeEnum::CreateSeqStmt(stmt) if !stmt.if_not_exists => stmt.sequence.as_ref(),
        NodeEnum::IndexStmt(stmt) if !stmt.if_not_exists && !stmt.idxname.is_empty() => {
            return stmt
                .relation
                .as_ref()
                .map(|table| {
                    let table = range_var_name(table);
                    vec![QualifiedName {
                        schema: table.schema,
                        name: stmt.idxname.clone(),
                    }]
                })
                .unwrap_or_default()
        }
        _ => None,
    };
    name.map(range_var_name).into_iter().collect()
}

fn range_var_name(range_var: &pgshift_sql::ast::RangeVar) -> QualifiedName {
    QualifiedName {
        schema: Some(range_var.schemaname.clone()).filter(|s| !s.is_empty()),
        name: range_var.relname.clone(),
    }
}

/// The index in `snapshot.relations` of the relation a written name denotes.
fn index_of(snapshot: &CatalogSnapshot, name: &QualifiedName) -> Option<usize> {
    match snapshot
        .resolutions
        .iter()
        .find(|(written, _)| written == name)
    {
        Some((_, found)) => *found,
        None => {
            name.schema.as_ref()?;
            snapshot.relations.iter().position(|r| r.name == *name)
        }
    }
}

/// Every written name of `name` (or of the relation at `index`) resolves to nothing.
fn forget_name(snapshot: &mut CatalogSnapshot, name: &QualifiedName) {
    if let Some((_, found)) = snapshot
        .resolutions
        .iter_mut()
        .find(|(written, _)| written == name)
    {
        *found = None;
    } else {
        snapshot.resolutions.push((name.clone(), None));
    }
}

fn rename(snapshot: &mut CatalogSnapshot, stmt: &RenameStmt) {
    let kind = ObjectType::try_from(stmt.rename_type).unwrap_or(ObjectType::Undefined);
    let Some(relation) = stmt.relation.as_ref().map(range_var_name) else {
        return;
    };
    let Some(index) = index_of(snapshot, &relation) else {
        return;
    };
    match kind {
        ObjectType::ObjectTable
        | ObjectType::ObjectForeignTable
        | ObjectType::ObjectView
        | ObjectType::ObjectMatview
        | ObjectType::ObjectIndex
        | ObjectType::ObjectSequence => rename_relation(snapshot, index, &relation, &stmt.newname),
        ObjectType::ObjectColumn => {
            let facts = &mut snapshot.relations[index];
            for column in &mut facts.columns {
                if column.name == stmt.subname {
                    column.name.clone_from(&stmt.newname);
                }
                for user in column.used_by_generated.iter_mut() {
                    if *user == stmt.subname {
                        user.clone_from(&stmt.newname);
                    }
                }
            }
            if let Some(key) = &mut facts.primary_key {
                for (column, _) in key.columns.iter_mut().filter(|(c, _)| *c == stmt.subname) {
                    column.clone_from(&stmt.newname);
                }
            }
        }
        ObjectType::ObjectTabconstraint => {
            let facts = &mut snapshot.relations[index];
            for constraint in facts
                .constraints
                .iter_mut()
                .filter(|c| c.name == stmt.subname)
            {
                constraint.name.clone_from(&stmt.newname);
            }
            if let Some(key) = facts
                .primary_key
                .as_mut()
                .filter(|k| k.name == stmt.subname)
            {
                key.name.clone_from(&stmt.newname);
            }
        }
        ObjectType::ObjectTrigger => {
            for trigger in snapshot.relations[index]
                .triggers
                .iter_mut()
                .filter(|t| t.name == stmt.subname)
            {
                trigger.name.clone_from(&stmt.newname);
            }
        }
        _ => {}
    }
}

/// The relation at `index`, written `written`, is now called `new_name` (same schema).
fn rename_relation(
    snapshot: &mut CatalogSnapshot,
    index: usize,
    written: &QualifiedName,
    new_name: &str,
) {
    let old = snapshot.relations[index].name.clone();
    let new = QualifiedName {
        schema: old.schema.clone(),
        name: new_name.to_owned(),
    };
    for (_, found) in snapshot
        .resolutions
        .iter_mut()
        .filter(|(_, found)| *found == Some(index))
    {
        *found = None;
    }
    let written_new = QualifiedName {
        schema: written.schema.clone(),
        name: new_name.to_owned(),
    };
    for name in [written_new, new.clone()] {
        match snapshot
            .resolutions
            .iter_mut()
            .find(|(written, _)| *written == name)
        {
            Some((_, found)) => *found = Some(index),
            None => snapshot.resolutions.push((name, Some(index))),
        }
    }
    for relation in &mut snapshot.relations {
        rename_references(relation, &old, &new);
    }
}

/// Every place a relation's facts name `old` now names `new`.
fn rename_references(
    relation: &mut super::facts::RelationFacts,
    old: &QualifiedName,
    new: &QualifiedName,
) {
    let swap = |name: &mut QualifiedName| {
        if name == old {
            *name = new.clone();
        }
    };
    swap(&mut relation.name);
    if let Some(parent) = &mut relation.parent {
        swap(parent);
    }
    if let Some(table) = &mut relation.indexed_table {
        swap(table);
    }
    relation
        .partitions
        .iter_mut()
        .for_each(|p| swap(&mut p.name));
    relation.indexes.iter_mut().for_each(|i| swap(&mut i.name));
    for key in relation
        .foreign_keys_out
        .iter_mut()
        .chain(relation.foreign_keys_in.iter_mut())
    {
        swap(&mut key.referencing);
        swap(&mut key.referenced);
    }
    relation.dependent_views.iter_mut().for_each(swap);
    relation.related.iter_mut().for_each(|r| swap(&mut r.name));
}

fn drop(snapshot: &mut CatalogSnapshot, stmt: &DropStmt) {
    let kind = ObjectType::try_from(stmt.remove_type).unwrap_or(ObjectType::Undefined);
    if !matches!(
        kind,
        ObjectType::ObjectTable
            | ObjectType::ObjectForeignTable
            | ObjectType::ObjectView
            | ObjectType::ObjectMatview
            | ObjectType::ObjectIndex
            | ObjectType::ObjectSequence
    ) {
        return;
    }
    let cascade = stmt.behavior == 2;
    for object in &stmt.objects {
        let parts = crate::classify::strings_of(list_items(object));
        let name = match parts.as_slice() {
            [name] => QualifiedName::bare(name.clone()),
            [schema, name] => QualifiedName::qualified(schema.clone(), name.clone()),
            [_, schema, name] => QualifiedName::qualified(schema.clone(), name.clone()),
            _ => continue,
        };
        match index_of(snapshot, &name) {
            Some(index) => drop_relation(snapshot, index, cascade),
            None => forget_name(snapshot, &name),
        }
    }
}

fn list_items(node: &pgshift_sql::ast::Node) -> &[pgshift_sql::ast::Node] {
    match &node.node {
        Some(NodeEnum::List(list)) => &list.items,
        _ => std::slice::from_ref(node),
    }
}

/// The relation at `index` is gone, with what goes with it: its indexes and
/// partitions, foreign keys to and from it, and with `cascade` the views on it.
fn drop_relation(snapshot: &mut CatalogSnapshot, index: usize, cascade: bool) {
    let mut gone: Vec<QualifiedName> = Vec::new();
    let mut queue = vec![index];
    let mut seen = BTreeSet::new();
    while let Some(index) = queue.pop() {
        if !seen.insert(index) {
            continue;
        }
        let facts = &snapshot.relations[index];
        gone.push(facts.name.clone());
        let mut with_it: Vec<QualifiedName> =
            facts.indexes.iter().map(|i| i.name.clone()).collect();
        with_it.extend(facts.partitions.iter().map(|p| p.name.clone()));
        if cascade {
            with_it.extend(facts.dependent_views.iter().cloned());
        }
        for name in with_it {
            match snapshot.relations.iter().position(|r| r.name == name) {
                Some(other) => queue.push(other),
                None => gone.push(name),
            }
        }
        for (_, found) in snapshot
            .resolutions
            .iter_mut()
            .filter(|(_, found)| *found == Some(index))
        {
            *found = None;
        }
    }
    for relation in &mut snapshot.relations {
        relation.indexes.retain(|i| !gone.contains(&i.name));
        relation.partitions.retain(|p| !gone.contains(&p.name));
        relation.dependent_views.retain(|v| !gone.contains(v));
        relation
            .foreign_keys_out
            .retain(|k| !gone.contains(&k.referenced) && !gone.contains(&k.referencing));
        relation
            .foreign_keys_in
            .retain(|k| !gone.contains(&k.referenced) && !gone.contains(&k.referencing));
        relation.related.retain(|r| !gone.contains(&r.name));
    }
}

fn alter_table_cmd(
    snapshot: &mut CatalogSnapshot,
    table: &QualifiedName,
    cmd: &AlterTableCmd,
    evolved: &mut Evolved,
) {
    let subtype = AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined);
    let Some(index) = index_of(snapshot, table) else {
        return;
    };
    let facts = &mut snapshot.relations[index];
    match subtype {
        AlterTableType::AtDropColumn => {
            facts.columns.retain(|c| c.name != cmd.name);
            for column in &mut facts.columns {
                column.used_by_generated.retain(|g| *g != cmd.name);
            }
        }
        // The column is still there; its type is the new one, which only the
        // server's `format_type` could spell as the facts do: later statements judge
        // it as a column of unknown type (as one the input added).
        AlterTableType::AtAlterColumnType if facts.columns.iter().any(|c| c.name == cmd.name) => {
            facts.columns.retain(|c| c.name != cmd.name);
            evolved
                .retyped_columns
                .push((table.clone(), cmd.name.clone()));
        }
        AlterTableType::AtAddConstraint => {
            // The name it takes (PostgreSQL's choice when unnamed) is held from now on:
            // a later unnamed constraint of the schema does not get it.
            let Some(NodeEnum::Constraint(constraint)) =
                cmd.def.as_deref().and_then(|d| d.node.as_ref())
            else {
                return;
            };
            let name = if constraint.conname.is_empty() {
                crate::classify::unnamed_constraint_name(constraint, &table.name, Some(facts))
            } else {
                Some(constraint.conname.clone())
            };
            let Some(name) = name else {
                return;
            };
            let schema = facts.name.schema.clone();
            for relation in snapshot
                .relations
                .iter_mut()
                .filter(|r| r.name.schema == schema)
            {
                relation.schema_constraint_names.push(name.clone());
            }
        }
        AlterTableType::AtDropConstraint => {
            facts.constraints.retain(|c| c.name != cmd.name);
            facts.foreign_keys_out.retain(|k| k.name != cmd.name);
            if facts
                .primary_key
                .as_ref()
                .is_some_and(|k| k.name == cmd.name)
            {
                facts.primary_key = None;
            }
            let schema = facts.name.schema.clone();
            for relation in snapshot
                .relations
                .iter_mut()
                .filter(|r| r.name.schema == schema)
            {
                relation.schema_constraint_names.retain(|n| *n != cmd.name);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{DeclaredSchema, Lookup};

    /// The snapshot of `schema`, evolved by each statement of `sql` in turn.
    fn evolved(schema: &str, sql: &str) -> (CatalogSnapshot, Vec<(QualifiedName, String)>) {
        let mut declared = DeclaredSchema::new();
        declared.absorb(&pgshift_sql::parse(schema).expect("schema parses"));
        let mut snapshot = declared.snapshot();
        let mut retyped = Vec::new();
        let created = BTreeSet::new();
        for statement in pgshift_sql::parse(sql).expect("input parses") {
            retyped.extend(evolve(&mut snapshot, &statement, &created).retyped_columns);
        }
        (snapshot, retyped)
    }

    fn found<'a>(
        snapshot: &'a CatalogSnapshot,
        name: &str,
    ) -> Option<&'a super::super::facts::RelationFacts> {
        match snapshot.lookup(&QualifiedName::bare(name)) {
            Lookup::Found(facts) => Some(facts),
            _ => None,
        }
    }

    #[test]
    fn a_renamed_table_answers_to_its_new_name_only() {
        let (s, _) = evolved(
            "CREATE TABLE t (c int); CREATE INDEX t_c ON t (c);",
            "ALTER TABLE t RENAME TO t2;",
        );
        assert!(found(&s, "t").is_none());
        let t2 = found(&s, "t2").expect("t2 is the old t");
        assert_eq!(t2.name.name, "t2");
    }

    #[test]
    fn a_renamed_column_keeps_its_facts_under_its_new_name() {
        let (s, _) = evolved(
            "CREATE TABLE t (c int PRIMARY KEY);",
            "ALTER TABLE t RENAME COLUMN c TO d;",
        );
        let t = found(&s, "t").expect("t");
        assert!(t.column("c").is_none());
        assert_eq!(t.column("d").map(|c| c.type_sql.as_str()), Some("int4"));
        let key = t.primary_key.as_ref().expect("key");
        assert_eq!(key.columns[0].0, "d");
    }

    #[test]
    fn a_dropped_view_frees_its_name_and_cascade_takes_its_dependents() {
        let (s, _) = evolved("CREATE TABLE v (x int);", "DROP TABLE v;");
        assert!(matches!(
            s.lookup(&QualifiedName::bare("v")),
            Lookup::Missing
        ));
        let mut declared = DeclaredSchema::new();
        declared.absorb(
            &pgshift_sql::parse("CREATE TABLE t (c int); CREATE TABLE w (c int);").expect("parses"),
        );
        let mut snapshot = declared.snapshot();
        // As live facts say it: w is a view on t.
        let w = snapshot.relations[1].name.clone();
        snapshot.relations[0].dependent_views.push(w);
        let drop = pgshift_sql::parse("DROP TABLE t CASCADE;").expect("parses");
        evolve(&mut snapshot, &drop[0], &BTreeSet::new());
        assert!(found(&snapshot, "t").is_none());
        assert!(
            found(&snapshot, "w").is_none(),
            "the dependent went with it"
        );
    }

    #[test]
    fn a_retyped_column_is_reported_and_no_longer_carries_its_old_type() {
        let (s, retyped) = evolved(
            "CREATE TABLE t (c int);",
            "ALTER TABLE t ALTER COLUMN c TYPE bigint;",
        );
        assert_eq!(retyped, vec![(QualifiedName::bare("t"), "c".to_owned())]);
        assert!(found(&s, "t").expect("t").column("c").is_none());
    }

    #[test]
    fn a_name_created_again_is_not_the_dropped_relation() {
        let (s, _) = evolved(
            "CREATE TABLE v (x int);",
            "DROP TABLE v; CREATE TABLE v (y int);",
        );
        assert!(found(&s, "v").is_none(), "the new v is not the old one");
    }
}
