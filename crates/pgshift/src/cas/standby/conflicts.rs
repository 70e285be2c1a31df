//! After the swap: when each standby named with `--standby-url` replayed it, and how
//! many of its queries the replay cancelled (`pg_stat_database_conflicts.confl_lock`,
//! read before the swap and again after).

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::queries::{confl_lock, QueriedStandby, Watched};

/// How often replay is looked at.
const POLL: Duration = Duration::from_millis(100);
/// How long a cancelled backend's count may take to reach the statistics after the
/// standby replayed the swap: a backend reports it when it goes idle or exits (at
/// most a second later, PostgreSQL 15+), or through the statistics collector
/// (PostgreSQL 14, a stats file at most half a second old).
const STATS_SETTLE: Duration = Duration::from_millis(2_000);
/// The longest a standby's `max_standby_streaming_delay` lengthens the wait.
const MAX_DELAY_WAIT: Duration = Duration::from_secs(60);

/// Reads, after the swap committed, when each standby had replayed it (waited for at
/// most `wait` plus its `max_standby_streaming_delay`, up to a minute more) and then
/// how many queries the replay cancelled there. A standby that did not replay in time
/// or could not be read is reported with unknown counts.
pub async fn after_swap(primary: &Client, watched: Watched, wait: Duration) -> Vec<QueriedStandby> {
    let Watched {
        sessions,
        database,
        mut standbys,
    } = watched;
    if sessions.is_empty() {
        return standbys;
    }
    let Ok(target) = primary
        .query_one(
            "SELECT pg_catalog.pg_current_wal_lsn()::pg_catalog.text",
            &[],
        )
        .await
        .map(|r| r.get::<_, String>(0))
    else {
        return standbys;
    };
    let started = Instant::now();
    for (session, standby) in sessions.iter().zip(standbys.iter_mut()) {
        let delay = u64::try_from(standby.max_standby_streaming_delay_ms)
            .map_or(MAX_DELAY_WAIT, Duration::from_millis)
            .min(MAX_DELAY_WAIT);
        let deadline = started + wait + delay;
        loop {
            let replayed = session
                .client()
                .query_one(
                    "SELECT coalesce(pg_catalog.pg_last_wal_replay_lsn() OPERATOR(pg_catalog.>=) $1::pg_catalog.text::pg_catalog.pg_lsn, false)",
                    &[&target],
                )
                .await
                .map(|r| r.get::<_, bool>(0));
            match replayed {
                Ok(true) => {
                    standby.replayed_swap_after_ms =
                        Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                    break;
                }
                Ok(false) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
                _ => break,
            }
        }
    }
    if standbys.iter().any(|s| s.replayed_swap_after_ms.is_some()) {
        tokio::time::sleep(STATS_SETTLE).await;
    }
    for (session, standby) in sessions.iter().zip(standbys.iter_mut()) {
        if standby.replayed_swap_after_ms.is_none() {
            continue;
        }
        if let Ok(after) = confl_lock(session.client(), database).await {
            standby.confl_lock_after = Some(after);
            standby.cancelled_by_swap = Some(after.saturating_sub(standby.confl_lock_before));
        }
    }
    standbys
}
