//! A schema dump as units that can be compared one by one: each statement of
//! `pg_dump --schema-only` keyed by what it defines (a table, one constraint, one
//! index, one trigger's enable state, one grant, …), read from its syntax tree.

use std::collections::BTreeMap;

use pgshift_sql::ast::{AlterTableType, FunctionParameterMode, ObjectType};
use pgshift_sql::{NodeEnum, Statement};

use super::objects::{self, Name};
use crate::classify::names::strings;

/// What a unit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `CREATE SCHEMA`.
    Schema,
    /// `CREATE EXTENSION`.
    Extension,
    /// `CREATE TYPE`, `CREATE DOMAIN` (parts: schema, name).
    Type,
    /// `ALTER DOMAIN … ADD CONSTRAINT` (schema, domain, constraint).
    DomainConstraint,
    /// `CREATE FUNCTION`/`PROCEDURE` (schema, name, argument types).
    Function,
    /// `CREATE AGGREGATE` (schema, name, text).
    Aggregate,
    /// `CREATE SEQUENCE` (schema, name).
    Sequence,
    /// `ALTER SEQUENCE … OWNED BY` (schema, sequence).
    SequenceOwnedBy,
    /// `CREATE TABLE` (schema, name).
    Table,
    /// `CREATE VIEW`.
    View,
    /// `CREATE MATERIALIZED VIEW`.
    MaterializedView,
    /// A column default (schema, table, column).
    Default,
    /// An identity column (schema, table, column).
    Identity,
    /// A table constraint (schema, table, constraint).
    Constraint,
    /// An index (schema, index).
    Index,
    /// `ALTER INDEX … ATTACH PARTITION` (schema, partition's index).
    IndexAttach,
    /// A trigger (schema, table, trigger).
    Trigger,
    /// A trigger's enable state (schema, table, trigger).
    TriggerState,
    /// A policy (schema, table, policy).
    Policy,
    /// A rule (schema, relation, rule).
    Rule,
    /// `ENABLE ROW LEVEL SECURITY` (schema, table).
    RowSecurity,
    /// `FORCE ROW LEVEL SECURITY` (schema, table).
    ForceRowSecurity,
    /// Extended statistics (schema, name).
    Statistics,
    /// `ALTER STATISTICS … SET STATISTICS` (schema, name).
    StatisticsTarget,
    /// `ATTACH PARTITION` (schema, partition).
    Attach,
    /// Any other one-command `ALTER TABLE` (schema, table, command, name).
    TableSetting,
    /// `COMMENT ON` (object type, object).
    Comment,
    /// One `GRANT` (its text).
    Grant,
    /// `ALTER DEFAULT PRIVILEGES` (its text).
    DefaultPrivileges,
    /// `CREATE PUBLICATION` (name).
    Publication,
    /// One `ALTER PUBLICATION … ADD`/`SET` of a publication (name, its text).
    PublicationMember,
}

/// A unit's identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// What it is.
    pub kind: Kind,
    /// Its names, outermost first.
    pub parts: Vec<String>,
}

impl Key {
    fn new(kind: Kind, parts: &[&str]) -> Self {
        Key {
            kind,
            parts: parts.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    /// The schema it lives in, where it has one.
    pub fn schema(&self) -> Option<&str> {
        match self.kind {
            Kind::Schema
            | Kind::Extension
            | Kind::Comment
            | Kind::Grant
            | Kind::DefaultPrivileges
            | Kind::Publication
            | Kind::PublicationMember => None,
            _ => self.parts.first().map(String::as_str),
        }
    }

    /// The table or relation it belongs to (schema, name), for parts of one.
    pub fn relation(&self) -> Option<Name> {
        match self.kind {
            Kind::Table
            | Kind::View
            | Kind::MaterializedView
            | Kind::Default
            | Kind::Identity
            | Kind::Constraint
            | Kind::Trigger
            | Kind::TriggerState
            | Kind::Policy
            | Kind::Rule
            | Kind::RowSecurity
            | Kind::ForceRowSecurity
            | Kind::TableSetting => Some((self.parts.first()?.clone(), self.parts.get(1)?.clone())),
            _ => None,
        }
    }
}

/// One unit: its statement and the object settings in force when the dump wrote it.
#[derive(Clone, Debug)]
pub struct Unit {
    /// Where the dump wrote it (its order).
    pub position: usize,
    /// The statement.
    pub statement: Statement,
    /// `SET default_tablespace …` / `SET default_table_access_method …` texts in
    /// force, when not the defaults.
    pub settings: Vec<String>,
}

/// Every unit of a dump, by key.
#[derive(Clone, Debug, Default)]
pub struct Units {
    /// The units.
    pub by_key: BTreeMap<Key, Unit>,
}

/// A statement the comparison does not cover.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of a schema dump: {what} is not covered by desired state yet")]
pub struct NotCovered {
    /// The line.
    pub line: u32,
    /// What.
    pub what: String,
}

impl Units {
    /// The units of a dump's statements.
    pub fn read(statements: &[Statement]) -> Result<Self, NotCovered> {
        let mut by_key = BTreeMap::new();
        let mut tablespace: Option<String> = None;
        let mut access_method: Option<String> = None;
        for (position, statement) in statements.iter().enumerate() {
            if let NodeEnum::VariableSetStmt(set) = &statement.node {
                let default = match set.name.as_str() {
                    "default_tablespace" => statement.text == "SET default_tablespace = ''",
                    "default_table_access_method" => {
                        statement.text == "SET default_table_access_method = heap"
                    }
                    _ => continue,
                };
                let slot = if set.name == "default_tablespace" {
                    &mut tablespace
                } else {
                    &mut access_method
                };
                *slot = (!default).then(|| statement.text.clone());
                continue;
            }
            if objects::role(statement, &objects::Aliases::default())
                .is_ok_and(|r| matches!(r, objects::Role::Setting(_)))
            {
                continue;
            }
            let key = key_of(statement)?;
            by_key.insert(
                key,
                Unit {
                    position,
                    statement: statement.clone(),
                    settings: tablespace
                        .iter()
                        .chain(access_method.iter())
                        .cloned()
                        .collect(),
                },
            );
        }
        Ok(Units { by_key })
    }
}

fn name(rv: Option<&pgshift_sql::ast::RangeVar>) -> Option<Name> {
    rv.map(objects::name_of)
}

/// The key of one statement of a dump.
pub fn key_of(statement: &Statement) -> Result<Key, NotCovered> {
    let not_covered = |what: &str| NotCovered {
        line: statement.position.line,
        what: what.to_owned(),
    };
    let two = |kind: Kind, n: Option<Name>, what: &str| {
        n.map(|(s, n)| Key::new(kind, &[&s, &n]))
            .ok_or_else(|| not_covered(what))
    };
    let qualified = |kind: Kind, parts: &[pgshift_sql::ast::Node], what: &str| {
        objects::qualified(&strings(parts))
            .map(|(s, n)| Key::new(kind, &[&s, &n]))
            .ok_or_else(|| not_covered(what))
    };
    match &statement.node {
        NodeEnum::CreateSchemaStmt(s) => Ok(Key::new(Kind::Schema, &[&s.schemaname])),
        NodeEnum::CreateExtensionStmt(s) => Ok(Key::new(Kind::Extension, &[&s.extname])),
        NodeEnum::CreateEnumStmt(s) => qualified(Kind::Type, &s.type_name, "a type"),
        NodeEnum::CreateRangeStmt(s) => qualified(Kind::Type, &s.type_name, "a type"),
        NodeEnum::CreateDomainStmt(s) => qualified(Kind::Type, &s.domainname, "a domain"),
        NodeEnum::CompositeTypeStmt(s) => two(Kind::Type, name(s.typevar.as_ref()), "a type"),
        NodeEnum::AlterDomainStmt(s) => {
            let (schema, domain) = objects::qualified(&strings(&s.type_name))
                .ok_or_else(|| not_covered("a domain"))?;
            let constraint = match s.def.as_deref().and_then(|d| d.node.as_ref()) {
                Some(NodeEnum::Constraint(c)) => c.conname.clone(),
                _ => s.name.clone(),
            };
            Ok(Key::new(
                Kind::DomainConstraint,
                &[&schema, &domain, &constraint],
            ))
        }
        NodeEnum::DefineStmt(s) => match ObjectType::try_from(s.kind) {
            Ok(ObjectType::ObjectType) => qualified(Kind::Type, &s.defnames, "a type"),
            Ok(ObjectType::ObjectAggregate) => {
                let (schema, n) = objects::qualified(&strings(&s.defnames))
                    .ok_or_else(|| not_covered("an aggregate"))?;
                Ok(Key::new(Kind::Aggregate, &[&schema, &n, &statement.text]))
            }
            _ => Err(not_covered("a definition")),
        },
        NodeEnum::CreateFunctionStmt(s) => {
            let (schema, n) = objects::qualified(&strings(&s.funcname))
                .ok_or_else(|| not_covered("a function"))?;
            Ok(Key::new(Kind::Function, &[&schema, &n, &argument_types(s)]))
        }
        NodeEnum::CreateSeqStmt(s) => two(Kind::Sequence, name(s.sequence.as_ref()), "a sequence"),
        NodeEnum::AlterSeqStmt(s) => two(
            Kind::SequenceOwnedBy,
            name(s.sequence.as_ref()),
            "a sequence",
        ),
        NodeEnum::CreateStmt(s) => two(Kind::Table, name(s.relation.as_ref()), "a table"),
        NodeEnum::CreateForeignTableStmt(s) => two(
            Kind::Table,
            name(s.base_stmt.as_ref().and_then(|b| b.relation.as_ref())),
            "a foreign table",
        ),
        NodeEnum::ViewStmt(s) => two(Kind::View, name(s.view.as_ref()), "a view"),
        NodeEnum::CreateTableAsStmt(s) => two(
            Kind::MaterializedView,
            name(s.into.as_ref().and_then(|i| i.rel.as_ref())),
            "a materialized view",
        ),
        NodeEnum::IndexStmt(s) => {
            let (schema, _) = name(s.relation.as_ref()).ok_or_else(|| not_covered("an index"))?;
            Ok(Key::new(Kind::Index, &[&schema, &s.idxname]))
        }
        NodeEnum::CreateTrigStmt(s) => {
            let (schema, table) =
                name(s.relation.as_ref()).ok_or_else(|| not_covered("a trigger"))?;
            Ok(Key::new(Kind::Trigger, &[&schema, &table, &s.trigname]))
        }
        NodeEnum::CreatePolicyStmt(s) => {
            let (schema, table) = name(s.table.as_ref()).ok_or_else(|| not_covered("a policy"))?;
            Ok(Key::new(Kind::Policy, &[&schema, &table, &s.policy_name]))
        }
        NodeEnum::RuleStmt(s) => {
            let (schema, rel) = name(s.relation.as_ref()).ok_or_else(|| not_covered("a rule"))?;
            Ok(Key::new(Kind::Rule, &[&schema, &rel, &s.rulename]))
        }
        NodeEnum::CreateStatsStmt(s) => qualified(Kind::Statistics, &s.defnames, "statistics"),
        NodeEnum::AlterStatsStmt(s) => qualified(Kind::StatisticsTarget, &s.defnames, "statistics"),
        NodeEnum::AlterTableStmt(s) => alter_table_key(statement, s),
        NodeEnum::CommentStmt(s) => {
            let object = s.object.as_deref().map(shape).unwrap_or_default();
            let what = ObjectType::try_from(s.objtype)
                .map(|o| o.as_str_name().to_owned())
                .unwrap_or_default();
            Ok(Key::new(Kind::Comment, &[&what, &object]))
        }
        NodeEnum::GrantStmt(_) => Ok(Key::new(Kind::Grant, &[&statement.text])),
        NodeEnum::CreatePublicationStmt(s) => Ok(Key::new(Kind::Publication, &[&s.pubname])),
        NodeEnum::AlterPublicationStmt(s) => Ok(Key::new(
            Kind::PublicationMember,
            &[&s.pubname, &statement.text],
        )),
        NodeEnum::AlterDefaultPrivilegesStmt(_) => {
            Ok(Key::new(Kind::DefaultPrivileges, &[&statement.text]))
        }
        other => Err(not_covered(&objects::statement_words(other))),
    }
}

fn alter_table_key(
    statement: &Statement,
    stmt: &pgshift_sql::ast::AlterTableStmt,
) -> Result<Key, NotCovered> {
    let not_covered = |what: &str| NotCovered {
        line: statement.position.line,
        what: what.to_owned(),
    };
    let (schema, table) = name(stmt.relation.as_ref()).ok_or_else(|| not_covered("ALTER TABLE"))?;
    let [cmd] = stmt.cmds.as_slice() else {
        return Err(not_covered("an ALTER TABLE of several commands"));
    };
    let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node else {
        return Err(not_covered("ALTER TABLE"));
    };
    let subtype = AlterTableType::try_from(cmd.subtype).unwrap_or(AlterTableType::Undefined);
    let def = cmd.def.as_deref().and_then(|d| d.node.as_ref());
    let key = |kind: Kind, last: &str| Key::new(kind, &[&schema, &table, last]);
    Ok(match (subtype, def) {
        (AlterTableType::AtAddConstraint, Some(NodeEnum::Constraint(c))) => {
            key(Kind::Constraint, &c.conname)
        }
        (AlterTableType::AtColumnDefault, _) => key(Kind::Default, &cmd.name),
        (AlterTableType::AtAddIdentity, _) => key(Kind::Identity, &cmd.name),
        (AlterTableType::AtAttachPartition, Some(NodeEnum::PartitionCmd(p))) => {
            let (s, child) =
                name(p.name.as_ref()).ok_or_else(|| not_covered("ATTACH PARTITION"))?;
            if stmt.objtype == ObjectType::ObjectIndex as i32 {
                Key::new(Kind::IndexAttach, &[&s, &child])
            } else {
                Key::new(Kind::Attach, &[&s, &child])
            }
        }
        (AlterTableType::AtEnableRowSecurity, _) => Key::new(Kind::RowSecurity, &[&schema, &table]),
        (AlterTableType::AtForceRowSecurity, _) => {
            Key::new(Kind::ForceRowSecurity, &[&schema, &table])
        }
        (
            AlterTableType::AtDisableTrig
            | AlterTableType::AtEnableAlwaysTrig
            | AlterTableType::AtEnableReplicaTrig
            | AlterTableType::AtEnableTrig,
            _,
        ) => key(Kind::TriggerState, &cmd.name),
        (other, _) => Key::new(
            Kind::TableSetting,
            &[&schema, &table, other.as_str_name(), &cmd.name],
        ),
    })
}

/// A function's input argument types, as a comparable text.
fn argument_types(stmt: &pgshift_sql::ast::CreateFunctionStmt) -> String {
    stmt.parameters
        .iter()
        .filter_map(|p| match &p.node {
            Some(NodeEnum::FunctionParameter(p))
                if p.mode != FunctionParameterMode::FuncParamOut as i32
                    && p.mode != FunctionParameterMode::FuncParamTable as i32 =>
            {
                p.arg_type.as_ref().map(shape_of)
            }
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A syntax tree as a comparable text: its serialized form without token locations.
pub fn shape(node: &pgshift_sql::ast::Node) -> String {
    shape_of(node)
}

/// [`shape`] of any node type.
pub fn shape_of<T: serde::Serialize>(node: &T) -> String {
    let mut value = serde_json::to_value(node).unwrap_or_default();
    strip_locations(&mut value);
    value.to_string()
}

fn strip_locations(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            // Token positions: `location`, `*_location`, and the bounds of a list
            // (`list_start`, `list_end`, `rexpr_list_start`, …).
            map.retain(|key, _| {
                key != "location"
                    && !key.ends_with("_location")
                    && !key.ends_with("list_start")
                    && !key.ends_with("list_end")
            });
            for inner in map.values_mut() {
                strip_locations(inner);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_locations),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(sql: &str) -> Vec<Key> {
        let statements = pgshift_sql::parse(sql).expect("parses");
        Units::read(&statements)
            .expect("covered")
            .by_key
            .into_keys()
            .collect()
    }

    #[test]
    fn each_statement_of_a_table_is_its_own_unit() {
        let got = keys(
            "SET default_tablespace = '';
             CREATE TABLE app.a (id int NOT NULL);
             ALTER TABLE ONLY app.a ADD CONSTRAINT a_pkey PRIMARY KEY (id);
             ALTER TABLE ONLY app.a ALTER COLUMN id SET DEFAULT nextval('app.s'::regclass);
             CREATE INDEX a_i ON app.a USING btree (id);
             CREATE TRIGGER t BEFORE UPDATE ON app.a FOR EACH ROW EXECUTE FUNCTION app.f();
             ALTER TABLE app.a DISABLE TRIGGER t;
             GRANT SELECT ON TABLE app.a TO r;
             COMMENT ON COLUMN app.a.id IS 'x';",
        );
        let kinds: Vec<Kind> = got.iter().map(|k| k.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::Table,
                Kind::Default,
                Kind::Constraint,
                Kind::Index,
                Kind::Trigger,
                Kind::TriggerState,
                Kind::Comment,
                Kind::Grant
            ]
        );
    }

    #[test]
    fn shapes_ignore_where_the_tokens_were() {
        let column = |sql: &str| {
            let statements = pgshift_sql::parse(sql).expect("parses");
            match &statements[0].node {
                NodeEnum::CreateStmt(c) => match &c.table_elts[1].node {
                    Some(NodeEnum::ColumnDef(d)) => shape_of(&d.constraints),
                    _ => String::new(),
                },
                _ => String::new(),
            }
        };
        let generated = "s tsvector GENERATED ALWAYS AS (CASE WHEN (kind = ANY (ARRAY[1, 30023])) \
                         THEN to_tsvector('simple'::regconfig, content) END) STORED)";
        assert_eq!(
            column(&format!("CREATE TABLE e (d text, {generated}")),
            column(&format!(
                "CREATE TABLE e (d character varying(300), {generated}"
            ))
        );
    }

    #[test]
    fn overloads_are_told_apart_by_their_input_types() {
        let got = keys(
            "CREATE FUNCTION app.f(a integer) RETURNS int LANGUAGE sql AS 'SELECT 1';
             CREATE FUNCTION app.f(a text, OUT b int) RETURNS int LANGUAGE sql AS 'SELECT 1';",
        );
        assert_eq!(got.len(), 2);
        assert_ne!(got[0].parts[2], got[1].parts[2]);
    }
}
