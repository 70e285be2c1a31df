//! Lock truth measured on SQL we did not write: PostgreSQL's own regression suite
//! (`src/test/regress/sql/*.sql`), run as `pg_regress` runs it, statement by statement.
//!
//! Skipped (passes, saying why) unless `PGSHIFT_PG_REGRESS_DIR` names a
//! `src/test/regress` directory; `scripts/pg-regress-sql MAJOR` fetches one (pinned in
//! `data/lock_truth/regress_sources.json`). The server follows `PGSHIFT_PG_BIN`:
//!
//! ```sh
//! PGSHIFT_PG_REGRESS_DIR=$(scripts/pg-regress-sql 18 | cut -f2) \
//! PGSHIFT_PG_BIN=/var/cache/pgshift/pg/18/bin \
//!   cargo test -p pgshift --test lock_truth_regress -- --nocapture
//! ```
//!
//! The files of `parallel_schedule` run in its order, one at a time, each in a new
//! session (session A) of a database `regression` set up as `pg_regress` sets it up.
//! Each file is read as psql reads it (`lock_truth/psql.rs`): meta-commands are
//! carried out where they matter to the SQL (`\set`, `\unset`, `\getenv`, `\gset`,
//! `\gexec`, `\if`/`\elif`/`\else`/`\endif`, `\c -`, `\q`, `\r`), `COPY … FROM stdin`
//! gets the data lines that follow it, and the others (`\d`, `\pset`, `\echo`, …)
//! are dropped. Each query is parsed with PostgreSQL's grammar (`pgshift_sql::parse`).
//!
//! A query of one statement, sent while A is not inside a transaction of the file's
//! own, whose classification says it may run in a transaction block, is **observed**:
//! `pgshift::plan::plan` reads the live facts first (with A's search path, A's
//! temporary schema included), then A runs `BEGIN; <statement>`, session B reads A's
//! granted relation locks from `pg_locks` (strongest mode per relation, system
//! catalogs and relations the statement created left out) and judges each against the
//! classification exactly as `lock_truth.rs` judges its live path (`lock_truth/judge.rs`,
//! shared), and A commits — or rolls back when the statement failed, as psql's
//! autocommit would. Everything else is executed as psql would execute it, not
//! observed: transaction control, statements inside the file's own transactions,
//! statements the classification says must run outside a block (`VACUUM`,
//! `CONCURRENTLY`, `CREATE DATABASE`), queries of several statements (`\;`), and text
//! the grammar rejects. A statement the server refuses inside a block although the
//! classification allowed it (SQLSTATE 25001, or 2D000 for a procedure that commits)
//! is run again outside one and counted. A statement that fails is expected in
//! regression SQL and only counted. Every statement has a `statement_timeout` (60 s)
//! and a `lock_timeout` (10 s).
//!
//! What is judged: a lock is **understated** when the classification states no lock
//! covering it in at least the observed mode; it **hides a lock that blocks writes**
//! when the observed mode conflicts with ROW EXCLUSIVE (SHARE or stronger) and what is
//! stated on it does not, and **one that blocks reads** when the observed mode is
//! ACCESS EXCLUSIVE (the only mode conflicting with ACCESS SHARE) and the stated one is
//! not. A stated lock is **overstated** when the relation it resolves to was observed
//! weaker or not at all. The test fails only when the harness did not run (too few
//! statements observed); it prints every understated lock and, with
//! `PGSHIFT_WRITE_LOCK_TRUTH=1`, writes `data/lock_truth/regress-pg<major>.md`.
//! `PGSHIFT_PG_REGRESS_FILES=a,b` runs only those files (after `test_setup`).
//!
//! A whole run takes 20–30 minutes on a shared 2-core machine (18: 1608 s for 47874
//! queries, release build), three quarters of it in `plan`'s catalog snapshot, one
//! per observed statement; build it with `--release`.
//!
//! What the regression suite has that this run cannot give it, and so fails there
//! (counted as failed statements, not skipped): C functions from `regress.so`, which
//! is not built (`test_setup`'s, and those of `create_function_c`, `create_type`,
//! `misc`, `triggers`, `lock`, `foreign_data`, `conversion`, … — the statements using
//! them fail), `\copy` and `\lo_import` (dropped: no client files), shell backticks,
//! and the other sessions `pg_regress` runs in parallel (none: files run one after
//! another, which only makes the locks easier to read). `abs_srcdir` and
//! `abs_builddir` are a scratch copy of `data/` the server can read, with a writable
//! `results/`; tablespaces are the in-place ones the suite makes itself.
//! `standard_conforming_strings = off` is not known to the reader's scanner (see
//! `psql.rs`). Files skipped, with why:
//!
//! * `psql`, `psql_pipeline`: they test psql itself (output formats, `\bind`,
//!   pipelines, `\gdesc`…), whose extended-protocol meta-commands this reader does
//!   not run.

#[path = "lock_truth/judge.rs"]
mod judge;
#[path = "lock_truth/oracle.rs"]
#[allow(dead_code)] // `Rel::label` names relations of the corpus schema only.
mod oracle;
#[path = "lock_truth/psql.rs"]
mod psql;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use pgshift::classify::{classify, Classification, Context, TransactionUse, WorkClass};
use pgshift::connect::{connect, ConnectionSpec, Session, SessionBudgets};
use pgshift::lock::LockMode;
use pgshift::plan::{plan, PlanInput};
use pgshift::script::TransactionMode;
use pgshift_embedded::{Cluster, ClusterOptions};
use pgshift_sql::ast::{AlterTableType, DropBehavior, ObjectType};
use pgshift_sql::NodeEnum;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use judge::{err, judge, locks_of, stated, Cover};
use oracle::Oracle;
use psql::{Item, Meta, Reader};

const DIR_ENV: &str = "PGSHIFT_PG_REGRESS_DIR";
const FILES_ENV: &str = "PGSHIFT_PG_REGRESS_FILES";
const WRITE_ENV: &str = "PGSHIFT_WRITE_LOCK_TRUTH";
const DATABASE: &str = "regression";
/// Files not run, with why (module docs).
const SKIPPED: &[(&str, &str)] = &[
    (
        "psql",
        "tests psql itself: output formats, \\bind, pipelines",
    ),
    (
        "psql_pipeline",
        "tests psql's pipelines (\\startpipeline, \\bind)",
    ),
];
/// Fewer observed statements than this means the harness did not really run.
const FLOOR: usize = 5_000;
const STATEMENT_TIMEOUT: &str = "60s";
const LOCK_TIMEOUT: &str = "10s";

/// One understated lock.
#[derive(Clone)]
struct Miss {
    file: String,
    line: usize,
    kind: String,
    sql: String,
    relation: String,
    relkind: char,
    observed: LockMode,
    stated: Option<LockMode>,
    /// The classification calls the statement's work opaque (procedural code: a
    /// function call, `DO`, `CALL`), which `plan` leaves to its trace.
    opaque: bool,
}

impl Miss {
    fn hides_write_block(&self) -> bool {
        self.observed.blocks_writes() && !self.stated.is_some_and(LockMode::blocks_writes)
    }
    fn hides_read_block(&self) -> bool {
        self.observed.blocks_reads() && !self.stated.is_some_and(LockMode::blocks_reads)
    }
}

#[derive(Default)]
struct Totals {
    files: usize,
    queries: usize,
    observed: usize,
    observed_failed: usize,
    locks_judged: usize,
    understated: usize,
    overstated: usize,
    plan_failed: usize,
    observe_failed: usize,
    in_user_transaction: usize,
    outside_only: usize,
    refused_in_block: Vec<String>,
    transaction_control: usize,
    multi_statement: usize,
    unparsed: usize,
    unreadable: usize,
    not_run: usize,
    meta_dropped: BTreeMap<String, usize>,
    reconnects: usize,
    kinds: BTreeMap<String, usize>,
}

/// The server's error text, and whether the connection is gone.
fn failure(e: &tokio_postgres::Error) -> (String, bool) {
    let text = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    (text, e.is_closed())
}

async fn client(conninfo: &str) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .map_err(err)?;
    tokio::spawn(connection);
    Ok(client)
}

/// The rows of a query's last result, as text.
type Rows = Vec<Vec<(String, Option<String>)>>;

/// How a statement is sent.
enum Send {
    /// A simple query.
    Simple,
    /// `COPY … FROM STDIN`, with the data that follows it in the script.
    CopyIn,
    /// `COPY … TO STDOUT`.
    CopyOut,
}

/// Session A, which runs the files.
struct A {
    conninfo: String,
    client: Client,
    pid: i32,
}

impl A {
    async fn connect(conninfo: &str) -> Result<A, String> {
        let client = client(conninfo).await?;
        let pid: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .map_err(err)?
            .get(0);
        Ok(A {
            conninfo: conninfo.to_owned(),
            client,
            pid,
        })
    }

    /// Runs `sql` as `send` says; the rows of its last result.
    async fn run(
        &self,
        sql: &str,
        send: &Send,
        reader: &mut Reader<'_>,
    ) -> Result<Rows, (String, bool)> {
        match send {
            Send::Simple => {
                let messages = self
                    .client
                    .simple_query(sql)
                    .await
                    .map_err(|e| failure(&e))?;
                let mut rows: Rows = Vec::new();
                for message in messages {
                    match message {
                        SimpleQueryMessage::RowDescription(_) => rows.clear(),
                        SimpleQueryMessage::Row(row) => rows.push(
                            row.columns()
                                .iter()
                                .enumerate()
                                .map(|(i, c)| (c.name().to_owned(), row.get(i).map(str::to_owned)))
                                .collect(),
                        ),
                        _ => {}
                    }
                }
                Ok(rows)
            }
            Send::CopyIn => {
                let sink = self.client.copy_in(sql).await.map_err(|e| failure(&e))?;
                // The server accepted the COPY: the data lines are its, not SQL.
                let data = reader.copy_data().into_bytes();
                futures_util::pin_mut!(sink);
                sink.send(Cursor::new(data))
                    .await
                    .map_err(|e| failure(&e))?;
                sink.finish().await.map_err(|e| failure(&e))?;
                Ok(Vec::new())
            }
            Send::CopyOut => {
                let stream = self.client.copy_out(sql).await.map_err(|e| failure(&e))?;
                futures_util::pin_mut!(stream);
                while let Some(chunk) = stream.next().await {
                    chunk.map_err(|e| failure(&e))?;
                }
                Ok(Vec::new())
            }
        }
    }

    /// Whether A is inside a transaction block (of the file's own).
    async fn in_transaction(&self) -> Result<bool, (String, bool)> {
        match self
            .client
            .simple_query("SELECT pg_catalog.now() = pg_catalog.statement_timestamp()")
            .await
        {
            Ok(messages) => Ok(messages
                .iter()
                .any(|m| matches!(m, SimpleQueryMessage::Row(row) if row.get(0) == Some("f")))),
            Err(e) if e.is_closed() => Err(failure(&e)),
            // A failed transaction block refuses every query.
            Err(_) => Ok(true),
        }
    }
}

struct Harness {
    conninfo: String,
    a: A,
    b: Client,
    planner: Session,
    planner_path: Vec<String>,
    vars: HashMap<String, String>,
    env: HashMap<&'static str, String>,
    totals: Totals,
    misses: Vec<Miss>,
    file: String,
    /// The scratch directory standing for `abs_srcdir`, written back as
    /// `:abs_srcdir` in the statements the report quotes.
    scratch: String,
    timings: [Duration; 4],
}

fn budgets() -> SessionBudgets {
    SessionBudgets {
        lock_timeout_ms: 5_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 600_000,
    }
}

/// A `-c search_path=…` value for `options`, when every schema can be written there.
fn search_path_option(path: &[String]) -> Option<String> {
    let simple = path.iter().all(|s| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    });
    simple.then(|| path.join(","))
}

/// Statement kinds for the report: the node, and what distinguishes its forms.
fn kind(node: &NodeEnum) -> String {
    let object = |t: i32| {
        ObjectType::try_from(t)
            .map(|o| o.as_str_name().trim_start_matches("OBJECT_").to_owned())
            .unwrap_or_default()
    };
    match node {
        NodeEnum::AlterTableStmt(s) => {
            let mut subs: Vec<String> = s
                .cmds
                .iter()
                .filter_map(|c| match c.node.as_ref()? {
                    NodeEnum::AlterTableCmd(c) => Some(
                        AlterTableType::try_from(c.subtype)
                            .map(|t| t.as_str_name().trim_start_matches("AT_").to_owned())
                            .unwrap_or_default(),
                    ),
                    _ => None,
                })
                .collect();
            subs.sort();
            subs.dedup();
            format!("ALTER {} {}", object(s.objtype), subs.join("+"))
        }
        NodeEnum::DropStmt(s) => format!(
            "DROP {}{}",
            object(s.remove_type),
            if s.behavior == DropBehavior::DropCascade as i32 {
                " CASCADE"
            } else {
                ""
            }
        ),
        NodeEnum::RenameStmt(s) => format!("RENAME {}", object(s.rename_type)),
        NodeEnum::AlterObjectSchemaStmt(s) => format!("SET SCHEMA {}", object(s.object_type)),
        NodeEnum::AlterOwnerStmt(s) => format!("OWNER TO {}", object(s.object_type)),
        NodeEnum::CommentStmt(s) => format!("COMMENT ON {}", object(s.objtype)),
        NodeEnum::GrantStmt(s) => format!("GRANT {}", object(s.objtype)),
        NodeEnum::CreateStmt(s) => {
            if s.partbound.is_some() {
                "CreateStmt PARTITION OF".to_owned()
            } else if !s.inh_relations.is_empty() {
                "CreateStmt INHERITS".to_owned()
            } else if s.of_typename.is_some() {
                "CreateStmt OF type".to_owned()
            } else {
                "CreateStmt".to_owned()
            }
        }
        NodeEnum::IndexStmt(s) if s.concurrent => "IndexStmt CONCURRENTLY".to_owned(),
        NodeEnum::ReindexStmt(s) => format!("ReindexStmt {:?}", s.kind()),
        NodeEnum::SelectStmt(s) if s.into_clause.is_some() => "SelectStmt INTO".to_owned(),
        NodeEnum::CreateTableAsStmt(s) => format!("CREATE {} AS", object(s.objtype)),
        NodeEnum::ExplainStmt(s) => match s.query.as_ref().and_then(|q| q.node.as_ref()) {
            Some(inner) => format!("EXPLAIN {}", kind(inner)),
            None => "ExplainStmt".to_owned(),
        },
        other => {
            let debug = format!("{other:?}");
            debug.split('(').next().unwrap_or("?").to_owned()
        }
    }
}

/// Whether `node` is `COPY … FROM STDIN` or `COPY … TO STDOUT`.
fn copy_send(node: &NodeEnum) -> Send {
    match node {
        NodeEnum::CopyStmt(c) if c.filename.is_empty() && !c.is_program => {
            if c.is_from {
                Send::CopyIn
            } else {
                Send::CopyOut
            }
        }
        _ => Send::Simple,
    }
}

impl Harness {
    /// A's effective search path (its temporary schema and `pg_catalog` included).
    async fn a_search_path(&self) -> Result<Vec<String>, String> {
        let row = self
            .a
            .client
            .query_one("SELECT pg_catalog.current_schemas(true)::text[]", &[])
            .await
            .map_err(err)?;
        Ok(row.get(0))
    }

    /// The planner session, with A's search path.
    async fn planner_for(&mut self, path: &[String]) -> Result<(), String> {
        if self.planner_path == path {
            return Ok(());
        }
        let conninfo = match search_path_option(path) {
            Some(option) => format!("{} options='-c search_path={option}'", self.conninfo),
            None => self.conninfo.clone(),
        };
        let spec = ConnectionSpec::parse(&conninfo).map_err(|e| e.to_string())?;
        self.planner = match connect(&spec, &budgets()).await {
            Ok(session) => session,
            // A search path the server refuses at connection: the role's own.
            Err(_) => {
                let spec = ConnectionSpec::parse(&self.conninfo).map_err(|e| e.to_string())?;
                connect(&spec, &budgets())
                    .await
                    .map_err(|e| e.to_string())?
            }
        };
        self.planner_path = path.to_vec();
        Ok(())
    }

    /// Session B again, after a statement of the file ended it.
    async fn reconnect_b(&mut self) -> Result<(), String> {
        self.totals.reconnects += 1;
        self.b = client(&self.conninfo).await?;
        self.b
            .batch_execute("SET statement_timeout = '30s'; SET lock_timeout = '2s'")
            .await
            .map_err(err)
    }

    async fn reconnect(&mut self) -> Result<(), String> {
        self.totals.reconnects += 1;
        self.a = A::connect(&self.a.conninfo).await?;
        Ok(())
    }

    /// Runs one file.
    async fn run_file(&mut self, name: &str, text: &str) -> Result<(), String> {
        self.file = name.to_owned();
        self.totals.files += 1;
        self.reconnect().await?;
        self.vars = HashMap::from([
            (
                "SERVER_VERSION_NUM".to_owned(),
                self.planner.server_version_num().to_string(),
            ),
            (
                "VERSION_NUM".to_owned(),
                self.planner.server_version_num().to_string(),
            ),
            ("ENCODING".to_owned(), "UTF8".to_owned()),
            ("HIDE_TABLEAM".to_owned(), "on".to_owned()),
            ("HIDE_TOAST_COMPRESSION".to_owned(), "on".to_owned()),
        ]);
        let mut reader = Reader::new(text);
        // Each `\if` level: whether its branch runs, whether one already ran, and
        // whether the level around it runs.
        let mut conditions: Vec<(bool, bool, bool)> = Vec::new();
        let active = |c: &Vec<(bool, bool, bool)>| c.last().is_none_or(|l| l.0 && l.2);
        while let Some(item) = reader.next() {
            match item {
                Item::Meta(meta) => {
                    let value = |meta: &Meta, vars: &HashMap<String, String>| {
                        meta.args
                            .iter()
                            .filter_map(|w| w.value(vars))
                            .collect::<Vec<_>>()
                            .join(" ")
                    };
                    match meta.name.as_str() {
                        "if" => {
                            let outer = active(&conditions);
                            let yes =
                                outer && psql::truthy(&value(&meta, &self.vars)).unwrap_or(false);
                            conditions.push((yes, yes, outer));
                            continue;
                        }
                        "elif" => {
                            let truth = psql::truthy(&value(&meta, &self.vars)).unwrap_or(false);
                            if let Some(level) = conditions.last_mut() {
                                let yes = !level.1 && level.2 && truth;
                                level.0 = yes;
                                level.1 |= yes;
                            }
                            continue;
                        }
                        "else" => {
                            if let Some(level) = conditions.last_mut() {
                                level.0 = !level.1 && level.2;
                                level.1 = true;
                            }
                            continue;
                        }
                        "endif" => {
                            conditions.pop();
                            continue;
                        }
                        _ if !active(&conditions) => continue,
                        _ => {}
                    }
                    match meta.name.as_str() {
                        "set" => {
                            let mut args = meta.args.iter();
                            if let Some(name) = args.next().and_then(|w| w.value(&self.vars)) {
                                let value: String =
                                    args.filter_map(|w| w.value(&self.vars)).collect();
                                self.vars.insert(name, value);
                            }
                        }
                        "unset" => {
                            if let Some(name) = meta.args.first().and_then(|w| w.value(&self.vars))
                            {
                                self.vars.remove(&name);
                            }
                        }
                        "getenv" => {
                            let mut args = meta.args.iter().filter_map(|w| w.value(&self.vars));
                            if let (Some(var), Some(env)) = (args.next(), args.next()) {
                                match self.env.get(env.as_str()) {
                                    Some(value) => {
                                        self.vars.insert(var, value.clone());
                                    }
                                    None => {
                                        self.vars.remove(&var);
                                    }
                                }
                            }
                        }
                        "c" | "connect" => {
                            let args: Vec<String> = meta
                                .args
                                .iter()
                                .filter_map(|w| w.value(&self.vars))
                                .collect();
                            let same = args.iter().take(2).all(|a| a == "-" || a == DATABASE);
                            if !same {
                                *self
                                    .totals
                                    .meta_dropped
                                    .entry(format!("\\{} (another database or user)", meta.name))
                                    .or_default() += 1;
                            }
                            self.reconnect().await?;
                        }
                        "q" | "quit" => break,
                        other => {
                            *self
                                .totals
                                .meta_dropped
                                .entry(format!("\\{other}"))
                                .or_default() += 1;
                        }
                    }
                }
                Item::Unreadable { text, line } => {
                    if !active(&conditions) {
                        continue;
                    }
                    self.totals.queries += 1;
                    self.totals.unreadable += 1;
                    let sql = psql::interpolate(&text, &self.vars);
                    self.plain(&sql, &Send::Simple, &mut reader, line).await?;
                }
                Item::Query {
                    text,
                    line,
                    sent_by,
                } => {
                    if !active(&conditions) {
                        continue;
                    }
                    let how = sent_by.as_ref().map_or("", |m| m.name.as_str());
                    if matches!(
                        how,
                        "gdesc" | "bind" | "bind_named" | "parse" | "sendpipeline"
                    ) {
                        self.totals.not_run += 1;
                        continue;
                    }
                    let sql = psql::interpolate(&text, &self.vars);
                    let rows = self.statement(&sql, &mut reader, line).await?;
                    match (how, rows) {
                        ("gset", Some(rows)) if rows.len() == 1 => {
                            let prefix = sent_by
                                .as_ref()
                                .and_then(|m| m.args.first())
                                .and_then(|w| w.value(&self.vars))
                                .unwrap_or_default();
                            for (column, value) in &rows[0] {
                                let name = format!("{prefix}{column}");
                                match value {
                                    Some(v) => self.vars.insert(name, v.clone()),
                                    None => self.vars.remove(&name),
                                };
                            }
                        }
                        ("gexec", Some(rows)) => {
                            for row in rows {
                                for (_, cell) in row {
                                    if let Some(cell) = cell {
                                        self.statement(&cell, &mut reader, line).await?;
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Executes without observing; counts a failure. Errors only when A is gone and
    /// cannot be reconnected.
    async fn plain(
        &mut self,
        sql: &str,
        send: &Send,
        reader: &mut Reader<'_>,
        _line: usize,
    ) -> Result<Option<Rows>, String> {
        match self.a.run(sql, send, reader).await {
            Ok(rows) => Ok(Some(rows)),
            Err((_, closed)) => {
                if closed {
                    self.reconnect().await?;
                }
                Ok(None)
            }
        }
    }

    /// One query psql sends: observed when it can be, else executed. Its rows when
    /// it succeeded.
    async fn statement(
        &mut self,
        sql: &str,
        reader: &mut Reader<'_>,
        line: usize,
    ) -> Result<Option<Rows>, String> {
        self.totals.queries += 1;
        let parsed = match pgshift_sql::parse(sql) {
            Ok(parsed) => parsed,
            Err(_) => {
                self.totals.unparsed += 1;
                return self.plain(sql, &Send::Simple, reader, line).await;
            }
        };
        if parsed.len() != 1 {
            self.totals.multi_statement += usize::from(parsed.len() > 1);
            return self.plain(sql, &Send::Simple, reader, line).await;
        }
        let statement = &parsed[0];
        let send = copy_send(&statement.node);
        let offline = classify(
            statement,
            &Context {
                in_transaction: true,
                ..Context::default()
            },
        );
        match offline.transaction {
            TransactionUse::Control => {
                self.totals.transaction_control += 1;
                return self.plain(sql, &send, reader, line).await;
            }
            TransactionUse::OutsideOnly => {
                self.totals.outside_only += 1;
                return self.plain(sql, &send, reader, line).await;
            }
            TransactionUse::Any | TransactionUse::InsideOnly => {}
        }
        match self.a.in_transaction().await {
            Ok(false) => {}
            Ok(true) => {
                self.totals.in_user_transaction += 1;
                return self.plain(sql, &send, reader, line).await;
            }
            Err(_) => {
                self.reconnect().await?;
                return self.plain(sql, &send, reader, line).await;
            }
        }
        self.observe(sql, statement, &send, reader, line).await
    }

    /// Plans, runs in a block, reads and judges the locks, commits.
    async fn observe(
        &mut self,
        sql: &str,
        statement: &pgshift_sql::Statement,
        send: &Send,
        reader: &mut Reader<'_>,
        line: usize,
    ) -> Result<Option<Rows>, String> {
        let t0 = Instant::now();
        let path = match self.a_search_path().await {
            Ok(path) => path,
            Err(_) => {
                self.reconnect().await?;
                return self.plain(sql, send, reader, line).await;
            }
        };
        self.planner_for(&path).await?;
        let live = match plan(
            &self.planner,
            vec![PlanInput {
                path: format!("{}:{line}", self.file),
                statements: vec![statement.clone()],
            }],
            TransactionMode::File,
        )
        .await
        {
            Ok(planned) => {
                let knowledge = pgshift::script::Knowledge {
                    facts: Some(&planned.snapshot),
                    server_version_num: Some(planned.snapshot.server.version_num),
                    created_earlier: None,
                };
                pgshift::script::analyze(vec![statement.clone()], TransactionMode::File, knowledge)
                    .statements
                    .first()
                    .map(|s| s.classification.clone())
            }
            Err(e) => {
                self.totals.plan_failed += 1;
                eprintln!("{}:{line}: plan failed: {e}", self.file);
                if self.planner.client().is_closed() {
                    self.planner_path = vec!["(closed)".to_owned()];
                }
                None
            }
        };
        self.timings[0] += t0.elapsed();
        let t0 = Instant::now();
        let begin = format!(
            "BEGIN; SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT}'; SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"
        );
        if let Err(e) = self.a.client.batch_execute(&begin).await {
            let (_, closed) = failure(&e);
            if closed {
                self.reconnect().await?;
            }
            return self.plain(sql, send, reader, line).await;
        }
        let outcome = self.a.run(sql, send, reader).await;
        self.timings[1] += t0.elapsed();
        let rows = match outcome {
            Ok(rows) => rows,
            Err((error, closed)) => {
                if closed {
                    self.reconnect().await?;
                    self.totals.observed_failed += 1;
                    return Ok(None);
                }
                let _ = self.a.client.batch_execute("ROLLBACK").await;
                if error.ends_with("(25001)") || error.ends_with("(2D000)") {
                    self.totals.refused_in_block.push(format!(
                        "{}:{line}: {} — {error}",
                        self.file,
                        one_line(&sql.replace(&self.scratch, ":abs_srcdir"))
                    ));
                    return self.plain(sql, send, reader, line).await;
                }
                self.totals.observed_failed += 1;
                return Ok(None);
            }
        };
        let t0 = Instant::now();
        self.totals.observed += 1;
        let opaque = live.as_ref().is_some_and(|l| l.work == WorkClass::Opaque);
        let label = format!(
            "{}{}",
            kind(&statement.node),
            if opaque { " (opaque)" } else { "" }
        );
        *self.totals.kinds.entry(label.clone()).or_default() += 1;
        if let Some(live) = &live {
            if let Err(e) = self.judge_locks(sql, &label, live, &path, line).await {
                self.totals.observe_failed += 1;
                eprintln!("{}:{line}: locks not read: {e}", self.file);
                if self.b.is_closed() {
                    self.reconnect_b().await?;
                }
            }
        }
        self.timings[2] += t0.elapsed();
        if let Err(e) = self.a.client.batch_execute("COMMIT").await {
            let (_, closed) = failure(&e);
            if closed {
                self.reconnect().await?;
            }
        }
        Ok(Some(rows))
    }

    async fn judge_locks(
        &mut self,
        sql: &str,
        label: &str,
        live: &Classification,
        path: &[String],
        line: usize,
    ) -> Result<(), String> {
        let observed = locks_of(&self.b, self.a.pid).await?;
        if !observed.keys().any(|oid| *oid >= 16384) {
            return Ok(());
        }
        // B sees the catalog as it was before the statement (A has not committed).
        let mut oracle = Oracle::load(&self.b).await?;
        oracle.search_path = path.to_vec();
        for s in stated(live, &oracle) {
            if observed.get(&s.oid).is_none_or(|seen| *seen < s.mode) {
                self.totals.overstated += 1;
            }
        }
        for (oid, mode) in observed {
            let Some(rel) = oracle.rels.get(&oid).cloned() else {
                continue; // created by the statement itself
            };
            if rel.is_system(oid) {
                continue;
            }
            self.totals.locks_judged += 1;
            if let Cover::Weaker(stated) = judge(&self.b, &mut oracle, live, oid, mode).await? {
                self.totals.understated += 1;
                let miss = Miss {
                    file: self.file.clone(),
                    line,
                    kind: label.to_owned(),
                    opaque: live.work == WorkClass::Opaque,
                    sql: sql.replace(&self.scratch, ":abs_srcdir"),
                    relation: format!("{}.{}", rel.schema, rel.name),
                    relkind: rel.relkind,
                    observed: mode,
                    stated,
                };
                println!(
                    "understated: {}:{} [{}] {} | {} ({}): observed {}, stated {}",
                    miss.file,
                    miss.line,
                    miss.kind,
                    one_line(&miss.sql),
                    miss.relation,
                    miss.relkind,
                    miss.observed,
                    miss.stated.map_or("nothing".to_owned(), |s| s.to_string())
                );
                self.misses.push(miss);
            }
        }
        Ok(())
    }
}

fn one_line(sql: &str) -> String {
    let flat = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 160 {
        let cut: String = flat.chars().take(157).collect();
        format!("{cut}...")
    } else {
        flat
    }
}

/// The files of `parallel_schedule`, in order.
fn schedule(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("parallel_schedule"))
        .unwrap_or_else(|e| panic!("{}/parallel_schedule: {e}", dir.display()));
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("test:")
                .or_else(|| l.strip_prefix("ignore:"))
        })
        .flat_map(|names| names.split_whitespace().map(str::to_owned))
        .collect::<Vec<_>>()
        .into_iter()
        .fold(Vec::new(), |mut out, name| {
            if !out.contains(&name) {
                out.push(name);
            }
            out
        })
}

/// A directory the server (the `postgres` OS user, when root) may read and write:
/// `data/` of the regression directory, `results/`, and nothing else.
fn scratch(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = std::env::temp_dir().join(format!("pgshift-regress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("data")).expect("scratch directory");
    std::fs::create_dir_all(root.join("results")).expect("scratch results");
    if let Ok(entries) = std::fs::read_dir(dir.join("data")) {
        for entry in entries.flatten() {
            let _ = std::fs::copy(entry.path(), root.join("data").join(entry.file_name()));
        }
    }
    for path in [root.clone(), root.join("data"), root.join("results")] {
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777));
    }
    root
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_sql_locks_are_stated() {
    let Some(dir) = std::env::var_os(DIR_ENV).map(PathBuf::from) else {
        eprintln!(
            "lock_truth_regress: skipped: {DIR_ENV} is not set (PGSHIFT_PG_REGRESS_DIR=$(scripts/pg-regress-sql 18 | cut -f2))"
        );
        return;
    };
    let started = Instant::now();
    let only: Vec<String> = std::env::var(FILES_ENV)
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect())
        .unwrap_or_default();
    let cluster = Cluster::start(
        &ClusterOptions::new()
            .setting("autovacuum", "off")
            .setting("max_connections", "50"),
    )
    .expect("a PostgreSQL cluster");
    let version = cluster.version();
    let major = version.major;
    let admin = client(&cluster.connection_string("postgres"))
        .await
        .expect("admin session");
    // The database as pg_regress makes it (its --temp-instance defaults, PGTZ and
    // PGDATESTYLE as database settings), plus the budgets.
    for sql in [
        format!("CREATE DATABASE {DATABASE} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"),
        format!(
            "ALTER DATABASE {DATABASE} SET lc_messages TO 'C'; \
             ALTER DATABASE {DATABASE} SET lc_monetary TO 'C'; \
             ALTER DATABASE {DATABASE} SET lc_numeric TO 'C'; \
             ALTER DATABASE {DATABASE} SET lc_time TO 'C'; \
             ALTER DATABASE {DATABASE} SET bytea_output TO 'hex'; \
             ALTER DATABASE {DATABASE} SET timezone_abbreviations TO 'Default'; \
             ALTER DATABASE {DATABASE} SET timezone TO 'PST8PDT'; \
             ALTER DATABASE {DATABASE} SET datestyle TO 'Postgres, MDY'; \
             ALTER DATABASE {DATABASE} SET intervalstyle TO 'postgres_verbose'; \
             ALTER DATABASE {DATABASE} SET statement_timeout TO '{STATEMENT_TIMEOUT}'; \
             ALTER DATABASE {DATABASE} SET lock_timeout TO '{LOCK_TIMEOUT}'"
        ),
    ] {
        admin.batch_execute(&sql).await.expect("regression database");
    }
    let conninfo = cluster.connection_string(DATABASE);
    let b = client(&conninfo).await.expect("session B");
    let planner = connect(&ConnectionSpec::parse(&conninfo).expect("spec"), &budgets())
        .await
        .expect("pgshift session");
    let scratch = scratch(&dir);
    let scratch_text = scratch.display().to_string();
    let libdir = cluster
        .install()
        .lib_dir()
        .map_or_else(|| "/nonexistent".to_owned(), |p| p.display().to_string());
    let mut h = Harness {
        a: A::connect(&conninfo).await.expect("session A"),
        conninfo,
        b,
        planner,
        planner_path: Vec::new(),
        vars: HashMap::new(),
        env: HashMap::from([
            ("PG_ABS_SRCDIR", scratch_text.clone()),
            ("PG_ABS_BUILDDIR", scratch_text.clone()),
            ("PG_LIBDIR", libdir),
            ("PG_DLSUFFIX", ".so".to_owned()),
        ]),
        totals: Totals::default(),
        misses: Vec::new(),
        file: String::new(),
        scratch: scratch_text,
        timings: [Duration::ZERO; 4],
    };
    h.reconnect_b().await.expect("session B");
    let mut per_file: Vec<(String, Duration)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for name in schedule(&dir) {
        if let Some((_, why)) = SKIPPED.iter().find(|(n, _)| *n == name) {
            skipped.push(format!("{name}: {why}"));
            continue;
        }
        if !only.is_empty() && name != "test_setup" && !only.contains(&name) {
            continue;
        }
        let path = dir.join("sql").join(format!("{name}.sql"));
        let Ok(bytes) = std::fs::read(&path) else {
            skipped.push(format!("{name}: no sql/{name}.sql"));
            continue;
        };
        let text = String::from_utf8_lossy(&bytes).replace('\0', "");
        let t0 = Instant::now();
        h.run_file(&name, &text)
            .await
            .unwrap_or_else(|e| panic!("{name}: the harness lost its sessions: {e}"));
        per_file.push((name, t0.elapsed()));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let elapsed = started.elapsed();
    let source = dir
        .components()
        .rev()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .find(|c| c.starts_with("pg-regress-") || c.starts_with("postgresql-"))
        .unwrap_or_else(|| dir.display().to_string());
    let report = render(&h, major, &version.to_string(), &source, &skipped, elapsed);
    println!("{report}");
    per_file.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
    eprintln!(
        "slowest files: {}",
        per_file
            .iter()
            .take(8)
            .map(|(n, d)| format!("{n} {d:.1?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    eprintln!(
        "plan, statement, judging: {:.1?}; total {elapsed:.1?}",
        &h.timings[..3]
    );
    if std::env::var(WRITE_ENV).is_ok_and(|v| v == "1") && only.is_empty() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/lock_truth/regress-pg{major}.md"));
        std::fs::write(&path, &report).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let floor = if only.is_empty() { FLOOR } else { 1 };
    assert!(
        h.totals.observed >= floor,
        "only {} statements observed (fewer than {floor}): the harness did not run the suite",
        h.totals.observed
    );
}

/// A row of the table by statement kind.
struct KindRow<'a> {
    locks: usize,
    writes: usize,
    reads: usize,
    /// Statements by file and line.
    statements: BTreeSet<(&'a str, usize)>,
    example: &'a Miss,
}

/// A family of understated locks: statement kind, relkind of the locked relation,
/// observed mode, stated mode.
type FamilyKey = (String, char, LockMode, Option<LockMode>);

fn render(
    h: &Harness,
    major: u32,
    version: &str,
    source: &str,
    skipped: &[String],
    elapsed: Duration,
) -> String {
    let t = &h.totals;
    let mut out = String::new();
    let writes = h.misses.iter().filter(|m| m.hides_write_block()).count();
    let reads = h.misses.iter().filter(|m| m.hides_read_block()).count();
    let _ = writeln!(
        out,
        "# Lock truth on PostgreSQL's regression SQL, {version}\n"
    );
    let _ = writeln!(out, "Server {version}; SQL from `{source}`.\n");
    let _ = writeln!(
        out,
        "Generated by `crates/pgshift/tests/lock_truth_regress.rs` with `{WRITE_ENV}=1` \
         (PostgreSQL {major}; the SQL of `src/test/regress` of the same major, \
         `scripts/pg-regress-sql {major}`). Each statement that may run in a transaction \
         block ran as `BEGIN; <statement>` while another session read `pg_locks`; every \
         relation lock observed (strongest mode per relation; system catalogs and \
         relations the statement created left out) was compared with what \
         `pgshift::plan` states with live facts. A lock is *understated* when nothing \
         stated covers it in its mode; it *hides a write block* when the observed mode \
         conflicts with ROW EXCLUSIVE (SHARE or stronger) and the stated one does not, \
         a *read block* when the observed mode is ACCESS EXCLUSIVE and the stated one is \
         not. *Overstated*: a stated lock on a relation observed weaker or not at all.\n"
    );
    let _ = writeln!(out, "| figure | count |\n|---|---|");
    for (label, n) in [
        ("files run", t.files),
        ("queries sent", t.queries),
        ("statements observed (ran in a block)", t.observed),
        ("relation locks judged", t.locks_judged),
        ("**understated locks (live)**", t.understated),
        ("of which hide a lock blocking writes", writes),
        ("of which hide a lock blocking reads", reads),
        (
            "of which in statements of opaque work (procedural code, left to the trace)",
            h.misses.iter().filter(|m| m.opaque).count(),
        ),
        ("overstated locks", t.overstated),
        (
            "observed statements the server refused (rolled back)",
            t.observed_failed,
        ),
        (
            "refused in a block although classified as allowed (run outside)",
            t.refused_in_block.len(),
        ),
        (
            "not observed: inside the file's own transactions",
            t.in_user_transaction,
        ),
        ("not observed: must run outside a block", t.outside_only),
        ("not observed: transaction control", t.transaction_control),
        (
            "not observed: several statements in one query (`\\;`)",
            t.multi_statement,
        ),
        ("not observed: the grammar rejects it", t.unparsed),
        ("not observed: the scanner cannot read it", t.unreadable),
        (
            "not run: `\\gdesc`, `\\bind`, `\\parse`, `\\sendpipeline`",
            t.not_run,
        ),
        ("plan failed", t.plan_failed),
        ("locks not read (B timed out)", t.observe_failed),
    ] {
        let _ = writeln!(out, "| {label} | {n} |");
    }
    let _ = writeln!(out, "\nRun time: {:.0} s.\n", elapsed.as_secs_f64());
    // By statement kind.
    let mut kinds: BTreeMap<&str, KindRow> = BTreeMap::new();
    for m in &h.misses {
        let e = kinds.entry(m.kind.as_str()).or_insert(KindRow {
            locks: 0,
            writes: 0,
            reads: 0,
            statements: BTreeSet::new(),
            example: m,
        });
        e.locks += 1;
        e.writes += usize::from(m.hides_write_block());
        e.reads += usize::from(m.hides_read_block());
        e.statements.insert((m.file.as_str(), m.line));
    }
    let _ = writeln!(out, "## Understated locks by statement kind\n");
    let _ = writeln!(
        out,
        "| statement kind | statements observed | understated locks | statements | hide a write block | hide a read block | example (file:line) | relation (relkind) | observed | stated |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    let mut rows: Vec<_> = kinds.into_iter().collect();
    rows.sort_by(|x, y| y.1.locks.cmp(&x.1.locks).then(x.0.cmp(y.0)));
    for (kind, row) in rows {
        let ex = row.example;
        let _ = writeln!(
            out,
            "| {kind} | {} | {} | {} | {} | {} | `{}` ({}:{}) | {} ({}) | {} | {} |",
            t.kinds.get(kind).copied().unwrap_or(0),
            row.locks,
            row.statements.len(),
            row.writes,
            row.reads,
            one_line(&ex.sql).replace('|', "\\|"),
            ex.file,
            ex.line,
            ex.relation,
            ex.relkind,
            ex.observed,
            ex.stated.map_or("nothing".to_owned(), |s| s.to_string())
        );
    }
    // Families: kind, relkind, observed, stated.
    let mut families: BTreeMap<FamilyKey, (usize, &Miss)> = BTreeMap::new();
    for m in &h.misses {
        families
            .entry((m.kind.clone(), m.relkind, m.observed, m.stated))
            .or_insert((0, m))
            .0 += 1;
    }
    let _ = writeln!(
        out,
        "\n## Understated families (kind, relkind of the locked relation, observed, stated)\n"
    );
    let _ = writeln!(
        out,
        "| statement kind | relkind | observed | stated | locks | example (file:line) | relation |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for ((kind, relkind, observed, stated), (n, ex)) in &families {
        let _ = writeln!(
            out,
            "| {kind} | {relkind} | {observed} | {} | {n} | `{}` ({}:{}) | {} |",
            stated.map_or("nothing".to_owned(), |s| s.to_string()),
            one_line(&ex.sql).replace('|', "\\|"),
            ex.file,
            ex.line,
            ex.relation
        );
    }
    if !t.refused_in_block.is_empty() {
        let _ = writeln!(
            out,
            "\n## Refused inside a transaction block although classified as allowed there\n"
        );
        for r in &t.refused_in_block {
            let _ = writeln!(out, "- `{}`", r.replace('`', "'"));
        }
    }
    let _ = writeln!(out, "\n## Skipped files\n");
    for s in skipped {
        let _ = writeln!(out, "- {s}");
    }
    let mut dropped: Vec<_> = t.meta_dropped.iter().collect();
    dropped.sort_by(|x, y| y.1.cmp(x.1));
    let _ = writeln!(
        out,
        "\nMeta-commands dropped: {}",
        dropped
            .iter()
            .map(|(m, n)| format!("`{m}` × {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}
