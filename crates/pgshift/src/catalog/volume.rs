//! What the live catalog says about the size of a relation a statement locks: the
//! facts an explicit block that must stay whole is judged by (`docs/EXECUTION.md`,
//! "What shares a transaction", rule 3).

use serde::Serialize;

use super::facts::{CatalogSnapshot, Lookup, RelationKind};
use pgshift_sql::QualifiedName;

/// The live size of one pre-existing relation a statement locks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LiveVolume {
    /// The relation, as the statement names it.
    pub relation: QualifiedName,
    /// Heap bytes over every partition, measured on the live server; `None` when not
    /// known (no live facts, facts declared by a schema file, or sizes estimated from
    /// `relpages` because another session held the relation locked).
    pub heap_bytes: Option<i64>,
    /// `reltuples` summed over partitions (-1 when never analysed, or not known).
    pub row_estimate: i64,
}

impl LiveVolume {
    /// Whether the live server shows the relation holding no rows: no heap page on
    /// disk, over every partition. A table whose rows were all deleted holds pages
    /// until `VACUUM` or `TRUNCATE` gives them back, so it does not count as empty.
    pub fn empty(&self) -> bool {
        self.heap_bytes == Some(0)
    }

    /// `channels (16384 bytes, ~120 rows)`, or `channels (size not known)`.
    pub fn describe(&self) -> String {
        let name = self.relation.to_string();
        match self.heap_bytes {
            None => format!("{name} (size not known)"),
            Some(bytes) if self.row_estimate >= 0 => {
                format!("{name} ({bytes} bytes, ~{} rows)", self.row_estimate)
            }
            Some(bytes) => format!("{name} ({bytes} bytes)"),
        }
    }
}

/// The live volume of `relation`, a pre-existing relation a statement locks; `None`
/// when it has no rows of its own to judge by (an index, a sequence, a view — a view's
/// base relations and an index's table are locked, and judged, themselves) or when the
/// live server has no relation of that name (the input creates it).
pub fn live_volume(
    facts: Option<&CatalogSnapshot>,
    relation: &QualifiedName,
) -> Option<LiveVolume> {
    let unknown = || LiveVolume {
        relation: relation.clone(),
        heap_bytes: None,
        row_estimate: -1,
    };
    let Some(facts) = facts.filter(|f| !f.is_declared()) else {
        return Some(unknown());
    };
    let found = match facts.lookup(relation) {
        Lookup::Found(found) => Some(found),
        Lookup::Missing => return None,
        Lookup::Unknown => facts.by_name(relation),
    };
    let Some(found) = found else {
        return Some(unknown());
    };
    match found.kind {
        RelationKind::Table | RelationKind::PartitionedTable | RelationKind::MaterializedView => {}
        // Its rows live on another server: nothing here says how many.
        RelationKind::ForeignTable => return Some(unknown()),
        _ => return None,
    }
    Some(LiveVolume {
        relation: relation.clone(),
        heap_bytes: (!found.sizes_estimated).then_some(found.sizes.heap_bytes),
        row_estimate: if found.sizes_estimated {
            -1
        } else {
            found.row_estimate
        },
    })
}
