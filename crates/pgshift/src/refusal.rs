//! Refusals: the closed list of reasons pgshift declines to run a statement.
//!
//! Every refusal has exactly one cause and one class (INV: RF-1). The list is mirrored
//! in `docs/REFUSALS.md`; a test keeps the two identical.

use std::fmt;

use serde::Serialize;

/// The broad kind of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalClass {
    /// pgshift cannot (yet) run this safely; the statement itself may be fine.
    Unsupported,
    /// The statement does not fit the live database (a missing table, a wrong kind of
    /// relation); PostgreSQL would reject it too.
    Invalid,
    /// Running it would break one of pgshift's promises (a lost write, an unbounded
    /// lock), so pgshift will not, whatever the flags.
    Unsafe,
}

impl RefusalClass {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            RefusalClass::Unsupported => "unsupported",
            RefusalClass::Invalid => "invalid",
            RefusalClass::Unsafe => "unsafe",
        }
    }
}

macro_rules! refusal_causes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $class:ident; )*) => {
        /// Why a statement is refused. Closed vocabulary; serialized in kebab-case.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum RefusalCause {
            $( $(#[$doc])* $variant, )*
        }

        impl RefusalCause {
            /// Every cause, in documentation order.
            pub const ALL: &'static [RefusalCause] = &[ $( RefusalCause::$variant, )* ];

            /// The stable kebab-case name.
            pub fn name(self) -> &'static str {
                match self { $( RefusalCause::$variant => $name, )* }
            }

            /// The one class this cause belongs to.
            pub fn class(self) -> RefusalClass {
                // INV: RF-1 — one cause maps to exactly one class, fixed here.
                match self { $( RefusalCause::$variant => RefusalClass::$class, )* }
            }
        }
    };
}

refusal_causes! {
    /// A `DO` block or `CALL`: its locks and effects cannot be known before it runs.
    OpaqueProceduralCode = "opaque-procedural-code", Unsupported;
    /// Procedural code failed when it was traced on a throwaway clone of the target's
    /// schema.
    ProceduralFailedOnClone = "procedural-failed-on-clone", Invalid;
    /// Procedural code whose traced DDL takes a lock that blocks writes (or rewrites) on
    /// a table with rows, and that pgshift cannot expand into statements it routes.
    ProceduralBlocking = "procedural-blocking", Unsafe;
    /// The target's schema changed while procedural code was traced on a clone of it.
    ProceduralSchemaChanged = "procedural-schema-changed", Unsupported;
    /// A statement form pgshift does not classify, so it cannot bound its locks.
    UnclassifiedStatement = "unclassified-statement", Unsupported;
    /// Transaction control pgshift does not run on behalf of a migration
    /// (`PREPARE TRANSACTION`, `COMMIT PREPARED`).
    TwoPhaseCommit = "two-phase-commit", Unsupported;
    /// A rewrite that copy-and-swap does not carry through yet.
    RewriteUnsupported = "rewrite-unsupported", Unsupported;
    /// The connection has no server session of its own: a pooler in transaction or
    /// statement mode runs its transactions on shared server backends, where what
    /// pgshift sets and the locks it holds for a session would land on other clients.
    PooledWithoutSession = "pooled-without-session", Unsupported;
    /// The statement needs a server version newer than the target's.
    ServerTooOld = "server-too-old", Invalid;
    /// The statement names a table that does not exist.
    TableMissing = "table-missing", Invalid;
    /// The statement names a relation of the wrong kind (for example an index where a
    /// table is expected).
    WrongRelationKind = "wrong-relation-kind", Invalid;
    /// The statement names a column that does not exist.
    ColumnMissing = "column-missing", Invalid;
    /// `ALTER COLUMN … TYPE` of a column a generated column's expression uses, which
    /// PostgreSQL refuses.
    ColumnUsedByGenerated = "column-used-by-generated", Invalid;
    /// `DETACH PARTITION CONCURRENTLY` while the table has a default partition, which
    /// PostgreSQL does not allow.
    DetachConcurrentlyWithDefault = "detach-concurrently-with-default", Invalid;
    /// A statement that must run outside a transaction block, placed inside one.
    NotAllowedInTransaction = "not-allowed-in-transaction", Invalid;
    /// An unlogged or temporary table, which copy-and-swap cannot carry through
    /// (changes to it are not WAL-logged, or it is private to one session).
    NonPermanentTable = "non-permanent-table", Unsupported;
    /// A partition that is itself partitioned, where a flow handles one level.
    NestedPartitioning = "nested-partitioning", Unsupported;
    /// A rewrite that only copy-and-swap runs online, while copy-and-swap is not
    /// available; `--allow-blocking TABLE` runs the blocking form instead.
    CopyAndSwapUnavailable = "copy-and-swap-unavailable", Unsupported;
    /// A transaction block whose meaning depends on running as one transaction
    /// (`LOCK TABLE`, or data changes with schema changes) but whose statements need
    /// steps that cannot share one bounded transaction.
    NotSplittable = "not-splittable", Unsafe;
    /// The lock a step needs could not be taken within the lock budget, on every
    /// attempt.
    LockBudgetExhausted = "lock-budget-exhausted", Unsafe;
    /// An invalid index (a failed or interrupted concurrent build) already has the
    /// name a build would use; pgshift reports it and never drops it by name.
    InvalidIndexExists = "invalid-index-exists", Invalid;
    /// The capture trigger (or the fence) is missing, disabled, not `ALWAYS`, or
    /// changed (a `WHEN`, a column list, arguments, deferral) at the swap: a write
    /// could have bypassed the run, so the source stays in place.
    CutoverUnfenced = "cutover-unfenced", Unsafe;
    /// The source's shape (columns, indexes, constraints, triggers, partitions)
    /// changed while the run was copying.
    SchemaChanged = "schema-changed", Invalid;
    /// Under the swap's lock, an index of the shadow is not valid and ready (a build
    /// that failed or was interrupted, or one someone invalidated): swapped in, it
    /// would neither enforce nor serve.
    ShadowIndexInvalid = "shadow-index-invalid", Unsafe;
    /// A name the swap gives the old table or one of its indexes is held by another
    /// relation (a leftover of another run, or the user's).
    SwapNameTaken = "swap-name-taken", Invalid;
    /// A materialized view depends on the table; copy-and-swap does not carry it yet.
    DependentMaterializedView = "dependent-materialized-view", Unsupported;
    /// A view depends on a view that depends on the table; copy-and-swap recreates
    /// only views that depend on the table directly.
    NestedDependentViews = "nested-dependent-views", Unsupported;
    /// A view that reads the table, which the swap replaces or drops and makes again,
    /// is itself used by another object (a function body, a policy, another
    /// relation's rule, a column of its row type, an extension).
    DependentViewInUse = "dependent-view-in-use", Unsupported;
    /// A view that reads the table has grants the swap could not make again as they
    /// are: made by a role other than its owner, or its owner's own privileges
    /// narrowed.
    DependentViewGrants = "dependent-view-grants", Unsupported;
    /// A rule of another table reads or writes the table: it names the table by its
    /// identity and would go on using the old one after a swap.
    RuleUsesTable = "rule-uses-table", Unsupported;
    /// The table is already being rewritten by another run.
    RunInProgress = "run-in-progress", Invalid;
    /// Copy-and-swap needs a primary key (or a unique, non-null key) to copy and
    /// verify in chunks; the table has none.
    NoUsableKey = "no-usable-key", Unsupported;
    /// The connecting role lacks a privilege copy-and-swap needs (ownership of the
    /// table, `CREATE` on the database or a schema, the engine's own schema and run
    /// table); the message names the `GRANT` that gives it.
    MissingPrivilege = "missing-privilege", Invalid;
    /// A step would scan, build or rewrite an existing relation under a lock that
    /// blocks writes, and no safer sequence or copy-and-swap exists for it;
    /// `--allow-blocking TABLE` runs it as written, reported as blocking.
    BlockingWork = "blocking-work", Unsupported;
    /// A step accepted as blocking (`--allow-blocking`) would scan, build or rewrite a
    /// table larger than `--max-table-size` (or one whose size is not known) under a lock
    /// that blocks writes.
    TableTooLarge = "table-too-large", Unsafe;
    /// A unit planned to run as written because the tables it blocks writes on held no
    /// rows found one holding rows when it started, under its own lock; nothing of it
    /// ran.
    TableNoLongerEmpty = "table-no-longer-empty", Unsafe;
    /// `ADD COLUMN … NOT NULL` with no default on a table that has rows: every existing
    /// row would hold NULL, so PostgreSQL rejects it.
    NullInExistingRows = "null-in-existing-rows", Invalid;
    /// Row-level security applies to the connecting role on the table (enabled, and
    /// the role is neither a superuser nor `BYPASSRLS`, and not its owner or the table
    /// is `FORCE`d): the run's reads would see only the rows the policies show, and the
    /// swap would drop the others.
    RowSecurityApplies = "row-security-applies", Unsafe;
    /// The file system the run would write the shadow (or WAL) to has less free space
    /// than the run's estimated need.
    InsufficientDiskSpace = "insufficient-disk-space", Unsafe;
    /// Free disk cannot be measured (the server is reached over the network, or the
    /// role may not read `data_directory`) and the operator gave no `--disk-room`.
    DiskSpaceNotMeasured = "disk-space-not-measured", Unsafe;
    /// While the run wrote, a volume it writes to fell below the free space the run
    /// keeps there, or the run wrote past the room `--disk-room` gave (or the server
    /// reported a full disk): the run stopped and removed itself.
    DiskSpaceRunningOut = "disk-space-running-out", Unsafe;
    /// A standby did not replay the WAL written before the cutover within
    /// `--max-replica-lag`, or its replay position cannot be read: the swap's lock
    /// would reach it late, so the swap is not made.
    StandbyLagging = "standby-lagging", Unsafe;
    /// A `--standby-url` does not reach a standby of this primary: the server is not in
    /// recovery, its system identifier is another's, or it cannot be read to tell.
    NotAStandby = "not-a-standby", Invalid;
    /// The run was started with `--standby-url` and is continued without naming one of
    /// those standbys again: its queries could not be checked before the swap.
    StandbyUrlMissing = "standby-url-missing", Unsafe;
    /// At the cutover, a query on a standby named with `--standby-url` held or waited
    /// for a lock on the table past the cutover's budget (the swap's replayed lock
    /// would hold up replay behind it, then cancel it), or the standby could not be
    /// read.
    StandbyQueries = "standby-queries", Unsafe;
}

impl fmt::Display for RefusalCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for RefusalCause {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A refusal: one cause, its class, a sentence for people, and the next step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Why, from a closed list.
    pub cause: RefusalCause,
    /// The cause's class (always `cause.class()`).
    pub class: RefusalClass,
    /// What went wrong, in words.
    pub message: String,
    /// What to do next, one sentence: the "do this" line printed after the message
    /// (the cause's page's, unless the refusal knows a more precise one).
    pub next_step: String,
}

impl Refusal {
    /// A refusal for `cause`; its class is the cause's own, its next step the cause's
    /// page's (`pgshift explain CAUSE`).
    pub fn new(cause: RefusalCause, message: impl Into<String>) -> Self {
        Refusal {
            cause,
            class: cause.class(),
            message: message.into(),
            next_step: crate::pages::refusal_page(cause).do_this.to_owned(),
        }
    }

    /// The same refusal with a more precise next step.
    pub fn with_next_step(mut self, next_step: impl Into<String>) -> Self {
        self.next_step = next_step.into();
        self
    }
}
