//! The cutover's check of the standbys named with `--standby-url`, made before the
//! swap takes its lock (INV: LK-9).
//!
//! The swap's ACCESS EXCLUSIVE lock is replayed on every physical standby. A standby
//! query that holds a lock on the table then holds up replay for up to the standby's
//! `max_standby_streaming_delay` and is cancelled after it (`hot_standby_feedback`
//! prevents snapshot conflicts, not lock conflicts). So on each standby the check
//! reads the backends holding or waiting for a lock on the table or any of its
//! partitions (`pg_locks`: relation and database OIDs are the primary's on a physical
//! standby), and waits for them to end for as long as the swap's lock attempts may take
//! in all; if some are still there, the swap is refused, the source untouched and the
//! run resumable. A standby that cannot be read refuses the swap the same way.
//!
//! The race it cannot close: a query that starts after the check and before the
//! standby replays the lock is held up and cancelled all the same; `conflicts` counts
//! them after the swap (`pg_stat_database_conflicts.confl_lock`).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::endpoint::StandbyEndpoint;
use super::prove::{open, system_identifier};
use crate::cas::error::CasError;
use crate::connect::{ConnectionSpec, Session};
use crate::refusal::{Refusal, RefusalCause};

/// How often the check looks again.
const POLL: Duration = Duration::from_millis(100);
/// How much of a standby query's text is kept.
const QUERY_CHARS: i32 = 200;

/// A standby backend holding or waiting for a lock on the table (or a partition).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyLockHolder {
    /// Its pid on the standby.
    pub pid: i32,
    /// The locked relation's OID (the table or one of its partitions).
    pub relation: u32,
    /// The lock mode.
    pub mode: String,
    /// Whether it holds the lock (else it waits for it).
    pub granted: bool,
    /// `pg_stat_activity.state` (NULL when the role may not see it).
    pub state: Option<String>,
    /// When its transaction started.
    pub xact_start: Option<String>,
    /// The first characters of its query (hidden from a role without
    /// `pg_read_all_stats` when another role runs it).
    pub query: Option<String>,
}

/// One standby named with `--standby-url`, as the cutover read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueriedStandby {
    /// Where it is (redacted).
    pub standby: StandbyEndpoint,
    /// `max_standby_streaming_delay` in ms (-1: replay waits for a conflicting query
    /// forever).
    pub max_standby_streaming_delay_ms: i64,
    /// `hot_standby_feedback`.
    pub hot_standby_feedback: bool,
    /// The backends holding or waiting for a lock on the table at the first look
    /// (each ended before the swap, or the swap was refused).
    pub holders_seen: Vec<StandbyLockHolder>,
    /// How long the check waited for them to end (ms).
    pub waited_ms: u64,
    /// `pg_stat_database_conflicts.confl_lock` of the run's database there, just
    /// before the swap.
    pub confl_lock_before: i64,
    /// The same, read after the standby replayed the swap (and its statistics had a
    /// moment to arrive); `None` when it did not replay within the wait.
    pub confl_lock_after: Option<i64>,
    /// Cancellations by lock conflicts there while the swap replayed:
    /// `confl_lock_after - confl_lock_before` (any other lock conflict in that
    /// database in between counts too). The server counts cancellations, not
    /// sessions: a backend whose statement is cancelled can also have its connection
    /// ended by the startup process's next signal, and counts twice.
    pub cancelled_by_swap: Option<i64>,
    /// How long after the swap's commit the standby had replayed it (ms).
    pub replayed_swap_after_ms: Option<u64>,
}

/// The standbys checked before the swap, their sessions kept open to read their
/// conflicts after it.
pub struct Watched {
    pub(super) sessions: Vec<Session>,
    pub(super) database: u32,
    /// What the check found.
    pub standbys: Vec<QueriedStandby>,
}

/// The refusal of a swap past a standby that cannot be read: `what` failed with `e`.
pub(super) fn unreadable(
    endpoint: &StandbyEndpoint,
    what: &str,
    e: &dyn std::fmt::Display,
) -> CasError {
    // INV: LK-9 — a standby that cannot be read is not swapped past.
    CasError::CutoverRefused(Refusal::new(
        RefusalCause::StandbyQueries,
        format!(
            "standby {endpoint} cannot be read ({what}: {e}), so its queries could not be shown clear of the swap's lock; the source is untouched"
        ),
    ))
}

async fn holders(
    client: &Client,
    relations: &[u32],
    database: u32,
) -> Result<Vec<StandbyLockHolder>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT l.pid, l.relation, l.mode, l.granted, a.state, a.xact_start::pg_catalog.text, \
                    pg_catalog.left(a.query, $3) \
               FROM pg_catalog.pg_locks l \
               LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid \
              WHERE l.locktype OPERATOR(pg_catalog.=) 'relation' \
                AND l.database OPERATOR(pg_catalog.=) $2::pg_catalog.oid \
                AND l.relation OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) \
                AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() \
                AND a.backend_type IS DISTINCT FROM 'startup' \
              ORDER BY l.pid, l.relation, l.mode",
            &[&relations, &database, &QUERY_CHARS],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| StandbyLockHolder {
            pid: r.get(0),
            relation: r.get(1),
            mode: r.get(2),
            granted: r.get(3),
            state: r.get(4),
            xact_start: r.get(5),
            query: r.get(6),
        })
        .collect())
}

/// `confl_lock` of `database` on the standby behind `client`.
pub(super) async fn confl_lock(
    client: &Client,
    database: u32,
) -> Result<i64, tokio_postgres::Error> {
    client
        .query_one(
            "SELECT coalesce((SELECT confl_lock FROM pg_catalog.pg_stat_database_conflicts \
                               WHERE datid OPERATOR(pg_catalog.=) $1::pg_catalog.oid), 0)::pg_catalog.int8",
            &[&database],
        )
        .await
        .map(|r| r.get(0))
}

/// Before the swap: connects to every standby of `standbys` (proven one of this
/// primary again), reads its settings, and waits up to `budget` until no backend there
/// holds or waits for a lock on `relations` (the table and its partitions). Refuses
/// the cutover (nothing swapped) if some still do, or a standby cannot be read.
pub async fn before_swap(
    primary: &Client,
    standbys: &[ConnectionSpec],
    relations: &[u32],
    table: &str,
    budget: Duration,
) -> Result<Watched, CasError> {
    let mut watched = Watched {
        sessions: Vec::new(),
        database: 0,
        standbys: Vec::new(),
    };
    if standbys.is_empty() {
        return Ok(watched);
    }
    let primary_id = system_identifier(primary).await.map_err(|e| {
        CasError::CutoverRefused(Refusal::new(
            RefusalCause::StandbyQueries,
            format!("the primary's system identifier cannot be read ({e}), so no standby can be shown to be its own; the source is untouched"),
        ))
    })?;
    watched.database = primary
        .query_one(
            "SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()",
            &[],
        )
        .await
        .map(|r| r.get(0))
        .map_err(|e| CasError::db("reading the database's OID", e))?;
    for spec in standbys {
        let session = open(spec, &primary_id, true).await?;
        let endpoint = StandbyEndpoint::of(spec);
        let row = session
            .client()
            .query_one(
                "SELECT (SELECT setting::pg_catalog.int8 FROM pg_catalog.pg_settings WHERE name OPERATOR(pg_catalog.=) 'max_standby_streaming_delay'), \
                        pg_catalog.current_setting('hot_standby_feedback')::pg_catalog.bool",
                &[],
            )
            .await
            .map_err(|e| unreadable(&endpoint, "reading its settings", &e))?;
        watched.standbys.push(QueriedStandby {
            standby: endpoint,
            max_standby_streaming_delay_ms: row.get(0),
            hot_standby_feedback: row.get(1),
            holders_seen: Vec::new(),
            waited_ms: 0,
            confl_lock_before: 0,
            confl_lock_after: None,
            cancelled_by_swap: None,
            replayed_swap_after_ms: None,
        });
        watched.sessions.push(session);
    }
    let started = Instant::now();
    let mut first = true;
    loop {
        let mut blocked: Vec<(usize, Vec<StandbyLockHolder>)> = Vec::new();
        for (i, session) in watched.sessions.iter().enumerate() {
            let found = holders(session.client(), relations, watched.database)
                .await
                .map_err(|e| unreadable(&watched.standbys[i].standby, "reading pg_locks", &e))?;
            if first {
                watched.standbys[i].holders_seen = found.clone();
            }
            if !found.is_empty() {
                blocked.push((i, found));
            }
        }
        first = false;
        let waited = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if blocked.is_empty() {
            for standby in &mut watched.standbys {
                standby.waited_ms = waited;
            }
            break;
        }
        if started.elapsed() >= budget {
            // INV: LK-9 — no swap while a standby query would be held up or cancelled
            // by its replayed lock.
            let named: Vec<String> = blocked
                .iter()
                .map(|(i, found)| {
                    let standby = &watched.standbys[*i];
                    let mut pids: Vec<i32> = found.iter().map(|h| h.pid).collect();
                    pids.dedup();
                    format!(
                        "standby {} (pids {}; max_standby_streaming_delay {}, hot_standby_feedback {})",
                        standby.standby,
                        pids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                        delay_text(standby.max_standby_streaming_delay_ms),
                        if standby.hot_standby_feedback { "on" } else { "off" }
                    )
                })
                .collect();
            return Err(CasError::CutoverRefused(Refusal::new(
                RefusalCause::StandbyQueries,
                format!(
                    "queries on {} held or waited for a lock on {table} for the cutover's whole budget ({} ms): the swap's replayed lock would hold up replay behind them, then cancel them; {table} is untouched",
                    named.join("; "),
                    budget.as_millis()
                ),
            )));
        }
        tokio::time::sleep(POLL).await;
    }
    for (i, session) in watched.sessions.iter().enumerate() {
        watched.standbys[i].confl_lock_before = confl_lock(session.client(), watched.database)
            .await
            .map_err(|e| {
                unreadable(
                    &watched.standbys[i].standby,
                    "reading pg_stat_database_conflicts",
                    &e,
                )
            })?;
    }
    Ok(watched)
}

/// `max_standby_streaming_delay` as people read it.
pub(super) fn delay_text(ms: i64) -> String {
    if ms < 0 {
        "-1 (replay waits forever)".to_owned()
    } else {
        format!("{ms} ms")
    }
}

/// The progress note of a standby the check found clear.
pub fn clear_note(standby: &QueriedStandby, table: &str) -> String {
    let waited = if standby.holders_seen.is_empty() {
        String::new()
    } else {
        format!(
            " (after waiting {} ms for {} backend(s) to end)",
            standby.waited_ms,
            standby.holders_seen.len()
        )
    };
    format!(
        "standby {}: no query holds or waits for a lock on {table}{waited}; max_standby_streaming_delay {}, hot_standby_feedback {}; confl_lock {} before the swap",
        standby.standby,
        delay_text(standby.max_standby_streaming_delay_ms),
        if standby.hot_standby_feedback { "on" } else { "off" },
        standby.confl_lock_before
    )
}

/// The progress note of what the swap's replay cancelled on a standby.
pub fn cancelled_note(standby: &QueriedStandby) -> String {
    match (standby.cancelled_by_swap, standby.replayed_swap_after_ms) {
        (Some(n), Some(ms)) => format!(
            "standby {}: replayed the swap {ms} ms after its commit; {n} cancellation{} by lock conflicts meanwhile (confl_lock {} → {}; a session whose statement is cancelled and then its connection ended counts twice)",
            standby.standby,
            if n == 1 { "" } else { "s" },
            standby.confl_lock_before,
            standby.confl_lock_after.unwrap_or_default()
        ),
        (_, Some(ms)) => format!(
            "standby {}: replayed the swap {ms} ms after its commit; its confl_lock could not be read, so cancellations there are unknown",
            standby.standby
        ),
        _ => format!(
            "standby {}: had not replayed the swap within the wait; cancellations there are unknown",
            standby.standby
        ),
    }
}
