//! Verification: chunk by chunk, in one `REPEATABLE READ` snapshot per chunk, the
//! count and an order-independent digest (sum and `bit_xor` of per-row hashes) of the
//! source, its values cast to the shadow's types, against the shadow's, over the keys
//! that have no change-log entry visible in that snapshot (INV: CO-6). Those keys are
//! the applier's to bring over from the source (and the swap drains the last of them
//! under its lock); comparing them would only race it. A chunk where they are many
//! waits for the applier and is tried again (smaller), so that verification passes on a
//! table that is written to all the time — and still compares nearly every row.

use std::time::Duration;

use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use super::error::CasError;
use super::keys::KeyValue;
use super::statements::Statements;

/// A chunk's digest.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Digest {
    count: i64,
    sum: String,
    xor: i64,
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

async fn digest(
    client: &Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Digest, tokio_postgres::Error> {
    let row = client.query_one(sql, params).await?;
    Ok(Digest {
        count: row.get(0),
        sum: row.get(1),
        xor: row.get(2),
    })
}

/// Verifies `[lo, hi)` once, in one snapshot.
pub async fn check_chunk(
    client: &Client,
    statements: &Statements,
    lo: &Option<KeyValue>,
    hi: &Option<KeyValue>,
) -> Result<ChunkCheck, CasError> {
    let (has_lo, has_hi) = (lo.is_some(), hi.is_some());
    let values = params(lo, hi);
    let run = async {
        client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await?;
        let pending: i64 = client
            .query_one(&statements.pending_in_range(has_lo, has_hi), &values)
            .await?
            .get(0);
        let source = digest(client, &statements.source_digest(has_lo, has_hi), &values).await?;
        let shadow = digest(client, &statements.shadow_digest(has_lo, has_hi), &values).await?;
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>((pending, source, shadow))
    };
    let (pending, source, shadow) =
        super::session::settle(client, "verifying a chunk", run.await).await?;
    // INV: CO-6 — rows with a change not yet applied are not compared (the applier
    // brings them over from the source, and the swap drains the rest under its lock);
    // when they are too many for the comparison to say much, the chunk waits.
    if pending > PENDING_TOLERATED && pending.saturating_mul(10) > source.count {
        return Ok(ChunkCheck::Pending);
    }
    if source == shadow {
        Ok(ChunkCheck::Clean { rows: source.count })
    } else {
        Ok(ChunkCheck::Diverged {
            detail: format!(
                "source has {} rows, shadow {}; digests {}/{} and {}/{}",
                source.count, shadow.count, source.sum, source.xor, shadow.sum, shadow.xor
            ),
        })
    }
}

/// The exclusive upper bound of the chunk of `rows` rows starting at `lo`.
pub async fn next_bound(
    client: &Client,
    statements: &Statements,
    lo: &Option<KeyValue>,
    rows: i64,
) -> Result<Option<KeyValue>, CasError> {
    let sql = statements.next_bound(lo.is_some());
    let mut values = params(lo, &None);
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
            .execute(&statements.copy(lo.is_some(), hi.is_some()), &values)
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
