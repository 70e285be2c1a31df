//! What a trace records, per statement: plain data, serialized into `lint --trace`'s
//! JSON report.

use pgshift_sql::QualifiedName;
use serde::Serialize;

use crate::lock::LockMode;

/// The whole trace of a set of files.
#[derive(Clone, Debug, Serialize)]
pub struct TraceRun {
    /// The throwaway server's version (`server_version`), e.g. `15.20`.
    pub server_version: String,
    /// Where the clone's schema came from.
    pub schema: SchemaOrigin,
    /// Whether the text of nested statements was recorded (`pg_stat_statements` was
    /// loadable in the clone), and if not, why.
    pub nested_statements: NestedAvailability,
    /// The files, in the order they ran.
    pub files: Vec<FileTrace>,
}

/// Where the clone's schema came from.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SchemaOrigin {
    /// `pg_dump --schema-only` of the live target (its server version).
    Dump {
        /// The target's `server_version_num`.
        target_version_num: u32,
        /// The `pg_dump` that made the dump.
        pg_dump: String,
    },
    /// An empty database: the files are replayed from the first one.
    Replay,
}

/// Whether nested statement texts are recorded.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum NestedAvailability {
    /// Recorded from `pg_stat_statements` with `track = all`.
    Recorded,
    /// Not recorded.
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// One file's statements.
#[derive(Clone, Debug, Serialize)]
pub struct FileTrace {
    /// The path as given.
    pub path: String,
    /// One entry per top-level statement, in order.
    pub statements: Vec<StatementTrace>,
}

/// What happened to one top-level statement.
#[derive(Clone, Debug, Serialize)]
pub struct StatementTrace {
    /// Zero-based index in its file.
    pub index: usize,
    /// Ran, failed, skipped or not run.
    pub outcome: Outcome,
    /// Whether it ran inside a transaction block of its own (locks are read then);
    /// `false` for statements PostgreSQL runs only outside one (`CONCURRENTLY`).
    pub in_transaction: bool,
    /// Every relation lock its transaction held, one entry per relation, read from
    /// `pg_locks` before `COMMIT`; `None` when it ran outside a transaction block.
    pub locks: Option<Vec<TracedLock>>,
    /// Every table it rewrote.
    pub rewrites: Vec<TracedRewrite>,
    /// The DDL it executed, in order (nested commands included).
    pub ddl: Vec<TracedDdl>,
    /// Texts of the statements it ran below the top level (`EXECUTE`, a function's
    /// SQL, the server's own SPI queries), from `pg_stat_statements`: unordered (sorted
    /// by text), with call counts; `None` when not recorded.
    pub nested: Option<Vec<NestedStatement>>,
    /// For a `DO` block run instrumented, a `SELECT` or `CALL`, and any statement that
    /// ran an instrumented function: the statements it executed, in order, as exact
    /// text (static DDL of a body and the strings its `EXECUTE`s ran, in the block and
    /// in the PL/pgSQL functions it called); `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executed: Option<Vec<String>>,
    /// The user functions and procedures its transaction called (nested calls and
    /// trigger functions included), from `pg_stat_xact_user_functions` before
    /// `COMMIT`; `None` when not read (it ran outside a transaction block).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<CalledFunction>>,
}

/// A user function or procedure a statement called on the clone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CalledFunction {
    /// Schema-qualified name.
    pub name: QualifiedName,
    /// Its identity arguments (`tbl regclass`), which tell overloads apart.
    pub arguments: String,
    /// `function`, `procedure`, `trigger` or `event-trigger`.
    pub kind: &'static str,
    /// Its language (`plpgsql`, `sql`, …).
    pub language: String,
    /// Why the statements it executed were not logged, when they were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_logged: Option<String>,
    /// The queries and expressions of its body other than its DDL (a PL/pgSQL
    /// function read by `pgshift_sql::DoBlock`), to tell what its control flow reads.
    #[serde(skip)]
    pub queries: Vec<String>,
}

/// What happened to a statement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Outcome {
    /// It ran and committed on the clone.
    Ran,
    /// The server raised an error; the statement was rolled back and the trace
    /// stopped there.
    Failed {
        /// The server's message.
        message: String,
        /// The SQLSTATE, when the server sent one.
        sqlstate: Option<String>,
    },
    /// Transaction control (`BEGIN`, `COMMIT`, …): every statement is traced in a
    /// transaction of its own, so these are not run.
    Skipped,
    /// An earlier statement failed.
    NotRun,
}

/// The locks one relation was held in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TracedLock {
    /// The relation.
    pub relation: QualifiedName,
    /// `table`, `partitioned-table`, `index`, `partitioned-index`, `toast`,
    /// `sequence`, `view`, `materialized-view`, `foreign-table` or `other`.
    pub kind: &'static str,
    /// The strongest mode held.
    pub mode: LockMode,
    /// Every mode held, weakest first.
    pub modes: Vec<LockMode>,
    /// For an index or TOAST table, the table it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<QualifiedName>,
    /// For a partition or inheritance child, its parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<QualifiedName>,
    /// Whether the relation did not exist before the statement.
    pub created: bool,
    /// Whether it no longer exists after it (dropped, or a TOAST table a rewrite
    /// replaced); it is named as it was before.
    pub gone: bool,
}

/// One table rewrite.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TracedRewrite {
    /// The table (for a partitioned table, each rewritten partition).
    pub table: QualifiedName,
    /// Why, as PostgreSQL said (`column-rewrite`, `default-value`,
    /// `persistence`, `access-method`), or `new-storage` when only the relation's
    /// file node changed (`VACUUM FULL`, `CLUSTER`, `TRUNCATE`, `REFRESH MATERIALIZED
    /// VIEW`: forms no `table_rewrite` event reports).
    pub reasons: Vec<&'static str>,
}

/// One DDL command, as `ddl_command_end` or `sql_drop` reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TracedDdl {
    /// The command tag (`ALTER TABLE`, `CREATE INDEX`).
    pub command_tag: String,
    /// The object type (`table`, `index`, `table column`).
    pub object_type: String,
    /// The object's identity (`public.events`, `public.events.kind`).
    pub object_identity: String,
    /// Whether the object was dropped (`sql_drop`) rather than created or altered.
    pub dropped: bool,
}

/// A statement run below the top level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NestedStatement {
    /// Its text as `pg_stat_statements` keeps it (constants of plannable statements,
    /// and on PostgreSQL 16+ of some utility statements, replaced by `$n`).
    pub text: String,
    /// How many times it ran.
    pub calls: i64,
}

impl StatementTrace {
    /// A statement that did not run.
    pub(crate) fn not_run(index: usize, outcome: Outcome) -> Self {
        StatementTrace {
            index,
            outcome,
            in_transaction: false,
            locks: None,
            rewrites: Vec::new(),
            ddl: Vec::new(),
            nested: None,
            executed: None,
            functions: None,
        }
    }

    /// The strongest mode held on `relation` itself (any schema when the name has
    /// none).
    pub fn mode_on(&self, relation: &QualifiedName) -> Option<LockMode> {
        self.locks
            .as_ref()?
            .iter()
            .filter(|lock| relation.matches(&lock.relation))
            .map(|lock| lock.mode)
            .max()
    }

    /// Whether the statement rewrote any table.
    pub fn rewrote(&self) -> bool {
        !self.rewrites.is_empty()
    }
}
