//! Verification: chunk by chunk, in one `REPEATABLE READ` snapshot per chunk, every row
//! of the source, its values cast to the shadow's types, compared with the shadow's row
//! of the same key — exactly, not by a digest: each value by its type's `=` where that
//! holds only for identical values (integers, `uuid`, timestamps, `text` under `"C"`,
//! …) and by its text form otherwise; and every shadow row matched to a source row —
//! over the keys that have no change-log entry visible in that snapshot (INV: CO-6).
//! Those keys are the applier's to bring over from the source (and the swap drains the
//! last of them under its lock); comparing them would only race it. A chunk where they
//! are many waits for the applier and is tried again (smaller), so that verification
//! passes on a table that is written to all the time — and still compares nearly every
//! row.

use std::time::Duration;

use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use super::error::CasError;
use super::keys::KeyValue;
use super::plan::VerifyMethod;
use super::statements::Statements;
use super::throttle::Pacer;

/// A chunk compared: rows of the source, rows of the join, and the differences.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Comparison {
    source: i64,
    joined: i64,
    missing: i64,
    extra: i64,
    different: i64,
}

impl Comparison {
    /// A chunk of `source` rows not compared: too many of its keys are pending.
    fn pending(source: i64) -> Self {
        Comparison {
            source,
            joined: source,
            missing: 0,
            extra: 0,
            different: 0,
        }
    }

    /// Every source row has exactly one shadow row, equal to it, and every shadow row
    /// a source row: no row only on one side, none different, and as many pairs as
    /// source rows (a source row paired twice would mean two shadow rows for its key).
    fn equal(&self) -> bool {
        self.missing == 0 && self.extra == 0 && self.different == 0 && self.joined == self.source
    }
}

/// The outcome of verifying one chunk once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkCheck {
    /// Equal in one snapshot, with no pending change for its keys.
    Clean {
        /// Rows in the chunk.
        rows: i64,
    },
    /// Changes for its keys are still in the log: check again after the applier.
    Pending,
    /// Different, with nothing pending: the shadow is wrong.
    Diverged {
        /// What differs.
        detail: String,
    },
}

fn params<'a>(lo: &'a Option<KeyValue>, hi: &'a Option<KeyValue>) -> Vec<&'a (dyn ToSql + Sync)> {
    let mut out: Vec<&(dyn ToSql + Sync)> = Vec::new();
    if let Some(lo) = lo {
        out.extend(lo.iter().map(|v| v as &(dyn ToSql + Sync)));
    }
    if let Some(hi) = hi {
        out.extend(hi.iter().map(|v| v as &(dyn ToSql + Sync)));
    }
    out
}

async fn compare(
    client: &Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Comparison, tokio_postgres::Error> {
    let row = client.query_one(sql, params).await?;
    Ok(Comparison {
        source: row.get(0),
        joined: row.get(1),
        missing: row.get(2),
        extra: row.get(3),
        different: row.get(4),
    })
}

/// One side's digest of a chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SideDigest {
    /// Rows.
    rows: i64,
    /// Rows whose hash is not NULL: those the sum and XOR cover.
    hashed: i64,
    /// The sum and XOR of their hashes (`None` over none).
    sum: Option<String>,
    xor: Option<i64>,
}

impl SideDigest {
    fn read(row: &tokio_postgres::Row, first: usize) -> Self {
        SideDigest {
            rows: row.get(first),
            hashed: row.get(first + 1),
            sum: row.get(first + 2),
            xor: row.get(first + 3),
        }
    }
}

/// What two sides' digests say of a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Equal, over every row: the chunk is equal (but for a collision: CO-10).
    Equal,
    /// Different, over every row: the rows must differ, and comparing them confirms it.
    Different,
    /// A row of either side has no hash (a NULL in a column the shadow declares NOT
    /// NULL, hashed without its NULL test): the digests cover less than the chunk, and
    /// only the row comparison decides.
    Partial,
}

fn verdict(source: &SideDigest, shadow: &SideDigest) -> Verdict {
    if source.hashed != source.rows || shadow.hashed != shadow.rows {
        Verdict::Partial
    } else if source == shadow {
        Verdict::Equal
    } else {
        Verdict::Different
    }
}

/// The digests of both sides of a range, in the open snapshot.
async fn digests(
    client: &Client,
    statements: &Statements,
    (has_lo, has_hi): (bool, bool),
    values: &[&(dyn ToSql + Sync)],
    unlogged: bool,
) -> Result<(SideDigest, SideDigest), tokio_postgres::Error> {
    let seed = seed();
    let mut params = values.to_vec();
    params.push(&seed);
    let row = client
        .query_one(&statements.digest(has_lo, has_hi, unlogged), &params)
        .await?;
    Ok((SideDigest::read(&row, 0), SideDigest::read(&row, 4)))
}

/// A fresh random seed for one chunk's row hashes (from the standard library's
/// randomly keyed hasher), so that no collision repeats from one pass to the next.
fn seed() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    i64::from_ne_bytes(hasher.finish().to_ne_bytes())
}

/// What one snapshot of a chunk found.
enum Found {
    /// The digests agree: `rows` source rows.
    Digests { rows: i64 },
    /// Compared row by row (the digests differed, or the exact method).
    Rows(Comparison),
    /// The digests differed, but the rows compare equal: one of the two is wrong.
    Contradiction {
        source: SideDigest,
        shadow: SideDigest,
    },
}

/// Verifies `[lo, hi)` once, in one snapshot: by digests first with
/// [`VerifyMethod::Digest`], row by row where they differ (INV: CO-10).
pub async fn check_chunk(
    client: &Client,
    statements: &Statements,
    lo: &Option<KeyValue>,
    hi: &Option<KeyValue>,
) -> Result<ChunkCheck, CasError> {
    let method = statements.verify_method();
    let (has_lo, has_hi) = (lo.is_some(), hi.is_some());
    let values = params(lo, hi);
    let run = async {
        // A chunk is a key range of at most `LARGEST` rows, read through the key's
        // index on both sides: never a scan of a whole table, whatever the planner's
        // statistics say (a table never analyzed has a range open at one end
        // estimated at a third of its rows, and was read whole for the first and the
        // last chunk: about 2 s each at 10 M rows, against 57 ms for the others).
        // And by this session alone: the run's workers are the parallelism the
        // throttle paces, and a parallel plan for such a range (one open at one end on
        // a shadow not analyzed yet, beside the builds) took 83–97 ms against 31–48 ms
        // for one process (10 M rows, 2 cores).
        client
            .batch_execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL enable_seqscan = off; \
                 SET LOCAL max_parallel_workers_per_gather = 0",
            )
            .await?;
        let pending: i64 = client
            .query_one(&statements.pending_in_range(has_lo, has_hi), &values)
            .await?
            .get(0);
        let mut found = None;
        if method == VerifyMethod::Digest {
            // No key of the range in the log (in this snapshot): the test per row of
            // whether it is logged would be true for every row, and is left out.
            let (source, shadow) =
                digests(client, statements, (has_lo, has_hi), &values, pending > 0).await?;
            let verdict = verdict(&source, &shadow);
            if verdict == Verdict::Equal {
                found = Some(Found::Digests { rows: source.rows });
            } else if pending > PENDING_TOLERATED && pending.saturating_mul(10) > source.rows {
                found = Some(Found::Rows(Comparison::pending(source.rows)));
            } else {
                // INV: CO-10 — digests that differ (or cover less than the chunk) are
                // settled row by row, in the same snapshot.
                let rows = compare(client, &statements.compare(has_lo, has_hi), &values).await?;
                found = Some(if rows.equal() && verdict == Verdict::Different {
                    Found::Contradiction { source, shadow }
                } else {
                    Found::Rows(rows)
                });
            }
        }
        let found = match found {
            Some(found) => found,
            None => {
                Found::Rows(compare(client, &statements.compare(has_lo, has_hi), &values).await?)
            }
        };
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>((pending, found))
    };
    let (pending, found) = super::session::settle(client, "verifying a chunk", run.await).await?;
    let comparison = match found {
        Found::Digests { rows } => {
            return Ok(
                if pending > PENDING_TOLERATED && pending.saturating_mul(10) > rows {
                    ChunkCheck::Pending
                } else {
                    ChunkCheck::Clean { rows }
                },
            );
        }
        Found::Contradiction { source, shadow } => {
            return Ok(ChunkCheck::Diverged {
                detail: format!(
                    "the digests differ (source {source:?}, shadow {shadow:?}) while the rows compare equal"
                ),
            });
        }
        Found::Rows(comparison) => comparison,
    };
    // INV: CO-6 — rows with a change not yet applied are not compared (the applier
    // brings them over from the source, and the swap drains the rest under its lock);
    // when they are too many for the comparison to say much, the chunk waits.
    if pending > PENDING_TOLERATED && pending.saturating_mul(10) > comparison.source {
        return Ok(ChunkCheck::Pending);
    }
    if comparison.equal() {
        Ok(ChunkCheck::Clean {
            rows: comparison.source,
        })
    } else {
        let Comparison {
            source,
            joined,
            missing,
            extra,
            different,
        } = comparison;
        Ok(ChunkCheck::Diverged {
            detail: format!(
                "source has {source} rows, shadow {}; {missing} missing from the shadow, {extra} only in the shadow, {different} different{}",
                joined - missing,
                if joined - extra > source {
                    ", and keys with more than one row in the shadow"
                } else {
                    ""
                }
            ),
        })
    }
}

/// The key `rows` rows past `lo` (the exclusive end of the next chunk); `None` at the
/// end of the table.
pub async fn next_bound(
    client: &Client,
    statements: &Statements,
    lo: &Option<KeyValue>,
    rows: i64,
) -> Result<Option<KeyValue>, CasError> {
    bound_within(client, statements, lo, &None, rows).await
}

/// Re-copies a diverged range (repair): delete it from the shadow and copy it again.
pub async fn repair(
    client: &Client,
    statements: &Statements,
    lo: &Option<KeyValue>,
    hi: &Option<KeyValue>,
) -> Result<(), CasError> {
    let values = params(lo, hi);
    let run = async {
        client.batch_execute("BEGIN").await?;
        client
            .execute(
                &statements.delete_range(lo.is_some(), hi.is_some()),
                &values,
            )
            .await?;
        client
            .execute(&statements.recopy(lo.is_some(), hi.is_some()), &values)
            .await?;
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>(())
    };
    super::session::settle(client, "repairing a chunk", run.await).await
}

/// How long to wait before checking a pending chunk again.
pub const PENDING_BACKOFF: Duration = Duration::from_millis(100);

/// Keys with pending changes a chunk may have and still be compared (the rest of its
/// rows); above this, and above a tenth of the chunk, it waits for the applier.
pub const PENDING_TOLERATED: i64 = 50;

/// Rows of the chunks a pass hands out (and of the largest chunk a worker compares).
pub const LARGEST: i64 = 50_000;
/// The smallest chunk a worker shrinks to where writes keep a chunk pending.
pub const SMALLEST: i64 = 200;
/// Checks of one chunk that found it pending before the pass gives up.
pub const MAX_PENDING: u32 = 600;

/// One verification pass, shared by its workers (each in its own session, each chunk in
/// its own snapshot): a cursor handing out ranges of [`LARGEST`] rows, in key order,
/// until the end of the source.
#[derive(Default)]
pub struct Pass {
    /// The start of the ranges not handed out yet, and whether none is left.
    cursor: tokio::sync::Mutex<(Option<KeyValue>, bool)>,
    /// Rows compared so far.
    pub verified: std::sync::atomic::AtomicI64,
    /// Whether a chunk was repaired (the pass then proves nothing: INV CO-7).
    pub repaired: std::sync::atomic::AtomicBool,
    /// What the workers have to say (repairs), for the caller to report.
    pub notes: std::sync::Mutex<Vec<String>>,
    /// Set while the applier is held for an index build (verification runs beside
    /// the builds): a chunk found pending then does not count towards
    /// [`MAX_PENDING`], which is about an applier that cannot keep up.
    pub applier_held: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Pass {
    /// A pass beside an applier that index builds hold now and then (`applier_held`).
    pub fn new(applier_held: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>) -> Self {
        Pass {
            applier_held,
            ..Pass::default()
        }
    }

    /// Whether the applier is held for an index build now.
    fn applier_held(&self) -> bool {
        self.applier_held
            .as_ref()
            .is_some_and(|held| held.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Whether the pass has handed out every range (the cursor busy is not an answer:
    /// looked at again later).
    fn handed_out_all(&self) -> bool {
        self.cursor.try_lock().is_ok_and(|cursor| cursor.1)
    }

    /// The next range `[lo, hi)` to verify, `None` when the pass has handed out all.
    async fn take(
        &self,
        client: &Client,
        statements: &Statements,
    ) -> Result<Option<(Option<KeyValue>, Option<KeyValue>)>, CasError> {
        let mut cursor = self.cursor.lock().await;
        if cursor.1 {
            return Ok(None);
        }
        let lo = cursor.0.clone();
        let hi = next_bound(client, statements, &lo, LARGEST).await?;
        match &hi {
            Some(hi) => cursor.0 = Some(hi.clone()),
            None => cursor.1 = true,
        }
        Ok(Some((lo, hi)))
    }
}

/// One verification worker: verifies the ranges the pass hands out until none is left.
/// A divergence stops it with [`CasError::Divergence`] unless `repair`, which re-copies
/// the chunk and marks the pass repaired.
pub async fn worker(
    client: &Client,
    statements: &Statements,
    pass: &Pass,
    repair_diverged: bool,
    pace: &Pacer,
) -> Result<(), CasError> {
    loop {
        // The throttle's word before each range (INV: OC-5), unless the pass has
        // handed out every range: then this worker is done, slowed or not.
        if pace.admit_unless(|| pass.handed_out_all()).await.is_none() {
            break;
        }
        let Some((lo, hi)) = pass.take(client, statements).await? else {
            break;
        };
        verify_range(client, statements, pass, repair_diverged, lo, hi).await?;
    }
    Ok(())
}

/// The checks of one chunk that found it pending, against [`MAX_PENDING`].
#[derive(Default)]
struct PendingBudget {
    rounds: u32,
}

impl PendingBudget {
    /// One more check found the chunk pending; `applier_held`: the applier was held
    /// for an index build meanwhile. An error once the applier has had its chances.
    fn spend(&mut self, applier_held: bool) -> Result<(), CasError> {
        // INV: CO-11 — changes held back by an index build are not an applier falling
        // behind.
        if !applier_held {
            self.rounds += 1;
        }
        if self.rounds > MAX_PENDING {
            return Err(CasError::Divergence(
                "changes keep arriving faster than the applier applies them; verification cannot complete".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Verifies `[lo, hi)`: whole, or — where writes keep a chunk pending — in smaller
/// chunks (fewer keys, fewer chances that one has a change not yet applied), growing
/// back after.
async fn verify_range(
    client: &Client,
    statements: &Statements,
    pass: &Pass,
    repair_diverged: bool,
    mut lo: Option<KeyValue>,
    hi: Option<KeyValue>,
) -> Result<(), CasError> {
    use std::sync::atomic::Ordering;
    let mut size = LARGEST;
    loop {
        let mut budget = PendingBudget::default();
        let mut pending_here: u32 = 0;
        let end = loop {
            let end = if size >= LARGEST {
                None
            } else {
                bound_within(client, statements, &lo, &hi, size).await?
            };
            let chunk_hi = end.clone().or_else(|| hi.clone());
            match check_chunk(client, statements, &lo, &chunk_hi).await? {
                ChunkCheck::Clean { rows } => {
                    pass.verified.fetch_add(rows, Ordering::Relaxed);
                    if pending_here == 0 {
                        size = (size * 2).min(LARGEST);
                    }
                    break end;
                }
                ChunkCheck::Pending => {
                    budget.spend(pass.applier_held())?;
                    pending_here += 1;
                    if pending_here >= 2 && size > SMALLEST {
                        size = (size / 4).max(SMALLEST);
                        pending_here = 0;
                        continue;
                    }
                    tokio::time::sleep(PENDING_BACKOFF).await;
                }
                ChunkCheck::Diverged { detail } => {
                    if !repair_diverged {
                        return Err(CasError::Divergence(format!(
                            "a chunk of the shadow differs from the source: {detail}; the run stops (rerun with --on-divergence=repair to repair and verify again)"
                        )));
                    }
                    if let Ok(mut notes) = pass.notes.lock() {
                        notes.push(format!("repairing a diverged chunk: {detail}"));
                    }
                    repair(client, statements, &lo, &chunk_hi).await?;
                    pass.repaired.store(true, Ordering::Relaxed);
                    break end;
                }
            }
        };
        match end {
            Some(end) => lo = Some(end),
            None => return Ok(()),
        }
    }
}

/// The key `rows` rows past `lo` inside `[lo, hi)`; `None` when the range has no more.
async fn bound_within(
    client: &Client,
    statements: &Statements,
    lo: &Option<KeyValue>,
    hi: &Option<KeyValue>,
    rows: i64,
) -> Result<Option<KeyValue>, CasError> {
    let sql = statements.next_bound_within(lo.is_some(), hi.is_some());
    let mut values = params(lo, hi);
    values.push(&rows);
    let row = client
        .query_opt(&sql, &values)
        .await
        .map_err(|e| CasError::db("finding the next verification chunk", e))?;
    Ok(row.map(|row| {
        (0..statements.key().len())
            .map(|i| row.get::<_, String>(i))
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_has_nothing_left_to_wait_for_once_the_pass_handed_out_every_range() {
        let pass = Pass::default();
        assert!(
            !pass.handed_out_all(),
            "a new pass has every range to hand out"
        );
        {
            let mut cursor = pass.cursor.try_lock().expect("free");
            cursor.1 = true;
            // Busy: not an answer.
            assert!(!pass.handed_out_all());
        }
        assert!(pass.handed_out_all(), "every range handed out");
    }

    fn side(rows: i64, hashed: i64, xor: i64) -> SideDigest {
        SideDigest {
            rows,
            hashed,
            sum: Some(xor.to_string()),
            xor: Some(xor),
        }
    }

    #[test]
    fn inv_co_10_digests_that_leave_a_row_out_decide_nothing() {
        assert_eq!(verdict(&side(10, 10, 7), &side(10, 10, 7)), Verdict::Equal);
        assert_eq!(
            verdict(&side(10, 10, 7), &side(10, 10, 8)),
            Verdict::Different
        );
        // A row without a hash on both sides: equal sums over the other rows say
        // nothing of it.
        assert_eq!(verdict(&side(10, 9, 7), &side(10, 9, 7)), Verdict::Partial);
        assert_eq!(verdict(&side(10, 10, 7), &side(10, 9, 7)), Verdict::Partial);
        assert_eq!(verdict(&side(10, 9, 7), &side(10, 10, 7)), Verdict::Partial);
    }

    #[test]
    fn inv_co_11_a_chunk_pending_while_the_applier_is_held_for_a_build_costs_nothing() {
        // Held for a build, a chunk may be found pending any number of times.
        let mut budget = PendingBudget::default();
        for _ in 0..(MAX_PENDING * 3) {
            assert!(budget.spend(true).is_ok());
        }
        // Then the applier's own chances, and not one more.
        for _ in 0..MAX_PENDING {
            assert!(budget.spend(false).is_ok());
        }
        assert!(matches!(budget.spend(false), Err(CasError::Divergence(_))));
        // Without a build, the same limit from the start.
        let mut budget = PendingBudget::default();
        for _ in 0..MAX_PENDING {
            assert!(budget.spend(false).is_ok());
        }
        assert!(budget.spend(false).is_err());
    }
}
