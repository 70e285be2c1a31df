//! Sizes and row estimates, summed over every partition (recursively).
//!
//! The members of a relation are its `pg_partition_tree` (partitioned tables and
//! indexes, and partitions), or the relation alone when it has no tree (a plain table,
//! a view, a sequence). The size functions take `ACCESS SHARE` on each member, so this
//! step waits behind an `ACCESS EXCLUSIVE` holder, bounded by the session's
//! `lock_timeout` and `statement_timeout`.

use std::collections::HashMap;

use tokio_postgres::Client;

use super::error::CatalogError;
use super::rows::{query, Fields};
use crate::catalog::facts::Sizes;

const STEP: &str = "sizes";

const SQL: &str = "\
SELECT r.root, m.relid, m.isleaf, c.reltuples,
       pg_catalog.pg_relation_size(m.relid) AS heap_bytes,
       pg_catalog.pg_indexes_size(m.relid) AS index_bytes,
       CASE WHEN c.reltoastrelid OPERATOR(pg_catalog.<>) '0'::pg_catalog.oid
            THEN pg_catalog.pg_total_relation_size(c.reltoastrelid) END AS toast_bytes,
       pg_catalog.pg_total_relation_size(m.relid) AS total_bytes
  FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS r(root)
 CROSS JOIN LATERAL (
        SELECT t.relid::pg_catalog.oid AS relid, t.isleaf
          FROM pg_catalog.pg_partition_tree(r.root) AS t
        UNION ALL
        SELECT r.root, true
         WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_partition_tree(r.root))
       ) AS m
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) m.relid";

/// Sizes and the row estimate of one relation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Volume {
    /// Bytes, summed over the members.
    pub(super) sizes: Sizes,
    /// `reltuples` summed over the analysed leaves; -1 when no leaf was analysed.
    pub(super) row_estimate: i64,
}

/// A running sum over the members of one relation.
#[derive(Default)]
struct Sum {
    sizes: Sizes,
    rows: f64,
    analysed: bool,
}

/// Reads the sizes and row estimates of `oids`.
pub(super) async fn read(
    client: &Client,
    oids: &[u32],
) -> Result<HashMap<u32, Volume>, CatalogError> {
    if oids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = query(client, STEP, SQL, &[&oids]).await?;
    let mut sums: HashMap<u32, Sum> = HashMap::new();
    for row in &rows {
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
        sum.sizes.heap_bytes = sum.sizes.heap_bytes.saturating_add(size("heap_bytes")?);
        sum.sizes.index_bytes = sum.sizes.index_bytes.saturating_add(size("index_bytes")?);
        let toast = fields.get::<Option<i64>>("toast_bytes")?.unwrap_or(0);
        sum.sizes.toast_bytes = sum.sizes.toast_bytes.saturating_add(toast);
        sum.sizes.total_bytes = sum.sizes.total_bytes.saturating_add(size("total_bytes")?);
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
