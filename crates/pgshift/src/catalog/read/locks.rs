//! The relation locks other sessions hold or wait for on each relation and its
//! members (partitions, indexes, TOAST table and TOAST index), from `pg_locks`.
//!
//! `pg_locks` is readable by every role and reading it takes no relation lock. The
//! members of a relation are found through `pg_inherits` (a recursive query, not
//! `pg_partition_tree`, which takes ACCESS SHARE on every partition: checked against a
//! holder on PostgreSQL 14, 15 and 18 by `tests/catalog_locked.rs`).

use std::collections::HashMap;

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::LockElsewhere;
use crate::lock::LockMode;

const STEP: &str = "locks";

/// The members of each root: itself, and its partitions at every level.
pub(super) const TREE_CTE: &str = "\
WITH RECURSIVE tree(root, relid) AS (
        SELECT r.root, r.root FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS r(root)
        UNION ALL
        SELECT t.root, i.inhrelid
          FROM tree t
          JOIN pg_catalog.pg_inherits i ON i.inhparent OPERATOR(pg_catalog.=) t.relid
          JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
         WHERE c.relispartition
       )";

const SQL: &str = "\
, members(root, rel) AS (
        SELECT t.root, t.relid FROM tree t
        UNION ALL
        SELECT t.root, x.indexrelid FROM tree t
          JOIN pg_catalog.pg_index x ON x.indrelid OPERATOR(pg_catalog.=) t.relid
        UNION ALL
        SELECT t.root, c.reltoastrelid FROM tree t
          JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid
         WHERE c.reltoastrelid OPERATOR(pg_catalog.<>) '0'::pg_catalog.oid
        UNION ALL
        SELECT t.root, x.indexrelid FROM tree t
          JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid
          JOIN pg_catalog.pg_index x ON x.indrelid OPERATOR(pg_catalog.=) c.reltoastrelid
       )
SELECT m.root, n.nspname, c.relname, l.pid, l.mode, l.granted
  FROM members m
  JOIN pg_catalog.pg_locks l
    ON l.locktype OPERATOR(pg_catalog.=) 'relation'
   AND l.relation OPERATOR(pg_catalog.=) m.rel
   AND l.database OPERATOR(pg_catalog.=)
       (SELECT d.oid FROM pg_catalog.pg_database d
         WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) m.rel
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 WHERE l.pid IS DISTINCT FROM pg_catalog.pg_backend_pid()
 ORDER BY m.root, n.nspname, c.relname, l.granted DESC, l.pid";

/// The locks held or awaited by other sessions on each of `oids` and its members.
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
) -> Result<HashMap<u32, Vec<LockElsewhere>>, CatalogError> {
    let mut found: HashMap<u32, Vec<LockElsewhere>> = HashMap::new();
    if oids.is_empty() {
        return Ok(found);
    }
    let rows = query(client, STEP, &format!("{TREE_CTE}{SQL}"), &[&oids]).await?;
    for row in &rows {
        let fields = Fields::new(row, STEP);
        let mode: String = fields.get("mode")?;
        // Advisory and other non-table modes never appear on a relation lock.
        let Some(mode) = LockMode::from_pg_locks_name(&mode) else {
            continue;
        };
        found
            .entry(fields.get("root")?)
            .or_default()
            .push(LockElsewhere {
                relation: fields.name("nspname", "relname")?,
                pid: fields.get::<Option<i32>>("pid")?,
                mode,
                granted: fields.get("granted")?,
            });
    }
    Ok(found)
}

/// Whether another session holds or waits for ACCESS EXCLUSIVE on the relation `oid` or
/// one of its members, so that a read needing ACCESS SHARE on them would wait; read
/// without taking any relation lock.
pub async fn access_exclusive_elsewhere(client: &Client, oid: u32) -> Result<bool, CatalogError> {
    Ok(read(client, &[oid])
        .await?
        .get(&oid)
        .is_some_and(|locks| blocks_size_functions(locks)))
}

/// Whether the size functions (which take ACCESS SHARE on every member) would wait:
/// another session holds or waits for ACCESS EXCLUSIVE on one of them.
pub(super) fn blocks_size_functions(locks: &[LockElsewhere]) -> bool {
    locks.iter().any(|l| l.mode == LockMode::AccessExclusive)
}
