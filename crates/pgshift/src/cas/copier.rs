//! The chunked copy: keyset chunks over the key, each one server-side
//! `INSERT INTO shadow … SELECT … FROM source WHERE key in [lo, hi)` in its own short
//! transaction, several workers at once, the chunk size adapting toward a target
//! duration. The landed prefix is recorded as it advances. The shadow has no index
//! during the copy (its primary key is built when the indexing phase starts), so the
//! chunks write a bare heap.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use super::error::CasError;
use super::keys::KeyValue;
use super::ledger::{Chunk, Ledger};
use super::statements::Statements;
use super::store;
use super::throttle::Pacer;

/// Shared state of the copy workers and the applier.
pub struct CopyState {
    /// The ledger and its landing count (behind one lock: INV CO-5).
    pub ledger: Mutex<(Ledger, u64)>,
    /// Held by the worker cutting the next chunk: the ledger's cursor moves only there
    /// (and back when a chunk fails, which halts the copy), so the next bound is found
    /// with the ledger free.
    pub cutting: Mutex<()>,
    /// Rows copied in this process.
    pub rows: AtomicI64,
    /// Rows asked for by the chunks this process cut (landed or in flight): what
    /// remains to cut is the estimate less these (`taper`).
    pub asked: AtomicI64,
    /// Whether the shadow has its primary key: the applier applies nothing before
    /// (it deletes and inserts again by key); entries wait in the change log.
    pub key_ready: AtomicBool,
}

/// Chunk sizing.
#[derive(Clone, Copy, Debug)]
pub struct Sizing {
    /// Rows of the first chunk.
    pub first_rows: i64,
    /// The duration a chunk should take.
    pub target: Duration,
    /// The rows this process expects to copy in all (the table's estimate; 0:
    /// unknown), and the workers sharing them: see `taper`.
    pub estimate: i64,
    /// Copy workers.
    pub workers: i64,
}

const MIN_ROWS: i64 = 500;
const MAX_ROWS: i64 = 2_000_000;

/// The next chunk size after one of `rows` rows took `took`.
fn next_rows(rows: i64, took: Duration, target: Duration) -> i64 {
    let took = took.as_secs_f64().max(0.001);
    let scaled = (rows as f64 * target.as_secs_f64() / took) as i64;
    // Move at most 4x per step, so one slow chunk does not collapse the size.
    scaled
        .clamp(rows / 4, rows.saturating_mul(4))
        .clamp(MIN_ROWS, MAX_ROWS)
}

/// The size to ask for when a chunk of `rows` is due and about `left` rows remain
/// for `workers` workers: near the end, each takes its share of what is left, so that
/// the workers finish together rather than one copying a whole last chunk while the
/// others wait with their cores idle (a VACUUM FULL of 2 M rows with two workers
/// ended with one of them alone for 64–407 ms, median 199 ms). Never below a quarter
/// of `rows`: an estimate that is too low (the table grew, or its statistics are old)
/// makes the rest of the copy's chunks smaller, not tiny. `left` ≤ 0 is such an
/// estimate.
fn taper(rows: i64, left: i64, workers: i64) -> i64 {
    let share = left / workers.max(1);
    rows.min(share.max(rows / 4)).max(MIN_ROWS.min(rows))
}

/// Whether every range has been cut (or a failed chunk halted the copy): a worker has
/// nothing left to wait for. The ledger busy is not an answer (looked at again later).
fn nothing_to_cut(state: &CopyState) -> bool {
    state
        .ledger
        .try_lock()
        .is_ok_and(|guard| guard.0.exhausted() || guard.0.halted())
}

/// Cuts the next chunk of about `rows` rows and marks it in flight, under the ledger
/// lock, before its transaction starts. `None` when nothing is left to cut.
///
/// The bound is found (an index scan over the chunk's rows: tens of milliseconds) with
/// the ledger free, so that landings and the applier's classification of the change
/// log do not wait for it. An entry the applier finds uncut meanwhile is in the range
/// about to be cut, whose chunk takes its snapshot after it is marked in flight below,
/// so it sees that change (INV: CO-5).
async fn cut(
    client: &Client,
    statements: &Statements,
    state: &CopyState,
    rows: i64,
) -> Result<Option<Chunk>, CasError> {
    let _cutting = state.cutting.lock().await;
    let lo = {
        let guard = state.ledger.lock().await;
        let (ledger, _) = &*guard;
        if ledger.exhausted() || ledger.halted() {
            return Ok(None);
        }
        ledger.cursor().cloned()
    };
    let sql = statements.next_bound(lo.is_some());
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    if let Some(lo) = &lo {
        params.extend(lo.iter().map(|v| v as &(dyn ToSql + Sync)));
    }
    params.push(&rows);
    let row = client
        .query_opt(&sql, &params)
        .await
        .map_err(|e| CasError::db("finding the next chunk", e))?;
    let hi: Option<KeyValue> = row.map(|row| {
        (0..statements.key().len())
            .map(|i| row.get::<_, String>(i))
            .collect()
    });
    let mut guard = state.ledger.lock().await;
    let (ledger, _) = &mut *guard;
    if ledger.halted() {
        // A chunk failed meanwhile: its worker reports it.
        return Ok(None);
    }
    if ledger.cursor() != lo.as_ref() {
        return Err(CasError::Record(
            "the copy ledger's cursor moved while a chunk was being cut".to_owned(),
        ));
    }
    // INV: CO-5 — marked in flight here, under the lock, before the chunk's snapshot.
    Ok(Some(ledger.cut(hi)))
}

/// Copies one chunk in its own transaction; returns the rows inserted.
async fn copy_chunk(
    client: &Client,
    statements: &Statements,
    chunk: &Chunk,
) -> Result<u64, CasError> {
    let sql = statements.copy(chunk.lo.is_some(), chunk.hi.is_some());
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    if let Some(lo) = &chunk.lo {
        params.extend(lo.iter().map(|v| v as &(dyn ToSql + Sync)));
    }
    if let Some(hi) = &chunk.hi {
        params.extend(hi.iter().map(|v| v as &(dyn ToSql + Sync)));
    }
    client
        .execute(&sql, &params)
        .await
        .map_err(|e| CasError::db("copying a chunk", e))
}

/// Records a landed chunk; persists the prefix when it moved.
async fn land(
    client: &Client,
    run: i64,
    state: &CopyState,
    chunk: &Chunk,
    rows: u64,
) -> Result<(), CasError> {
    let (prefix, finished, moved) = {
        let mut guard = state.ledger.lock().await;
        let (ledger, landings) = &mut *guard;
        let moved = ledger.land(chunk.id);
        *landings += 1;
        (ledger.prefix().cloned(), ledger.finished(), moved)
    };
    let total = state
        .rows
        .fetch_add(i64::try_from(rows).unwrap_or(i64::MAX), Ordering::Relaxed)
        + i64::try_from(rows).unwrap_or(i64::MAX);
    if moved {
        let prefix = serde_json::to_string(&prefix).map_err(|e| CasError::Record(e.to_string()))?;
        let rows = total;
        client
            .execute(store::LANDED_SQL, &[&run, &prefix, &rows, &finished])
            .await
            .map_err(|e| CasError::db("recording copy progress", e))?;
    }
    Ok(())
}

/// One copy worker: cuts and copies chunks until none are left.
pub async fn worker(
    client: &Client,
    run: i64,
    statements: &Statements,
    state: &CopyState,
    sizing: Sizing,
    pace: &Pacer,
) -> Result<(), CasError> {
    let mut rows = sizing.first_rows;
    loop {
        // The throttle's word before each chunk is cut (INV: OC-5), unless nothing is
        // left to cut: then this worker is done, slowed or not.
        if pace.admit_unless(|| nothing_to_cut(state)).await.is_none() {
            break;
        }
        let left = sizing.estimate - state.asked.load(Ordering::Relaxed);
        let ask = if sizing.estimate > 0 {
            taper(rows, left, sizing.workers)
        } else {
            rows
        };
        let Some(chunk) = cut(client, statements, state, ask).await? else {
            break;
        };
        state.asked.fetch_add(ask, Ordering::Relaxed);
        let started = Instant::now();
        match copy_chunk(client, statements, &chunk).await {
            Ok(inserted) => {
                land(client, run, state, &chunk, inserted).await?;
                rows = next_rows(ask, started.elapsed(), sizing.target);
            }
            Err(err) => {
                state.ledger.lock().await.0.unland(chunk.id);
                return Err(err);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_grow_and_shrink_toward_the_target() {
        let target = Duration::from_millis(500);
        assert_eq!(
            next_rows(10_000, Duration::from_millis(250), target),
            20_000
        );
        assert_eq!(next_rows(10_000, Duration::from_secs(10), target), 2_500);
        assert_eq!(next_rows(1_000, Duration::from_micros(1), target), 4_000);
        assert_eq!(next_rows(600, Duration::from_secs(60), target), MIN_ROWS);
    }

    #[test]
    fn a_worker_has_nothing_left_to_wait_for_once_every_range_is_cut() {
        let state = CopyState {
            ledger: Mutex::new((Ledger::resume(None, false), 0)),
            cutting: Mutex::new(()),
            rows: AtomicI64::new(0),
            asked: AtomicI64::new(0),
            key_ready: AtomicBool::new(false),
        };
        assert!(
            !nothing_to_cut(&state),
            "a fresh ledger has everything to cut"
        );
        state
            .ledger
            .try_lock()
            .expect("free")
            .0
            .cut(Some(vec!["10".to_owned()]));
        assert!(!nothing_to_cut(&state), "ranges above the cut remain");
        let mut guard = state.ledger.try_lock().expect("free");
        guard.0.cut(None);
        // Busy, even with every range cut: not an answer (looked at again later).
        assert!(!nothing_to_cut(&state));
        drop(guard);
        assert!(nothing_to_cut(&state), "the last range is cut");
    }

    #[test]
    fn the_last_chunks_share_what_is_left_among_the_workers() {
        // Far from the end: the size the target asks for.
        assert_eq!(taper(400_000, 1_500_000, 2), 400_000);
        // Near it: each worker its half of what is left.
        assert_eq!(taper(400_000, 600_000, 2), 300_000);
        assert_eq!(taper(400_000, 240_000, 2), 120_000);
        // Never below a quarter of the due size, however low the estimate.
        assert_eq!(taper(400_000, 10_000, 2), 100_000);
        assert_eq!(taper(400_000, -5_000_000, 2), 100_000);
        // Nor below the smallest chunk, unless the due size already is.
        assert_eq!(taper(1_000, 10, 2), MIN_ROWS);
        assert_eq!(taper(300, 10, 2), 300);
    }
}
