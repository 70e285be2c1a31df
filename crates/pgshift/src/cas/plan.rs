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
}

/// An index or constraint to build on the shadow after the copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowIndex {
    /// The source's name for it (the shadow's takes it at the swap).
    pub source_name: String,
    /// The name it is built under.
    pub temp_name: String,
    /// The statement building it on the shadow.
    pub sql: String,
    /// Whether it backs a constraint (renamed with `ALTER TABLE … RENAME CONSTRAINT`).
    pub constraint: bool,
    /// Whether replica identity uses it.
    pub replica_identity: bool,
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

/// Options of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// Everything a run needs, recorded with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Indexes and unique/exclusion constraints built after the copy.
    pub indexes: Vec<ShadowIndex>,
    /// Constraints added after the copy.
    pub constraints: Vec<ShadowConstraint>,
    /// The `search_path` the user's statement was written for (its own expressions and
    /// type names are resolved with it, after `pg_catalog`).
    #[serde(default)]
    pub search_path: Vec<String>,
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

    /// The shadow and its partitions, parent first.
    pub fn shadow_relations(&self) -> Vec<&QualifiedName> {
        let mut out = vec![&self.shadow];
        out.extend(self.shadow_partitions.iter());
        out
    }
}
