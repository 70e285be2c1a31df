//! The differences between the native statement and copy-and-swap that are intended,
//! each listed (with its reason) in `docs/COPY-AND-SWAP.md` under "Intended
//! differences", scoped to the forms and shapes it is about and to the lines it
//! excuses. The harness fails when an allowance never excuses anything over the
//! corpus (it would be stale), and a test checks each one excuses only its own lines.

use super::shape::Shape;
use super::snapshot::Mask;
use super::statement::Form;

/// One intended (or, pointing at an issue, temporarily tolerated) difference.
pub struct Allowance {
    /// Its name, as in `docs/COPY-AND-SWAP.md`.
    pub id: &'static str,
    /// Whether it applies to a case on a server of a version (`server_version_num`).
    pub applies: fn(&Shape, Form, i32) -> bool,
    /// The part of a snapshot line it allows to differ, blanked out (`None`: the line
    /// is not its business). Both sides' lines are compared after this.
    pub blank: fn(&str) -> Option<String>,
}

/// A column whose values copy-and-swap computes again, so that they are compared as
/// the allowance says rather than row by row: `(table, column, how)`.
pub fn mask(form: Form) -> Option<(&'static str, &'static str, Mask)> {
    match form {
        Form::AddNextval => Some(("item", "stamp", Mask::Multiset)),
        Form::AddSerial => Some(("item", "ticket", Mask::Multiset)),
        Form::AddIdentity => Some(("item", "seqno", Mask::Multiset)),
        Form::AddRandom => Some(("item", "token", Mask::Distinct)),
        _ => None,
    }
}

/// The id under which [`mask`] is documented.
pub const VOLATILE_VALUES: &str = "volatile-values";

/// The id of the allowance for what copy-and-swap does where PostgreSQL refuses.
pub const DEPENDENTS_RECREATED: &str = "dependents-recreated";

/// Where PostgreSQL rejected the statement (`rejected`: its message and SQLSTATE)
/// because a view or a trigger's column list uses the column it changes, and
/// copy-and-swap carries the change out by making them again on the new table: the
/// native oracle to compare with instead, the statement (`{statement}`) between
/// dropping those dependents and making them again.
pub fn dependents_recreated(
    shape: &Shape,
    form: Form,
    version: i32,
    rejected: &str,
) -> Option<String> {
    if !rejected.ends_with("(0A000)") {
        return None;
    }
    let (drop, create) = shape.dependents_of(form.altered_column(shape)?, version)?;
    Some(format!("{drop}{{statement}};\n{create}"))
}

/// Every line-level allowance.
pub const ALLOWANCES: &[Allowance] = &[PARTITION_FOREIGN_KEY_CLONES];

/// The ids of every allowance, the data mask's included.
pub fn ids() -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = ALLOWANCES.iter().map(|a| a.id).collect();
    ids.push(VOLATILE_VALUES);
    ids.push(DEPENDENTS_RECREATED);
    ids.push(CLUSTER_BEFORE_15);
    ids
}

/// The allowances applying to a case.
pub fn applicable(shape: &Shape, form: Form, version: i32) -> Vec<&'static Allowance> {
    ALLOWANCES
        .iter()
        .filter(|a| (a.applies)(shape, form, version))
        .collect()
}

/// PostgreSQL 14 cannot `CLUSTER` a partitioned table (0A000); copy-and-swap rebuilds
/// it all the same. The oracle is then the table as it was, the clustered marks of the
/// partitions' indexes aside.
pub const CLUSTER_BEFORE_15: &str = "cluster-partitioned-before-15";

/// Whether [`CLUSTER_BEFORE_15`] covers a case PostgreSQL rejected with `rejected`.
pub fn cluster_before_15(shape: &Shape, form: Form, version: i32, rejected: &str) -> bool {
    form == Form::Cluster
        && shape.partitioned()
        && version < 150000
        && rejected.starts_with("cannot cluster a partitioned table")
}

/// Blanks the clustered mark of an index line.
pub const CLUSTER_MARKS: Allowance = Allowance {
    id: CLUSTER_BEFORE_15,
    applies: |_, _, _| true,
    blank: |line| {
        line.starts_with("index ").then(|| {
            line.replace(" clustered=t ", " clustered=* ")
                .replace(" clustered=f ", " clustered=* ")
        })
    },
};

/// A foreign key pointing at a partitioned table has one clone per partition (on the
/// referencing table, `conparentid` the key). The swap re-points the key `NOT VALID`
/// and validates it after commit: PostgreSQL's `VALIDATE CONSTRAINT` checks every row
/// but marks only the key validated, not its clones. Only `validated=` (and the
/// `NOT VALID` in the definition) of those clones is blanked.
const PARTITION_FOREIGN_KEY_CLONES: Allowance = Allowance {
    id: "partition-foreign-key-clones",
    // PostgreSQL 18 marks the clones validated too.
    applies: |shape, _, version| shape.fk_in && shape.partitioned() && version < 180000,
    blank: |line| {
        (line.starts_with("constraint public.item_ref.")
            && line.contains(" parent=public.item_ref.item_ref_item_fkey "))
        .then(|| {
            line.replace(" NOT VALID deferrable=", " deferrable=")
                .replace(" validated=f ", " validated=* ")
                .replace(" validated=t ", " validated=* ")
        })
    },
};
