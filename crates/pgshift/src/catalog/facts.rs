//! Live facts about the tables a migration touches, read from one catalog snapshot.
//!
//! These are plain data: the reader (`catalog::read`) fills them from PostgreSQL, and
//! the classifier and planner only look at them. Tests build them by hand.

use serde::Serialize;

use pgshift_sql::QualifiedName;

use crate::lock::{ObjectClass, ObjectRef, Role};

/// Facts about the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServerFacts {
    /// `server_version_num` (for example 150018).
    pub version_num: i32,
    /// `server_version` as the server reports it.
    pub version: String,
}

impl ServerFacts {
    /// The major version (for example 15).
    pub fn major(&self) -> i32 {
        self.version_num / 10000
    }
}

/// What kind of relation a name denotes (`pg_class.relkind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RelationKind {
    /// An ordinary table (`r`).
    Table,
    /// A partitioned table (`p`).
    PartitionedTable,
    /// An index (`i`).
    Index,
    /// A partitioned index (`I`).
    PartitionedIndex,
    /// A view (`v`).
    View,
    /// A materialized view (`m`).
    MaterializedView,
    /// A sequence (`S`).
    Sequence,
    /// A foreign table (`f`).
    ForeignTable,
    /// Anything else (composite type, TOAST table).
    Other,
}

impl RelationKind {
    /// The kind for a `pg_class.relkind` character.
    pub fn from_relkind(relkind: char) -> RelationKind {
        match relkind {
            'r' => RelationKind::Table,
            'p' => RelationKind::PartitionedTable,
            'i' => RelationKind::Index,
            'I' => RelationKind::PartitionedIndex,
            'v' => RelationKind::View,
            'm' => RelationKind::MaterializedView,
            'S' => RelationKind::Sequence,
            'f' => RelationKind::ForeignTable,
            _ => RelationKind::Other,
        }
    }

    /// Whether rows live in (or under) this relation: a table or partitioned table.
    pub fn is_table(self) -> bool {
        matches!(self, RelationKind::Table | RelationKind::PartitionedTable)
    }
}

/// `pg_class.relpersistence`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// `p`: WAL-logged, visible to every session.
    Permanent,
    /// `u`: not WAL-logged, emptied after a crash.
    Unlogged,
    /// `t`: private to one session.
    Temporary,
}

/// Sizes in bytes, summed over every partition for a partitioned table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sizes {
    /// Main fork (heap) bytes.
    pub heap_bytes: i64,
    /// Bytes of all indexes.
    pub index_bytes: i64,
    /// Bytes of the TOAST table and its index.
    pub toast_bytes: i64,
    /// Everything together (`pg_total_relation_size`).
    pub total_bytes: i64,
}

/// The definition pgshift gives an object whose relation another session held (or
/// awaited) ACCESS EXCLUSIVE on while the snapshot was read: rendering it would have
/// waited for that lock.
pub const NOT_READ_WHILE_LOCKED: &str = "(not read: locked by another session)";

/// A relation lock another session held, or waited for, when the snapshot was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LockElsewhere {
    /// The locked relation: the relation itself, a partition, an index or its TOAST
    /// table.
    pub relation: QualifiedName,
    /// The session's process ID (`None`: a prepared transaction holds it).
    pub pid: Option<i32>,
    /// The mode.
    pub mode: crate::lock::LockMode,
    /// Whether it is held (`false`: the session is waiting for it).
    pub granted: bool,
}

/// One column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ColumnFacts {
    /// Column name.
    pub name: String,
    /// The type as `format_type` writes it (`character varying(100)`).
    pub type_sql: String,
    /// The type's OID.
    pub type_oid: u32,
    /// The type's name without modifiers, schema-qualified when not in `pg_catalog`
    /// (`varchar`, `numeric`, `public.mood`).
    pub type_name: String,
    /// `atttypmod` (-1 when none).
    pub typmod: i32,
    /// Whether the column is `NOT NULL`.
    pub not_null: bool,
    /// The default expression, if any.
    pub default: Option<String>,
    /// `s` for a stored generated column, `v` for virtual (PostgreSQL 18+).
    pub generated: Option<char>,
    /// `a` (ALWAYS) or `d` (BY DEFAULT) for an identity column.
    pub identity: Option<char>,
    /// The generated columns of the table whose expression uses this column
    /// (`pg_depend`): PostgreSQL refuses to change its type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by_generated: Vec<String>,
}

/// One partition of a partitioned table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionFacts {
    /// The partition's name.
    pub name: QualifiedName,
    /// Its bound as `pg_get_expr(relpartbound)` writes it.
    pub bound: String,
    /// Whether it is the default partition.
    pub is_default: bool,
    /// Whether it is itself partitioned.
    pub is_partitioned: bool,
}

/// One index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IndexFacts {
    /// Index name.
    pub name: QualifiedName,
    /// `pg_get_indexdef`.
    pub definition: String,
    /// Whether it is unique.
    pub is_unique: bool,
    /// Whether it backs the primary key.
    pub is_primary: bool,
    /// `indisvalid`: false for a failed or unfinished concurrent build.
    pub is_valid: bool,
}

/// One constraint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConstraintFacts {
    /// Constraint name.
    pub name: String,
    /// `contype`: `c`, `f`, `p`, `u`, `x`, `t`, `n`.
    pub kind: char,
    /// `pg_get_constraintdef`.
    pub definition: String,
    /// `convalidated`.
    pub validated: bool,
}

/// A trigger's enable state (`pg_trigger.tgenabled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerEnabled {
    /// `O`: fires unless `session_replication_role = replica`.
    Origin,
    /// `A`: fires always.
    Always,
    /// `R`: fires only when `session_replication_role = replica`.
    Replica,
    /// `D`: never fires.
    Disabled,
}

impl TriggerEnabled {
    /// The state for a `tgenabled` character.
    pub fn from_char(c: char) -> Option<TriggerEnabled> {
        match c {
            'O' => Some(TriggerEnabled::Origin),
            'A' => Some(TriggerEnabled::Always),
            'R' => Some(TriggerEnabled::Replica),
            'D' => Some(TriggerEnabled::Disabled),
            _ => None,
        }
    }
}

/// One user trigger (internal triggers of foreign keys are not listed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TriggerFacts {
    /// Trigger name.
    pub name: String,
    /// Enable state.
    pub enabled: TriggerEnabled,
    /// Whether it is a constraint trigger.
    pub is_constraint: bool,
    /// Whether it is deferrable.
    pub deferrable: bool,
    /// Whether it is initially deferred.
    pub initially_deferred: bool,
    /// Whether it is a clone of a trigger on the partitioned parent.
    pub is_clone: bool,
    /// `pg_get_triggerdef`.
    pub definition: String,
}

/// A foreign key, seen from either side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForeignKeyFacts {
    /// Constraint name.
    pub name: String,
    /// The table holding the constraint.
    pub referencing: QualifiedName,
    /// The referenced table.
    pub referenced: QualifiedName,
    /// `pg_get_constraintdef`.
    pub definition: String,
    /// `convalidated`.
    pub validated: bool,
}

/// The primary key and its column types.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyFacts {
    /// Constraint name.
    pub name: String,
    /// Key columns in order, with their types (`format_type`).
    pub columns: Vec<(String, String)>,
}

/// Everything pgshift reads about one relation named by a migration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelationFacts {
    /// `pg_class.oid`.
    pub oid: u32,
    /// Schema-qualified name.
    pub name: QualifiedName,
    /// Relation kind.
    pub kind: RelationKind,
    /// Persistence.
    pub persistence: Persistence,
    /// Owner role.
    pub owner: String,
    /// Sizes (all partitions together).
    pub sizes: Sizes,
    /// `reltuples`, summed over partitions (-1 when never analysed).
    pub row_estimate: i64,
    /// Whether `sizes` are estimates from `pg_class.relpages`: another session held
    /// or awaited ACCESS EXCLUSIVE on the relation or a member, and the size functions
    /// (which need ACCESS SHARE) would have waited for it.
    pub sizes_estimated: bool,
    /// Relation locks other sessions held or waited for on the relation, its
    /// partitions, indexes and TOAST table when the snapshot was read.
    pub locks_elsewhere: Vec<LockElsewhere>,
    /// The partitioned parent, when this is a partition.
    pub parent: Option<QualifiedName>,
    /// For an index, the table it indexes.
    pub indexed_table: Option<QualifiedName>,
    /// `pg_get_partkeydef`, for a partitioned table.
    pub partition_key: Option<String>,
    /// Direct partitions, for a partitioned table.
    pub partitions: Vec<PartitionFacts>,
    /// Columns in order (dropped columns omitted).
    pub columns: Vec<ColumnFacts>,
    /// The primary key.
    pub primary_key: Option<KeyFacts>,
    /// Indexes.
    pub indexes: Vec<IndexFacts>,
    /// Constraints (of every kind).
    pub constraints: Vec<ConstraintFacts>,
    /// User triggers.
    pub triggers: Vec<TriggerFacts>,
    /// Foreign keys on this table.
    pub foreign_keys_out: Vec<ForeignKeyFacts>,
    /// Foreign keys on other tables referencing this one.
    pub foreign_keys_in: Vec<ForeignKeyFacts>,
    /// Views (and materialized views) that depend on this relation.
    pub dependent_views: Vec<QualifiedName>,
    /// Publications that include this table.
    pub publications: Vec<String>,
    /// Row-level security enabled.
    pub rls_enabled: bool,
    /// Row-level security forced for the owner.
    pub rls_forced: bool,
    /// `relreplident`: `d`, `n`, `f`, `i`.
    pub replica_identity: char,
    /// Names of the constraints in the relation's schema that begin with the first 16
    /// characters of its name: what PostgreSQL avoids when it names a constraint a
    /// statement leaves unnamed (`ChooseConstraintName` takes the first of
    /// `<table>_<column>_check`, `…_check1`, … that no constraint of the schema holds).
    #[serde(skip)]
    pub schema_constraint_names: Vec<String>,
    /// Columns an earlier file of the same input adds (or retypes): there when a later
    /// file runs, their type unknown here (`catalog::evolve`).
    #[serde(skip)]
    pub added_by_input: Vec<String>,
    /// Relations that stand in a [`Role`] to this one beyond what the fields above say
    /// (descendants, parents, dependents, rule and policy relations, a view's base
    /// relations, owned sequences), for stating every lock a statement takes.
    pub related: Vec<RelatedFacts>,
}

/// A relation standing in a [`Role`] to a relation or another catalog object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelatedFacts {
    /// How it relates.
    pub role: Role,
    /// The related relation.
    pub name: QualifiedName,
    /// What it is.
    pub kind: RelationKind,
    /// The rule or policy it is related through, for [`Role::RuleRelations`] and
    /// [`Role::PolicyRelations`].
    pub via: Option<String>,
}

/// Facts about a catalog object that is not a relation (a type, a schema, a
/// publication, a statistics object), as far as locks on relations go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectFacts {
    /// The object as written in the input.
    pub written: ObjectRef,
    /// Whether it exists (resolved like the server would).
    pub found: bool,
    /// The relations related to it.
    pub related: Vec<RelatedFacts>,
}

impl RelationFacts {
    /// A column by name.
    pub fn column(&self, name: &str) -> Option<&ColumnFacts> {
        self.columns.iter().find(|column| column.name == name)
    }

    /// Whether a validated `CHECK (col IS NOT NULL)` exists, which lets
    /// `SET NOT NULL` skip its scan (PostgreSQL 12+).
    pub fn has_validated_not_null_check(&self, column: &str) -> bool {
        let wanted = [
            format!("CHECK (({column} IS NOT NULL))"),
            format!("CHECK (({} IS NOT NULL))", pgshift_sql::quote_ident(column)),
        ];
        self.constraints
            .iter()
            .any(|c| c.kind == 'c' && c.validated && wanted.contains(&c.definition))
    }

    /// The default partition, if any.
    pub fn default_partition(&self) -> Option<&PartitionFacts> {
        self.partitions.iter().find(|p| p.is_default)
    }
}

/// The facts of one planning run: the server and every relation the input names, all
/// read in one snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CatalogSnapshot {
    /// The server.
    pub server: ServerFacts,
    /// The relations found.
    pub relations: Vec<RelationFacts>,
    /// Each name as written in the input, and which relation it resolved to (`None`:
    /// no such relation in the search path).
    pub resolutions: Vec<(QualifiedName, Option<usize>)>,
    /// Objects other than relations that the input names and whose related relations
    /// a statement locks (types, schemas, publications, statistics).
    pub objects: Vec<ObjectFacts>,
    /// Functions the input calls by a name that is not a built-in one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionFacts>,
}

/// What a function name the input calls denotes, as far as the relations its body locks
/// go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FunctionFacts {
    /// The name as written in the input.
    pub written: QualifiedName,
    /// Whether any function or procedure has that name (in its schema, or in the search
    /// path).
    pub found: bool,
    /// `pg_get_functiondef` of each one written in SQL (outside `pg_catalog`): the body
    /// whose statements say what a call locks.
    pub sql_definitions: Vec<String>,
}

/// The answer to "what is this name?".
#[derive(Clone, Copy, Debug)]
pub enum Lookup<'a> {
    /// The name resolves to this relation.
    Found(&'a RelationFacts),
    /// The name was looked up and nothing has it.
    Missing,
    /// The name was not looked up (offline, or not collected).
    Unknown,
}

impl CatalogSnapshot {
    /// Whether these facts were declared by SQL (a schema file) rather than read from
    /// a server: then they are partial, and an absent column proves nothing.
    pub fn is_declared(&self) -> bool {
        self.server.version_num == super::declared::DECLARED_VERSION_NUM
    }

    /// Resolves a name as written in the input (a schema-qualified one also by the
    /// relation of that name the snapshot holds).
    pub fn lookup(&self, name: &QualifiedName) -> Lookup<'_> {
        match self.resolutions.iter().find(|(written, _)| written == name) {
            Some((_, Some(index))) => self
                .relations
                .get(*index)
                .map_or(Lookup::Unknown, Lookup::Found),
            Some((_, None)) => Lookup::Missing,
            // A schema-qualified name not written in the input (a function body's, or a
            // role's member) denotes the relation of that name read under another.
            None => self.by_name(name).map_or(Lookup::Unknown, Lookup::Found),
        }
    }

    /// Whether the snapshot has an answer for `name`: the relation's facts (by the name
    /// as written, or by its schema-qualified name) or that no relation has it.
    pub fn knows(&self, name: &QualifiedName) -> bool {
        !matches!(self.lookup(name), Lookup::Unknown)
    }

    /// A relation of the snapshot by its resolved (schema-qualified) name.
    pub fn by_name(&self, name: &QualifiedName) -> Option<&RelationFacts> {
        name.schema.as_ref()?;
        self.relations.iter().find(|r| r.name == *name)
    }

    /// What the snapshot says about a function name as written: `None` when it was not
    /// looked up.
    pub fn function(&self, name: &QualifiedName) -> Option<&FunctionFacts> {
        self.functions.iter().find(|f| &f.written == name)
    }

    /// What the snapshot says about a catalog object that is not a relation: `None`
    /// when it was not looked up.
    pub fn object(&self, object: &ObjectRef) -> Option<&ObjectFacts> {
        debug_assert!(object.class != ObjectClass::Relation);
        self.objects.iter().find(|o| &o.written == object)
    }
}
