//! Rule 3's exception (`docs/EXECUTION.md`, "What shares a transaction"): an explicit
//! block that must stay one transaction (a `LOCK TABLE`, or data changes with schema
//! changes) but has statements that would need a safer sequence runs whole, as
//! written, as one transaction, when every table it locks that existed before the
//! input holds no rows on the live server. On empty tables the blocking forms have
//! no rows to scan, rewrite or hold writers behind.

use crate::catalog::volume::LiveVolume;
use crate::classify::TransactionUse;
use crate::route::Route;
use crate::script::Script;

/// What the live facts say about running a block whole.
#[derive(Debug)]
pub(super) enum Whole<'a> {
    /// Every pre-existing table it locks is empty here: it runs whole.
    Runs {
        /// Those tables.
        tables: Vec<&'a LiveVolume>,
    },
    /// Some pre-existing table it locks holds rows here, or its size is not known.
    Populated {
        /// Those tables.
        tables: Vec<&'a LiveVolume>,
    },
    /// A statement of it cannot run as written in a transaction (or is refused on
    /// its own): the live sizes do not matter.
    NotAsWritten,
}

/// Judges the block of `members` (its statements, transaction control left out).
// INV: TX-1 — a block that must stay whole runs as written only where every table it
// locks is empty on the live server.
pub(super) fn judge<'a>(script: &'a Script, members: &[usize]) -> Whole<'a> {
    // A statement routed to a safer sequence or to copy-and-swap is one PostgreSQL
    // runs as written inside a transaction (what needs to run outside one, a
    // `CONCURRENTLY`, is routed natively and marked so).
    let as_written = members.iter().all(|&i| {
        let c = &script.statements[i].classification;
        match &c.route {
            Route::Native => c.transaction != TransactionUse::OutsideOnly,
            Route::NativeSequence { .. } | Route::CopyAndSwap => true,
            Route::Refused { .. } => false,
        }
    });
    if !as_written {
        return Whole::NotAsWritten;
    }
    let mut tables: Vec<&LiveVolume> = Vec::new();
    for &i in members {
        for volume in &script.statements[i].live {
            if !tables.iter().any(|t| t.relation.matches(&volume.relation)) {
                tables.push(volume);
            }
        }
    }
    let populated: Vec<&LiveVolume> = tables.iter().copied().filter(|t| !t.empty()).collect();
    if populated.is_empty() {
        Whole::Runs { tables }
    } else {
        Whole::Populated { tables: populated }
    }
}

/// `"public"."channels", "public"."communities"`.
pub(super) fn names(tables: &[&LiveVolume]) -> String {
    tables
        .iter()
        .map(|t| t.relation.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"public"."channels" (16384 bytes, ~120 rows), …`.
pub(super) fn sizes(tables: &[&LiveVolume]) -> String {
    tables
        .iter()
        .map(|t| t.describe())
        .collect::<Vec<_>>()
        .join(", ")
}
