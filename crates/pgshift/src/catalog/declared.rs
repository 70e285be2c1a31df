//! Facts declared by SQL rather than read from a server: the tables a schema file (and
//! earlier migrations) create, their columns and types, keys, partitions and indexes.
//!
//! `pgshift lint --schema schema.sql migrations/` uses them so that offline judgement
//! knows that `events` is partitioned or that `display_name` is `varchar(100)`. They
//! are partial by nature: a name they do not know is *unknown*, never *missing*, and
//! a column they do not list is not taken as absent.

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, ColumnDef, ConstrType, Constraint, CreateStmt,
    DropStmt, IndexStmt, ObjectType, RenameStmt,
};
use pgshift_sql::{NodeEnum, QualifiedName, Statement};

use super::facts::{
    CatalogSnapshot, ColumnFacts, IndexFacts, KeyFacts, PartitionFacts, Persistence, RelationFacts,
    RelationKind, ServerFacts, Sizes,
};
use crate::classify::{type_name_parts, typmod_for};

/// The `server_version_num` of a declared snapshot: there is no server.
pub const DECLARED_VERSION_NUM: i32 = 0;

/// A schema built from DDL statements.
#[derive(Clone, Debug)]
pub struct DeclaredSchema {
    relations: Vec<RelationFacts>,
}

impl Default for DeclaredSchema {
    fn default() -> Self {
        DeclaredSchema::new()
    }
}

impl DeclaredSchema {
    /// An empty schema.
    pub fn new() -> Self {
        DeclaredSchema {
            relations: Vec::new(),
        }
    }

    /// Applies the DDL among `statements` to the schema, in order. Statements it does
    /// not model are ignored.
    pub fn absorb(&mut self, statements: &[Statement]) {
        for statement in statements {
            match &statement.node {
                NodeEnum::CreateStmt(stmt) => self.create_table(stmt),
                NodeEnum::AlterTableStmt(stmt) => self.alter_table(stmt),
                NodeEnum::IndexStmt(stmt) => self.create_index(stmt),
                NodeEnum::DropStmt(stmt) => self.drop(stmt),
                NodeEnum::RenameStmt(stmt) => self.rename(stmt),
                _ => {}
            }
        }
    }

    /// The schema as a snapshot the classifier can consult. Each relation answers to
    /// its bare name and to its schema-qualified name (`public` when none was written).
    pub fn snapshot(&self) -> CatalogSnapshot {
        let mut resolutions = Vec::new();
        for (index, relation) in self.relations.iter().enumerate() {
            let schema = relation
                .name
                .schema
                .clone()
                .unwrap_or_else(|| "public".to_owned());
            resolutions.push((QualifiedName::bare(relation.name.name.clone()), Some(index)));
            resolutions.push((
                QualifiedName::qualified(schema, relation.name.name.clone()),
                Some(index),
            ));
        }
        CatalogSnapshot {
            server: ServerFacts {
                version_num: DECLARED_VERSION_NUM,
                version: "declared by schema files".to_owned(),
            },
            relations: self.relations.clone(),
            resolutions,
            objects: Vec::new(),
            functions: Vec::new(),
        }
    }

    fn find(&self, name: &QualifiedName) -> Option<usize> {
        self.relations.iter().position(|r| same(&r.name, name))
    }

    fn create_table(&mut self, stmt: &CreateStmt) {
        let Some(relation) = &stmt.relation else {
            return;
        };
        let name = written(relation);
        let mut facts = empty_relation(name.clone());
        facts.kind = if stmt.partspec.is_some() {
            RelationKind::PartitionedTable
        } else {
            RelationKind::Table
        };
        facts.partition_key = stmt.partspec.as_ref().map(|_| "declared".to_owned());
        facts.persistence = match relation.relpersistence.as_str() {
            "u" => Persistence::Unlogged,
            "t" => Persistence::Temporary,
            _ => Persistence::Permanent,
        };
        for element in &stmt.table_elts {
            match &element.node {
                Some(NodeEnum::ColumnDef(def)) => {
                    let (column, primary) = column_facts(def);
                    if primary {
                        facts.primary_key =
                            Some(key_of(&facts.name.name, std::slice::from_ref(&column)));
                    }
                    facts.columns.push(column);
                }
                Some(NodeEnum::Constraint(constraint)) => {
                    apply_table_constraint(&mut facts, constraint)
                }
                Some(NodeEnum::TableLikeClause(like)) => {
                    if let Some(source) =
                        like.relation.as_ref().and_then(|r| self.find(&written(r)))
                    {
                        facts.columns.extend(self.relations[source].columns.clone());
                    }
                }
                _ => {}
            }
        }
        if let Some(bound) = &stmt.partbound {
            for parent in stmt.inh_relations.iter().filter_map(|n| match &n.node {
                Some(NodeEnum::RangeVar(rv)) => Some(written(rv)),
                _ => None,
            }) {
                facts.parent = Some(parent.clone());
                if let Some(index) = self.find(&parent) {
                    if facts.columns.is_empty() {
                        facts.columns = self.relations[index].columns.clone();
                    }
                    self.relations[index].partitions.push(PartitionFacts {
                        name: name.clone(),
                        bound: if bound.is_default {
                            "DEFAULT".to_owned()
                        } else {
                            "declared".to_owned()
                        },
                        is_default: bound.is_default,
                        is_partitioned: stmt.partspec.is_some(),
                    });
                }
            }
        }
        if let Some(existing) = self.find(&name) {
            self.relations[existing] = facts;
        } else {
            self.relations.push(facts);
        }
    }

    fn alter_table(&mut self, stmt: &AlterTableStmt) {
        if stmt.objtype != ObjectType::ObjectTable as i32 {
            return;
        }
        let Some(relation) = &stmt.relation else {
            return;
        };
        let Some(index) = self.find(&written(relation)) else {
            return;
        };
        for cmd in stmt.cmds.iter().filter_map(|n| match &n.node {
            Some(NodeEnum::AlterTableCmd(cmd)) => Some(cmd.as_ref()),
            _ => None,
        }) {
            self.alter_one(index, cmd);
        }
    }

    fn alter_one(&mut self, index: usize, cmd: &AlterTableCmd) {
        let def = cmd.def.as_deref().and_then(|n| n.node.as_ref());
        let table = &mut self.relations[index];
        match AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined) {
            AlterTableType::AtAddColumn => {
                if let Some(NodeEnum::ColumnDef(def)) = def {
                    let (column, _) = column_facts(def);
                    table.columns.retain(|c| c.name != column.name);
                    table.columns.push(column);
                }
            }
            AlterTableType::AtDropColumn => table.columns.retain(|c| c.name != cmd.name),
            AlterTableType::AtAlterColumnType => {
                if let (Some(NodeEnum::ColumnDef(def)), Some(column)) =
                    (def, table.columns.iter_mut().find(|c| c.name == cmd.name))
                {
                    if let Some(type_name) = &def.type_name {
                        let (base, modifiers) = type_name_parts(type_name);
                        column.typmod = typmod_for(&base, &modifiers).unwrap_or(-1);
                        column.type_sql = base.clone();
                        column.type_name = base;
                    }
                }
            }
            AlterTableType::AtSetNotNull | AlterTableType::AtDropNotNull => {
                let not_null = cmd.subtype == AlterTableType::AtSetNotNull as i32;
                if let Some(column) = table.columns.iter_mut().find(|c| c.name == cmd.name) {
                    column.not_null = not_null;
                }
            }
            AlterTableType::AtAddConstraint => {
                if let Some(NodeEnum::Constraint(constraint)) = def {
                    apply_table_constraint(table, constraint);
                }
            }
            AlterTableType::AtAttachPartition => {
                if let Some(NodeEnum::PartitionCmd(partition)) = def {
                    if let Some(child) = partition.name.as_ref().map(written) {
                        let is_default = partition.bound.as_ref().is_some_and(|b| b.is_default);
                        table.partitions.push(PartitionFacts {
                            name: child,
                            bound: if is_default {
                                "DEFAULT".to_owned()
                            } else {
                                "declared".to_owned()
                            },
                            is_default,
                            is_partitioned: false,
                        });
                    }
                }
            }
            AlterTableType::AtDetachPartition => {
                if let Some(NodeEnum::PartitionCmd(partition)) = def {
                    if let Some(child) = partition.name.as_ref().map(written) {
                        table.partitions.retain(|p| !same(&p.name, &child));
                    }
                }
            }
            _ => {}
        }
    }

    fn create_index(&mut self, stmt: &IndexStmt) {
        let Some(relation) = &stmt.relation else {
            return;
        };
        let table_name = written(relation);
        let Some(table) = self.find(&table_name) else {
            return;
        };
        let partitioned = self.relations[table].kind == RelationKind::PartitionedTable;
        let name = QualifiedName {
            schema: table_name.schema.clone(),
            name: if stmt.idxname.is_empty() {
                "unnamed".to_owned()
            } else {
                stmt.idxname.clone()
            },
        };
        self.relations[table].indexes.push(IndexFacts {
            name: name.clone(),
            definition: "declared".to_owned(),
            is_unique: stmt.unique,
            is_primary: stmt.primary,
            is_valid: true,
        });
        let mut index = empty_relation(name);
        index.kind = if partitioned {
            RelationKind::PartitionedIndex
        } else {
            RelationKind::Index
        };
        index.indexed_table = Some(table_name);
        self.relations.push(index);
    }

    fn drop(&mut self, stmt: &DropStmt) {
        let kinds = [
            ObjectType::ObjectTable as i32,
            ObjectType::ObjectIndex as i32,
        ];
        if !kinds.contains(&stmt.remove_type) {
            return;
        }
        for object in &stmt.objects {
            let parts = crate::classify::name_parts(object);
            let name = match parts.as_slice() {
                [name] => QualifiedName::bare(name.clone()),
                [schema, name] => QualifiedName::qualified(schema.clone(), name.clone()),
                _ => continue,
            };
            self.relations.retain(|r| !same(&r.name, &name));
        }
    }

    fn rename(&mut self, stmt: &RenameStmt) {
        let Some(relation) = &stmt.relation else {
            return;
        };
        let Some(index) = self.find(&written(relation)) else {
            return;
        };
        match ObjectType::try_from(stmt.rename_type) {
            Ok(ObjectType::ObjectTable) => self.relations[index].name.name = stmt.newname.clone(),
            Ok(ObjectType::ObjectColumn) => {
                if let Some(column) = self.relations[index]
                    .columns
                    .iter_mut()
                    .find(|c| c.name == stmt.subname)
                {
                    column.name = stmt.newname.clone();
                }
            }
            _ => {}
        }
    }
}

/// Names match when the relation names match and, if both carry a schema, the schemas
/// do (an unqualified name is taken to be the same relation).
fn same(a: &QualifiedName, b: &QualifiedName) -> bool {
    a.matches(b)
}

fn written(range_var: &pgshift_sql::ast::RangeVar) -> QualifiedName {
    QualifiedName {
        schema: Some(range_var.schemaname.clone()).filter(|s| !s.is_empty()),
        name: range_var.relname.clone(),
    }
}

fn empty_relation(name: QualifiedName) -> RelationFacts {
    RelationFacts {
        oid: 0,
        name,
        kind: RelationKind::Table,
        persistence: Persistence::Permanent,
        owner: String::new(),
        sizes: Sizes::default(),
        row_estimate: -1,
        sizes_estimated: false,
        locks_elsewhere: Vec::new(),
        parent: None,
        indexed_table: None,
        partition_key: None,
        partitions: Vec::new(),
        columns: Vec::new(),
        primary_key: None,
        indexes: Vec::new(),
        constraints: Vec::new(),
        triggers: Vec::new(),
        foreign_keys_out: Vec::new(),
        schema_constraint_names: Vec::new(),
        added_by_input: Vec::new(),
        foreign_keys_in: Vec::new(),
        dependent_views: Vec::new(),
        publications: Vec::new(),
        rls_enabled: false,
        rls_forced: false,
        replica_identity: 'd',
        related: Vec::new(),
    }
}

/// A column as declared, and whether it is declared `PRIMARY KEY` inline.
fn column_facts(def: &ColumnDef) -> (ColumnFacts, bool) {
    let (mut base, modifiers) = def
        .type_name
        .as_ref()
        .map(type_name_parts)
        .unwrap_or_default();
    let mut has_default = false;
    let serial = match base.as_str() {
        "serial" | "serial4" => Some("int4"),
        "bigserial" | "serial8" => Some("int8"),
        "smallserial" | "serial2" => Some("int2"),
        _ => None,
    };
    if let Some(real) = serial {
        base = real.to_owned();
        has_default = true;
    }
    let mut column = ColumnFacts {
        name: def.colname.clone(),
        type_sql: base.clone(),
        type_oid: 0,
        typmod: typmod_for(&base, &modifiers).unwrap_or(-1),
        type_name: base,
        not_null: def.is_not_null || serial.is_some(),
        default: None,
        generated: None,
        identity: None,
        used_by_generated: Vec::new(),
    };
    let mut primary = false;
    for constraint in def.constraints.iter().filter_map(|n| match &n.node {
        Some(NodeEnum::Constraint(c)) => Some(c.as_ref()),
        _ => None,
    }) {
        match ConstrType::try_from(constraint.contype).unwrap_or(ConstrType::Undefined) {
            ConstrType::ConstrNotnull => column.not_null = true,
            ConstrType::ConstrPrimary => {
                column.not_null = true;
                primary = true;
            }
            ConstrType::ConstrDefault => has_default = true,
            ConstrType::ConstrGenerated => {
                column.generated = constraint.generated_kind.chars().next().or(Some('s'));
            }
            ConstrType::ConstrIdentity => {
                column.identity = constraint.generated_when.chars().next();
                column.not_null = true;
            }
            _ => {}
        }
    }
    if has_default {
        column.default = Some("declared".to_owned());
    }
    (column, primary)
}

fn key_of(table: &str, columns: &[ColumnFacts]) -> KeyFacts {
    KeyFacts {
        name: crate::classify::constraint_name_for(table, &[], "pkey"),
        columns: columns
            .iter()
            .map(|c| (c.name.clone(), c.type_sql.clone()))
            .collect(),
    }
}

fn apply_table_constraint(facts: &mut RelationFacts, constraint: &Constraint) {
    if constraint.contype != ConstrType::ConstrPrimary as i32 {
        return;
    }
    let names = crate::classify::strings_of(&constraint.keys);
    let mut key_columns = Vec::new();
    for name in &names {
        if let Some(column) = facts.columns.iter_mut().find(|c| &c.name == name) {
            column.not_null = true;
            key_columns.push(column.clone());
        }
    }
    let mut key = key_of(&facts.name.name, &key_columns);
    if !constraint.conname.is_empty() {
        key.name = constraint.conname.clone();
    }
    facts.primary_key = Some(key);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Lookup;

    fn schema(sql: &str) -> CatalogSnapshot {
        let mut schema = DeclaredSchema::new();
        schema.absorb(&pgshift_sql::parse(sql).expect("valid"));
        schema.snapshot()
    }

    #[test]
    fn partitioned_tables_and_their_partitions_are_declared() {
        let snapshot = schema(
            "CREATE TABLE public.events (id bigint, at timestamptz, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
             CREATE TABLE events_a PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
             CREATE TABLE events_d PARTITION OF events DEFAULT;",
        );
        let Lookup::Found(events) = snapshot.lookup(&QualifiedName::bare("events")) else {
            panic!("events is declared")
        };
        assert_eq!(events.kind, RelationKind::PartitionedTable);
        assert_eq!(events.partitions.len(), 2);
        assert!(events.default_partition().is_some());
        let key = events.primary_key.as_ref().expect("primary key");
        assert_eq!(key.columns.len(), 2);
        assert!(matches!(
            snapshot.lookup(&QualifiedName::qualified("public", "events")),
            Lookup::Found(_)
        ));
        assert!(matches!(
            snapshot.lookup(&QualifiedName::bare("nothing")),
            Lookup::Unknown
        ));
    }

    #[test]
    fn later_ddl_updates_columns() {
        let snapshot = schema(
            "CREATE TABLE c (id uuid PRIMARY KEY, name text);
             ALTER TABLE c ADD COLUMN display_name varchar(100);
             ALTER TABLE c RENAME COLUMN name TO title;",
        );
        let Lookup::Found(c) = snapshot.lookup(&QualifiedName::bare("c")) else {
            panic!("declared")
        };
        let display = c.column("display_name").expect("added column");
        assert_eq!(
            (display.type_name.as_str(), display.typmod),
            ("varchar", 104)
        );
        assert!(c.column("title").is_some());
        assert!(c.column("id").expect("id").not_null);
    }
}
