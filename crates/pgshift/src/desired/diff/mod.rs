//! The statements that take a schema from one dump to another, unit by unit
//! ([`super::units`]), written from syntax trees or quoted identifiers, never by editing
//! text: what only the live side has is dropped (in reverse dump order), what only
//! the desired side has is created with the desired dump's own statement (in its dump
//! order, partitions attached last), and what differs is altered where a change is
//! mechanical (a table's columns, defaults, NOT NULL, generation, checks and
//! persistence; an identity; a setting; `CREATE OR REPLACE` of views and functions)
//! or dropped and created again (an index, a constraint, a trigger, a policy, a rule,
//! statistics, a partition's bound). Anything else is an error that names it. Renames are
//! never guessed: a table of another name is a drop and a create.

mod access;
mod drop;
mod gone;
mod identity;
mod settings;
mod table;
mod types;

use std::collections::{BTreeMap, BTreeSet};

use pgshift_sql::ast::Node;
use pgshift_sql::{deparse, NodeEnum, QualifiedName};

pub use access::{access_changes, AccessChange, Impact};

use super::units::{Key, Kind, NotCovered, Unit, Units};

/// What a change does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Creates what only the desired schema has.
    Create,
    /// Drops what only the live schema has.
    Drop,
    /// Alters what both have.
    Alter,
}

/// One statement of the plan.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// Its SQL.
    pub sql: String,
    /// What it does.
    pub action: Action,
    /// The object, in words (`index app.a_note`).
    pub object: String,
    /// Whether it may lose data or something the database holds (a drop of a table,
    /// column, view, function, type, sequence; a type change; a `DETACH PARTITION`,
    /// whose rows leave the parent; `SET UNLOGGED`, which a crash empties).
    pub destructive: bool,
}

/// Why no plan could be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    /// A statement of a kind the comparison does not cover.
    #[error(transparent)]
    NotCovered(#[from] NotCovered),
    /// A difference pgshift does not write a change for.
    #[error("{object}: {what} is not covered by desired state yet")]
    Unsupported {
        /// The object.
        object: String,
        /// The difference.
        what: String,
    },
    /// SQL could not be written from a syntax tree.
    #[error("cannot write the SQL for {object}: {reason}")]
    Deparse {
        /// The object.
        object: String,
        /// The deparser's words.
        reason: String,
    },
}

/// What the desired database's catalog says where its dump says nothing, and what
/// the server can run.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The server's `server_version_num`.
    pub server_version_num: u32,
    /// The storage (`plain`, `external`, `extended`, `main`) the desired database gives
    /// a column (schema, table, column) that the live dump sets and the desired one
    /// does not: what `SET STORAGE` takes the column back to.
    pub storage: BTreeMap<(String, String, String), String>,
    /// The materialized views that hold rows in the desired database (its files'
    /// `CREATE MATERIALIZED VIEW` without `WITH NO DATA`): a dump writes every one
    /// `WITH NO DATA`, so a created one is refreshed after.
    pub populated: BTreeSet<(String, String)>,
    /// The materialized views that hold rows in the live database.
    pub live_populated: BTreeSet<(String, String)>,
}

/// The columns whose storage [`Facts::storage`] must give: those with a live
/// `SET STORAGE` the desired dump lacks.
pub fn storage_to_read(
    live: &Units,
    desired: &Units,
    managed: &BTreeSet<String>,
) -> Vec<(String, String, String)> {
    let in_scope = scope(desired, managed);
    live.by_key
        .keys()
        .filter(|k| {
            in_scope(k)
                && k.kind == Kind::TableSetting
                && k.parts[2] == pgshift_sql::ast::AlterTableType::AtSetStorage.as_str_name()
                && !desired.by_key.contains_key(k)
        })
        .map(|k| (k.parts[0].clone(), k.parts[1].clone(), k.parts[3].clone()))
        .collect()
}

/// The changes from `live` to `desired`, managing only the schemas in `managed` (and
/// extensions only where the desired schema has some).
pub fn changes(
    live: &Units,
    desired: &Units,
    managed: &BTreeSet<String>,
    facts: &Facts,
) -> Result<Vec<Change>, DiffError> {
    let in_scope = scope(desired, managed);
    let gone = gone::Gone::of(live, desired, &in_scope);
    let mut drops: Vec<(usize, Change)> = Vec::new();
    for (key, unit) in &live.by_key {
        if !in_scope(key) || gone.takes(key) {
            continue;
        }
        let dropped = match desired.by_key.get(key) {
            None => drop::drop(key, unit, facts)?,
            Some(wanted) if wanted.statement.text != unit.statement.text && recreated(key.kind) => {
                drop::drop(key, unit, facts)?
            }
            Some(_) => None,
        };
        drops.extend(dropped.map(|c| (unit.position, c)));
    }
    drops.sort_by_key(|d| std::cmp::Reverse(d.0));
    let mut out: Vec<Change> = drops.into_iter().map(|(_, c)| c).collect();
    // A partition's columns and checks follow its parent's: PostgreSQL refuses most
    // column changes on a partition itself, and the parent's recurse. What else
    // differs on a partition is left to the convergence check to find.
    let partition = |key: &Key| {
        key.kind == Kind::Table
            && live.by_key.contains_key(&Key {
                kind: Kind::Attach,
                parts: key.parts.clone(),
            })
    };
    let mut creates: Vec<(&Key, &Unit)> = desired.by_key.iter().collect();
    creates.sort_by_key(|(_, u)| u.position);
    // Partitions are attached last, index partitions after them: a partition's own
    // indexes and keys exist by then, so ATTACH PARTITION adopts them instead of
    // building copies under other names (pg_dump attaches first because it restores
    // into tables without indexes).
    let retyped = table::retyped(live, desired);
    let mut attaches: Vec<Change> = Vec::new();
    let mut index_attaches: Vec<Change> = Vec::new();
    for (key, unit) in creates {
        if !in_scope(key) {
            continue;
        }
        let created = match live.by_key.get(key) {
            None => with_settings(create(key, unit), unit),
            Some(was) if was.statement.text != unit.statement.text => {
                if recreated(key.kind) {
                    with_settings(create(key, unit), unit)
                } else if partition(key) {
                    continue;
                } else {
                    alter(key, was, unit, facts)?
                }
            }
            Some(_) => {
                // Unchanged, but it may hold rows on one side only.
                if key.kind == Kind::MaterializedView {
                    out.extend(refresh(key, true, facts)?);
                }
                // Unchanged, but a type change takes a column's storage back to its
                // new type's default: set again after it.
                if key.kind == Kind::TableSetting
                    && retyped.contains(&(
                        key.parts[0].clone(),
                        key.parts[1].clone(),
                        key.parts[3].clone(),
                    ))
                {
                    out.push(Change {
                        sql: unit.statement.text.clone(),
                        action: Action::Alter,
                        object: describe(key),
                        destructive: false,
                    });
                }
                continue;
            }
        };
        let mut created = created;
        if key.kind == Kind::MaterializedView {
            // Created or created again: `WITH NO DATA`, as the dump writes it.
            created.extend(refresh(key, false, facts)?);
        }
        match key.kind {
            Kind::Attach => attaches.extend(created),
            Kind::IndexAttach => index_attaches.extend(created),
            _ => out.extend(created),
        }
    }
    out.extend(attaches);
    out.extend(index_attaches);
    Ok(out)
}

/// `REFRESH MATERIALIZED VIEW` where the desired database's view holds rows and the
/// live one will not (it was created `WITH NO DATA` by the plan, or is so live), and
/// `… WITH NO DATA` the other way round.
fn refresh(key: &Key, kept: bool, facts: &Facts) -> Result<Option<Change>, DiffError> {
    let name = (key.parts[0].clone(), key.parts[1].clone());
    let will_hold = kept && facts.live_populated.contains(&name);
    let wanted = facts.populated.contains(&name);
    if will_hold == wanted {
        return Ok(None);
    }
    let stmt = pgshift_sql::ast::RefreshMatViewStmt {
        concurrent: false,
        skip_data: !wanted,
        relation: Some(pgshift_sql::ast::RangeVar {
            schemaname: name.0.clone(),
            relname: name.1.clone(),
            inh: true,
            relpersistence: "p".to_owned(),
            ..Default::default()
        }),
    };
    Ok(Some(Change {
        sql: sql_of(NodeEnum::RefreshMatViewStmt(stmt), &describe(key))?,
        action: Action::Alter,
        object: describe(key),
        destructive: !wanted,
    }))
}

/// Whether a key is managed: in a schema the desired files name (extensions only when
/// they create some; comments and grants always, their objects being managed).
pub(super) fn scope<'a>(
    desired: &'a Units,
    managed: &'a BTreeSet<String>,
) -> impl Fn(&Key) -> bool + 'a {
    let manages_extensions = desired.by_key.keys().any(|k| k.kind == Kind::Extension);
    let manages_publications = desired.by_key.keys().any(|k| k.kind == Kind::Publication);
    move |key: &Key| match key.kind {
        Kind::Extension => manages_extensions,
        Kind::Schema => managed.contains(&key.parts[0]),
        Kind::Comment | Kind::Grant | Kind::DefaultPrivileges => true,
        // A publication is the database's, not a schema's: managed where the desired
        // files have some.
        Kind::Publication | Kind::PublicationMember => manages_publications,
        _ => key.schema().is_some_and(|s| managed.contains(s)),
    }
}

/// What still differs between `after` and `desired` in the managed scope, in words:
/// empty when a plan converged.
pub fn leftover(after: &Units, desired: &Units, managed: &BTreeSet<String>) -> Vec<String> {
    let in_scope = scope(desired, managed);
    let keys: BTreeSet<&Key> = after
        .by_key
        .keys()
        .chain(desired.by_key.keys())
        .filter(|k| in_scope(k))
        .collect();
    keys.into_iter()
        .filter_map(|key| {
            let (a, d) = (after.by_key.get(key), desired.by_key.get(key));
            match (a, d) {
                (Some(a), Some(d)) if a.statement.text == d.statement.text => None,
                (Some(a), Some(_)) => {
                    Some(format!("{} differs: {}", describe(key), a.statement.text))
                }
                (Some(_), None) => Some(format!("{} is left over", describe(key))),
                (None, _) => Some(format!("{} is missing", describe(key))),
            }
        })
        .collect()
}

/// Kinds changed by dropping the live one and creating the desired one.
fn recreated(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Constraint
            | Kind::Index
            | Kind::Trigger
            | Kind::Policy
            | Kind::Rule
            | Kind::Statistics
            | Kind::MaterializedView
            | Kind::DomainConstraint
            | Kind::Attach
    )
}

pub(super) fn describe(key: &Key) -> String {
    let kind = match key.kind {
        Kind::Schema => "schema",
        Kind::Extension => "extension",
        Kind::Type => "type",
        Kind::DomainConstraint => "domain constraint",
        Kind::Function => "function",
        Kind::Aggregate => "aggregate",
        Kind::Sequence => "sequence",
        Kind::SequenceOwnedBy => "ownership of sequence",
        Kind::Table => "table",
        Kind::View => "view",
        Kind::MaterializedView => "materialized view",
        Kind::Default => "default of",
        Kind::Identity => "identity of",
        Kind::Constraint => "constraint",
        Kind::Index => "index",
        Kind::IndexAttach => "attachment of index",
        Kind::Trigger => "trigger",
        Kind::TriggerState => "enable state of trigger",
        Kind::Policy => "policy",
        Kind::Rule => "rule",
        Kind::RowSecurity => "row level security of",
        Kind::ForceRowSecurity => "forced row level security of",
        Kind::Statistics => "statistics",
        Kind::StatisticsTarget => "statistics target of",
        Kind::Attach => "attachment of partition",
        Kind::TableSetting => "setting of",
        Kind::Publication => "publication",
        Kind::PublicationMember => "tables of publication",
        Kind::Comment | Kind::Grant | Kind::DefaultPrivileges => "",
    };
    match key.kind {
        Kind::Grant | Kind::DefaultPrivileges => key.parts[0].clone(),
        Kind::Comment => format!(
            "comment on {}",
            key.parts[0].trim_start_matches("OBJECT_").to_lowercase()
        ),
        Kind::Function => format!("function {}.{}", key.parts[0], key.parts[1]),
        Kind::PublicationMember => format!("{kind} {}", key.parts[0]),
        Kind::TableSetting => format!(
            "{kind} {}.{} ({})",
            key.parts[0], key.parts[1], key.parts[2]
        ),
        _ => format!("{kind} {}", key.parts.join(".")),
    }
}

fn create(key: &Key, unit: &Unit) -> Change {
    Change {
        sql: unit.statement.text.clone(),
        action: Action::Create,
        object: describe(key),
        destructive: false,
    }
}

/// `unit`'s `SET default_tablespace …` around its change, then the defaults back.
fn with_settings(change: Change, unit: &Unit) -> Vec<Change> {
    if unit.settings.is_empty() {
        return vec![change];
    }
    let setting = |sql: String| Change {
        sql,
        action: Action::Create,
        object: change.object.clone(),
        destructive: false,
    };
    let mut out: Vec<Change> = unit.settings.iter().cloned().map(setting).collect();
    out.push(change.clone());
    out.push(setting("SET default_tablespace = ''".to_owned()));
    out.push(setting("SET default_table_access_method = heap".to_owned()));
    out
}

pub(super) fn q(schema: &str, name: &str) -> QualifiedName {
    QualifiedName::qualified(schema, name)
}

pub(super) fn unsupported<T>(object: &str, what: &str) -> Result<T, DiffError> {
    Err(DiffError::Unsupported {
        object: object.to_owned(),
        what: what.to_owned(),
    })
}

pub(super) fn sql_of(node: NodeEnum, object: &str) -> Result<String, DiffError> {
    deparse(&node).map_err(|err| DiffError::Deparse {
        object: object.to_owned(),
        reason: err.to_string(),
    })
}

/// The change of a unit both sides have, where it is not dropped and created again.
fn alter(key: &Key, was: &Unit, wanted: &Unit, facts: &Facts) -> Result<Vec<Change>, DiffError> {
    let object = describe(key);
    let desired_text = |destructive: bool| {
        vec![Change {
            sql: wanted.statement.text.clone(),
            action: Action::Alter,
            object: object.clone(),
            destructive,
        }]
    };
    match key.kind {
        Kind::Table => {
            let altered = table::table(key, was, wanted, facts)?;
            if altered.is_empty() {
                // The texts differ in something no column change makes: the columns'
                // order, say.
                return unsupported(
                    &object,
                    "a change no column statement makes (the columns' order?)",
                );
            }
            Ok(altered)
        }
        Kind::View | Kind::Function => {
            let mut node = wanted.statement.node.clone();
            match &mut node {
                NodeEnum::ViewStmt(v) => v.replace = true,
                NodeEnum::CreateFunctionStmt(f) => f.replace = true,
                _ => return unsupported(&object, "a change"),
            }
            Ok(vec![Change {
                sql: sql_of(node, &object)?,
                action: Action::Alter,
                object,
                destructive: false,
            }])
        }
        Kind::Type => match (&was.statement.node, &wanted.statement.node) {
            (NodeEnum::CreateEnumStmt(old), NodeEnum::CreateEnumStmt(new)) => {
                enum_values(&object, old, new)
            }
            (NodeEnum::CreateDomainStmt(old), NodeEnum::CreateDomainStmt(new)) => {
                types::domain(&object, old, new)
            }
            (NodeEnum::CompositeTypeStmt(old), NodeEnum::CompositeTypeStmt(new)) => {
                types::composite(&object, old, new)
            }
            _ => unsupported(&object, "a change of its definition"),
        },
        Kind::Sequence => match (&was.statement.node, &wanted.statement.node) {
            (NodeEnum::CreateSeqStmt(_), NodeEnum::CreateSeqStmt(new)) => {
                let alter = pgshift_sql::ast::AlterSeqStmt {
                    sequence: new.sequence.clone(),
                    options: new.options.clone(),
                    for_identity: false,
                    missing_ok: false,
                };
                Ok(vec![Change {
                    sql: sql_of(NodeEnum::AlterSeqStmt(alter), &object)?,
                    action: Action::Alter,
                    object,
                    destructive: false,
                }])
            }
            _ => unsupported(&object, "a change of its definition"),
        },
        // Statements that set what they set, whatever was there.
        Kind::Default
        | Kind::TriggerState
        | Kind::Comment
        | Kind::SequenceOwnedBy
        | Kind::StatisticsTarget => Ok(desired_text(false)),
        // The desired setting, after a reset of what only the live one sets.
        Kind::TableSetting => {
            let mut out = settings::unset(key, was, wanted)?;
            out.extend(desired_text(false));
            Ok(out)
        }
        Kind::Identity => identity::alter(&object, was, wanted),
        _ => unsupported(&object, "a change of its definition"),
    }
}

/// `ALTER TYPE … ADD VALUE` for each label the desired enum has that the live one
/// lacks, placed by its neighbour; a label removed or moved is not covered (PostgreSQL
/// cannot do either in place).
fn enum_values(
    object: &str,
    old: &pgshift_sql::ast::CreateEnumStmt,
    new: &pgshift_sql::ast::CreateEnumStmt,
) -> Result<Vec<Change>, DiffError> {
    let (was, wanted) = (strings(&old.vals), strings(&new.vals));
    let kept: Vec<&String> = wanted.iter().filter(|v| was.contains(v)).collect();
    if kept.len() != was.len() || kept.iter().zip(&was).any(|(a, b)| *a != b) {
        return unsupported(object, "a label removed or moved");
    }
    let mut out = Vec::new();
    for (i, value) in wanted.iter().enumerate() {
        if was.contains(value) {
            continue;
        }
        // Before the next label the live type has, else after the one before it.
        let (neighbor, after) = match wanted[i + 1..].iter().find(|v| was.contains(v)) {
            Some(next) => (next.clone(), false),
            None => (wanted[..i].last().cloned().unwrap_or_default(), true),
        };
        let stmt = pgshift_sql::ast::AlterEnumStmt {
            type_name: new.type_name.clone(),
            old_val: String::new(),
            new_val: value.clone(),
            new_val_neighbor: neighbor,
            new_val_is_after: after,
            skip_if_new_val_exists: false,
        };
        out.push(Change {
            sql: sql_of(NodeEnum::AlterEnumStmt(stmt), object)?,
            action: Action::Alter,
            object: object.to_owned(),
            destructive: false,
        });
    }
    Ok(out)
}

fn strings(nodes: &[Node]) -> Vec<String> {
    crate::classify::names::strings(nodes)
}
#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn units(sql: &str) -> Units {
        Units::read(&pgshift_sql::parse(sql).expect("parses")).expect("covered")
    }

    pub(super) fn facts() -> Facts {
        Facts {
            server_version_num: 180_000,
            storage: BTreeMap::from([(
                ("app".to_owned(), "t".to_owned(), "body".to_owned()),
                "extended".to_owned(),
            )]),
            populated: BTreeSet::new(),
            live_populated: BTreeSet::new(),
        }
    }

    pub(super) fn plan(live: &str, desired: &str) -> Vec<Change> {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        changes(&units(live), &units(desired), &managed, &facts()).expect("a plan")
    }

    pub(super) fn sql(changes: &[Change]) -> Vec<&str> {
        changes.iter().map(|c| c.sql.as_str()).collect()
    }

    #[test]
    fn what_only_one_side_has_is_dropped_or_created_in_dump_order() {
        let got = plan(
            "CREATE TABLE app.t (id integer);
             CREATE INDEX t_old ON app.t USING btree (id);
             CREATE VIEW app.v AS SELECT t.id FROM app.t;
             GRANT SELECT ON TABLE app.t TO r;
             CREATE FUNCTION app.f(a integer, OUT b integer) RETURNS integer LANGUAGE sql AS 'SELECT 1';",
            "CREATE TABLE app.t (id integer);
             CREATE INDEX t_new ON app.t USING btree (id DESC);
             CREATE TABLE app.u (id integer);",
        );
        assert_eq!(
            sql(&got),
            [
                "DROP FUNCTION app.f(int)",
                "REVOKE select ON app.t FROM r",
                r#"DROP VIEW "app"."v""#,
                r#"DROP INDEX "app"."t_old""#,
                "CREATE INDEX t_new ON app.t USING btree (id DESC)",
                "CREATE TABLE app.u (id integer)",
            ]
        );
    }

    #[test]
    fn a_partitions_columns_follow_its_parent() {
        let got = plan(
            "CREATE TABLE app.p (id integer, t integer) PARTITION BY RANGE (t);
             CREATE TABLE app.p_0 (id integer, t integer);
             ALTER TABLE ONLY app.p ATTACH PARTITION app.p_0 FOR VALUES FROM (0) TO (10);",
            "CREATE TABLE app.p (id bigint, t integer) PARTITION BY RANGE (t);
             CREATE TABLE app.p_0 (id bigint, t integer);
             ALTER TABLE ONLY app.p ATTACH PARTITION app.p_0 FOR VALUES FROM (0) TO (10);",
        );
        assert_eq!(sql(&got), ["ALTER TABLE app.p ALTER COLUMN id TYPE bigint"]);
    }

    #[test]
    fn publication_tables_are_added_and_dropped() {
        let got = plan(
            "CREATE TABLE app.t (id integer);
             CREATE PUBLICATION p WITH (publish = 'insert');
             ALTER PUBLICATION p ADD TABLE ONLY app.t WHERE ((id > 0));",
            "CREATE TABLE app.t (id integer);
             CREATE TABLE app.u (id integer);
             CREATE PUBLICATION p WITH (publish = 'insert');
             ALTER PUBLICATION p ADD TABLE ONLY app.u;",
        );
        assert_eq!(
            sql(&got),
            [
                "ALTER PUBLICATION p DROP TABLE ONLY app.t",
                "CREATE TABLE app.u (id integer)",
                "ALTER PUBLICATION p ADD TABLE ONLY app.u",
            ]
        );
    }

    #[test]
    fn unmanaged_schemas_are_left_alone() {
        let got = plan(
            "CREATE TABLE other.t (id integer); CREATE TABLE app.t (id integer);",
            "CREATE TABLE app.t (id integer); CREATE TABLE elsewhere.u (id integer);",
        );
        assert!(got.is_empty(), "neither dropped nor created: {got:?}");
    }

    #[test]
    fn a_change_without_a_mechanical_statement_is_named() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let err = changes(
            &units("CREATE TABLE app.t (id integer) PARTITION BY RANGE (id);"),
            &units("CREATE TABLE app.t (id integer) PARTITION BY LIST (id);"),
            &managed,
            &facts(),
        )
        .expect_err("partitioning is not covered");
        assert!(err.to_string().contains("table app.t"), "{err}");
        let err = changes(
            &units("CREATE TYPE app.e AS ENUM ('a', 'b');"),
            &units("CREATE TYPE app.e AS ENUM ('b', 'a');"),
            &managed,
            &facts(),
        )
        .expect_err("moving a label is not covered");
        assert!(err.to_string().contains("moved"), "{err}");
    }

    #[test]
    fn options_enum_labels_and_sequences_are_altered_in_place() {
        let got = plan(
            "CREATE TABLE app.t (id integer) WITH (fillfactor='80', autovacuum_enabled='false');
             CREATE TYPE app.e AS ENUM ('a', 'c');
             CREATE SEQUENCE app.s START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1;",
            "CREATE TABLE app.t (id integer) WITH (fillfactor='90');
             CREATE TYPE app.e AS ENUM ('0', 'a', 'b', 'c', 'd');
             CREATE SEQUENCE app.s START WITH 1 INCREMENT BY 5 NO MINVALUE NO MAXVALUE CACHE 1;",
        );
        assert_eq!(
            sql(&got),
            [
                "ALTER TABLE app.t SET (fillfactor='90')",
                "ALTER TABLE app.t RESET (autovacuum_enabled)",
                "ALTER TYPE app.e ADD VALUE '0' BEFORE 'a'",
                "ALTER TYPE app.e ADD VALUE 'b' BEFORE 'c'",
                "ALTER TYPE app.e ADD VALUE 'd' AFTER 'c'",
                "ALTER SEQUENCE app.s START 1 INCREMENT 5 NO MINVALUE NO MAXVALUE CACHE 1",
            ]
        );
    }

    const PARTITIONED: &str = "CREATE TABLE app.ev (id bigint NOT NULL, t integer NOT NULL, note text) PARTITION BY RANGE (t);
        CREATE TABLE app.ev_0 (id bigint NOT NULL, t integer NOT NULL, note text);
        CREATE TABLE app.ev_d (id bigint NOT NULL, t integer NOT NULL, note text);
        ALTER TABLE ONLY app.ev ATTACH PARTITION app.ev_0 FOR VALUES FROM (0) TO (10);
        ALTER TABLE ONLY app.ev ATTACH PARTITION app.ev_d DEFAULT;
        ALTER TABLE ONLY app.ev ADD CONSTRAINT ev_pkey PRIMARY KEY (id, t);
        ALTER TABLE ONLY app.ev_0 ADD CONSTRAINT ev_0_pkey PRIMARY KEY (id, t);
        ALTER TABLE ONLY app.ev_d ADD CONSTRAINT ev_d_pkey PRIMARY KEY (id, t);
        CREATE INDEX ev_note ON ONLY app.ev USING btree (note);
        CREATE INDEX ev_0_note_idx ON app.ev_0 USING btree (note);
        CREATE INDEX ev_d_note_idx ON app.ev_d USING btree (note);
        ALTER INDEX app.ev_note ATTACH PARTITION app.ev_0_note_idx;
        ALTER INDEX app.ev_pkey ATTACH PARTITION app.ev_0_pkey;
        ALTER INDEX app.ev_note ATTACH PARTITION app.ev_d_note_idx;
        ALTER INDEX app.ev_pkey ATTACH PARTITION app.ev_d_pkey;";

    #[test]
    fn partitions_are_attached_after_their_indexes_and_leave_with_their_table() {
        // The default partition replaced by a range, and the first range widened.
        let desired = PARTITIONED
            .replace("app.ev_d DEFAULT", "app.ev_2 FOR VALUES FROM (20) TO (30)")
            .replace("ev_d", "ev_2")
            .replace("TO (10)", "TO (20)");
        let got = plan(PARTITIONED, &desired);
        assert_eq!(
            sql(&got),
            [
                r#"ALTER TABLE "app"."ev" DETACH PARTITION "app"."ev_d""#,
                r#"ALTER TABLE "app"."ev" DETACH PARTITION "app"."ev_0""#,
                r#"DROP TABLE "app"."ev_d""#,
                "CREATE TABLE app.ev_2 (id bigint NOT NULL, t integer NOT NULL, note text)",
                "ALTER TABLE ONLY app.ev_2 ADD CONSTRAINT ev_2_pkey PRIMARY KEY (id, t)",
                "CREATE INDEX ev_2_note_idx ON app.ev_2 USING btree (note)",
                "ALTER TABLE ONLY app.ev ATTACH PARTITION app.ev_0 FOR VALUES FROM (0) TO (20)",
                "ALTER TABLE ONLY app.ev ATTACH PARTITION app.ev_2 FOR VALUES FROM (20) TO (30)",
                "ALTER INDEX app.ev_note ATTACH PARTITION app.ev_2_note_idx",
                "ALTER INDEX app.ev_pkey ATTACH PARTITION app.ev_2_pkey",
            ]
        );
    }

    #[test]
    fn materialized_views_hold_rows_where_the_desired_database_s_do() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let name = |n: &str| ("app".to_owned(), n.to_owned());
        let facts = Facts {
            populated: [name("kept"), name("changed")].into(),
            live_populated: [name("emptied")].into(),
            ..facts()
        };
        let got = changes(
            &units(
                "CREATE TABLE app.t (id integer);
                 CREATE MATERIALIZED VIEW app.kept AS SELECT t.id FROM app.t WITH NO DATA;
                 CREATE MATERIALIZED VIEW app.changed AS SELECT t.id FROM app.t WITH NO DATA;
                 CREATE MATERIALIZED VIEW app.emptied AS SELECT t.id FROM app.t WITH NO DATA;",
            ),
            &units(
                "CREATE TABLE app.t (id integer);
                 CREATE MATERIALIZED VIEW app.kept AS SELECT t.id FROM app.t WITH NO DATA;
                 CREATE MATERIALIZED VIEW app.changed AS SELECT (t.id + 1) FROM app.t WITH NO DATA;
                 CREATE MATERIALIZED VIEW app.emptied AS SELECT t.id FROM app.t WITH NO DATA;",
            ),
            &managed,
            &facts,
        )
        .expect("a plan");
        assert_eq!(
            sql(&got),
            [
                r#"DROP MATERIALIZED VIEW "app"."changed""#,
                "REFRESH MATERIALIZED VIEW app.kept",
                "CREATE MATERIALIZED VIEW app.changed AS SELECT (t.id + 1) FROM app.t WITH NO DATA",
                "REFRESH MATERIALIZED VIEW app.changed",
                "REFRESH MATERIALIZED VIEW app.emptied WITH NO DATA",
            ]
        );
    }
}
