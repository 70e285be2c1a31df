//! The names of a run's artifacts, all derived from the run's number so that every
//! artifact has an owner on record and `abort` can find each one.
//!
//! Shadow relations live in the source's schema (they take the source's names at the
//! swap); the change log and the trigger functions live in the engine-owned schema
//! `pgshift`.

use pgshift_sql::QualifiedName;
use sha2::Digest;

use crate::connect::APPLICATION_NAME;

/// The engine-owned schema.
pub const ENGINE_SCHEMA: &str = "pgshift";

/// PostgreSQL's identifier limit in bytes.
const MAX_NAME: usize = 63;

/// `prefix` + `name`, when that fits in 63 bytes. A name that does not is cut on a
/// character boundary and ends in `_` and 12 hex digits of the SHA-256 of the whole
/// name, so that two source names sharing their first ~40 bytes (indexes and
/// partitions of one table often do) never meet in one cut name: the swap renames
/// every index of the tree at once, and a meeting was a 42P07 there.
fn fit(prefix: &str, name: &str) -> String {
    if prefix.len() + name.len() <= MAX_NAME {
        return format!("{prefix}{name}");
    }
    let digest = sha2::Sha256::digest(name.as_bytes());
    let tag: String = digest
        .iter()
        .take(6)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let mut out = String::from(prefix);
    for ch in name.chars() {
        if out.len() + ch.len_utf8() + 1 + tag.len() > MAX_NAME {
            break;
        }
        out.push(ch);
    }
    out.push('_');
    out.push_str(&tag);
    out
}

/// The artifacts of run `run`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunNames {
    run: i64,
}

impl RunNames {
    /// The names of run `run`.
    pub fn new(run: i64) -> Self {
        RunNames { run }
    }

    /// The run's number.
    pub fn run(&self) -> i64 {
        self.run
    }

    /// A shadow relation for source relation `name` (in the same schema).
    pub fn shadow(&self, source: &QualifiedName) -> QualifiedName {
        QualifiedName {
            schema: source.schema.clone(),
            name: fit(&format!("_pgshift_{}_", self.run), &source.name),
        }
    }

    /// The name the source relation `name` takes at the swap, when kept.
    pub fn old(&self, source: &QualifiedName) -> QualifiedName {
        QualifiedName {
            schema: source.schema.clone(),
            name: fit(&format!("_pgshift_old_{}_", self.run), &source.name),
        }
    }

    /// A temporary name for the shadow's `n`-th index or constraint.
    pub fn shadow_index(&self, n: usize) -> String {
        format!("_pgshift_{}_i{n}", self.run)
    }

    /// The schema the shadow is first made in, under the source's own names; it
    /// exists only inside the transaction that creates the shadow.
    pub fn scratch_schema(&self) -> String {
        format!("_pgshift_{}_scratch", self.run)
    }

    /// A temporary name for the `n`-th object of a kind (`r` a partition's index of
    /// the key, `q` a sequence, `x` extended statistics) of the shadow tree.
    pub fn shadow_object(&self, kind: char, n: usize) -> String {
        format!("_pgshift_{}_{kind}{n}", self.run)
    }

    /// The name an index or constraint of the source takes at the swap.
    pub fn old_index(&self, name: &str) -> String {
        fit(&format!("_pgshift_old_{}_", self.run), name)
    }

    /// The change log table.
    pub fn log_table(&self) -> QualifiedName {
        QualifiedName::qualified(ENGINE_SCHEMA, format!("log_{}", self.run))
    }

    /// The capture trigger function.
    pub fn capture_function(&self) -> QualifiedName {
        QualifiedName::qualified(ENGINE_SCHEMA, format!("capture_{}", self.run))
    }

    /// The function refusing writes (fence) and `TRUNCATE`.
    pub fn refuse_function(&self) -> QualifiedName {
        QualifiedName::qualified(ENGINE_SCHEMA, format!("refuse_{}", self.run))
    }

    /// The capture row trigger (cloned to every partition).
    pub fn capture_trigger(&self) -> String {
        format!("pgshift_capture_{}", self.run)
    }

    /// The fence statement trigger (on the parent and on each partition).
    pub fn fence_trigger(&self) -> String {
        format!("pgshift_fence_{}", self.run)
    }

    /// The statement trigger refusing `TRUNCATE` while capturing.
    pub fn truncate_trigger(&self) -> String {
        format!("pgshift_truncate_{}", self.run)
    }

    /// The `application_name` of a session of the run doing `task`: the engine's
    /// connection name, the task and the run (`pgshift-copy-7`). Every session a run
    /// opens besides its runner is named here, so that a later process of the run
    /// finds each one to end ([`RunNames::task_applications`]) and the throttle tells
    /// them from the application's sessions (by these names, whole).
    fn task_application(&self, task: &str) -> String {
        format!("{APPLICATION_NAME}-{task}-{}", self.run)
    }

    /// The `application_name` of the run's copy sessions.
    pub fn copy_application(&self) -> String {
        self.task_application("copy")
    }

    /// The `application_name` of the run's index builder.
    pub fn index_application(&self) -> String {
        self.task_application("index")
    }

    /// The `application_name` of the run's applier.
    pub fn apply_application(&self) -> String {
        self.task_application("apply")
    }

    /// The `application_name` of the run's verification sessions.
    pub fn verify_application(&self) -> String {
        self.task_application("verify")
    }

    /// The `application_name` of the run's throttle controller.
    pub fn throttle_application(&self) -> String {
        self.task_application("throttle")
    }

    /// The `application_name` of the run's disk watch.
    pub fn disk_application(&self) -> String {
        self.task_application("disk")
    }

    /// Every task session name of the run.
    pub fn task_applications(&self) -> Vec<String> {
        vec![
            self.copy_application(),
            self.index_application(),
            self.apply_application(),
            self.verify_application(),
            self.throttle_application(),
            self.disk_application(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_in_63_bytes() {
        let names = RunNames::new(12345);
        let long = QualifiedName::qualified("s", "é".repeat(40));
        let shadow = names.shadow(&long);
        assert!(shadow.name.len() <= 63, "{}", shadow.name);
        assert!(shadow.name.starts_with("_pgshift_12345_"));
        assert_eq!(names.log_table().to_string(), "\"pgshift\".\"log_12345\"");
        assert!(names.old_index(&"x".repeat(70)).len() <= 63);
    }

    #[test]
    fn long_names_that_share_a_prefix_stay_apart_once_cut() {
        let names = RunNames::new(1234567);
        let stem = "events_community_id_created_at_kind_pubkey_tags_";
        let a = names.old_index(&format!("{stem}idx"));
        let b = names.old_index(&format!("{stem}key"));
        assert_ne!(a, b);
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert!(a.starts_with("_pgshift_old_1234567_events_"), "{a}");
        // The same name always gets the same cut name (resume and abort find it).
        assert_eq!(a, names.old_index(&format!("{stem}idx")));
        // A name that fits is kept whole.
        assert_eq!(names.old_index("t_pkey"), "_pgshift_old_1234567_t_pkey");
        let p = QualifiedName::qualified("s", format!("{stem}2024_01"));
        let q = QualifiedName::qualified("s", format!("{stem}2024_02"));
        assert_ne!(names.shadow(&p), names.shadow(&q));
        assert_ne!(names.old(&p), names.old(&q));
    }

    #[test]
    fn task_sessions_carry_the_engine_prefix_and_are_told_apart() {
        let names = RunNames::new(7);
        let all = names.task_applications();
        assert_eq!(all[0], "pgshift-copy-7");
        let prefix = format!("{APPLICATION_NAME}-");
        assert!(all.iter().all(|a| a.starts_with(&prefix)), "{all:?}");
        let mut distinct = all.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
        // Another run's sessions are not this run's.
        assert!(RunNames::new(70)
            .task_applications()
            .iter()
            .all(|a| !all.contains(a)));
    }
}
