//! Offline (and fact-aware) classification of one statement: what it does, which locks
//! PostgreSQL takes for it, how heavy its work is, and how pgshift would run it.
//!
//! The classifier is pure: no I/O, no connection. Given live facts
//! ([`CatalogSnapshot`]) it refines its answer (a type change that is binary-coercible
//! for the actual column type, a table that is partitioned, a table that is missing);
//! without them it assumes the worst case a live table could present and says so in
//! its reasons.
//!
//! **Architecture invariant:** every lock mode stated here is checked against a live
//! server by `tests/lock_modes.rs`, which holds each statement open in one session and
//! reads `pg_locks` from another.

mod alter_table;
pub mod builtins;
mod coercion;
pub(crate) mod dml;
mod expr;
mod families;
mod function_bodies;
mod index;
mod misc;
pub(crate) mod names;
mod related;
mod related_families;
mod session;
pub(crate) mod steps;
mod table;
mod trigger;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::catalog::{CatalogSnapshot, Lookup, RelationFacts};
use crate::lock::{LockMode, ObjectRef, Role};
use crate::refusal::{Refusal, RefusalCause};
use crate::route::Route;
use pgshift_sql::{NodeEnum, QualifiedName, Statement};

pub use alter_table::HAS_DEFAULT_PARTITION;
pub(crate) use alter_table::{type_name_parts, unnamed_constraint_name};
pub use coercion::is_binary_coercible;
pub(crate) use coercion::typmod_for;
pub use dml::WHOLE_TABLE;
pub use names::constraint_name_for;
pub(crate) use names::{name_parts, strings as strings_of};

/// How heavy a statement's work is, from lightest to heaviest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkClass {
    /// No work on any table (session settings, transaction control).
    None,
    /// Reads rows (a query); takes only weak locks.
    Read,
    /// Changes the catalog only; time does not grow with the table.
    CatalogOnly,
    /// Builds or validates while reads and writes continue (`CONCURRENTLY`,
    /// `VALIDATE CONSTRAINT`); time grows with the table but writers are not blocked.
    ConcurrentBuild,
    /// Inserts, updates or deletes rows.
    DataChange,
    /// Reads the whole table under a lock that blocks writers (or everyone).
    ScanUnderLock,
    /// Rewrites the whole table (and rebuilds its indexes) under ACCESS EXCLUSIVE.
    Rewrite,
    /// Procedural code whose work cannot be known before it runs.
    Opaque,
}

impl WorkClass {
    /// Whether the work's duration grows with the table while a strong lock is held.
    pub fn grows_under_lock(self) -> bool {
        matches!(self, WorkClass::ScanUnderLock | WorkClass::Rewrite)
    }
}

/// Where a statement may run relative to transaction blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionUse {
    /// Inside or outside a transaction block.
    Any,
    /// Only outside a transaction block (`CONCURRENTLY`, `VACUUM`).
    OutsideOnly,
    /// Only inside a transaction block (`LOCK TABLE`, `SET LOCAL` to any effect).
    InsideOnly,
    /// The statement is transaction control itself.
    Control,
}

/// What kind of relation a lock is on, as far as the statement says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectKind {
    /// A table (ordinary or partitioned).
    Table,
    /// An index.
    Index,
    /// A view or materialized view.
    View,
    /// A sequence.
    Sequence,
    /// A composite type's relation.
    Type,
}

/// One lock PostgreSQL takes for the statement, on a relation it names or on a
/// related relation the facts name.
///
/// A lock on a table also covers its indexes, its TOAST table and the sequences and
/// composite types its columns use: PostgreSQL locks those in at most `mode`
/// (`index_mode` when set), and only through the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LockTaken {
    /// The relation, as written (or as resolved, with facts).
    pub relation: QualifiedName,
    /// What the relation is.
    pub object: ObjectKind,
    /// The strongest mode taken on it.
    pub mode: LockMode,
    /// Whether the lock is also taken on every partition (or inheritance child, or
    /// each partition's index for a partitioned index).
    pub recurses: bool,
    /// The mode taken on each partition, when it differs from `mode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_mode: Option<LockMode>,
    /// The mode taken on its indexes (and its TOAST table's index), when stronger than
    /// `mode` (`REINDEX TABLE`: SHARE on the table, ACCESS EXCLUSIVE on each index).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_mode: Option<LockMode>,
    /// Why it is locked when the statement does not name it: how it relates to an
    /// object the statement names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related_to: Option<RelatedTo>,
}

/// How a locked relation relates to an object the statement names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RelatedTo {
    /// The role.
    pub role: Role,
    /// The object the statement names.
    pub of: ObjectRef,
}

/// A lock on relations the statement does not name and the facts cannot list (offline,
/// or genuinely open-ended): described by their role. An upper bound: PostgreSQL takes
/// at most `mode` on each of them (there may be none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelatedLock {
    /// Which relations: the role and the object they relate to.
    #[serde(flatten)]
    pub related_to: RelatedTo,
    /// The same in words (`the default partition of ledger`).
    pub description: String,
    /// What the relations are.
    pub object: ObjectKind,
    /// The strongest mode taken on each.
    pub mode: LockMode,
    /// Whether each one's partitions (or inheritance children) are locked too.
    pub recurses: bool,
}

macro_rules! operation_kinds {
    ($( $variant:ident, )*) => {
        /// The closed vocabulary of operations a statement can contain.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "kebab-case")]
        #[allow(missing_docs)]
        pub enum OperationKind {
            $( $variant, )*
        }

        impl OperationKind {
            /// Every kind, in declaration order: what `pgshift capabilities` checks its
            /// form table against, so a new kind without a form fails a test.
            pub const ALL: &'static [OperationKind] = &[ $( OperationKind::$variant, )* ];
        }
    };
}

operation_kinds! {
    AddColumn,
    DropColumn,
    SetDefault,
    DropDefault,
    SetNotNull,
    DropNotNull,
    AlterColumnType,
    AddIdentity,
    SetIdentity,
    DropIdentity,
    SetExpression,
    DropExpression,
    SetStatistics,
    SetColumnOptions,
    SetStorage,
    SetCompression,
    AddCheck,
    AddForeignKey,
    AddUnique,
    AddPrimaryKey,
    AddExclusion,
    AddNotNullConstraint,
    AddConstraintUsingIndex,
    AlterConstraint,
    ValidateConstraint,
    DropConstraint,
    RenameTable,
    RenameColumn,
    RenameConstraint,
    RenameIndex,
    RenameTrigger,
    SetSchema,
    SetTablespace,
    SetAccessMethod,
    SetLogged,
    SetUnlogged,
    SetStorageParameters,
    ResetStorageParameters,
    EnableTrigger,
    EnableAlwaysTrigger,
    EnableReplicaTrigger,
    DisableTrigger,
    EnableRule,
    DisableRule,
    AttachPartition,
    DetachPartition,
    DetachPartitionConcurrently,
    DetachPartitionFinalize,
    ReplicaIdentity,
    EnableRowSecurity,
    DisableRowSecurity,
    ForceRowSecurity,
    NoForceRowSecurity,
    ChangeOwner,
    ClusterOn,
    SetWithoutCluster,
    Inherit,
    NoInherit,
    OfType,
    NotOfType,
    CreateIndex,
    CreateIndexConcurrently,
    DropIndex,
    DropIndexConcurrently,
    Reindex,
    ReindexConcurrently,
    AlterIndex,
    AttachIndexPartition,
    CreateTrigger,
    CreateConstraintTrigger,
    ReplaceTrigger,
    DropTrigger,
    CreateFunction,
    DropFunction,
    CreateTable,
    CreatePartition,
    CreateTableAs,
    DropTable,
    Truncate,
    VacuumFull,
    Vacuum,
    Analyze,
    Cluster,
    LockTable,
    Insert,
    Update,
    Delete,
    Merge,
    Select,
    Copy,
    SetSetting,
    ResetSetting,
    Begin,
    Commit,
    Rollback,
    Savepoint,
    ReleaseSavepoint,
    RollbackToSavepoint,
    PrepareTransaction,
    CommitPrepared,
    RollbackPrepared,
    Do,
    Call,
    Comment,
    Grant,
    Revoke,
    CreateView,
    DropView,
    CreateMaterializedView,
    RefreshMaterializedView,
    RefreshMaterializedViewConcurrently,
    CreatePolicy,
    AlterPolicy,
    DropPolicy,
    CreateSequence,
    AlterSequence,
    DropSequence,
    CreateStatistics,
    CreatePublication,
    AlterPublication,
    CreateSchema,
    CreateType,
    CreateExtension,
    OtherCatalogChange,
    Unclassified,
}

impl OperationKind {
    /// Whether the operation creates the relation it names (a table, partition,
    /// sequence, view).
    pub fn creates_relation(self) -> bool {
        matches!(
            self,
            OperationKind::CreateTable
                | OperationKind::CreatePartition
                | OperationKind::CreateTableAs
                | OperationKind::CreateMaterializedView
                | OperationKind::CreateSequence
                | OperationKind::CreateView
        )
    }
}

/// One operation of a statement (an `ALTER TABLE` has one per subcommand).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// What it is.
    pub kind: OperationKind,
    /// The table it acts on, when there is one.
    pub table: Option<QualifiedName>,
    /// The column, constraint, index or trigger it names, when there is one.
    pub object: Option<String>,
    /// How heavy it is.
    pub work: WorkClass,
    /// Whether it destroys data or objects that cannot be recovered by running
    /// another migration (a dropped column, a truncated table).
    pub destructive: bool,
    /// A short detail for people (`int4 -> int8`).
    pub detail: Option<String>,
}

/// The effect a statement has on the session or transaction around it, for judging a
/// file or transaction block as a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "effect", rename_all = "kebab-case")]
pub enum Effect {
    /// Opens a transaction block.
    Begin,
    /// Ends a transaction block, keeping its work.
    Commit,
    /// Ends a transaction block, discarding its work.
    Rollback,
    /// Sets `lock_timeout` (0 means no timeout).
    SetLockTimeout {
        /// The timeout in milliseconds, when it could be read.
        millis: Option<u64>,
        /// `SET LOCAL` (ends with the transaction).
        local: bool,
    },
    /// Sets `statement_timeout` (0 means no timeout).
    SetStatementTimeout {
        /// The timeout in milliseconds, when it could be read.
        millis: Option<u64>,
        /// `SET LOCAL`.
        local: bool,
    },
    /// Sets `session_replication_role`.
    SetReplicationRole {
        /// The new role (`origin`, `replica`, `local`).
        role: String,
        /// `SET LOCAL`.
        local: bool,
    },
    /// `RESET ALL` (or `DISCARD ALL`).
    ResetAll,
    /// Procedural code that runs as written because its trace on a clone says so
    /// (`crate::procedural`).
    RunsProcedural {
        /// Whether the operator named it with `--allow-procedural` (the outcome is then
        /// reported as accepted, exit 3).
        accepted: bool,
    },
    /// Procedural code that runs first read-only on live, as its guard's copy
    /// (PC-5, `crate::procedural`).
    RunsGuarded {
        /// The copy and its marker.
        guard: crate::procedural::Guard,
    },
    /// Creates a relation that nobody else can be using yet.
    Creates {
        /// The new relation.
        relation: QualifiedName,
    },
    /// Defines (or replaces) a function.
    DefinesFunction {
        /// Function name.
        name: QualifiedName,
        /// Whether it returns `trigger`.
        returns_trigger: bool,
        /// Whether its body raises an exception (a sign it guards an invariant).
        raises: bool,
        /// Whether this replaced an existing definition (`OR REPLACE`).
        replaces: bool,
    },
    /// Creates a trigger.
    CreatesTrigger {
        /// Table.
        table: QualifiedName,
        /// Trigger name.
        name: String,
        /// Function called.
        function: QualifiedName,
        /// `CREATE CONSTRAINT TRIGGER`.
        is_constraint: bool,
        /// A `BEFORE … FOR EACH ROW` trigger (can reject or rewrite rows).
        before_row: bool,
    },
    /// Changes a trigger's enable state.
    SetsTriggerState {
        /// Table.
        table: QualifiedName,
        /// Trigger name (`None`: all triggers).
        name: Option<String>,
        /// The new state.
        state: crate::catalog::TriggerEnabled,
    },
}

/// Everything the classifier says about one statement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The statement's kind in one word (`alter-table`, `create-index`).
    pub statement: &'static str,
    /// Its operations.
    pub operations: Vec<Operation>,
    /// The locks it takes, strongest mode per relation: the relations it names first,
    /// then the related relations the facts name.
    pub locks: Vec<LockTaken>,
    /// The locks it takes on related relations the facts cannot name, by role.
    pub related_locks: Vec<RelatedLock>,
    /// The heaviest work among its operations.
    pub work: WorkClass,
    /// Where it may run relative to transaction blocks.
    pub transaction: TransactionUse,
    /// Whether any operation is destructive.
    pub destructive: bool,
    /// How pgshift would run it (flattened: `route`, then `steps` or `refusal`).
    #[serde(flatten)]
    pub route: Route,
    /// Why the route and work are what they are (assumptions included).
    pub reasons: Vec<String>,
    /// Effects on the surrounding session or transaction.
    pub effects: Vec<Effect>,
}

impl Classification {
    /// The strongest lock the statement takes, on any relation it or the facts name
    /// (the first such, so a relation the statement names before a related one).
    pub fn strongest_lock(&self) -> Option<&LockTaken> {
        self.locks.iter().rev().max_by_key(|lock| lock.mode)
    }

    /// The strongest mode the statement takes on any relation, related relations
    /// described by role included.
    pub fn strongest_mode(&self) -> Option<LockMode> {
        self.locks
            .iter()
            .map(|lock| lock.mode.max(lock.index_mode.unwrap_or(lock.mode)))
            .chain(self.related_locks.iter().map(|lock| lock.mode))
            .max()
    }

    /// The columns this statement adds, as (table, column): what later statements of
    /// the same input may use although the live catalog has no such column yet.
    pub fn added_columns(&self) -> impl Iterator<Item = (QualifiedName, String)> + '_ {
        self.operations
            .iter()
            .filter(|op| op.kind == OperationKind::AddColumn)
            .filter_map(|op| Some((op.table.clone()?, op.object.clone()?)))
    }

    /// The relations this statement creates.
    pub fn created_relations(&self) -> impl Iterator<Item = &QualifiedName> {
        self.effects.iter().filter_map(|effect| match effect {
            Effect::Creates { relation } => Some(relation),
            _ => None,
        })
    }
}

/// What the classifier may know beyond the statement itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context<'a> {
    /// Facts about the relations: live ones when planning against a server, or the
    /// ones declared by a schema file when linting.
    pub facts: Option<&'a CatalogSnapshot>,
    /// The target server's `server_version_num`, when known.
    pub server_version_num: Option<i32>,
    /// Relations created earlier in the same input: nobody else can be using them, so
    /// blocking work on them is harmless.
    pub created_earlier: Option<&'a BTreeSet<QualifiedName>>,
    /// Whether the statement runs inside a transaction block (explicit or a runner's).
    pub in_transaction: bool,
    /// Columns earlier statements of the same input add to pre-existing tables (table,
    /// column): absent from the live facts, yet there when this statement runs.
    pub added_columns: Option<&'a BTreeSet<(QualifiedName, String)>>,
}

impl Context<'_> {
    /// The server's `server_version_num`, when known.
    pub fn server_version_num(&self) -> Option<i32> {
        self.server_version_num
    }

    /// What the catalog says about a name.
    pub fn lookup(&self, name: &QualifiedName) -> Lookup<'_> {
        self.facts
            .map_or(Lookup::Unknown, |facts| facts.lookup(name))
    }

    /// The facts of a relation, when known and present.
    pub fn relation(&self, name: &QualifiedName) -> Option<&RelationFacts> {
        match self.lookup(name) {
            Lookup::Found(facts) => Some(facts),
            _ => None,
        }
    }

    /// Whether an earlier statement of the same input adds `column` to `table`.
    pub fn column_added_earlier(&self, table: &QualifiedName, column: &str) -> bool {
        self.added_columns
            .is_some_and(|added| added.iter().any(|(t, c)| c == column && t.matches(table)))
    }

    /// Whether the relation was created earlier in the same input.
    pub fn is_new(&self, name: &QualifiedName) -> bool {
        self.created_earlier
            .is_some_and(|created| created.iter().any(|c| c.matches(name)))
    }
}

/// Classifies one parsed statement.
pub fn classify(statement: &Statement, context: &Context<'_>) -> Classification {
    let mut builder = Builder::new("unclassified");
    match &statement.node {
        NodeEnum::AlterTableStmt(stmt) => alter_table::classify(stmt, context, &mut builder),
        NodeEnum::IndexStmt(stmt) => index::classify_create(stmt, context, &mut builder),
        NodeEnum::ReindexStmt(stmt) => index::classify_reindex(stmt, context, &mut builder),
        NodeEnum::CreateTrigStmt(stmt) => trigger::classify_create(stmt, context, &mut builder),
        NodeEnum::CreateFunctionStmt(stmt) => trigger::classify_function(stmt, &mut builder),
        NodeEnum::CreateStmt(stmt) => table::classify_create(stmt, context, &mut builder),
        NodeEnum::CreateTableAsStmt(stmt) => table::classify_create_as(stmt, context, &mut builder),
        NodeEnum::DropStmt(stmt) => table::classify_drop(stmt, context, &mut builder),
        NodeEnum::TruncateStmt(stmt) => table::classify_truncate(stmt, context, &mut builder),
        NodeEnum::RenameStmt(stmt) => table::classify_rename(stmt, context, &mut builder),
        NodeEnum::AlterObjectSchemaStmt(stmt) => {
            table::classify_set_schema(stmt, context, &mut builder)
        }
        NodeEnum::VacuumStmt(stmt) => table::classify_vacuum(stmt, context, &mut builder),
        NodeEnum::ClusterStmt(stmt) => table::classify_cluster(stmt, context, &mut builder),
        NodeEnum::LockStmt(stmt) => table::classify_lock(stmt, context, &mut builder),
        NodeEnum::InsertStmt(_)
        | NodeEnum::UpdateStmt(_)
        | NodeEnum::DeleteStmt(_)
        | NodeEnum::MergeStmt(_)
        | NodeEnum::SelectStmt(_)
        | NodeEnum::CopyStmt(_) => dml::classify(&statement.node, context, &mut builder),
        NodeEnum::VariableSetStmt(stmt) => session::classify_set(stmt, &mut builder),
        NodeEnum::TransactionStmt(stmt) => session::classify_transaction(stmt, &mut builder),
        NodeEnum::DiscardStmt(_) => session::classify_discard(&mut builder),
        NodeEnum::VariableShowStmt(_) => session::classify_show(&mut builder),
        other => misc::classify(other, context, &mut builder),
    }
    // Which statements store expressions is `expr::stored_expressions`' to say.
    related_families::stored_references(&statement.node, &mut builder);
    related_families::row_type_casts(&statement.node, context, &mut builder);
    function_bodies::called(statement, context, &mut builder);
    if let NodeEnum::CreateFunctionStmt(stmt) = &statement.node {
        function_bodies::created(stmt, statement, context, &mut builder);
    }
    if matches!(&statement.node, NodeEnum::AlterTableStmt(_)) {
        // A rewrite evaluates a volatile default or a USING expression for every row:
        // the sequences they call are locked as a data statement locks them.
        related_families::evaluated_sequence_calls(&statement.node, &mut builder);
    }
    builder.finish(context)
}

/// Accumulates a classification; family modules fill it in.
pub(crate) struct Builder {
    statement: &'static str,
    operations: Vec<Operation>,
    locks: Vec<LockTaken>,
    related_locks: Vec<RelatedLock>,
    transaction: TransactionUse,
    route: Option<Route>,
    reasons: Vec<String>,
    effects: Vec<Effect>,
}

impl Builder {
    fn new(statement: &'static str) -> Self {
        Builder {
            statement,
            operations: Vec::new(),
            locks: Vec::new(),
            related_locks: Vec::new(),
            transaction: TransactionUse::Any,
            route: None,
            reasons: Vec::new(),
            effects: Vec::new(),
        }
    }

    pub(crate) fn statement(&mut self, statement: &'static str) -> &mut Self {
        self.statement = statement;
        self
    }

    pub(crate) fn operation(
        &mut self,
        kind: OperationKind,
        table: Option<&QualifiedName>,
        object: Option<&str>,
        work: WorkClass,
    ) -> &mut Operation {
        self.operations.push(Operation {
            kind,
            table: table.cloned(),
            object: object.filter(|o| !o.is_empty()).map(str::to_owned),
            work,
            destructive: false,
            detail: None,
        });
        let last = self.operations.len() - 1;
        &mut self.operations[last]
    }

    /// Records a lock on a relation the statement names, keeping the strongest mode
    /// per relation.
    // INV: LK-1 — with `related`, the one place a stated lock is recorded; tests/lock_modes.rs and tests/lock_truth.rs check each against pg_locks.
    pub(crate) fn lock(
        &mut self,
        relation: &QualifiedName,
        object: ObjectKind,
        mode: LockMode,
        recurses: bool,
    ) {
        self.record(relation, object, mode, recurses, None);
    }

    fn record(
        &mut self,
        relation: &QualifiedName,
        object: ObjectKind,
        mode: LockMode,
        recurses: bool,
        related_to: Option<RelatedTo>,
    ) {
        if let Some(existing) = self.locks.iter_mut().find(|l| &l.relation == relation) {
            existing.mode = existing.mode.max(mode);
            existing.recurses |= recurses;
            if related_to.is_none() {
                existing.related_to = None;
            }
            return;
        }
        self.locks.push(LockTaken {
            relation: relation.clone(),
            object,
            mode,
            recurses,
            partition_mode: None,
            index_mode: None,
            related_to,
        });
    }

    /// Records a lock on the relations standing in `role` to `of`: each by name when
    /// the facts list them, by the role itself when they cannot (offline, declared
    /// facts that may be partial, or an open-ended role).
    // INV: LK-1 — related relations are never left unstated: named, or described by role.
    pub(crate) fn related(
        &mut self,
        context: &Context<'_>,
        role: Role,
        of: ObjectRef,
        object: ObjectKind,
        mode: LockMode,
        recurses: bool,
    ) {
        let related_to = RelatedTo { role, of };
        let members = related::members(context, role, &related_to.of);
        for member in members.named() {
            self.record(
                &member.name,
                related::object_kind(member.kind).unwrap_or(object),
                mode,
                recurses,
                Some(related_to.clone()),
            );
        }
        if members.is_complete() {
            return;
        }
        if let Some(existing) = self
            .related_locks
            .iter_mut()
            .find(|l| l.related_to == related_to)
        {
            existing.mode = existing.mode.max(mode);
            existing.recurses |= recurses;
            return;
        }
        self.related_locks.push(RelatedLock {
            description: role.describe(&related_to.of),
            related_to,
            object,
            mode,
            recurses,
        });
    }

    /// Records that the indexes of `relation` are locked in `mode`, stronger than the
    /// relation itself.
    pub(crate) fn index_mode(&mut self, relation: &QualifiedName, mode: LockMode) {
        if let Some(lock) = self.locks.iter_mut().find(|l| &l.relation == relation) {
            if mode > lock.mode {
                lock.index_mode = Some(lock.index_mode.map_or(mode, |m| m.max(mode)));
            }
        }
    }

    /// Records that the partitions of `relation` are locked in `mode` rather than in
    /// the relation's own mode.
    pub(crate) fn partition_mode(&mut self, relation: &QualifiedName, mode: LockMode) {
        if let Some(lock) = self.locks.iter_mut().find(|l| &l.relation == relation) {
            if lock.recurses && lock.mode != mode {
                lock.partition_mode = Some(mode);
            }
        }
    }

    pub(crate) fn outside_transaction_only(&mut self) {
        self.transaction = TransactionUse::OutsideOnly;
    }

    pub(crate) fn inside_transaction_only(&mut self) {
        self.transaction = TransactionUse::InsideOnly;
    }

    pub(crate) fn transaction_control(&mut self) {
        self.transaction = TransactionUse::Control;
    }

    /// Sets the route. When several operations each propose one, the most cautious
    /// wins: refused, then copy-and-swap, then a native sequence, then native.
    pub(crate) fn route(&mut self, route: Route) {
        let rank = |route: &Route| match route {
            Route::Native => 0,
            Route::NativeSequence { .. } => 1,
            Route::CopyAndSwap => 2,
            Route::Refused { .. } => 3,
        };
        match (&mut self.route, route) {
            (None, route) => self.route = Some(route),
            (Some(Route::NativeSequence { steps }), Route::NativeSequence { steps: more }) => {
                steps.extend(more)
            }
            (Some(current), route) if rank(&route) > rank(current) => *current = route,
            _ => {}
        }
    }

    pub(crate) fn refuse(&mut self, cause: RefusalCause, message: impl Into<String>) {
        self.route(Route::Refused {
            refusal: Refusal::new(cause, message),
        });
    }

    pub(crate) fn reason(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }

    pub(crate) fn effect(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    fn finish(mut self, context: &Context<'_>) -> Classification {
        let work = self
            .operations
            .iter()
            .map(|op| op.work)
            .max()
            .unwrap_or(WorkClass::None);
        let destructive = self.operations.iter().any(|op| op.destructive);
        if context.in_transaction && self.transaction == TransactionUse::OutsideOnly {
            self.refuse(
                RefusalCause::NotAllowedInTransaction,
                "this statement cannot run inside a transaction block; run it on its own",
            );
        }
        let locks = related::merge_resolved(self.locks, context);
        Classification {
            statement: self.statement,
            operations: self.operations,
            locks,
            related_locks: self.related_locks,
            work,
            transaction: self.transaction,
            destructive,
            route: self.route.unwrap_or(Route::Native),
            reasons: self.reasons,
            effects: self.effects,
        }
    }
}
