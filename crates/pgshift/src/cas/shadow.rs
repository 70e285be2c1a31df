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

use std::collections::HashMap;

use pgshift_sql::ast::{
    AlterTableCmd, AlterTableStmt, AlterTableType, Node, ResTarget, SelectStmt,
};
use pgshift_sql::{deparse, quote_ident, quote_literal, NodeEnum, QualifiedName, Statement};
use tokio_postgres::Client;

use super::error::CasError;
use super::plan::{CopyColumn, PlannedRename, RunPlan, ShadowConstraint, ShadowIndex};
use super::source::{self, SourceGrant};
use crate::refusal::{Refusal, RefusalCause};

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

/// The user's statement retargeted at `shadow`, as SQL, when it is an `ALTER TABLE`.
pub fn retarget(statement: &Statement, shadow: &QualifiedName) -> Result<Option<String>, CasError> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return Ok(None);
    };
    retarget_alter(stmt, shadow, &|_| false)
}

/// An `ALTER TABLE` retargeted at `target`, without the subcommands `skip` selects;
/// `None` when no subcommand is left.
fn retarget_alter(
    stmt: &AlterTableStmt,
    target: &QualifiedName,
    skip: &dyn Fn(&AlterTableCmd) -> bool,
) -> Result<Option<String>, CasError> {
    retarget_alter_with(stmt, target, skip, &[])
}

/// The tables the foreign keys of an `ALTER TABLE` reference (`ADD CONSTRAINT …
/// FOREIGN KEY`, a column's `REFERENCES`), as written.
fn referenced_tables(stmt: &AlterTableStmt) -> Vec<QualifiedName> {
    let mut out = Vec::new();
    let mut visit = |constraint: &pgshift_sql::ast::Constraint| {
        if let Some(pktable) = &constraint.pktable {
            out.push(QualifiedName {
                schema: (!pktable.schemaname.is_empty()).then(|| pktable.schemaname.clone()),
                name: pktable.relname.clone(),
            });
        }
    };
    for node in &stmt.cmds {
        let Some(NodeEnum::AlterTableCmd(cmd)) = &node.node else {
            continue;
        };
        match cmd.def.as_deref().and_then(|d| d.node.as_ref()) {
            Some(NodeEnum::Constraint(constraint)) => visit(constraint),
            Some(NodeEnum::ColumnDef(def)) => {
                for node in &def.constraints {
                    if let Some(NodeEnum::Constraint(constraint)) = &node.node {
                        visit(constraint);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// [`retarget_alter`], also pointing the foreign keys that reference one of `selves`
/// (names, as written, that denote the table itself) at `target`.
fn retarget_alter_with(
    stmt: &AlterTableStmt,
    target: &QualifiedName,
    skip: &dyn Fn(&AlterTableCmd) -> bool,
    selves: &[QualifiedName],
) -> Result<Option<String>, CasError> {
    let mut retargeted: AlterTableStmt = stmt.clone();
    if let Some(relation) = retargeted.relation.as_mut() {
        relation.schemaname = target.schema.clone().unwrap_or_default();
        relation.relname = target.name.clone();
        relation.inh = true;
    }
    retargeted.cmds.retain(|node| match &node.node {
        Some(NodeEnum::AlterTableCmd(cmd)) => !skip(cmd),
        _ => true,
    });
    let point = |constraint: &mut pgshift_sql::ast::Constraint| {
        if let Some(pktable) = constraint.pktable.as_mut() {
            let written = QualifiedName {
                schema: (!pktable.schemaname.is_empty()).then(|| pktable.schemaname.clone()),
                name: pktable.relname.clone(),
            };
            if selves.contains(&written) {
                pktable.schemaname = target.schema.clone().unwrap_or_default();
                pktable.relname = target.name.clone();
            }
        }
    };
    for node in &mut retargeted.cmds {
        let Some(NodeEnum::AlterTableCmd(cmd)) = node.node.as_mut() else {
            continue;
        };
        match cmd.def.as_deref_mut().and_then(|d| d.node.as_mut()) {
            Some(NodeEnum::Constraint(constraint)) => point(constraint),
            Some(NodeEnum::ColumnDef(def)) => {
                for node in &mut def.constraints {
                    if let Some(NodeEnum::Constraint(constraint)) = node.node.as_mut() {
                        point(constraint);
                    }
                }
            }
            _ => {}
        }
    }
    if retargeted.cmds.is_empty() {
        return Ok(None);
    }
    let sql = deparse(&NodeEnum::AlterTableStmt(retargeted))
        .map_err(|e| CasError::Record(e.to_string()))?;
    Ok(Some(sql))
}

/// The subcommands of an `ALTER TABLE`.
fn commands(statement: &Statement) -> Vec<&AlterTableCmd> {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return Vec::new();
    };
    stmt.cmds
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::AlterTableCmd(cmd)) => Some(&**cmd),
            _ => None,
        })
        .collect()
}

fn is(cmd: &AlterTableCmd, subtype: AlterTableType) -> bool {
    cmd.subtype == subtype as i32
}

/// The `USING` expression given for column `column` by an `ALTER COLUMN … TYPE`.
fn using_expression(statement: &Statement, column: &str) -> Option<Node> {
    commands(statement).into_iter().find_map(|cmd| {
        if !is(cmd, AlterTableType::AtAlterColumnType) || cmd.name != column {
            return None;
        }
        let Some(NodeEnum::ColumnDef(def)) = cmd.def.as_deref().and_then(|d| d.node.as_ref())
        else {
            return None;
        };
        def.raw_default.as_deref().cloned()
    })
}

/// The columns an `ALTER TABLE` drops. A column of the same name added again by the
/// statement is a new column: it is not copied from the source.
fn dropped_columns(statement: &Statement) -> Vec<String> {
    commands(statement)
        .into_iter()
        .filter(|cmd| is(cmd, AlterTableType::AtDropColumn))
        .map(|cmd| cmd.name.clone())
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

/// A relation of the source tree, as the shadow needs it beyond [`source::SourceFacts`].
#[derive(Debug)]
struct Relation {
    oid: u32,
    /// The source's name (the final name).
    name: QualifiedName,
    /// Its counterpart in the scratch schema.
    scratch: QualifiedName,
    /// The shadow's name for it (in the source's schema).
    shadow: QualifiedName,
    tablespace: Option<String>,
    owner: String,
    toast_options: Vec<String>,
    replica_identity: String,
    rls: (bool, bool),
    /// Its columns' settings.
    columns: Vec<ColumnSettings>,
    /// `(name, default expression, not null)`.
    defaults: Vec<(String, Option<String>, bool)>,
}

/// A column's settings that `LIKE` does not copy (or, on a partition, at all).
#[derive(Debug)]
struct ColumnSettings {
    name: String,
    /// An explicit statistics target.
    statistics: Option<i32>,
    /// `attoptions`.
    options: Vec<String>,
    comment: Option<String>,
}

/// An index of the source tree.
#[derive(Debug)]
struct SourceIndexFacts {
    /// Position of its relation in the tree (0: the table).
    relation: usize,
    name: String,
    definition: String,
    /// `(name, pg_get_constraintdef)` of the constraint it backs.
    constraint: Option<(String, String)>,
    /// The parent index it is attached to.
    parent: Option<String>,
    tablespace: Option<String>,
    replica_identity: bool,
    clustered: bool,
    valid: bool,
    /// The index's storage parameters.
    options: Vec<String>,
    comment: Option<String>,
    constraint_comment: Option<String>,
}

async fn read_relations(
    client: &Client,
    plan: &RunPlan,
    scratch_schema: &str,
) -> Result<Vec<Relation>, CasError> {
    let mut out = Vec::new();
    let tree: Vec<(u32, &QualifiedName, &QualifiedName)> =
        std::iter::once((plan.source.table.oid, &plan.source.table.name, &plan.shadow))
            .chain(
                plan.source
                    .partitions
                    .iter()
                    .zip(&plan.shadow_partitions)
                    .map(|(p, s)| (p.relation.oid, &p.relation.name, s)),
            )
            .collect();
    for (oid, name, shadow) in tree {
        let row = client
            .query_one(
                "SELECT (SELECT ts.spcname::pg_catalog.text FROM pg_catalog.pg_tablespace ts WHERE ts.oid OPERATOR(pg_catalog.=) c.reltablespace), \
                        pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text, \
                        coalesce((SELECT t.reloptions FROM pg_catalog.pg_class t WHERE t.oid OPERATOR(pg_catalog.=) c.reltoastrelid), '{}')::pg_catalog.text[], \
                        c.relreplident::pg_catalog.text, c.relrowsecurity, c.relforcerowsecurity \
                   FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
                &[&oid],
            )
            .await
            .map_err(db("reading the source's relations"))?;
        let columns = client
            .query(
                "SELECT a.attname::pg_catalog.text, NULLIF(a.attstattarget::pg_catalog.int4, -1), \
                        coalesce(a.attoptions, '{}')::pg_catalog.text[], pg_catalog.col_description(a.attrelid, a.attnum), \
                        (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d \
                          WHERE d.adrelid OPERATOR(pg_catalog.=) a.attrelid AND d.adnum OPERATOR(pg_catalog.=) a.attnum), \
                        a.attnotnull, a.attgenerated::pg_catalog.text \
                   FROM pg_catalog.pg_attribute a \
                  WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped \
                  ORDER BY a.attnum",
                &[&oid],
            )
            .await
            .map_err(db("reading the source's columns"))?;
        out.push(Relation {
            oid,
            name: name.clone(),
            scratch: QualifiedName::qualified(scratch_schema, name.name.clone()),
            shadow: shadow.clone(),
            tablespace: row.get(0),
            owner: row.get(1),
            toast_options: row.get(2),
            replica_identity: row.get(3),
            rls: (row.get(4), row.get(5)),
            columns: columns
                .iter()
                .map(|r| ColumnSettings {
                    name: r.get(0),
                    statistics: r.get(1),
                    options: r.get(2),
                    comment: r.get(3),
                })
                .collect(),
            defaults: columns
                .iter()
                .filter(|r| r.get::<_, String>(6).is_empty())
                .map(|r| (r.get(0), r.get(4), r.get(5)))
                .collect(),
        });
    }
    Ok(out)
}

async fn read_source_indexes(
    client: &Client,
    tree: &[Relation],
) -> Result<Vec<SourceIndexFacts>, CasError> {
    let oids: Vec<u32> = tree.iter().map(|r| r.oid).collect();
    let rows = client
        .query(
            "SELECT i.indrelid, ic.relname::pg_catalog.text, pg_catalog.pg_get_indexdef(i.indexrelid), \
                    con.conname::pg_catalog.text, CASE WHEN con.oid IS NOT NULL THEN pg_catalog.pg_get_constraintdef(con.oid) END, \
                    (SELECT p.relname::pg_catalog.text FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) h.inhparent \
                      WHERE h.inhrelid OPERATOR(pg_catalog.=) i.indexrelid), \
                    (SELECT ts.spcname::pg_catalog.text FROM pg_catalog.pg_tablespace ts WHERE ts.oid OPERATOR(pg_catalog.=) ic.reltablespace), \
                    i.indisreplident, i.indisclustered, i.indisvalid, coalesce(ic.reloptions, '{}')::pg_catalog.text[], \
                    pg_catalog.obj_description(i.indexrelid, 'pg_class'), \
                    CASE WHEN con.oid IS NOT NULL THEN pg_catalog.obj_description(con.oid, 'pg_constraint') END \
               FROM pg_catalog.pg_index i \
               JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
               LEFT JOIN pg_catalog.pg_constraint con ON con.conindid OPERATOR(pg_catalog.=) i.indexrelid \
                    AND con.conrelid OPERATOR(pg_catalog.=) i.indrelid AND con.contype OPERATOR(pg_catalog.=) ANY ('{p,u,x}') \
              WHERE i.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) ORDER BY i.indexrelid",
            &[&oids],
        )
        .await
        .map_err(db("reading the source's indexes"))?;
    Ok(rows
        .iter()
        .map(|row| {
            let relid: u32 = row.get(0);
            SourceIndexFacts {
                relation: oids.iter().position(|o| *o == relid).unwrap_or(0),
                name: row.get(1),
                definition: row.get(2),
                constraint: match (
                    row.get::<_, Option<String>>(3),
                    row.get::<_, Option<String>>(4),
                ) {
                    (Some(name), Some(def)) => Some((name, def)),
                    _ => None,
                },
                parent: row.get(5),
                tablespace: row.get(6),
                replica_identity: row.get(7),
                clustered: row.get(8),
                valid: row.get(9),
                options: row.get(10),
                comment: row.get(11),
                constraint_comment: row.get(12),
            }
        })
        .collect())
}

/// `CREATE INDEX` from a definition, on `target` (recursing into its partitions)
/// under `name`, in `tablespace` when given.
fn retarget_index(
    definition: &str,
    target: &QualifiedName,
    name: &str,
    tablespace: Option<&str>,
) -> Result<String, CasError> {
    let bad = || {
        CasError::Record(format!(
            "index definition does not parse back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(definition).map_err(|_| bad())?;
    let Some(NodeEnum::IndexStmt(index)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut index = index.clone();
    index.idxname = name.to_owned();
    if let Some(relation) = index.relation.as_mut() {
        relation.schemaname = target.schema.clone().unwrap_or_default();
        relation.relname = target.name.clone();
        relation.inh = true;
    }
    if let Some(tablespace) = tablespace {
        index.table_space = tablespace.to_owned();
    }
    deparse(&NodeEnum::IndexStmt(index)).map_err(|e| CasError::Record(e.to_string()))
}

/// An index-backed constraint's definition (`pg_get_constraintdef`, which leaves them
/// out) with its index's storage parameters and tablespace, set in the syntax tree.
fn constraint_with_storage(
    definition: &str,
    options: &[String],
    tablespace: Option<&str>,
) -> Result<String, CasError> {
    const PREFIX: &str = "ALTER TABLE t ADD CONSTRAINT c ";
    if options.is_empty() && tablespace.is_none() {
        return Ok(definition.to_owned());
    }
    let bad = || CasError::Record(format!("constraint does not parse back: {definition}"));
    let statements = pgshift_sql::parse(&format!("{PREFIX}{definition}")).map_err(|_| bad())?;
    let Some(NodeEnum::AlterTableStmt(stmt)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut stmt = stmt.clone();
    let mut found = false;
    for node in &mut stmt.cmds {
        if let Some(NodeEnum::AlterTableCmd(cmd)) = node.node.as_mut() {
            if let Some(NodeEnum::Constraint(constraint)) =
                cmd.def.as_deref_mut().and_then(|d| d.node.as_mut())
            {
                if let Some(tablespace) = tablespace {
                    constraint.indexspace = tablespace.to_owned();
                }
                constraint.options = options
                    .iter()
                    .filter_map(|o| o.split_once('='))
                    .map(|(name, value)| Node {
                        node: Some(NodeEnum::DefElem(Box::new(pgshift_sql::ast::DefElem {
                            defname: name.to_owned(),
                            arg: Some(Box::new(Node {
                                node: Some(NodeEnum::String(pgshift_sql::ast::String {
                                    sval: value.to_owned(),
                                })),
                            })),
                            defaction: pgshift_sql::ast::DefElemAction::DefelemUnspec as i32,
                            location: -1,
                            ..Default::default()
                        }))),
                    })
                    .collect();
                found = true;
            }
        }
    }
    if !found {
        return Err(bad());
    }
    let sql =
        deparse(&NodeEnum::AlterTableStmt(stmt)).map_err(|e| CasError::Record(e.to_string()))?;
    sql.strip_prefix(PREFIX).map(str::to_owned).ok_or_else(bad)
}

/// PostgreSQL's `makeObjectName`: `name1_name2_label`, the longer of the two names
/// cut first (on a character boundary) to fit 63 bytes.
fn make_object_name(name1: &str, name2: Option<&str>, label: &str) -> String {
    fn clip(s: &str, len: usize) -> &str {
        let mut end = len.min(s.len());
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        &s[..end]
    }
    let overhead = usize::from(name2.is_some()) + label.len() + 1;
    let available = 63usize.saturating_sub(overhead);
    let (mut n1, mut n2) = (name1.len(), name2.map_or(0, str::len));
    while n1 + n2 > available {
        if n1 > n2 {
            n1 -= 1;
        } else {
            n2 -= 1;
        }
    }
    let mut out = clip(name1, n1).to_owned();
    if let Some(name2) = name2 {
        out.push('_');
        out.push_str(clip(name2, n2));
    }
    out.push('_');
    out.push_str(label);
    out
}

/// The name PostgreSQL would choose on the real table for an object it named `name`
/// on the scratch table (same table name, so the same `name1`): the same `name2` and
/// label, with the first free pass number (`ChooseRelationName` /
/// `ChooseConstraintName`), given what is `taken`. `None` when `name` is not one
/// PostgreSQL chose (the statement named it).
fn choose_name(
    table: &str,
    name: &str,
    labels: &[&str],
    taken: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let rest = name.strip_prefix(table)?.strip_prefix('_').unwrap_or("");
    let (name2, label) = labels.iter().find_map(|label| {
        let trimmed = rest.trim_end_matches(|c: char| c.is_ascii_digit());
        if trimmed == *label {
            return Some((None, *label));
        }
        let name2 = trimmed.strip_suffix(label)?.strip_suffix('_')?;
        Some((Some(name2), *label))
    })?;
    if make_object_name(table, name2, label) != name
        && !(1..100).any(|pass| make_object_name(table, name2, &format!("{label}{pass}")) == name)
    {
        return None;
    }
    (0..1000).find_map(|pass| {
        let label = if pass == 0 {
            label.to_owned()
        } else {
            format!("{label}{pass}")
        };
        let candidate = make_object_name(table, name2, &label);
        (!taken(&candidate)).then_some(candidate)
    })
}

/// A foreign key definition (`pg_get_constraintdef`) that references `target` instead.
fn retarget_foreign_key(definition: &str, target: &QualifiedName) -> Result<String, CasError> {
    const PREFIX: &str = "ALTER TABLE t ADD CONSTRAINT c ";
    let bad = || CasError::Record(format!("foreign key does not parse back: {definition}"));
    let statements = pgshift_sql::parse(&format!("{PREFIX}{definition}")).map_err(|_| bad())?;
    let Some(NodeEnum::AlterTableStmt(stmt)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut stmt = stmt.clone();
    let mut found = false;
    for node in &mut stmt.cmds {
        if let Some(NodeEnum::AlterTableCmd(cmd)) = node.node.as_mut() {
            if let Some(NodeEnum::Constraint(constraint)) =
                cmd.def.as_deref_mut().and_then(|d| d.node.as_mut())
            {
                if let Some(pktable) = constraint.pktable.as_mut() {
                    pktable.schemaname = target.schema.clone().unwrap_or_default();
                    pktable.relname = target.name.clone();
                    found = true;
                }
            }
        }
    }
    if !found {
        return Err(bad());
    }
    let sql =
        deparse(&NodeEnum::AlterTableStmt(stmt)).map_err(|e| CasError::Record(e.to_string()))?;
    sql.strip_prefix(PREFIX).map(str::to_owned).ok_or_else(bad)
}

/// `CREATE STATISTICS` from a definition, as `name` on `target`.
fn retarget_statistics(
    definition: &str,
    name: &QualifiedName,
    target: &QualifiedName,
) -> Result<String, CasError> {
    let bad = || {
        CasError::Record(format!(
            "statistics definition does not parse back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(definition).map_err(|_| bad())?;
    let Some(NodeEnum::CreateStatsStmt(stats)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut stats = stats.clone();
    let string = |s: &str| Node {
        node: Some(NodeEnum::String(pgshift_sql::ast::String {
            sval: s.to_owned(),
        })),
    };
    stats.defnames = vec![
        string(name.schema.as_deref().unwrap_or_default()),
        string(&name.name),
    ];
    for relation in &mut stats.relations {
        if let Some(NodeEnum::RangeVar(range)) = relation.node.as_mut() {
            range.schemaname = target.schema.clone().unwrap_or_default();
            range.relname = target.name.clone();
        }
    }
    deparse(&NodeEnum::CreateStatsStmt(stats)).map_err(|e| CasError::Record(e.to_string()))
}

/// A user trigger's definition retargeted at `target`.
fn retarget_trigger(definition: &str, target: &QualifiedName) -> Result<String, CasError> {
    let bad = || {
        CasError::Record(format!(
            "trigger definition does not parse back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(definition).map_err(|_| bad())?;
    let Some(NodeEnum::CreateTrigStmt(trigger)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let mut trigger = trigger.clone();
    if let Some(relation) = trigger.relation.as_mut() {
        relation.schemaname = target.schema.clone().unwrap_or_default();
        relation.relname = target.name.clone();
    }
    deparse(&NodeEnum::CreateTrigStmt(trigger)).map_err(|e| CasError::Record(e.to_string()))
}

/// The `search_path` setting the statement was written for, after `pg_catalog` (so
/// built-in names cannot be shadowed): the plan's, or the role's own when the plan
/// has none.
async fn statement_search_path(client: &Client, plan: &RunPlan) -> Result<String, CasError> {
    if !plan.search_path.is_empty() {
        let mut parts = vec!["pg_catalog".to_owned()];
        parts.extend(plan.search_path.iter().map(|s| quote_ident(s)));
        return Ok(parts.join(", "));
    }
    let row = client
        .query_one(
            "SELECT s.reset_val FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'search_path'",
            &[],
        )
        .await
        .map_err(db("reading the role's search_path"))?;
    let own: String = row.get(0);
    Ok(if own.trim().is_empty() {
        "pg_catalog".to_owned()
    } else {
        format!("pg_catalog, {own}")
    })
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
                        NULLIF(s.stxstattarget::pg_catalog.int4, -1), pg_catalog.obj_description(s.oid, 'pg_statistic_ext') \
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
    let path = statement_search_path(client, plan).await?;
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
    check_triggers(client, plan, &tree).await?;
    let dropped = dropped_columns(statement);
    let copied: Vec<&(String, String, String)> = columns
        .iter()
        .filter(|(name, _, generated)| {
            generated.is_empty()
                && !dropped.contains(name)
                && plan.source.columns.iter().any(|c| &c.name == name)
        })
        .collect();
    let mut copy_columns = Vec::new();
    for (n, (name, type_sql, _)) in copied.into_iter().enumerate() {
        let expression = match using_expression(statement, name) {
            Some(using) => {
                let resolved =
                    resolve_using(client, plan, &scratch_schema, &path, &using, n).await?;
                format!("({resolved})")
            }
            None => format!("s.{}", quote_ident(name)),
        };
        copy_columns.push(CopyColumn {
            name: name.clone(),
            type_sql: type_sql.clone(),
            expression,
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
        .filter(|c| !dropped.contains(&c.0))
        .map(|c| c.0.clone())
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
    Ok(())
}

/// The names the statement gave what it added to the table are PostgreSQL's for the
/// real table, except that on the scratch table it could not see the other relations
/// and constraints of the real schema: a name taken there moves on to the next pass
/// number, as `ChooseRelationName` and `ChooseConstraintName` would have.
async fn choose_names(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
    source_indexes: &[SourceIndexFacts],
    scratch_schema: &str,
    schema: &str,
) -> Result<(), CasError> {
    let oids: Vec<u32> = tree.iter().map(|r| r.oid).collect();
    // Relation and constraint names of the real schema, but for the source tree's
    // (the scratch tree has those), and of the scratch schema.
    let rows = client
        .query(
            "SELECT c.relname::pg_catalog.text, n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE (n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i \
                       WHERE i.indexrelid OPERATOR(pg_catalog.=) c.oid AND i.indrelid OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.oid[]))) \
                 OR n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
             UNION SELECT con.conname::pg_catalog.text, n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
               FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) con.connamespace \
              WHERE (n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND con.conrelid OPERATOR(pg_catalog.<>) ALL ($3::pg_catalog.oid[])) \
                 OR n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            &[&schema, &scratch_schema, &oids],
        )
        .await
        .map_err(db("reading the names in use"))?;
    let mut real: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut scratch_names: std::collections::HashSet<String> = std::collections::HashSet::new();
    for row in &rows {
        if row.get::<_, bool>(1) {
            scratch_names.insert(row.get(0));
        } else {
            real.insert(row.get(0));
        }
    }
    let table = &tree[0].name.name;
    let scratch = &tree[0].scratch;
    let added = client
        .query(
            "SELECT con.conname::pg_catalog.text, con.contype::pg_catalog.text, con.contype OPERATOR(pg_catalog.=) ANY ('{p,u,x}') \
               FROM pg_catalog.pg_constraint con \
              WHERE con.conrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) ORDER BY con.oid",
            &[&scratch.to_string()],
        )
        .await
        .map_err(db("reading the shadow's constraints"))?;
    let known = |name: &str| {
        plan.source.constraints.iter().any(|c| c.name == name)
            || source_indexes
                .iter()
                .any(|i| i.relation == 0 && i.name == name)
    };
    for row in added {
        let (name, kind, indexed): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        if known(&name) {
            continue;
        }
        let labels: &[&str] = match kind.as_str() {
            "p" => &["pkey"],
            "u" => &["key"],
            "x" => &["excl"],
            "c" => &["check"],
            "f" => &["fkey"],
            "n" => &["not_null"],
            _ => continue,
        };
        let taken = |c: &str| real.contains(c) || (c != name && scratch_names.contains(c));
        let Some(chosen) = choose_name(table, &name, labels, &taken) else {
            continue;
        };
        if chosen != name {
            let sql = if indexed {
                format!(
                    "ALTER INDEX {} RENAME TO {}",
                    QualifiedName::qualified(scratch_schema, name.clone()),
                    quote_ident(&chosen)
                )
            } else {
                format!(
                    "ALTER TABLE {scratch} RENAME CONSTRAINT {} TO {}",
                    quote_ident(&name),
                    quote_ident(&chosen)
                )
            };
            run(client, "naming what the statement added", &sql).await?;
            scratch_names.remove(&name);
        }
        scratch_names.insert(chosen);
    }
    Ok(())
}

/// Foreign keys the statement added: they would check (and, to the table itself, fail
/// on) every copied row, so they are taken off the scratch table and added after the
/// copy like the source's own — with PostgreSQL's names for them.
async fn added_foreign_keys(
    client: &Client,
    plan: &RunPlan,
    scratch: &QualifiedName,
    carry: &mut super::plan::Carry,
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

/// The indexes the partitions of the scratch table got for the table's indexes:
/// `(partition position, parent index name) → child name`.
async fn read_children(
    client: &Client,
    scratch_schema: &str,
    tree: &[Relation],
) -> Result<ChildNames, CasError> {
    let rows = client
        .query(
            "SELECT t.relname::pg_catalog.text, p.relname::pg_catalog.text, ic.relname::pg_catalog.text \
               FROM pg_catalog.pg_inherits h \
               JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) h.inhrelid \
               JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) h.inhparent \
               JOIN pg_catalog.pg_index i ON i.indexrelid OPERATOR(pg_catalog.=) ic.oid \
               JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.indrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) t.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text",
            &[&scratch_schema],
        )
        .await
        .map_err(db("reading the shadow's partition indexes"))?;
    let mut out = HashMap::new();
    for row in rows {
        let table: String = row.get(0);
        if let Some(position) = tree.iter().position(|r| r.name.name == table) {
            out.insert((position, row.get::<_, String>(1)), row.get::<_, String>(2));
        }
    }
    Ok(out)
}

/// `(name, format_type, attgenerated)` of a table's columns.
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

/// The statement must leave the primary key on the same columns, not deferrable: the
/// copy, the applier and verification go by it.
async fn check_key(
    client: &Client,
    plan: &RunPlan,
    scratch: &QualifiedName,
) -> Result<(), CasError> {
    let row = client
        .query_opt(
            "SELECT ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(con.conkey) WITH ORDINALITY k(attnum, ord) \
                            JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) con.conrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum \
                           ORDER BY k.ord), con.condeferrable \
               FROM pg_catalog.pg_constraint con \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.conrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND con.contype OPERATOR(pg_catalog.=) 'p'",
            &[&scratch.schema.clone().unwrap_or_default(), &scratch.name],
        )
        .await
        .map_err(db("reading the shadow's key"))?;
    let expected: Vec<String> = plan.key.columns().iter().map(|c| c.name.clone()).collect();
    match row {
        Some(row) if row.get::<_, Vec<String>>(0) == expected && !row.get::<_, bool>(1) => Ok(()),
        _ => Err(CasError::Refused(Refusal::new(
            RefusalCause::NoUsableKey,
            format!(
                "the statement removes or changes the primary key of {} ({}); copy-and-swap copies, applies and verifies by it",
                plan.source.table.name,
                expected.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ")
            ),
        ))),
    }
}

/// Every user trigger of the source must be valid on the changed table (a `WHEN`, a
/// column list or the function may use what the statement changed): each is created on
/// the scratch tree and dropped again, in a savepoint.
async fn check_triggers(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
) -> Result<(), CasError> {
    for trigger in plan.source.triggers.iter().filter(|t| !t.clone) {
        let Some(relation) = tree.iter().find(|r| r.name == trigger.on) else {
            continue;
        };
        let sql = retarget_trigger(&trigger.definition, &relation.scratch)?;
        run(client, "checking a trigger", "SAVEPOINT pgshift_trigger").await?;
        let outcome = client.batch_execute(&sql).await;
        run(
            client,
            "checking a trigger",
            "ROLLBACK TO SAVEPOINT pgshift_trigger",
        )
        .await?;
        if let Err(e) = outcome {
            let message = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned());
            return Err(refuse(format!(
                "trigger {} on {} would not survive the statement ({message}); PostgreSQL would refuse the statement too",
                quote_ident(&trigger.name),
                trigger.on
            )));
        }
    }
    Ok(())
}

/// A `USING` expression with every name resolved as the statement's `search_path`
/// resolves it, written with the names qualified (read back through a temporary view
/// over the source aliased `s`), so that the copy sessions evaluate the same thing.
async fn resolve_using(
    client: &Client,
    plan: &RunPlan,
    scratch_schema: &str,
    path: &str,
    expression: &Node,
    n: usize,
) -> Result<String, CasError> {
    let view = QualifiedName::qualified(scratch_schema, format!("using_{n}"));
    // A fixed shape of quoted names, with the expression put in in the syntax tree.
    let template = format!(
        "CREATE VIEW {view} AS SELECT NULL AS v FROM {} s",
        plan.source.table.name
    );
    let bad_template = || CasError::Record(format!("does not parse: {template}"));
    let parsed = pgshift_sql::parse(&template).map_err(|_| bad_template())?;
    let Some(NodeEnum::ViewStmt(mut create)) = parsed.into_iter().next().map(|s| s.node) else {
        return Err(bad_template());
    };
    let Some(NodeEnum::SelectStmt(select)) =
        create.query.as_deref_mut().and_then(|q| q.node.as_mut())
    else {
        return Err(bad_template());
    };
    let Some(NodeEnum::ResTarget(target)) =
        select.target_list.first_mut().and_then(|t| t.node.as_mut())
    else {
        return Err(bad_template());
    };
    target.val = Some(Box::new(expression.clone()));
    let sql = checked(
        deparse(&NodeEnum::ViewStmt(create)).map_err(|e| CasError::Record(e.to_string()))?,
        1,
    )?;
    set_search_path(client, path).await?;
    let created = client.batch_execute(&sql).await;
    set_search_path(client, "pg_catalog, pg_temp").await?;
    created.map_err(db("resolving a USING expression"))?;
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_get_viewdef(pg_catalog.to_regclass($1))",
            &[&view.to_string()],
        )
        .await
        .map_err(db("resolving a USING expression"))?;
    run(
        client,
        "resolving a USING expression",
        &format!("DROP VIEW {view}"),
    )
    .await?;
    let definition: String = row.get(0);
    let bad = || {
        CasError::Record(format!(
            "the USING expression does not read back: {definition}"
        ))
    };
    let statements = pgshift_sql::parse(&definition).map_err(|_| bad())?;
    let Some(NodeEnum::SelectStmt(select)) = statements.first().map(|s| &s.node) else {
        return Err(bad());
    };
    let Some(NodeEnum::ResTarget(target)) =
        select.target_list.first().and_then(|t| t.node.as_ref())
    else {
        return Err(bad());
    };
    target
        .val
        .as_deref()
        .and_then(deparse_expression)
        .ok_or_else(bad)
}

/// A self-referencing foreign key acts on the rows the applier deletes and inserts
/// again; the applier writes the shadow as a replica (no referential actions), which
/// the role must be allowed to.
async fn check_replica_role(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    run(
        client,
        "checking the replication role",
        "SAVEPOINT pgshift_role",
    )
    .await?;
    let outcome = client
        .batch_execute("SET LOCAL session_replication_role = replica")
        .await;
    run(
        client,
        "checking the replication role",
        "ROLLBACK TO SAVEPOINT pgshift_role",
    )
    .await?;
    outcome.map_err(|_| {
        refuse(format!(
            "{} has a foreign key to itself; copy-and-swap applies changes to the shadow with session_replication_role = replica, which this role may not set",
            plan.source.table.name
        ))
    })
}

/// Grants, row security and policies, comments, storage parameters, statistics
/// targets, column options, replica identity and the clustered index of each relation
/// of the source, on its scratch counterpart.
async fn settings(
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
        } in &relation.columns
        {
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

fn policy_statement(
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

/// `GRANT`s reproducing `grants` on `target`.
fn grant_statements(grants: &[SourceGrant], target: &QualifiedName) -> Vec<String> {
    grants
        .iter()
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

/// Reads the scratch tree's indexes after the statement: every index of the table and
/// of a partition's own is planned for after the copy under a temporary name, with the
/// name it takes at the swap and what the swap sets on it, and dropped here — the
/// primary key too (built first, at the start of the indexing phase, under
/// [`RunPlan::shadow_key_name`]: the copy writes an index-free heap).
async fn plan_indexes(
    client: &Client,
    plan: &mut RunPlan,
    tree: &[Relation],
    source_indexes: &[SourceIndexFacts],
    scratch_schema: &str,
    carry: &mut super::plan::Carry,
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

/// The scratch tree's sequences (identity columns, and those the statement added):
/// temporary names now, at the swap the source's sequence's name (a copied identity
/// column) or the name PostgreSQL chose (a new one). A copied identity sequence gets
/// the source's grants and comment.
async fn sequences(
    client: &Client,
    plan: &RunPlan,
    scratch_schema: &str,
    carry: &mut super::plan::Carry,
) -> Result<(), CasError> {
    let names = plan.names();
    let rows = client
        .query(
            "SELECT s.relname::pg_catalog.text, a.attname::pg_catalog.text \
               FROM pg_catalog.pg_class s \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.relnamespace \
               LEFT JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                    AND d.objid OPERATOR(pg_catalog.=) s.oid AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                    AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}') \
               LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND s.relkind OPERATOR(pg_catalog.=) 'S' ORDER BY s.oid",
            &[&scratch_schema],
        )
        .await
        .map_err(db("reading the shadow's sequences"))?;
    let schema = plan.source.table.name.schema.clone();
    for (n, row) in rows.iter().enumerate() {
        let (name, column): (String, Option<String>) = (row.get(0), row.get(1));
        let scratch = QualifiedName::qualified(scratch_schema, name.clone());
        let source = column.as_ref().and_then(|column| {
            plan.source
                .sequences
                .iter()
                .find(|s| s.identity && &s.column == column)
        });
        let final_name = match source {
            Some(source) => {
                let acl = client
                    .query_one(
                        "SELECT ARRAY(SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text END \
                                      || '|' || a.privilege_type || '|' || a.is_grantable::pg_catalog.text \
                                 FROM pg_catalog.aclexplode(c.relacl) a WHERE a.grantee OPERATOR(pg_catalog.<>) c.relowner), \
                                pg_catalog.obj_description(c.oid, 'pg_class') \
                           FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)",
                        &[&source.sequence.to_string()],
                    )
                    .await
                    .map_err(db("reading a sequence's grants"))?;
                for grant in acl.get::<_, Vec<String>>(0) {
                    let mut parts = grant.split('|');
                    let (Some(grantee), Some(privilege), Some(grantable)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        continue;
                    };
                    let grantee = if grantee == "PUBLIC" {
                        grantee.to_owned()
                    } else {
                        quote_ident(grantee)
                    };
                    run(
                        client,
                        "granting on a sequence",
                        &format!(
                            "GRANT {privilege} ON SEQUENCE {scratch} TO {grantee}{}",
                            if grantable == "true" {
                                " WITH GRANT OPTION"
                            } else {
                                ""
                            }
                        ),
                    )
                    .await?;
                }
                if let Some(comment) = acl.get::<_, Option<String>>(1) {
                    run(
                        client,
                        "commenting a sequence",
                        &format!(
                            "COMMENT ON SEQUENCE {scratch} IS {}",
                            quote_literal(&comment)
                        ),
                    )
                    .await?;
                }
                source.sequence.name.clone()
            }
            None => name.clone(),
        };
        let temp = names.shadow_object('q', n + 1);
        run(
            client,
            "naming a shadow sequence",
            &format!("ALTER SEQUENCE {scratch} RENAME TO {}", quote_ident(&temp)),
        )
        .await?;
        carry.renames.push(PlannedRename {
            kind: "sequence".to_owned(),
            temp: QualifiedName {
                schema: schema.clone(),
                name: temp,
            },
            final_name,
        });
    }
    Ok(())
}

/// Publication membership of the table and of each partition, with row filters and
/// column lists (PostgreSQL 15 and later): moved to the new tree at the swap.
async fn publications(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
    kept: &[String],
    carry: &mut super::plan::Carry,
) -> Result<(), CasError> {
    let version: i32 = client
        .query_one(
            "SELECT pg_catalog.current_setting('server_version_num')::pg_catalog.int4",
            &[],
        )
        .await
        .map_err(db("reading the server version"))?
        .get(0);
    let details = if version >= 150000 {
        "pg_catalog.pg_get_expr(r.prqual, r.prrelid), \
         ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(r.prattrs::pg_catalog.int2[]) WITH ORDINALITY k(attnum, ord) \
                JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) r.prrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum ORDER BY k.ord)"
    } else {
        "NULL::pg_catalog.text, '{}'::pg_catalog.text[]"
    };
    let names = plan.names();
    for relation in tree {
        let rows = client
            .query(
                &format!(
                    "SELECT p.pubname::pg_catalog.text, {details} FROM pg_catalog.pg_publication_rel r \
                       JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid \
                      WHERE r.prrelid OPERATOR(pg_catalog.=) $1 ORDER BY 1"
                ),
                &[&relation.oid],
            )
            .await
            .map_err(db("reading publications"))?;
        for row in rows {
            let publication: String = row.get(0);
            let filter: Option<String> = row.get(1);
            let columns: Vec<String> = row.get(2);
            let filtered = filter
                .as_ref()
                .is_none_or(|f| columns_exist(&format!("SELECT 1 WHERE {f}"), kept));
            if !filtered || columns.iter().any(|c| !kept.contains(c)) {
                return Err(refuse(format!(
                    "publication {} names a column of {} that the statement drops (in its column list or row filter); PostgreSQL would refuse the statement too",
                    quote_ident(&publication),
                    relation.name
                )));
            }
            let mut add = format!(
                "ALTER PUBLICATION {} ADD TABLE {}",
                quote_ident(&publication),
                relation.name
            );
            if !columns.is_empty() {
                let columns: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
                add.push_str(&format!(" ({})", columns.join(", ")));
            }
            if let Some(filter) = filter {
                add.push_str(&format!(" WHERE ({filter})"));
            }
            carry.after_swap.push(format!(
                "ALTER PUBLICATION {} DROP TABLE {}",
                quote_ident(&publication),
                names.old(&relation.name)
            ));
            carry.after_swap.push(checked(add, 1)?);
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

/// Whether every column a statement refers to is among `columns`: column references
/// anywhere in its tree (expressions of checks included), index elements, and the
/// key columns of constraints.
fn columns_exist(sql: &str, columns: &[String]) -> bool {
    fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
        if let Some(items) = value.as_array() {
            for item in items {
                if let Some(s) = item.pointer("/node/String/sval").and_then(|s| s.as_str()) {
                    out.push(s.to_owned());
                }
            }
        }
    }
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    match key.as_str() {
                        "ColumnRef" => {
                            if let Some(last) = inner
                                .get("fields")
                                .and_then(|f| f.as_array())
                                .and_then(|f| f.last())
                                .and_then(|f| f.pointer("/node/String/sval"))
                                .and_then(|s| s.as_str())
                            {
                                out.push(last.to_owned());
                            }
                        }
                        "IndexElem" => {
                            if let Some(name) = inner.get("name").and_then(|n| n.as_str()) {
                                if !name.is_empty() {
                                    out.push(name.to_owned());
                                }
                            }
                        }
                        "Constraint" => {
                            if let Some(keys) = inner.get("keys") {
                                strings(keys, out);
                            }
                            if let Some(keys) = inner.get("fk_attrs") {
                                strings(keys, out);
                            }
                        }
                        _ => {}
                    }
                    walk(inner, out);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    walk(item, out);
                }
            }
            _ => {}
        }
    }
    let Ok(statements) = pgshift_sql::parse(sql) else {
        return false;
    };
    let Ok(tree) = serde_json::to_value(&statements[0].node) else {
        return false;
    };
    let mut referenced = Vec::new();
    walk(&tree, &mut referenced);
    referenced.iter().all(|r| columns.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_chosen_as_postgres_chooses_them() {
        assert_eq!(
            make_object_name("booking", Some("code"), "key"),
            "booking_code_key"
        );
        let long = "x".repeat(60);
        let name = make_object_name(&long, Some("during"), "excl");
        assert_eq!(name.len(), 63, "{name}");
        assert!(
            name.ends_with("_during_excl") || name.ends_with("_excl"),
            "{name}"
        );
        let taken = |c: &str| c == "booking_code_key" || c == "booking_code_key1";
        assert_eq!(
            choose_name("booking", "booking_code_key", &["key"], &taken).as_deref(),
            Some("booking_code_key2")
        );
        assert_eq!(
            choose_name("booking", "booking_room_check", &["check"], &|_| false).as_deref(),
            Some("booking_room_check")
        );
        assert_eq!(choose_name("booking", "my_name", &["key"], &|_| true), None);
        assert_eq!(
            choose_name("booking", "booking_pkey", &["pkey"], &|c| c
                == "booking_pkey")
            .as_deref(),
            Some("booking_pkey1")
        );
        assert_eq!(
            constraint_with_storage("UNIQUE (code)", &["fillfactor=70".to_owned()], Some("fast"))
                .expect("parses"),
            "UNIQUE (code) WITH (fillfactor='70') USING INDEX TABLESPACE fast"
        );
    }

    #[test]
    fn columns_are_found_anywhere_in_a_constraint() {
        let kept = ["id".to_owned(), "qty".to_owned()];
        assert!(!columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c CHECK ((length(note) < 100000)) NOT VALID",
            &kept
        ));
        assert!(columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c CHECK ((qty > 0))",
            &kept
        ));
        assert!(!columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c FOREIGN KEY (owner) REFERENCES o(id)",
            &kept
        ));
        assert!(columns_exist(
            "ALTER TABLE t ADD CONSTRAINT c FOREIGN KEY (qty) REFERENCES o(id)",
            &kept
        ));
    }

    #[test]
    fn foreign_keys_to_the_table_itself_are_retargeted_in_the_tree() {
        let shadow = QualifiedName::qualified("public", "_pgshift_7_item");
        let sql = retarget_foreign_key(
            "FOREIGN KEY (parent_id) REFERENCES public.item(id) ON DELETE CASCADE",
            &shadow,
        )
        .expect("retargets");
        assert!(
            sql.starts_with("FOREIGN KEY (parent_id) REFERENCES"),
            "{sql}"
        );
        assert!(sql.contains("_pgshift_7_item"), "{sql}");
        assert!(sql.contains("ON DELETE CASCADE"), "{sql}");
    }

    #[test]
    fn statistics_and_triggers_are_retargeted_in_the_tree() {
        let sql = retarget_statistics(
            "CREATE STATISTICS public.acct_stats (ndistinct) ON region, qty FROM public.acct",
            &QualifiedName::qualified("public", "_pgshift_1_x1"),
            &QualifiedName::qualified("_pgshift_1_scratch", "acct"),
        )
        .expect("retargets");
        assert!(
            sql.contains("_pgshift_1_x1") && sql.contains("_pgshift_1_scratch"),
            "{sql}"
        );
        let sql = retarget_trigger(
            "CREATE TRIGGER t AFTER UPDATE OF qty ON public.acct FOR EACH ROW WHEN ((old.qty <> new.qty)) EXECUTE FUNCTION f()",
            &QualifiedName::qualified("_pgshift_1_scratch", "acct"),
        )
        .expect("retargets");
        assert!(sql.contains("_pgshift_1_scratch"), "{sql}");
    }
}
