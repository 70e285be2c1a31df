//! The cutover's check of the standbys, made before the swap takes its lock, and the
//! replay lag at the swap, read after it commits.
//!
//! Replay lag is measured exactly, from the primary: the WAL position when the check
//! starts is noted, and every standby must replay past it within `--max-replica-lag`
//! — a standby that does is less than that far behind; one that does not is refused
//! (INV: LK-7), the source untouched, and the run resumable. A standby whose position
//! the role cannot read (`pg_read_all_stats`) is refused the same way (fail closed).
//!
//! What the primary cannot see: the queries running on a standby and its
//! `max_standby_streaming_delay`. The swap's ACCESS EXCLUSIVE lock is replayed on every
//! standby; a standby query reading the table then holds up replay for up to
//! `max_standby_streaming_delay` and is cancelled after it (`hot_standby_feedback` does
//! not prevent lock conflicts, only snapshot ones). What the primary does see is
//! `backend_xmin` of a standby sending feedback: a snapshot open there, which the report
//! names as a query that may be cancelled or hold up the swap's replay. The standbys
//! named with `--standby-url` are read directly on their own connections
//! (`cas::standby`, INV: LK-9), after this check.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::refusal::{Refusal, RefusalCause};

/// How often the check looks again.
const POLL: Duration = Duration::from_millis(100);

/// One standby as the check and the swap saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StandbyAtSwap {
    /// `application_name`.
    pub name: String,
    /// How long it took to replay past the WAL position at the start of the check
    /// (ms): its replay lag before the swap, at most.
    pub lag_before_ms: Option<u64>,
    /// Bytes of WAL it had not replayed when the swap committed.
    pub behind_at_swap_bytes: Option<i64>,
    /// How long after the swap's commit it had replayed it (ms), within the wait.
    pub replayed_swap_after_ms: Option<u64>,
    /// `backend_xmin` (a standby sending `hot_standby_feedback` with a snapshot open).
    pub feedback_xmin: Option<String>,
}

/// What the check found, for the run's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StandbyReport {
    /// Every standby streaming from the primary.
    pub standbys: Vec<StandbyAtSwap>,
    /// What the primary can and cannot tell about standby queries.
    pub notes: Vec<String>,
    /// The standbys named with `--standby-url`, read on their own connections: their
    /// settings, the queries that held the swap back, and what its replay cancelled.
    #[serde(default)]
    pub queried: Vec<crate::cas::standby::QueriedStandby>,
}

struct Row {
    name: String,
    readable: bool,
    past: bool,
    behind: Option<i64>,
    xmin: Option<String>,
}

async fn read(client: &Client, target: &str) -> Result<Vec<Row>, CasError> {
    let rows = client
        .query(
            "SELECT r.application_name, r.state IS NOT NULL AND r.replay_lsn IS NOT NULL, \
                    coalesce(r.replay_lsn OPERATOR(pg_catalog.>=) $1::pg_catalog.text::pg_catalog.pg_lsn, false), \
                    pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), r.replay_lsn)::pg_catalog.int8, \
                    r.backend_xmin::pg_catalog.text \
               FROM pg_catalog.pg_stat_replication r ORDER BY r.application_name, r.pid",
            &[&target],
        )
        .await
        .map_err(|e| CasError::db("reading the standbys", e))?;
    Ok(rows
        .iter()
        .map(|r| Row {
            name: r.get(0),
            readable: r.get(1),
            past: r.get(2),
            behind: r.get(3),
            xmin: r.get(4),
        })
        .collect())
}

async fn current_lsn(client: &Client) -> Result<String, CasError> {
    client
        .query_one(
            "SELECT pg_catalog.pg_current_wal_lsn()::pg_catalog.text",
            &[],
        )
        .await
        .map(|r| r.get(0))
        .map_err(|e| CasError::db("reading the WAL position", e))
}

/// Before the swap: waits up to `max_lag` for every standby to replay the WAL written
/// so far, and refuses the cutover (nothing swapped) for one that does not, or whose
/// position cannot be read. `None`: the standbys are not waited for (only reported).
pub async fn before_swap(
    client: &Client,
    table: &str,
    max_lag: Option<Duration>,
) -> Result<StandbyReport, CasError> {
    let target = current_lsn(client).await?;
    let started = Instant::now();
    let mut report = StandbyReport::default();
    loop {
        let rows = read(client, &target).await?;
        let elapsed = started.elapsed();
        for row in &rows {
            let seen = report.standbys.iter_mut().find(|s| s.name == row.name);
            let standby = match seen {
                Some(standby) => standby,
                None => {
                    report.standbys.push(StandbyAtSwap {
                        name: row.name.clone(),
                        lag_before_ms: None,
                        behind_at_swap_bytes: None,
                        replayed_swap_after_ms: None,
                        feedback_xmin: None,
                    });
                    let last = report.standbys.len() - 1;
                    &mut report.standbys[last]
                }
            };
            standby.feedback_xmin.clone_from(&row.xmin);
            if row.past && standby.lag_before_ms.is_none() {
                standby.lag_before_ms =
                    Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
            }
        }
        let Some(max_lag) = max_lag else { break };
        let lagging: Vec<&Row> = rows.iter().filter(|r| !r.past).collect();
        if lagging.is_empty() {
            break;
        }
        if let Some(hidden) = lagging.iter().find(|r| !r.readable) {
            // INV: LK-7 — a standby whose position cannot be read is not swapped past.
            return Err(CasError::CutoverRefused(Refusal::new(
                RefusalCause::StandbyLagging,
                format!(
                    "the replay position of standby {:?} cannot be read (the role needs pg_read_all_stats), so the swap's lock could not be shown to replay promptly there; {table} is untouched",
                    hidden.name
                ),
            )));
        }
        if elapsed >= max_lag {
            // INV: LK-7 — a standby further behind than the bound is not swapped past.
            let names: Vec<String> = lagging
                .iter()
                .map(|r| format!("{:?} ({} bytes behind)", r.name, r.behind.unwrap_or(-1)))
                .collect();
            return Err(CasError::CutoverRefused(Refusal::new(
                RefusalCause::StandbyLagging,
                format!(
                    "standby {} did not replay the WAL written before the cutover within {} ms (--max-replica-lag); {table} is untouched",
                    names.join(", "),
                    max_lag.as_millis()
                ),
            )));
        }
        tokio::time::sleep(POLL).await;
    }
    for standby in &report.standbys {
        if let Some(xmin) = &standby.feedback_xmin {
            report.notes.push(format!(
                "standby {:?} has a snapshot open (hot_standby_feedback, xmin {xmin}): a query there that reads the table holds up the replay of the swap's lock for up to its max_standby_streaming_delay, and is cancelled after that",
                standby.name
            ));
        }
    }
    if !report.standbys.is_empty() {
        report.notes.push(
            "not visible from the primary: the standbys' own queries and their max_standby_streaming_delay (a standby without hot_standby_feedback shows no snapshot); --standby-url reads them on the standby".to_owned(),
        );
    }
    Ok(report)
}

/// After the swap committed: how far behind each standby was, and how long it took to
/// replay the swap (waited for at most `wait`).
pub async fn after_swap(client: &Client, report: &mut StandbyReport, wait: Duration) {
    if report.standbys.is_empty() {
        return;
    }
    let Ok(target) = current_lsn(client).await else {
        return;
    };
    let started = Instant::now();
    let mut first = true;
    loop {
        let Ok(rows) = read(client, &target).await else {
            return;
        };
        for row in &rows {
            if let Some(standby) = report.standbys.iter_mut().find(|s| s.name == row.name) {
                if first {
                    standby.behind_at_swap_bytes = row.behind;
                }
                if row.past && standby.replayed_swap_after_ms.is_none() {
                    standby.replayed_swap_after_ms =
                        Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                }
            }
        }
        first = false;
        let done = report
            .standbys
            .iter()
            .all(|s| s.replayed_swap_after_ms.is_some());
        if done || started.elapsed() >= wait {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}
