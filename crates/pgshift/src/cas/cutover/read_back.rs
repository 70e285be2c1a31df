//! The catalog read back before `COMMIT` (INV: CO-8), in one statement: which OIDs
//! the name and the old name denote, the new table's user triggers and indexes, and
//! any temporary name left on the new tree.

use tokio_postgres::Row;

use super::{CasError, RunPlan};

/// `$1`, `$2`: the table's schema and name; `$3`: its `_pgshift_old_…` name. One row
/// (none when the name is free): the name's OID, its user trigger count, its index
/// count, the old name's OID, and the `_pgshift_` names of the indexes and
/// constraints of the new table and its partitions.
pub(super) const READ_BACK_SQL: &str = "SELECT c.oid, \
        (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) c.oid AND NOT t.tgisinternal), \
        (SELECT pg_catalog.count(*) FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid), \
        (SELECT o.oid FROM pg_catalog.pg_class o JOIN pg_catalog.pg_namespace onsp ON onsp.oid OPERATOR(pg_catalog.=) o.relnamespace \
          WHERE onsp.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND o.relname OPERATOR(pg_catalog.=) $3::pg_catalog.text), \
        ARRAY(SELECT ic.relname::pg_catalog.text \
                FROM (SELECT c.oid AS oid UNION ALL \
                      SELECT h.inhrelid FROM pg_catalog.pg_inherits h WHERE h.inhparent OPERATOR(pg_catalog.=) c.oid) tree \
                JOIN pg_catalog.pg_index i ON i.indrelid OPERATOR(pg_catalog.=) tree.oid \
                JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
               WHERE ic.relname::pg_catalog.text ~ '^_pgshift_' \
              UNION ALL \
              SELECT con.conname::pg_catalog.text \
                FROM (SELECT c.oid AS oid UNION ALL \
                      SELECT h.inhrelid FROM pg_catalog.pg_inherits h WHERE h.inhparent OPERATOR(pg_catalog.=) c.oid) tree \
                JOIN pg_catalog.pg_constraint con ON con.conrelid OPERATOR(pg_catalog.=) tree.oid \
               WHERE con.conname::pg_catalog.text ~ '^_pgshift_') \
   FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text";

/// [`READ_BACK_SQL`]'s parameters.
pub(super) fn params(plan: &RunPlan) -> [String; 3] {
    [
        plan.source.table.name.schema.clone().unwrap_or_default(),
        plan.source.table.name.name.clone(),
        plan.names().old(&plan.source.table.name).name,
    ]
}

/// Checks the row read back: the name denotes the shadow's OID, the old name the
/// source's, the trigger and index counts are the source's, and (for a plan with
/// every final name known) no temporary name is left.
pub(super) fn check(plan: &RunPlan, row: &Row) -> Result<(), CasError> {
    let old_oid: Option<u32> = row.get(3);
    if old_oid != Some(plan.source.table.oid) {
        return Err(CasError::Record(
            "after the renames the old name does not denote the source".to_owned(),
        ));
    }
    let new_oid: u32 = row.get(0);
    if new_oid == plan.source.table.oid {
        return Err(CasError::Record(
            "after the renames the name still denotes the source".to_owned(),
        ));
    }
    let expected_triggers = plan
        .source
        .triggers
        .iter()
        .filter(|t| !t.clone && t.on == plan.source.table.name)
        .count();
    // INV: CO-8 — before COMMIT, the name denotes the new table, the old name the
    // source, and the new table carries every user trigger and every planned index
    // (those the statement added included), under final names only.
    let triggers: i64 = row.get(1);
    if usize::try_from(triggers).unwrap_or(usize::MAX) != expected_triggers {
        return Err(CasError::Record(format!(
            "the new table has {triggers} user triggers; the source had {expected_triggers}"
        )));
    }
    let indexes: i64 = row.get(2);
    let expected_indexes = plan
        .indexes
        .iter()
        .filter(|i| i.partition.is_none())
        .count()
        + 1;
    if usize::try_from(indexes).unwrap_or(usize::MAX) != expected_indexes {
        return Err(CasError::Record(format!(
            "the new table has {indexes} indexes; the plan built {expected_indexes}"
        )));
    }
    // Every name on the new tree is a final one: the source's, or PostgreSQL's for
    // what the statement added.
    let leftover: Vec<String> = row.get(4);
    if plan.source.carry.complete && !leftover.is_empty() {
        return Err(CasError::Record(format!(
            "the new table still has temporary names: {}",
            leftover.join(", ")
        )));
    }
    Ok(())
}
