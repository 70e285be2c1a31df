//! A run's plan: what the shadow is, how rows are copied and compared, and what the
//! swap must carry over — recorded with the run so that a resumed run (or another
//! process running `pgshift cutover`) follows exactly the same plan.

use serde::{Deserialize, Serialize};

use super::keys::KeySpec;
use super::names::RunNames;
use super::source::SourceFacts;
use pgshift_sql::QualifiedName;

/// How writes are handled during the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Writes continue; a capture trigger logs every changed key.
    Live,
    /// The application has stopped writing; a fence refuses any write (55006).
    Quiesced,
}

/// How a shadow column is filled from the source and compared with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyColumn {
    /// The shadow's column.
    pub name: String,
    /// Its type (`format_type`).
    pub type_sql: String,
    /// The expression over the source row (alias `s`) giving its value.
    pub expression: String,
    /// The shadow's column is declared NOT NULL. Only a hint for the digest's row
    /// hash, which then leaves out its NULL test (a NULL there makes the row's hash
    /// NULL, and the chunk is compared row by row): correctness never rests on it.
    /// Absent from the plans of older runs: `false`, the hash with the NULL test.
    #[serde(default)]
    pub not_null: bool,
}

impl CopyColumn {
    /// Whether the source's value is copied as it is (`s."name"`), not computed by an
    /// expression of the statement (a `USING`).
    pub fn copied_as_is(&self) -> bool {
        self.expression == format!("s.{}", pgshift_sql::quote_ident(&self.name))
    }
}

/// An index or constraint to build on the shadow after the copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowIndex {
    /// The name it takes at the swap: the source's name for it, or, for one the
    /// statement added, the name PostgreSQL gives it on the real table.
    pub source_name: String,
    /// The name it is built under.
    pub temp_name: String,
    /// The statement building it on the shadow.
    pub sql: String,
    /// Whether it backs a constraint (renamed with `ALTER TABLE … RENAME CONSTRAINT`).
    pub constraint: bool,
    /// Whether replica identity uses it.
    pub replica_identity: bool,
    /// The partition (by position in the source's partitions) it belongs to, for an
    /// index of a partition's own; `None` for an index of the table.
    #[serde(default)]
    pub partition: Option<usize>,
    /// For an index of a partitioned table, the name each partition's index takes at
    /// the swap (in the order of the source's partitions; empty: the source's
    /// counterparts' names, found at the swap).
    #[serde(default)]
    pub partition_names: Vec<String>,
}

/// A relation or object of the shadow created under a temporary name and renamed at
/// the swap (identity sequences, extended statistics).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedRename {
    /// `sequence` or `statistics`.
    pub kind: String,
    /// Its temporary name.
    pub temp: QualifiedName,
    /// The name it takes at the swap (in the same schema); an object of the source
    /// holding that name is renamed away first.
    pub final_name: String,
}

/// What creating the shadow found must be carried through the swap, beyond the
/// indexes and constraints built after the copy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carry {
    /// Whether the shadow was created by this design (a scratch schema, every name
    /// as PostgreSQL gives it on the real table); plans recorded before have none of
    /// what follows.
    #[serde(default)]
    pub complete: bool,
    /// The name each shadow partition's primary key index takes at the swap.
    #[serde(default)]
    pub key_partition_names: Vec<String>,
    /// Sequences and statistics renamed at the swap.
    #[serde(default)]
    pub renames: Vec<PlannedRename>,
    /// Statements run at the swap after the renames, naming the new tree by its final
    /// names (comments, clustered and replica-identity indexes, publication
    /// membership), built from quoted identifiers when the shadow was created.
    #[serde(default)]
    pub after_swap: Vec<String>,
    /// Whether the applier writes the shadow with `session_replication_role =
    /// replica` (a foreign key of the table to itself would otherwise act on the
    /// rows the applier deletes and inserts again).
    #[serde(default)]
    pub replica_apply: bool,
}

/// A constraint added to the shadow after the copy (foreign keys out, NOT VALID checks).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowConstraint {
    /// Name (the source's; constraint names are per table).
    pub name: String,
    /// `pg_get_constraintdef`.
    pub definition: String,
    /// Whether it is validated on the source (else added NOT VALID).
    pub validated: bool,
}

/// Budgets of the swap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutoverBudgets {
    /// `lock_timeout` of the swap's `LOCK TABLE`.
    pub lock_timeout_ms: u64,
    /// Attempts to take the lock.
    pub attempts: u32,
    /// First backoff between attempts.
    pub backoff_initial_ms: u64,
    /// Longest backoff.
    pub backoff_max_ms: u64,
    /// The most change-log entries drained under the lock; more, and the lock is
    /// given up to catch up first.
    pub max_drain: i64,
}

impl CutoverBudgets {
    /// The longest pause after attempt `attempt` (1-based) before the next one, in ms:
    /// the initial backoff doubled per attempt, at most the largest (the swap's jitter
    /// only shortens it).
    pub fn backoff_ms(&self, attempt: u32) -> u64 {
        let exponent = attempt.saturating_sub(1).min(20);
        self.backoff_initial_ms
            .saturating_mul(1u64 << exponent)
            .min(self.backoff_max_ms)
    }

    /// The longest the swap's lock attempts can take in all: every attempt's
    /// `lock_timeout` and the longest backoff between attempts. Other waits before the
    /// swap are bounded by it too.
    pub fn total(&self) -> std::time::Duration {
        let attempts = self
            .lock_timeout_ms
            .saturating_mul(u64::from(self.attempts));
        let ms = (1..self.attempts).fold(attempts, |ms, attempt| {
            ms.saturating_add(self.backoff_ms(attempt))
        });
        std::time::Duration::from_millis(ms)
    }
}

/// How verification compares a chunk (INV: CO-10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerifyMethod {
    /// Per-chunk digests of both sides (count, sum and XOR of 64-bit row hashes) in one
    /// snapshot; a chunk whose digests differ is compared row by row.
    #[default]
    Digest,
    /// Every chunk compared row by row, joined on the key.
    Exact,
}

/// Options of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Live or quiesced.
    pub mode: Mode,
    /// Parallel copy workers.
    pub workers: usize,
    /// Target duration of one chunk.
    pub chunk_target_ms: u64,
    /// Rows of the first chunk.
    pub first_chunk_rows: i64,
    /// Swap budgets.
    pub cutover: CutoverBudgets,
    /// Keep the old table after the swap (renamed).
    pub keep_old: bool,
    /// On a verification divergence, repair the chunk and verify again instead of
    /// stopping.
    pub repair: bool,
    /// Wait for `pgshift cutover` after verification.
    pub defer_cutover: bool,
    /// The throttle's limits (runs recorded before the throttle get its defaults).
    #[serde(default)]
    pub throttle: super::throttle::ThrottleLimits,
    /// How verification compares chunks (a run recorded before this existed: by
    /// digest, which proves the same).
    #[serde(default)]
    pub verify: VerifyMethod,
    /// The room, in bytes, the operator says the run has on the volumes it writes to
    /// (`--disk-room`): required where free disk cannot be measured, and then the
    /// ceiling on what the run may write.
    #[serde(default)]
    pub disk_room: Option<u64>,
}

impl RunOptions {
    /// What `pgshift apply` and `migrate` use when no copy-and-swap flag is given
    /// (and the [`Migrator`](crate::Migrator)'s default): writes continue (live), two
    /// workers, chunks sized toward 500 ms from a first one of 5,000 rows, the swap's
    /// lock tried 10 times for at most 1 s each (backoff 100 ms to 5 s, at most 50,000
    /// change-log entries drained under it), the old table dropped, a divergence stops
    /// the run, no deferred cutover, the throttle's default limits, digest
    /// verification, free disk measured rather than stated.
    pub const STANDARD: RunOptions = RunOptions {
        mode: Mode::Live,
        workers: 2,
        chunk_target_ms: 500,
        first_chunk_rows: 5_000,
        cutover: CutoverBudgets {
            lock_timeout_ms: 1_000,
            attempts: 10,
            backoff_initial_ms: 100,
            backoff_max_ms: 5_000,
            max_drain: 50_000,
        },
        keep_old: false,
        repair: false,
        defer_cutover: false,
        throttle: super::throttle::DEFAULT_LIMITS,
        verify: VerifyMethod::Digest,
        disk_room: None,
    };
}

/// Everything a run needs, recorded with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    /// The run's number (0 until recorded).
    pub run: i64,
    /// Options.
    pub options: RunOptions,
    /// The statement applied to the shadow (retargeted), if any.
    pub shadow_statement: Option<String>,
    /// The source as read at preflight.
    pub source: SourceFacts,
    /// The key.
    pub key: KeySpec,
    /// The shadow table.
    pub shadow: QualifiedName,
    /// The shadow's partitions, in the order of the source's.
    pub shadow_partitions: Vec<QualifiedName>,
    /// How each copied column is filled.
    pub columns: Vec<CopyColumn>,
    /// The temporary name of the shadow's primary key.
    pub shadow_key_name: String,
    /// The statement building the shadow's primary key (under
    /// [`RunPlan::shadow_key_name`]) at the start of the indexing phase: the copy writes
    /// an index-free heap. `None` for a run recorded before this existed, whose shadow
    /// was created with its key.
    #[serde(default)]
    pub key_build: Option<String>,
    /// Indexes and unique/exclusion constraints built after the copy.
    pub indexes: Vec<ShadowIndex>,
    /// Constraints added after the copy.
    pub constraints: Vec<ShadowConstraint>,
    /// The `search_path` the user's statement was written for (its own expressions and
    /// type names are resolved with it, after `pg_catalog`).
    #[serde(default)]
    pub search_path: Vec<String>,
    /// What the preflight found of free disk (`free disk checked: …` or `free disk not
    /// checked: <why>`).
    #[serde(default)]
    pub disk: String,
    /// What the run watches while it writes, so that it stops before a volume fills
    /// (`None`: a run recorded before the watch existed).
    #[serde(default)]
    pub disk_watch: Option<crate::cas::disk_watch::DiskWatch>,
    /// The standbys named with `--standby-url` when the run started (or was
    /// resumed), redacted: host, port and database, never a role or password. A
    /// resume must name each of them again (fail closed).
    #[serde(default)]
    pub standbys: Vec<crate::cas::standby::StandbyEndpoint>,
}

impl RunPlan {
    /// The artifact names of this run.
    pub fn names(&self) -> RunNames {
        RunNames::new(self.run)
    }

    /// The source and its partitions, parent first.
    pub fn source_relations(&self) -> Vec<&QualifiedName> {
        let mut out = vec![&self.source.table.name];
        out.extend(self.source.partitions.iter().map(|p| &p.relation.name));
        out
    }

    /// The OIDs of the source and its partitions, parent first.
    pub fn source_oids(&self) -> Vec<u32> {
        let mut out = vec![self.source.table.oid];
        out.extend(self.source.partitions.iter().map(|p| p.relation.oid));
        out
    }

    /// The shadow and its partitions, parent first.
    pub fn shadow_relations(&self) -> Vec<&QualifiedName> {
        let mut out = vec![&self.shadow];
        out.extend(self.shadow_partitions.iter());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::CutoverBudgets;

    #[test]
    fn the_cutover_budget_is_every_attempt_and_the_longest_backoffs_between_them() {
        let budgets = CutoverBudgets {
            lock_timeout_ms: 1_000,
            attempts: 10,
            backoff_initial_ms: 100,
            backoff_max_ms: 5_000,
            max_drain: 50_000,
        };
        // 10 × 1 s, and 100 + 200 + 400 + 800 + 1600 + 3200 + 3 × 5000 ms between them.
        assert_eq!(budgets.total().as_millis(), 31_300);
        let one = CutoverBudgets {
            attempts: 1,
            ..budgets
        };
        assert_eq!(one.total().as_millis(), 1_000);
    }
}
