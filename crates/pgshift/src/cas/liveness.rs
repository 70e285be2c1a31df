//! Whether a live process holds a run, and what became of a requested cutover.
//!
//! A process running a table's run holds the table's session advisory lock for as long
//! as it runs (INV: OC-2). Another session sees that lock in `pg_locks` without taking
//! it, so `status` can tell a live run from a dead one whose record still says
//! `verifying`, and `cutover` can tell whether anyone will act on its request.

use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_postgres::Client;

use super::error::CasError;
use super::run::RunReport;
use super::session;
use super::store::{self, Phase, RunRecord};
use crate::connect::ConnectionSpec;
use crate::refusal::{Refusal, RefusalCause};

/// The text the per-table advisory lock is keyed by (`hashtextextended(key, 0)`).
pub(crate) fn lock_key(oid: u32) -> String {
    format!("pgshift.cas:{oid}")
}

/// The backend pid of the session (other than this one) that holds the run lock of
/// table `oid` in this database, if any.
pub async fn holder(client: &Client, oid: u32) -> Result<Option<i32>, CasError> {
    // INV: OC-4 — read from pg_locks, never taken: probing must not make a resume
    // started at this moment find the table busy.
    let row = client
        .query_opt(
            "SELECT l.pid FROM pg_catalog.pg_locks l \
              WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted \
                AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) \
                AND ((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8) \
                    OPERATOR(pg_catalog.=) pg_catalog.hashtextextended($1, 0) \
                AND l.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() LIMIT 1",
            &[&lock_key(oid)],
        )
        .await
        .map_err(|e| CasError::db("looking for the process holding the run", e))?;
    Ok(row.map(|r| r.get(0)))
}

/// A recorded run and, while it is active, the backend holding it.
#[derive(Clone, Debug)]
pub struct RunStatus {
    /// The record.
    pub record: RunRecord,
    /// For an active run (not done, not aborted): the backend pid of the process
    /// running it, or `None` when no process does (it died, or stopped).
    pub holder_pid: Option<i32>,
}

impl RunStatus {
    /// Whether the run is still to be finished (neither done nor aborted).
    pub fn active(&self) -> bool {
        !matches!(self.record.phase, Phase::Done | Phase::Aborted)
    }
}

/// Every recorded run, newest first, with the liveness of the active ones.
pub async fn status(spec: &ConnectionSpec) -> Result<Vec<RunStatus>, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    let client = runner.client();
    let mut out = Vec::new();
    for record in store::all(client, 100).await? {
        let holder_pid = if matches!(record.phase, Phase::Done | Phase::Aborted) {
            None
        } else {
            holder(client, record.source_oid).await?
        };
        out.push(RunStatus { record, holder_pid });
    }
    Ok(out)
}

/// Why a run stopped, read from its record's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Refused (nothing swapped): one cause.
    Refused(Refusal),
    /// Verification found a difference.
    Diverged(String),
    /// Anything else.
    Failed(String),
}

/// Reads a recorded error back into why the run stopped (the record keeps the
/// error's text: `CasError`'s own `Display`, which a test pins).
pub fn stop_of(error: &str) -> Stop {
    for prefix in ["cutover refused: ", "refused: "] {
        let Some(rest) = error.strip_prefix(prefix) else {
            continue;
        };
        let Some((cause, message)) = rest.split_once(": ") else {
            continue;
        };
        if let Some(cause) = RefusalCause::ALL.iter().find(|c| c.name() == cause) {
            return Stop::Refused(Refusal::new(*cause, message));
        }
    }
    match error.strip_prefix("verification failed: ") {
        Some(detail) => Stop::Diverged(detail.to_owned()),
        None => Stop::Failed(error.to_owned()),
    }
}

/// What became of a requested cutover.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum CutoverOutcome {
    /// The run swapped and finished.
    Swapped {
        /// The run's final report, when it stored one.
        report: Option<Box<RunReport>>,
    },
    /// The run stopped with a refusal (or a divergence): nothing swapped.
    Refused {
        /// Why.
        refusal: Option<Refusal>,
        /// The recorded error.
        error: String,
    },
    /// The run stopped with a failure: nothing swapped, unless `resume` finds the
    /// swap committed.
    Failed {
        /// The recorded error.
        error: String,
    },
    /// No live process runs the run: nothing will swap until `pgshift resume`.
    NoProcess {
        /// The phase its record is in.
        phase: String,
    },
    /// The run was removed (aborted) meanwhile.
    Gone,
    /// No outcome within the wait: the request stands.
    TimedOut {
        /// The phase its record is in.
        phase: String,
        /// The backend running it.
        holder_pid: Option<i32>,
    },
}

/// How often [`await_cutover`] reads the record.
const POLL: Duration = Duration::from_millis(250);

/// Waits, at most `timeout`, until run `id` swaps or stops, or no live process runs
/// it any more; `on_wait` is told the phase and holder at every look.
pub async fn await_cutover(
    spec: &ConnectionSpec,
    id: i64,
    timeout: Duration,
    on_wait: &mut (dyn FnMut(Phase, Option<i32>) + Send),
) -> Result<CutoverOutcome, CasError> {
    let runner = session::open(spec, "pgshift").await?;
    let client = runner.client();
    let deadline = Instant::now() + timeout;
    loop {
        let Some(record) = read(client, id).await? else {
            return Ok(CutoverOutcome::Gone);
        };
        if let Some(outcome) = settled(&record) {
            return Ok(outcome);
        }
        let holder_pid = holder(client, record.source_oid).await?;
        if holder_pid.is_none() {
            // The process may have finished between the two reads: look once more.
            let Some(record) = read(client, id).await? else {
                return Ok(CutoverOutcome::Gone);
            };
            return Ok(settled(&record).unwrap_or(CutoverOutcome::NoProcess {
                phase: record.phase.name().to_owned(),
            }));
        }
        on_wait(record.phase, holder_pid);
        if Instant::now() >= deadline {
            return Ok(CutoverOutcome::TimedOut {
                phase: record.phase.name().to_owned(),
                holder_pid,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn read(client: &Client, id: i64) -> Result<Option<RunRecord>, CasError> {
    match store::by_id(client, id).await {
        Ok(record) => Ok(Some(record)),
        Err(CasError::NoSuchRun(_)) => Ok(None),
        Err(err) => Err(err),
    }
}

/// The outcome a record already shows, if it shows one.
fn settled(record: &RunRecord) -> Option<CutoverOutcome> {
    match record.phase {
        Phase::Done => Some(CutoverOutcome::Swapped {
            report: record
                .report
                .clone()
                .and_then(|value| serde_json::from_value(value).ok())
                .map(Box::new),
        }),
        Phase::Aborted => Some(CutoverOutcome::Gone),
        Phase::Failed => {
            let error = record.error.clone().unwrap_or_default();
            Some(match stop_of(&error) {
                Stop::Refused(refusal) => CutoverOutcome::Refused {
                    refusal: Some(refusal),
                    error,
                },
                Stop::Diverged(_) => CutoverOutcome::Refused {
                    refusal: None,
                    error,
                },
                Stop::Failed(_) => CutoverOutcome::Failed { error },
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{stop_of, Stop};
    use crate::cas::CasError;
    use crate::refusal::{Refusal, RefusalCause};

    #[test]
    fn a_recorded_error_reads_back_as_why_the_run_stopped() {
        let refusal = Refusal::new(
            RefusalCause::LockBudgetExhausted,
            "ACCESS EXCLUSIVE on a: b was not granted",
        );
        for err in [
            CasError::CutoverRefused(refusal.clone()),
            CasError::Refused(refusal.clone()),
        ] {
            assert_eq!(stop_of(&err.to_string()), Stop::Refused(refusal.clone()));
        }
        assert_eq!(
            stop_of(&CasError::Divergence("chunk 3".to_owned()).to_string()),
            Stop::Diverged("chunk 3".to_owned())
        );
        let failed = CasError::interrupted(2).to_string();
        assert_eq!(stop_of(&failed), Stop::Failed(failed.clone()));
        assert_eq!(
            stop_of("refused: not-a-cause: x"),
            Stop::Failed("refused: not-a-cause: x".to_owned())
        );
    }
}
