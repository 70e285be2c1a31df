//! Which object each statement of a schema dump belongs to, read from its syntax tree.
//!
//! `pg_dump` writes one object's definition in several places (a table, later its
//! default, its key, its indexes, its triggers, its grants); a pulled layout puts
//! them back together. The owner of a statement is the object a reviewer looks for it
//! under: a table's indexes, constraints, triggers, rules, policies, statistics,
//! comments, grants and the sequences it owns belong to the table; a view's rules to
//! the view; every overload of a function to one file of that name. A statement of a
//! kind desired state does not cover is an error that names it, never skipped.

use std::collections::BTreeMap;

use pgshift_sql::ast::{
    AlterTableType, ConstrType, DefineStmt, GrantTargetType, Node, ObjectType, RangeVar,
};
use pgshift_sql::{NodeEnum, Statement};

use crate::classify::names::strings;

/// A schema-qualified name as the catalog spells it (no quoting).
pub type Name = (String, String);

/// What a pulled file holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKey {
    /// A schema: its `CREATE SCHEMA`, comment and grants.
    Schema(String),
    /// Every extension.
    Extensions,
    /// A relation (table, partition, foreign table, view, materialized view,
    /// sequence) and what belongs to it.
    Relation(Name),
    /// Every function, procedure and aggregate of one name.
    Function(Name),
    /// A type (enum, composite, domain, range, base).
    Type(Name),
    /// A publication and its tables.
    Publication(String),
    /// Default privileges.
    DefaultPrivileges,
}

/// The kind of relation a `CREATE` statement makes (the pulled file's folder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelationKind {
    /// Tables, partitions and foreign tables.
    Table,
    /// Views.
    View,
    /// Materialized views.
    MaterializedView,
    /// Sequences no column owns.
    Sequence,
}

/// What one statement is, for the pulled layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A session setting that the statements after it run under (`SET x = v`, and
    /// `pg_dump`'s `set_config('search_path', …)`), by setting name.
    Setting(String),
    /// Part of an object's definition.
    Part {
        /// The object.
        owner: ObjectKey,
        /// Whether it is a foreign key (moved to a file of their own when the tables'
        /// keys reference each other in a cycle).
        foreign_key: bool,
    },
}

/// A statement of a kind desired state does not cover.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what} is not covered by desired state yet")]
pub struct Uncovered {
    /// Line of the statement in the dump.
    pub line: u32,
    /// The kind of statement or object.
    pub what: String,
}

/// The names every statement of a dump may use for a relation that belongs to
/// another: indexes and constraints to their table, owned and identity sequences to
/// the table owning them, partitions to their parent.
#[derive(Clone, Debug, Default)]
pub struct Aliases {
    owner_of: BTreeMap<Name, Name>,
    owned: BTreeMap<Name, Name>,
}

impl Aliases {
    /// Reads them from every statement of the dump.
    pub fn read(statements: &[Statement]) -> Self {
        let mut owner_of = BTreeMap::new();
        let mut owned = BTreeMap::new();
        for statement in statements {
            match &statement.node {
                NodeEnum::IndexStmt(stmt) => {
                    if let Some(table) = stmt.relation.as_ref().map(name_of) {
                        if !stmt.idxname.is_empty() {
                            owner_of.insert((table.0.clone(), stmt.idxname.clone()), table);
                        }
                    }
                }
                NodeEnum::CreateStatsStmt(stmt) => {
                    let table = stmt.relations.first().and_then(|n| match &n.node {
                        Some(NodeEnum::RangeVar(rv)) => Some(name_of(rv)),
                        _ => None,
                    });
                    if let (Some(stats), Some(table)) = (qualified(&strings(&stmt.defnames)), table)
                    {
                        owner_of.insert(stats, table);
                    }
                }
                NodeEnum::AlterSeqStmt(stmt) => {
                    if let (Some(sequence), Some(table)) =
                        (stmt.sequence.as_ref().map(name_of), owned_by(&stmt.options))
                    {
                        owned.insert(sequence.clone(), table.clone());
                        owner_of.insert(sequence, table);
                    }
                }
                NodeEnum::AlterTableStmt(stmt) => {
                    let Some(table) = stmt.relation.as_ref().map(name_of) else {
                        continue;
                    };
                    for cmd in &stmt.cmds {
                        let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node else {
                            continue;
                        };
                        match cmd.def.as_deref().and_then(|d| d.node.as_ref()) {
                            Some(NodeEnum::PartitionCmd(p))
                                if cmd.subtype == AlterTableType::AtAttachPartition as i32
                                    && stmt.objtype != ObjectType::ObjectIndex as i32 =>
                            {
                                if let Some(child) = p.name.as_ref() {
                                    owner_of.insert(name_of(child), table.clone());
                                }
                            }
                            Some(NodeEnum::Constraint(c)) => {
                                if !c.conname.is_empty() {
                                    owner_of.insert(
                                        (table.0.clone(), c.conname.clone()),
                                        table.clone(),
                                    );
                                }
                                for option in &c.options {
                                    if let Some(sequence) = sequence_name_option(option) {
                                        owner_of.insert(sequence, table.clone());
                                    }
                                }
                            }
                            Some(NodeEnum::List(list)) => {
                                for option in &list.items {
                                    if let Some(sequence) = sequence_name_option(option) {
                                        owner_of.insert(sequence, table.clone());
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Aliases { owner_of, owned }
    }

    /// Keeps `sequence` in a file of its own: another relation's statements use it
    /// (a partition's default naming its parent's `serial` sequence), so in its
    /// owner's file it would have to come both before and after that relation.
    pub fn release(&mut self, sequence: &Name) {
        self.owner_of.remove(sequence);
    }

    /// Whether `name` is a sequence an `OWNED BY` gives to a table.
    pub fn owned_sequence(&self, name: &Name) -> Option<&Name> {
        self.owned.get(name)
    }

    /// Every name that belongs to another relation, with that relation.
    pub fn pairs(&self) -> impl Iterator<Item = (&Name, &Name)> {
        self.owner_of.iter()
    }

    /// The relation `name` belongs to: its owner (a partition's is its tree's root,
    /// through every level), or itself.
    pub fn relation(&self, name: Name) -> Name {
        let mut current = name;
        // A chain is at most as long as the map; a cycle (never in a dump) stops there.
        for _ in 0..=self.owner_of.len() {
            match self.owner_of.get(&current) {
                Some(owner) if *owner != current => current = owner.clone(),
                _ => break,
            }
        }
        current
    }
}

/// The role of `statement` in the layout, or why it is not covered.
pub fn role(statement: &Statement, aliases: &Aliases) -> Result<Role, Uncovered> {
    let part = |owner: ObjectKey| {
        Ok(Role::Part {
            owner,
            foreign_key: false,
        })
    };
    let relation = |name: Name| part(ObjectKey::Relation(aliases.relation(name)));
    let uncovered = |what: &str| {
        Err(Uncovered {
            line: statement.position.line,
            what: what.to_owned(),
        })
    };
    match &statement.node {
        NodeEnum::VariableSetStmt(stmt) => Ok(Role::Setting(stmt.name.clone())),
        NodeEnum::SelectStmt(_) => match set_config_name(&statement.node) {
            Some(name) => Ok(Role::Setting(name)),
            None => uncovered("a SELECT"),
        },
        NodeEnum::CreateSchemaStmt(stmt) => part(ObjectKey::Schema(stmt.schemaname.clone())),
        NodeEnum::CreateExtensionStmt(_) => part(ObjectKey::Extensions),
        NodeEnum::CreateStmt(stmt) => match stmt.relation.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE TABLE without a name"),
        },
        NodeEnum::CreateForeignTableStmt(stmt) => {
            match stmt.base_stmt.as_ref().and_then(|b| b.relation.as_ref()) {
                Some(rv) => relation(name_of(rv)),
                None => uncovered("CREATE FOREIGN TABLE without a name"),
            }
        }
        NodeEnum::ViewStmt(stmt) => match stmt.view.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE VIEW without a name"),
        },
        NodeEnum::CreateTableAsStmt(stmt) => {
            match stmt.into.as_ref().and_then(|into| into.rel.as_ref()) {
                Some(rv) => relation(name_of(rv)),
                None => uncovered("CREATE MATERIALIZED VIEW without a name"),
            }
        }
        NodeEnum::CreateSeqStmt(stmt) => match stmt.sequence.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE SEQUENCE without a name"),
        },
        // `OWNED BY` ties the sequence to its table, in the table's file.
        NodeEnum::AlterSeqStmt(stmt) => match (owned_by(&stmt.options), stmt.sequence.as_ref()) {
            (Some(table), _) => relation(table),
            (None, Some(rv)) => relation(name_of(rv)),
            (None, None) => uncovered("ALTER SEQUENCE without a name"),
        },
        NodeEnum::AlterTableStmt(stmt) => {
            let Some(rv) = stmt.relation.as_ref() else {
                return uncovered("ALTER TABLE without a name");
            };
            // A partition tree is one file, in the dump's order: PostgreSQL 18 names a
            // partition's NOT NULL constraints after its parent's when it is created
            // as a partition, and a name already taken in the schema when the parent
            // is made would give the parent another; and the parent's `ONLY` key, the
            // partitions' keys and `ALTER INDEX … ATTACH PARTITION` must interleave.
            let owner = name_of(rv);
            let mut foreign_key = false;
            for cmd in &stmt.cmds {
                let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node else {
                    continue;
                };
                if let Some(NodeEnum::Constraint(c)) =
                    cmd.def.as_deref().and_then(|d| d.node.as_ref())
                {
                    if cmd.subtype == AlterTableType::AtAddConstraint as i32
                        && c.contype == ConstrType::ConstrForeign as i32
                    {
                        foreign_key = true;
                    }
                }
            }
            Ok(Role::Part {
                owner: ObjectKey::Relation(aliases.relation(owner)),
                foreign_key,
            })
        }
        NodeEnum::IndexStmt(stmt) => match stmt.relation.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE INDEX without a table"),
        },
        NodeEnum::CreateTrigStmt(stmt) => match stmt.relation.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE TRIGGER without a table"),
        },
        NodeEnum::RuleStmt(stmt) => match stmt.relation.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE RULE without a relation"),
        },
        NodeEnum::CreatePolicyStmt(stmt) => match stmt.table.as_ref() {
            Some(rv) => relation(name_of(rv)),
            None => uncovered("CREATE POLICY without a table"),
        },
        NodeEnum::CreateStatsStmt(stmt) => {
            match stmt.relations.first().and_then(|n| match &n.node {
                Some(NodeEnum::RangeVar(rv)) => Some(name_of(rv)),
                _ => None,
            }) {
                Some(table) => relation(table),
                None => uncovered("CREATE STATISTICS without one table"),
            }
        }
        NodeEnum::AlterStatsStmt(stmt) => match qualified(&strings(&stmt.defnames)) {
            Some(stats) => relation(stats),
            None => uncovered("ALTER STATISTICS without a schema"),
        },
        NodeEnum::CreateFunctionStmt(stmt) => match qualified(&strings(&stmt.funcname)) {
            Some(name) => part(ObjectKey::Function(name)),
            None => uncovered("a function without a schema"),
        },
        NodeEnum::CreateEnumStmt(stmt) => type_part(&strings(&stmt.type_name), statement),
        NodeEnum::CreateRangeStmt(stmt) => type_part(&strings(&stmt.type_name), statement),
        NodeEnum::CreateDomainStmt(stmt) => type_part(&strings(&stmt.domainname), statement),
        NodeEnum::AlterDomainStmt(stmt) => type_part(&strings(&stmt.type_name), statement),
        NodeEnum::CompositeTypeStmt(stmt) => match stmt.typevar.as_ref() {
            Some(rv) => part(ObjectKey::Type(name_of(rv))),
            None => uncovered("CREATE TYPE without a name"),
        },
        NodeEnum::DefineStmt(stmt) => define(stmt, statement),
        NodeEnum::CommentStmt(stmt) => {
            let what = ObjectType::try_from(stmt.objtype).unwrap_or(ObjectType::Undefined);
            match stmt.object.as_deref() {
                Some(object) => match object_owner(what, object, aliases) {
                    Some(owner) => part(owner),
                    None => uncovered(&format!("COMMENT ON {}", object_type_words(what))),
                },
                None => uncovered("COMMENT without an object"),
            }
        }
        NodeEnum::GrantStmt(stmt) => {
            if stmt.targtype != GrantTargetType::AclTargetObject as i32 {
                return uncovered("GRANT ON ALL … IN SCHEMA");
            }
            let what = ObjectType::try_from(stmt.objtype).unwrap_or(ObjectType::Undefined);
            let mut owners = stmt
                .objects
                .iter()
                .map(|object| object_owner(what, object, aliases));
            match (owners.next(), owners.next()) {
                (Some(Some(owner)), None) => part(owner),
                _ => uncovered(&format!("GRANT ON {}", object_type_words(what))),
            }
        }
        NodeEnum::AlterDefaultPrivilegesStmt(_) => part(ObjectKey::DefaultPrivileges),
        NodeEnum::CreatePublicationStmt(stmt) => part(ObjectKey::Publication(stmt.pubname.clone())),
        NodeEnum::AlterPublicationStmt(stmt) => part(ObjectKey::Publication(stmt.pubname.clone())),
        other => uncovered(&statement_words(other)),
    }
}

fn type_part(parts: &[String], statement: &Statement) -> Result<Role, Uncovered> {
    match qualified(parts) {
        Some(name) => Ok(Role::Part {
            owner: ObjectKey::Type(name),
            foreign_key: false,
        }),
        None => Err(Uncovered {
            line: statement.position.line,
            what: "a type without a schema".to_owned(),
        }),
    }
}

fn define(stmt: &DefineStmt, statement: &Statement) -> Result<Role, Uncovered> {
    let name = qualified(&strings(&stmt.defnames));
    let owner = match ObjectType::try_from(stmt.kind) {
        Ok(ObjectType::ObjectType) => name.map(ObjectKey::Type),
        Ok(ObjectType::ObjectAggregate) => name.map(ObjectKey::Function),
        Ok(other) => {
            return Err(Uncovered {
                line: statement.position.line,
                what: format!("CREATE {}", object_type_words(other)),
            })
        }
        Err(_) => None,
    };
    owner
        .map(|owner| Role::Part {
            owner,
            foreign_key: false,
        })
        .ok_or_else(|| Uncovered {
            line: statement.position.line,
            what: "a definition without a schema".to_owned(),
        })
}

/// The object a `COMMENT ON` or `GRANT ON` object of type `what` belongs to.
fn object_owner(what: ObjectType, object: &Node, aliases: &Aliases) -> Option<ObjectKey> {
    let relation = |name: Name| Some(ObjectKey::Relation(aliases.relation(name)));
    match what {
        ObjectType::ObjectTable
        | ObjectType::ObjectView
        | ObjectType::ObjectMatview
        | ObjectType::ObjectSequence
        | ObjectType::ObjectForeignTable
        | ObjectType::ObjectIndex => match &object.node {
            Some(NodeEnum::RangeVar(rv)) => relation(name_of(rv)),
            _ => qualified(&list_strings(object)).and_then(relation),
        },
        // `[schema, table, column]`, `[schema, table, name]`.
        ObjectType::ObjectColumn
        | ObjectType::ObjectTabconstraint
        | ObjectType::ObjectTrigger
        | ObjectType::ObjectPolicy
        | ObjectType::ObjectRule => {
            let parts = list_strings(object);
            qualified(parts.get(..parts.len().checked_sub(1)?)?).and_then(relation)
        }
        ObjectType::ObjectStatisticExt => qualified(&list_strings(object)).and_then(relation),
        ObjectType::ObjectSchema => match &object.node {
            Some(NodeEnum::String(s)) => Some(ObjectKey::Schema(s.sval.clone())),
            _ => None,
        },
        ObjectType::ObjectExtension => Some(ObjectKey::Extensions),
        ObjectType::ObjectPublication => match &object.node {
            Some(NodeEnum::String(s)) => Some(ObjectKey::Publication(s.sval.clone())),
            _ => None,
        },
        ObjectType::ObjectFunction
        | ObjectType::ObjectProcedure
        | ObjectType::ObjectRoutine
        | ObjectType::ObjectAggregate => match &object.node {
            Some(NodeEnum::ObjectWithArgs(o)) => {
                qualified(&strings(&o.objname)).map(ObjectKey::Function)
            }
            _ => None,
        },
        ObjectType::ObjectType | ObjectType::ObjectDomain => match &object.node {
            Some(NodeEnum::TypeName(t)) => qualified(&strings(&t.names)).map(ObjectKey::Type),
            _ => qualified(&list_strings(object)).map(ObjectKey::Type),
        },
        ObjectType::ObjectDomconstraint => match &object.node {
            Some(NodeEnum::List(list)) => match list.items.first().and_then(|n| n.node.as_ref()) {
                Some(NodeEnum::TypeName(t)) => qualified(&strings(&t.names)).map(ObjectKey::Type),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// `ALTER SEQUENCE … OWNED BY schema.table.column`: the table.
fn owned_by(options: &[Node]) -> Option<Name> {
    options.iter().find_map(|option| match &option.node {
        Some(NodeEnum::DefElem(d)) if d.defname == "owned_by" => {
            let parts = d.arg.as_deref().map(list_strings)?;
            qualified(parts.get(..parts.len().checked_sub(1)?)?)
        }
        _ => None,
    })
}

/// `SEQUENCE NAME schema.name` among an identity column's options.
fn sequence_name_option(option: &Node) -> Option<Name> {
    match &option.node {
        Some(NodeEnum::DefElem(d)) if d.defname == "sequence_name" => {
            qualified(&d.arg.as_deref().map(list_strings)?)
        }
        _ => None,
    }
}

/// `SELECT pg_catalog.set_config('name', …, false)`: the setting's name.
fn set_config_name(node: &NodeEnum) -> Option<String> {
    let NodeEnum::SelectStmt(select) = node else {
        return None;
    };
    if !select.from_clause.is_empty() || select.target_list.len() != 1 {
        return None;
    }
    let Some(NodeEnum::ResTarget(target)) = &select.target_list[0].node else {
        return None;
    };
    let Some(NodeEnum::FuncCall(call)) = target.val.as_deref().and_then(|v| v.node.as_ref()) else {
        return None;
    };
    if strings(&call.funcname) != ["pg_catalog", "set_config"] {
        return None;
    }
    match call.args.first().and_then(|a| a.node.as_ref()) {
        Some(NodeEnum::AConst(c)) => match &c.val {
            Some(pgshift_sql::ast::a_const::Val::Sval(s)) => Some(s.sval.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The schema-qualified name of a `RangeVar` (a dump qualifies every name; an
/// unqualified one is taken as `public`'s).
pub fn name_of(rv: &RangeVar) -> Name {
    let schema = if rv.schemaname.is_empty() {
        "public".to_owned()
    } else {
        rv.schemaname.clone()
    };
    (schema, rv.relname.clone())
}

/// `[schema, name]` (or `[catalog, schema, name]`) as a name; a bare name is `public`'s.
pub fn qualified(parts: &[String]) -> Option<Name> {
    match parts {
        [name] => Some(("public".to_owned(), name.clone())),
        [schema, name] | [_, schema, name] => Some((schema.clone(), name.clone())),
        _ => None,
    }
}

fn list_strings(node: &Node) -> Vec<String> {
    match &node.node {
        Some(NodeEnum::List(list)) => strings(&list.items),
        Some(NodeEnum::String(s)) => vec![s.sval.clone()],
        _ => Vec::new(),
    }
}

/// `OBJECT_FOREIGN_SERVER` → `FOREIGN SERVER`.
fn object_type_words(what: ObjectType) -> String {
    what.as_str_name()
        .trim_start_matches("OBJECT_")
        .replace('_', " ")
}

/// `CreatePublicationStmt` → `CreatePublication statement`.
pub(crate) fn statement_words(node: &NodeEnum) -> String {
    let debug = format!("{node:?}");
    let name = debug.split(['(', ' ', '{']).next().unwrap_or("a statement");
    format!("{} statement", name.trim_end_matches("Stmt"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(sql: &str) -> Vec<Result<Role, Uncovered>> {
        let statements = pgshift_sql::parse(sql).expect("parses");
        let aliases = Aliases::read(&statements);
        statements.iter().map(|s| role(s, &aliases)).collect()
    }

    fn table(schema: &str, name: &str) -> Result<Role, Uncovered> {
        Ok(Role::Part {
            owner: ObjectKey::Relation((schema.to_owned(), name.to_owned())),
            foreign_key: false,
        })
    }

    #[test]
    fn a_tables_parts_belong_to_it() {
        let got = roles(
            "CREATE TABLE app.a (id int NOT NULL);
             CREATE SEQUENCE app.a_id_seq;
             ALTER SEQUENCE app.a_id_seq OWNED BY app.a.id;
             ALTER TABLE ONLY app.a ADD CONSTRAINT a_pkey PRIMARY KEY (id);
             CREATE INDEX a_i ON app.a USING btree (id);
             COMMENT ON INDEX app.a_i IS 'x';
             COMMENT ON COLUMN app.a.id IS 'y';
             COMMENT ON CONSTRAINT a_pkey ON app.a IS 'z';
             GRANT SELECT ON TABLE app.a TO reader;
             GRANT USAGE ON SEQUENCE app.a_id_seq TO reader;
             CREATE TRIGGER t BEFORE UPDATE ON app.a FOR EACH ROW EXECUTE FUNCTION app.f();
             CREATE POLICY p ON app.a USING (true);
             CREATE STATISTICS app.s ON id, id FROM app.a;",
        );
        for (i, got) in got.into_iter().enumerate() {
            assert_eq!(got, table("app", "a"), "statement {i}");
        }
    }

    #[test]
    fn an_attached_partition_and_a_foreign_key_are_told_apart() {
        let got = roles(
            "ALTER TABLE ONLY app.c ATTACH PARTITION app.c_1 FOR VALUES IN (1);
             ALTER TABLE ONLY app.a ADD CONSTRAINT fk FOREIGN KEY (b) REFERENCES app.b(id);
             ALTER TABLE app.a ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME app.a_id_seq START WITH 1);
             GRANT SELECT ON SEQUENCE app.a_id_seq TO r;",
        );
        assert_eq!(got[0], table("app", "c"), "attached by its parent");
        let tree = roles(
            "ALTER TABLE ONLY app.c ADD CONSTRAINT c_pkey PRIMARY KEY (id);
             CREATE TABLE app.c_1 (id int);
             ALTER TABLE ONLY app.c_1 ADD CONSTRAINT c_1_pkey PRIMARY KEY (id);
             ALTER TABLE ONLY app.c ATTACH PARTITION app.c_1 FOR VALUES IN (1);
             ALTER TABLE ONLY app.c_1 ATTACH PARTITION app.c_1_a FOR VALUES IN (1);
             COMMENT ON TABLE app.c_1_a IS 'deeper';
             ALTER INDEX app.c_pkey ATTACH PARTITION app.c_1_pkey;",
        );
        for (i, got) in tree.into_iter().enumerate() {
            assert_eq!(got, table("app", "c"), "a partition is its root's: {i}");
        }
        assert_eq!(
            got[1],
            Ok(Role::Part {
                owner: ObjectKey::Relation(("app".into(), "a".into())),
                foreign_key: true
            })
        );
        assert_eq!(
            got[3],
            table("app", "a"),
            "an identity sequence is its table's"
        );
    }

    #[test]
    fn functions_types_schemas_and_settings() {
        let got = roles(
            "SET statement_timeout = 0;
             SELECT pg_catalog.set_config('search_path', '', false);
             CREATE SCHEMA app;
             COMMENT ON SCHEMA app IS 'x';
             CREATE FUNCTION app.f(a int) RETURNS int LANGUAGE sql AS 'SELECT 1';
             COMMENT ON FUNCTION app.f(a int) IS 'f';
             CREATE AGGREGATE app.agg(int) (sfunc = int4pl, stype = int);
             CREATE TYPE app.mood AS ENUM ('a');
             CREATE DOMAIN app.pos AS int;
             COMMENT ON DOMAIN app.pos IS 'p';
             CREATE TYPE app.pair AS (x int);
             CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA public;
             COMMENT ON EXTENSION pgcrypto IS 'c';",
        );
        let function = ObjectKey::Function(("app".into(), "f".into()));
        let part = |owner| {
            Ok(Role::Part {
                owner,
                foreign_key: false,
            })
        };
        assert_eq!(got[0], Ok(Role::Setting("statement_timeout".into())));
        assert_eq!(got[1], Ok(Role::Setting("search_path".into())));
        assert_eq!(got[2], part(ObjectKey::Schema("app".into())));
        assert_eq!(got[3], part(ObjectKey::Schema("app".into())));
        assert_eq!(got[4], part(function.clone()));
        assert_eq!(got[5], part(function));
        assert_eq!(
            got[6],
            part(ObjectKey::Function(("app".into(), "agg".into())))
        );
        assert_eq!(got[7], part(ObjectKey::Type(("app".into(), "mood".into()))));
        assert_eq!(got[8], part(ObjectKey::Type(("app".into(), "pos".into()))));
        assert_eq!(got[9], part(ObjectKey::Type(("app".into(), "pos".into()))));
        assert_eq!(
            got[10],
            part(ObjectKey::Type(("app".into(), "pair".into())))
        );
        assert_eq!(got[11], part(ObjectKey::Extensions));
        assert_eq!(got[12], part(ObjectKey::Extensions));
    }

    #[test]
    fn an_uncovered_kind_is_named_not_skipped() {
        let got = roles(
            "CREATE SUBSCRIPTION s CONNECTION 'host=x' PUBLICATION p;
             CREATE OPERATOR app.=== (leftarg = int, rightarg = int, function = int4eq);",
        );
        let first = got[0].as_ref().expect_err("subscriptions are not covered");
        assert!(first.what.contains("CreateSubscription"), "{first}");
        let second = got[1].as_ref().expect_err("operators are not covered");
        assert!(second.what.contains("OPERATOR"), "{second}");
    }
}
