//! The shadow's plain index builds, several at once while the throttle leaves the work
//! open. One build leaves cores idle for long stretches: its leader merges and writes
//! the index alone after its workers have sorted, and a GIN build or a partition too
//! small for parallel workers runs on one core throughout. A second build on its own
//! session takes those cores (`docs/COPY-AND-SWAP.md`, "Index builds at once").
//!
//! Only plain `CREATE [UNIQUE] INDEX` builds of the table run together: each takes the
//! shadow in SHARE mode, which another build's SHARE does not conflict with. An index
//! that backs a constraint (`ALTER TABLE`, ACCESS EXCLUSIVE) and a partition's own
//! index are built one at a time after them ([`pooled`]).
//!
//! The throttle (INV: OC-5): the first build of a stretch waits for admission as
//! every build did; another starts beside a running one only while the pace is open
//! (a slowed pace runs one build at a time, without parallel workers). The applier is
//! held from the first build of a stretch until the last of it ends, then catches up.
//! A build that fails cancels the others (they hold the shadow's lock until they end)
//! and is the phase's error; a build that committed stays built, and a resumed phase
//! skips it.

use futures_util::stream::{FuturesUnordered, StreamExt};
use pgshift_sql::NodeEnum;
use std::collections::BTreeMap;

use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::indexes::{hold_applier, on_shadow_at};
use crate::cas::error::CasError;
use crate::cas::index_watch::{Builder, IndexBuild, Watcher, EVERY};
use crate::cas::plan::{RunPlan, ShadowIndex};
use crate::cas::session::{self, ShadowLock};
use crate::cas::throttle::{Pace, Pacer};

/// Whether `index` may be built beside other builds: a plain `CREATE [UNIQUE] INDEX`
/// of the table (not of one partition, not backing a constraint).
pub(super) fn pooled(index: &ShadowIndex) -> bool {
    !index.constraint && index.partition.is_none() && index.sql.starts_with("CREATE ")
}

/// How long a build of `index` is expected to take beside the others, coarsely: 0 for
/// the kinds that cost the most per row (GIN, GiST, SP-GiST: several entries per row or
/// a tree built by insertion, and before PostgreSQL 18 no parallel workers), 2 for
/// BRIN (a summary per range of pages), 1 for the rest (btree, hash). The access
/// method is read from the statement by the server's grammar; a statement it cannot
/// read ranks with the btrees.
fn cost_rank(index: &ShadowIndex) -> u8 {
    let method = pgshift_sql::parse(&index.sql).ok().and_then(|statements| {
        match statements.first().map(|s| &s.node) {
            Some(NodeEnum::IndexStmt(stmt)) => Some(stmt.access_method.to_ascii_lowercase()),
            _ => None,
        }
    });
    match method.as_deref() {
        Some("gin" | "gist" | "spgist") => 0,
        Some("brin") => 2,
        _ => 1,
    }
}

/// The pool's builds in the order it starts them: the costliest kinds first (stable
/// within a kind), so that what runs alone at the end of the pool, with a core idle
/// beside it, is a short build rather than a GIN's.
pub(super) fn costliest_first(mut todo: Vec<&ShadowIndex>) -> Vec<&ShadowIndex> {
    todo.sort_by_cached_key(|index| cost_rank(index));
    todo
}

/// Whether a build may start beside running ones under the throttle's decision in
/// force: only while the pace is open. A slowed pace runs one build at a time, each
/// without parallel workers, as before builds ran at once.
fn may_start_beside(pace: Pace) -> bool {
    // INV: OC-5 — a build beside another only while the pace is open.
    pace == Pace::Open
}

/// What the pool works with.
pub(super) struct Pool<'a> {
    /// The build sessions: each runs one build at a time.
    pub builders: &'a [Builder],
    /// The session that reads the builds' progress and cancels them on a failure.
    pub monitor: &'a Client,
    pub plan: &'a RunPlan,
    pub pacer: &'a Pacer,
    /// The shadow's lock for each build.
    pub lock: ShadowLock,
}

/// A running build: its session, its number, and its outcome.
type Ended = (usize, usize, Result<(), tokio_postgres::Error>);

impl Pool<'_> {
    /// Builds `todo`, up to one per builder at once, reporting on `watcher`; the
    /// `applier` is held for each stretch of builds (released when the stretch ends).
    pub(super) async fn build(
        &self,
        todo: &[&ShadowIndex],
        watcher: &mut Watcher<'_>,
        applier: Option<&ApplierTask>,
    ) -> Result<(), CasError> {
        let mut next = 0;
        let mut running = FuturesUnordered::new();
        // Running builds by number: the lowest is the one whose readings are reported.
        let mut builds: BTreeMap<usize, (Option<i32>, IndexBuild)> = BTreeMap::new();
        let mut free: Vec<usize> = (0..self.builders.len()).rev().collect();
        let mut held = None;
        let mut tick = tokio::time::interval(EVERY);
        tick.tick().await;
        loop {
            while let (Some(index), Some(&slot)) = (todo.get(next), free.last()) {
                let pace = if running.is_empty() {
                    self.pacer.admit().await
                } else if may_start_beside(self.pacer.pace()) {
                    Pace::Open
                } else {
                    break;
                };
                next += 1;
                free.pop();
                if held.is_none() {
                    held = Some(hold_applier(applier).await);
                }
                let build = watcher.start(&index.source_name, running.len() + 1);
                let number = build.number;
                builds.insert(number, (self.builders[slot].pid(), build));
                let sql = on_shadow_at(self.plan, &index.sql, pace, self.lock);
                let client = self.builders[slot].client();
                running.push(async move { (slot, number, client.batch_execute(&sql).await) });
            }
            if running.is_empty() {
                return Ok(());
            }
            let ended = tokio::select! {
                Some(ended) = running.next() => Some(ended),
                _ = tick.tick() => None,
            };
            match ended {
                Some((slot, number, result)) => {
                    let ended = builds.remove(&number);
                    if let Err(e) = result {
                        let what = ended.map_or_else(String::new, |(_, b)| b.index);
                        return self.fail(slot, &what, e, &builds, running).await;
                    }
                    free.push(slot);
                    if running.is_empty() {
                        // The stretch is over: the applier catches up before the next.
                        held = None;
                    }
                }
                None => {
                    let at_once = builds.len();
                    if let Some((_, (Some(pid), build))) = builds.iter_mut().next() {
                        build.at_once = at_once;
                        watcher.read(*pid, build).await;
                    }
                }
            }
        }
    }

    /// A build on `slot` failed: cancels the others, waits for them to end, and
    /// returns the failure.
    async fn fail<S>(
        &self,
        slot: usize,
        index: &str,
        error: tokio_postgres::Error,
        others: &BTreeMap<usize, (Option<i32>, IndexBuild)>,
        mut running: S,
    ) -> Result<(), CasError>
    where
        S: futures_util::Stream<Item = Ended> + Unpin,
    {
        for pid in others.values().filter_map(|(pid, _)| *pid) {
            // Best effort: a build that ends meanwhile needs no cancel.
            let _ = self
                .monitor
                .execute("SELECT pg_catalog.pg_cancel_backend($1)", &[&pid])
                .await;
        }
        while let Some((other, _, result)) = running.next().await {
            if result.is_err() {
                let _ = self.builders[other]
                    .client()
                    .batch_execute("ROLLBACK")
                    .await;
            }
        }
        session::settle(
            self.builders[slot].client(),
            &format!("building index {index} on the shadow"),
            Err(error),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(name: &str, sql: &str) -> ShadowIndex {
        ShadowIndex {
            source_name: name.to_owned(),
            temp_name: name.to_owned(),
            sql: sql.to_owned(),
            constraint: false,
            replica_identity: false,
            partition: None,
            partition_names: Vec::new(),
        }
    }

    #[test]
    fn the_pool_starts_the_costliest_kinds_of_build_first() {
        let indexes = [
            index("a", "CREATE INDEX a ON s.t USING btree (id)"),
            index("b", "CREATE INDEX b ON s.t USING brin (at)"),
            index("c", "CREATE INDEX c ON s.t USING gin (tags)"),
            index(
                "d",
                "CREATE UNIQUE INDEX d ON s.t USING btree (k) INCLUDE (v)",
            ),
            index("e", "CREATE INDEX e ON s.t USING gist (box)"),
            index("f", "CREATE INDEX f ON s.t (plain)"),
            index("g", "CREATE INDEX g ON s.t USING hash (h)"),
            index("h", "not an index statement"),
            index("i", "CREATE INDEX i ON s.t USING spgist (p)"),
        ];
        let order: Vec<&str> = costliest_first(indexes.iter().collect())
            .into_iter()
            .map(|i| i.source_name.as_str())
            .collect();
        assert_eq!(order, ["c", "e", "i", "a", "d", "f", "g", "h", "b"]);
    }

    #[test]
    fn inv_oc_5_a_build_starts_beside_another_only_while_the_pace_is_open() {
        assert!(may_start_beside(Pace::Open));
        assert!(!may_start_beside(Pace::Paused));
        for workers in [1, 2, 8] {
            assert!(!may_start_beside(Pace::Slow {
                pause_ms: 0,
                workers
            }));
        }
    }
}
