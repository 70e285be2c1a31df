//! Sizes and row estimates, summed over every partition (recursively).
//!
//! The members of a relation are the relation and its partitions at every level
//! (found through `pg_inherits`, which takes no lock). The size functions
//! (`pg_relation_size` and friends) take ACCESS SHARE on each member and its indexes
//! for as long as they read it, so they would wait behind an ACCESS EXCLUSIVE held (or
//! awaited) by another session. For a relation [`super::locks`] finds so locked, the
//! sizes are estimates from `pg_class.relpages` (as of the last `VACUUM`, `ANALYZE` or
//! index build) and say so; the others are measured inside a savepoint, and a lock
//! taken in the meantime (55P03 or 57014) rolls back to it and falls back to the
//! estimates too. No size read ever fails the snapshot on a lock.

use std::collections::{HashMap, HashSet};

use tokio_postgres::Client;

use super::error::CatalogError;
use super::locks::TREE_CTE;
use super::rows::{query, Fields};
use crate::catalog::facts::Sizes;

const STEP: &str = "sizes";

const MEASURED: &str = "
SELECT t.root, t.relid, (c.relkind OPERATOR(pg_catalog.<>) 'p' AND c.relkind OPERATOR(pg_catalog.<>) 'I') AS isleaf, c.reltuples,
       pg_catalog.pg_relation_size(t.relid) AS heap_bytes,
       pg_catalog.pg_indexes_size(t.relid) AS index_bytes,
       CASE WHEN c.reltoastrelid OPERATOR(pg_catalog.<>) '0'::pg_catalog.oid
            THEN pg_catalog.pg_total_relation_size(c.reltoastrelid) END AS toast_bytes,
       pg_catalog.pg_total_relation_size(t.relid) AS total_bytes
  FROM tree t
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid";

const ESTIMATED: &str = "
, block AS (SELECT pg_catalog.current_setting('block_size')::pg_catalog.int8 AS bytes)
SELECT t.root, t.relid, (c.relkind OPERATOR(pg_catalog.<>) 'p' AND c.relkind OPERATOR(pg_catalog.<>) 'I') AS isleaf, c.reltuples,
       c.relpages::pg_catalog.int8 OPERATOR(pg_catalog.*) b.bytes AS heap_bytes,
       COALESCE((SELECT pg_catalog.sum(ic.relpages)::pg_catalog.int8
                   FROM pg_catalog.pg_index x
                   JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) x.indexrelid
                  WHERE x.indrelid OPERATOR(pg_catalog.=) t.relid), 0)
         OPERATOR(pg_catalog.*) b.bytes AS index_bytes,
       (SELECT (tc.relpages::pg_catalog.int8 OPERATOR(pg_catalog.+) COALESCE(
                 (SELECT pg_catalog.sum(ic.relpages)::pg_catalog.int8
                    FROM pg_catalog.pg_index x
                    JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) x.indexrelid
                   WHERE x.indrelid OPERATOR(pg_catalog.=) tc.oid), 0))
               OPERATOR(pg_catalog.*) b.bytes
          FROM pg_catalog.pg_class tc
         WHERE tc.oid OPERATOR(pg_catalog.=) c.reltoastrelid) AS toast_bytes,
       NULL::pg_catalog.int8 AS total_bytes
  FROM tree t
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid
 CROSS JOIN block b";

const SAVEPOINT: &str = "SAVEPOINT pgshift_sizes";

/// Sizes and the row estimate of one relation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Volume {
    /// Bytes, summed over the members.
    pub(super) sizes: Sizes,
    /// `reltuples` summed over the analysed leaves; -1 when no leaf was analysed.
    pub(super) row_estimate: i64,
    /// Whether the sizes are estimates from `relpages` (the relation was locked).
    pub(super) estimated: bool,
}

/// A running sum over the members of one relation.
#[derive(Default)]
struct Sum {
    sizes: Sizes,
    rows: f64,
    analysed: bool,
}

/// Reads the sizes and row estimates of `oids`; those in `locked` (and any that get
/// locked while they are measured) are estimated instead of measured.
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
    locked: &HashSet<u32>,
) -> Result<HashMap<u32, Volume>, CatalogError> {
    let (mut estimate_oids, measure_oids): (Vec<u32>, Vec<u32>) =
        oids.iter().partition(|oid| locked.contains(oid));
    let mut volumes = HashMap::new();
    if !measure_oids.is_empty() {
        match measured(client, &measure_oids).await? {
            Some(rows) => volumes.extend(sum(&rows, false)?),
            None => estimate_oids.extend(measure_oids),
        }
    }
    if !estimate_oids.is_empty() {
        let sql = format!("{TREE_CTE}{ESTIMATED}");
        let rows = query(client, STEP, &sql, &[&estimate_oids]).await?;
        volumes.extend(sum(&rows, true)?);
    }
    Ok(volumes)
}

/// The measured rows, or `None` when a member got locked meanwhile (the savepoint is
/// rolled back and the read goes on).
async fn measured(
    client: &Client,
    oids: &[u32],
) -> Result<Option<Vec<tokio_postgres::Row>>, CatalogError> {
    client
        .batch_execute(SAVEPOINT)
        .await
        .map_err(|source| CatalogError::query(STEP, source))?;
    let sql = format!("{TREE_CTE}{MEASURED}");
    match query(client, STEP, &sql, &[&oids]).await {
        Ok(rows) => {
            client
                .batch_execute("RELEASE SAVEPOINT pgshift_sizes")
                .await
                .map_err(|source| CatalogError::query(STEP, source))?;
            Ok(Some(rows))
        }
        Err(CatalogError::LockTimeout { .. } | CatalogError::StatementTimeout { .. }) => {
            client
                .batch_execute("ROLLBACK TO SAVEPOINT pgshift_sizes")
                .await
                .map_err(|source| CatalogError::query(STEP, source))?;
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// Sums the member rows per root.
fn sum(
    rows: &[tokio_postgres::Row],
    estimated: bool,
) -> Result<HashMap<u32, Volume>, CatalogError> {
    let mut sums: HashMap<u32, Sum> = HashMap::new();
    for row in rows {
        let fields = Fields::new(row, STEP);
        let relid: u32 = fields.get("relid")?;
        let size = |column| -> Result<i64, CatalogError> {
            fields
                .get::<Option<i64>>(column)?
                .ok_or(CatalogError::ChangedDuringRead {
                    step: STEP,
                    oid: relid,
                })
        };
        let sum = sums.entry(fields.get("root")?).or_default();
        let heap = size("heap_bytes")?;
        let index = size("index_bytes")?;
        let toast = fields.get::<Option<i64>>("toast_bytes")?.unwrap_or(0);
        let total = if estimated {
            heap.saturating_add(index).saturating_add(toast)
        } else {
            size("total_bytes")?
        };
        sum.sizes.heap_bytes = sum.sizes.heap_bytes.saturating_add(heap);
        sum.sizes.index_bytes = sum.sizes.index_bytes.saturating_add(index);
        sum.sizes.toast_bytes = sum.sizes.toast_bytes.saturating_add(toast);
        sum.sizes.total_bytes = sum.sizes.total_bytes.saturating_add(total);
        let reltuples: f32 = fields.get("reltuples")?;
        if fields.get::<Option<bool>>("isleaf")?.unwrap_or(false) && reltuples >= 0.0 {
            sum.rows += f64::from(reltuples);
            sum.analysed = true;
        }
    }
    Ok(sums
        .into_iter()
        .map(|(oid, sum)| {
            let row_estimate = if sum.analysed { estimate(sum.rows) } else { -1 };
            (
                oid,
                Volume {
                    sizes: sum.sizes,
                    row_estimate,
                    estimated,
                },
            )
        })
        .collect())
}

/// Rounds a (finite, non-negative) sum of `reltuples` to a row count.
fn estimate(rows: f64) -> i64 {
    if rows.is_finite() && rows < i64::MAX as f64 {
        // In range by the check above; `as` saturates anyway.
        rows.round() as i64
    } else {
        i64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_round_and_saturate() {
        assert_eq!(estimate(0.0), 0);
        assert_eq!(estimate(1499.6), 1500);
        assert_eq!(estimate(f64::INFINITY), i64::MAX);
        assert_eq!(estimate(1e30), i64::MAX);
    }
}
