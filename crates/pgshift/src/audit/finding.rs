//! What the audit finds: a closed vocabulary of kinds, each either a way a write
//! bypasses a trigger (exit 2) or a note about how one fires. `docs/AUDIT.md` lists
//! them; `tests/audit.rs` pins that list against [`FindingKind::ALL`].

use pgshift_sql::QualifiedName;
use serde::Serialize;

/// What a finding is about. The order is the order findings of one table are listed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// A partitioned table's own entry of a row trigger (the template that partitions
    /// created or attached later copy, state included) is `O`, `R` or `D`, and the
    /// fix of its partitions' states would not reach it. (Bypass.)
    ParentStateDiffers,
    /// A partition lacks the clone of a parent's row trigger: writes to it never fire
    /// it. (Bypass.)
    MissingClone,
    /// A trigger is disabled (`D`): no write fires it. (Bypass.)
    Disabled,
    /// A trigger is ORIGIN-enabled (`O`, the default): sessions with
    /// `session_replication_role = replica` skip it. (Bypass.)
    SkippedInReplica,
    /// A trigger is REPLICA-enabled (`R`): ordinary sessions skip it. (Bypass.)
    ReplicaOnly,
    /// A clone's name differs from its parent trigger's (possible on PostgreSQL 14):
    /// `ALTER TABLE parent ENABLE/DISABLE TRIGGER name` recurses by name and fails.
    CloneRenamed,
    /// A trigger on a partition that its parent lacks: writes to the other
    /// partitions do not fire it.
    PartitionOnlyTrigger,
    /// A statement trigger on a partitioned table: statements naming a partition
    /// directly do not fire it.
    StatementTriggerOnParent,
    /// A deferrable constraint trigger: it runs at `COMMIT` (initially deferred, or
    /// after `SET CONSTRAINTS … DEFERRED`), not at the write.
    DeferrableConstraintTrigger,
    /// Row `DELETE` triggers and no `TRUNCATE` trigger: `TRUNCATE` removes rows
    /// without firing them.
    TruncateSkipsDeleteTriggers,
    /// Foreign keys are enforced by internal ORIGIN triggers: replica sessions do not
    /// check them.
    ForeignKeysSkippedInReplica,
}

impl FindingKind {
    /// Every kind, in the order findings are listed, which is the order their fixes
    /// run in: a parent's own state before re-attaching a partition that copies it;
    /// per-partition states (which name a renamed clone by its name) before renaming
    /// the clone back.
    pub const ALL: [FindingKind; 11] = [
        FindingKind::ParentStateDiffers,
        FindingKind::MissingClone,
        FindingKind::Disabled,
        FindingKind::SkippedInReplica,
        FindingKind::ReplicaOnly,
        FindingKind::CloneRenamed,
        FindingKind::PartitionOnlyTrigger,
        FindingKind::StatementTriggerOnParent,
        FindingKind::DeferrableConstraintTrigger,
        FindingKind::TruncateSkipsDeleteTriggers,
        FindingKind::ForeignKeysSkippedInReplica,
    ];

    /// Whether a finding of this kind lets a write bypass a trigger, so that the
    /// audit exits 2.
    pub fn is_bypass(self) -> bool {
        matches!(
            self,
            FindingKind::MissingClone
                | FindingKind::Disabled
                | FindingKind::SkippedInReplica
                | FindingKind::ReplicaOnly
                | FindingKind::ParentStateDiffers
        )
    }

    /// The kebab-case code, as in JSON.
    pub fn code(self) -> &'static str {
        match self {
            FindingKind::MissingClone => "missing-clone",
            FindingKind::Disabled => "disabled",
            FindingKind::SkippedInReplica => "skipped-in-replica",
            FindingKind::ReplicaOnly => "replica-only",
            FindingKind::ParentStateDiffers => "parent-state-differs",
            FindingKind::CloneRenamed => "clone-renamed",
            FindingKind::PartitionOnlyTrigger => "partition-only-trigger",
            FindingKind::StatementTriggerOnParent => "statement-trigger-on-parent",
            FindingKind::DeferrableConstraintTrigger => "deferrable-constraint-trigger",
            FindingKind::TruncateSkipsDeleteTriggers => "truncate-skips-delete-triggers",
            FindingKind::ForeignKeysSkippedInReplica => "foreign-keys-skipped-in-replica",
        }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// Whether it lets a write bypass a trigger ([`FindingKind::is_bypass`]).
    pub bypass: bool,
    /// The table the trigger is declared on (a partitioned parent for clones).
    pub table: QualifiedName,
    /// The trigger, when the finding is about one.
    pub trigger: Option<String>,
    /// The tables whose writes it concerns (the partitions, or the table itself).
    pub relations: Vec<QualifiedName>,
    /// What it means, for people.
    pub message: String,
    /// What to do, for people.
    pub advice: String,
    /// SQL that does it, every name quoted (empty when the fix is not a statement).
    pub fix: Vec<String>,
}

impl Finding {
    /// A finding of `kind` on `table`.
    pub(super) fn new(
        kind: FindingKind,
        table: &QualifiedName,
        trigger: Option<&str>,
        relations: Vec<QualifiedName>,
        message: String,
    ) -> Self {
        Finding {
            kind,
            bypass: kind.is_bypass(),
            table: table.clone(),
            trigger: trigger.map(str::to_owned),
            relations,
            message,
            advice: String::new(),
            fix: Vec::new(),
        }
    }

    /// With advice and its SQL.
    pub(super) fn advise(mut self, advice: impl Into<String>, fix: Vec<String>) -> Self {
        self.advice = advice.into();
        self.fix = fix;
        self
    }
}
