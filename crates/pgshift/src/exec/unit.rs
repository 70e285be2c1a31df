//! Running one unit of work — a bounded transaction of steps, or one step that must
//! run outside a transaction — with retries on lock timeouts and deadlocks.
//!
//! Each attempt sets `lock_timeout`, `statement_timeout` and the user's
//! `search_path` for itself (`SET LOCAL` inside a transaction, session-level `SET`
//! reset afterwards outside one). A lock timeout or deadlock changed nothing and is
//! retried after a jittered, exponentially growing backoff, up to the budget's
//! attempts; a statement timeout (real work) and any other error are not.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::budgets::StepBudgets;
use super::errors::Failure;
use super::index_guard::{FoundIndex, IndexGuard};
use super::jitter::Jitter;
use crate::classify::WorkClass;
use crate::lock::LockMode;
use crate::route::Step;
use pgshift_sql::{quote_ident, QualifiedName};

/// Steps that run together: in one transaction, or (a single step) outside any.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unit {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Whether the steps run inside one transaction.
    pub transactional: bool,
    /// The input statements (indexes) the steps come from.
    pub statements: Vec<usize>,
    /// Whether this unit runs a blocking form the operator accepted explicitly.
    pub accepted_blocking: bool,
    /// When set, the unit's one step is a rewrite of this table run through
    /// copy-and-swap (`pgshift::cas`), not as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_and_swap: Option<QualifiedName>,
    /// When set, the unit's one step is a `DO` block guarded by PC-5: this copy of it
    /// runs read-only on live instead (`super::guarded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<crate::procedural::Guard>,
    /// Runs as written, in one transaction, because every table that existed before the
    /// input and that it blocks writes on holds no rows on the live server: an explicit
    /// block that must stay one transaction (invariant TX-1), a file its runner wraps, or
    /// one statement ([`super::whole_file`], TX-2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_on_empty: bool,
    /// For a [`Self::whole_on_empty`] unit: the pre-existing tables it blocks writes on
    /// and was planned on because they held no rows. Each is locked (in the strongest
    /// mode the unit takes on it) at the start of the unit's transaction and must
    /// still have no heap page, or nothing of the unit runs (TX-2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub empty_at_start: Vec<EmptyAtStart>,
}

/// A table a unit runs on as written because it held no rows when planned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyAtStart {
    /// The table, as the statements name it (resolved with the user's search_path).
    pub relation: QualifiedName,
    /// The mode it is locked in before the check.
    pub mode: LockMode,
    /// Locked without its partitions (`LOCK TABLE ONLY`): the statements take another
    /// mode on them, or none; their sizes are read unlocked.
    #[serde(default)]
    pub only: bool,
}

impl Unit {
    /// The strongest lock any step takes.
    pub fn strongest_lock(&self) -> Option<LockMode> {
        self.steps
            .iter()
            .filter_map(|s| s.lock.as_ref().map(|l| l.mode))
            .max()
    }

    /// The heaviest work of its steps.
    pub fn work(&self) -> WorkClass {
        self.steps
            .iter()
            .map(|s| s.work)
            .max()
            .unwrap_or(WorkClass::None)
    }
}

/// One try of a unit.
#[derive(Clone, Debug, Serialize)]
pub struct Attempt {
    /// 1-based.
    pub number: u32,
    /// `committed`, or the failure's name (`lock-timeout`, `deadlock`, …).
    pub outcome: String,
    /// From `BEGIN` (or the statement) to `COMMIT` (or the failure), in microseconds.
    pub elapsed_us: u64,
    /// The backoff slept after it, in microseconds.
    pub backoff_us: u64,
}

/// What happened to a unit.
#[derive(Clone, Debug, Serialize)]
pub struct UnitReport {
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// Whether it committed.
    pub committed: bool,
    /// The failure of the last attempt, when it did not commit.
    pub failure: Option<String>,
    /// The failure's kind (`lock-timeout`, `statement-timeout`, …).
    pub failure_kind: Option<&'static str>,
    /// For the committed attempt: the time from the start of the first statement
    /// that takes the unit's strongest lock to the end of `COMMIT` — an upper bound of
    /// how long that lock was held (it also includes the wait for it).
    pub strong_lock_held_us_max: Option<u64>,
    /// For the committed attempt: each step's duration, in microseconds.
    pub step_us: Vec<u64>,
    /// What was cleaned up between attempts (invalid indexes left by failed builds).
    pub cleanups: Vec<String>,
    /// How long the session was seen waiting for locks, over all attempts, sampled
    /// every 5 ms from a second session (when one was available and the unit takes a
    /// lock that blocks writes).
    pub lock_wait_us_observed: Option<u64>,
    /// For a unit guarded by PC-5 that is done: what its read-only run on live found
    /// (`ran read-only on live: a no-op here`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guarded: Option<String>,
}

/// Sleeps; injected so tests can run retries without real time.
pub trait Sleeper: Send + Sync {
    /// Sleeps for `duration`.
    fn sleep(&self, duration: Duration) -> impl std::future::Future<Output = ()> + Send;
}

/// Real time.
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// What a unit runs with besides its steps.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnitContext<'a> {
    /// The user's `search_path` for their SQL.
    pub search_path: &'a [String],
    /// For a concurrent index build: the index to watch for invalid leftovers.
    pub guard: Option<&'a IndexGuard>,
    /// SQL recording the unit as done (a history update): run inside the unit's
    /// transaction before `COMMIT`, so the record and the work commit together; for a
    /// unit outside a transaction, right after it succeeds.
    pub bookkeeping: Option<&'a str>,
}

/// Runs `unit` on `client` under `budgets`, retrying lock timeouts and deadlocks.
/// With a guard (a concurrent index build), an invalid index left by a failed
/// attempt is dropped, by OID, before the next one.
pub async fn run_unit(
    client: &Client,
    unit: &Unit,
    budgets: &StepBudgets,
    context: UnitContext<'_>,
    sleeper: &impl Sleeper,
    jitter: &mut Jitter,
) -> UnitReport {
    let UnitContext {
        search_path,
        guard,
        bookkeeping,
    } = context;
    let mut report = UnitReport {
        attempts: Vec::new(),
        committed: false,
        failure: None,
        failure_kind: None,
        strong_lock_held_us_max: None,
        step_us: Vec::new(),
        cleanups: Vec::new(),
        lock_wait_us_observed: None,
        guarded: None,
    };
    let statement_timeout = budgets.statement_timeout_for(unit.work());
    let lock_timeout = budgets.lock_timeout_for(unit.strongest_lock());
    for number in 1..=budgets.max_attempts {
        let before = match guard {
            Some(guard) => guard.find(client).await.ok().flatten(),
            None => None,
        };
        let started = Instant::now();
        let result = if let Some(guarded) = &unit.guard {
            let settings = settings(true, lock_timeout, statement_timeout, search_path);
            super::guarded::attempt_guarded(client, guarded, &settings, bookkeeping)
                .await
                .map(|()| {
                    report.guarded = Some(crate::procedural::GuardOutcome::NoOp.describe());
                    Timing {
                        strong_lock_held_us: None,
                        step_us: vec![micros(started.elapsed())],
                    }
                })
        } else if unit.transactional {
            attempt_in_transaction(
                client,
                unit,
                lock_timeout,
                statement_timeout,
                search_path,
                bookkeeping,
            )
            .await
        } else {
            attempt_alone(
                client,
                unit,
                lock_timeout,
                statement_timeout,
                search_path,
                bookkeeping,
            )
            .await
        };
        let elapsed_us = micros(started.elapsed());
        match result {
            Ok(timing) => {
                report.attempts.push(Attempt {
                    number,
                    outcome: "committed".to_owned(),
                    elapsed_us,
                    backoff_us: 0,
                });
                report.committed = true;
                report.strong_lock_held_us_max = timing.strong_lock_held_us;
                report.step_us = timing.step_us;
                return report;
            }
            Err(failure) => {
                if let Some(guard) = guard {
                    if let Err(cleanup) = clean_leftover(client, guard, before, &mut report).await {
                        report.failure_kind = Some(cleanup.name());
                        report.failure = Some(format!(
                            "{}; then removing the invalid index it left failed: {}",
                            failure.describe(),
                            cleanup.describe()
                        ));
                        return report;
                    }
                }
                // INV: LK-3 — lock waits are bounded by lock_timeout and retried at most max_attempts times.
                let retry = failure.is_retryable() && number < budgets.max_attempts;
                let backoff = if retry {
                    budgets.backoff(number + 1, jitter.next_unit())
                } else {
                    Duration::ZERO
                };
                report.attempts.push(Attempt {
                    number,
                    outcome: failure.name().to_owned(),
                    elapsed_us,
                    backoff_us: micros(backoff),
                });
                if !retry {
                    report.failure_kind = Some(failure.name());
                    report.failure = Some(if failure.is_retryable() {
                        format!(
                            "{} on each of {} attempts; the lock budget is exhausted",
                            failure.describe(),
                            budgets.max_attempts
                        )
                    } else {
                        failure.describe()
                    });
                    return report;
                }
                sleeper.sleep(backoff).await;
            }
        }
    }
    report
}

/// After a failed build: drop the invalid index the attempt left (a new OID under the
/// name), never one that was there before.
async fn clean_leftover(
    client: &Client,
    guard: &IndexGuard,
    before: Option<FoundIndex>,
    report: &mut UnitReport,
) -> Result<(), Failure> {
    let Some(after) = guard.find(client).await? else {
        return Ok(());
    };
    // INV: ST-2 — only an invalid index with a new OID (this attempt's) is dropped.
    if after.valid || before.is_some_and(|b| b.oid == after.oid) {
        return Ok(());
    }
    guard.drop_leftover(client, after).await?;
    report.cleanups.push(format!(
        "dropped the invalid index {} (OID {}) left by the failed attempt",
        guard.qualified(),
        after.oid
    ));
    Ok(())
}

struct Timing {
    strong_lock_held_us: Option<u64>,
    step_us: Vec<u64>,
}

/// `SET LOCAL`/`SET` statements for an attempt: validated integers and quoted names
/// only.
fn settings(
    local: bool,
    lock_timeout_ms: u64,
    statement_timeout_ms: u64,
    search_path: &[String],
) -> String {
    let set = if local { "SET LOCAL" } else { "SET" };
    let path = if search_path.is_empty() {
        "pg_catalog".to_owned()
    } else {
        search_path
            .iter()
            .map(|schema| quote_ident(schema))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{set} lock_timeout = {lock_timeout_ms}; {set} statement_timeout = {statement_timeout_ms}; {set} search_path = {path}"
    )
}

async fn attempt_in_transaction(
    client: &Client,
    unit: &Unit,
    lock_timeout_ms: u64,
    statement_timeout_ms: u64,
    search_path: &[String],
    bookkeeping: Option<&str>,
) -> Result<Timing, Failure> {
    let run = async {
        client.batch_execute("BEGIN").await?;
        client
            .batch_execute(&settings(
                true,
                lock_timeout_ms,
                statement_timeout_ms,
                search_path,
            ))
            .await?;
        if let Some(populated) = still_empty(client, &unit.empty_at_start, true).await? {
            return Ok(Err(populated));
        }
        let strongest = unit.strongest_lock();
        let mut strong_started: Option<Instant> = None;
        let mut step_us = Vec::with_capacity(unit.steps.len());
        for step in &unit.steps {
            let started = Instant::now();
            if strong_started.is_none()
                && step.lock.as_ref().map(|l| l.mode) == strongest
                && strongest.is_some_and(|m| m.blocks_writes())
            {
                strong_started = Some(started);
            }
            client.batch_execute(&step.sql).await?;
            step_us.push(micros(started.elapsed()));
        }
        // INV: ST-1 — the unit's record commits in the unit's own transaction.
        if let Some(bookkeeping) = bookkeeping {
            client.batch_execute(bookkeeping).await?;
        }
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>(Ok(Timing {
            strong_lock_held_us: strong_started.map(|s| micros(s.elapsed())),
            step_us,
        }))
    };
    match run.await {
        Ok(Ok(timing)) => Ok(timing),
        Ok(Err(populated)) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(no_longer_empty(&populated))
        }
        Err(error) => {
            let failure = Failure::of(&error);
            if failure != Failure::ConnectionLost {
                let _ = client.batch_execute("ROLLBACK").await;
            }
            Err(failure)
        }
    }
}

/// Locks each table of `tables` in its mode (in a transaction: `lock`) and reads
/// whether it still has no heap page, over every partition; the first that has one,
/// when any. Outside a transaction no lock can be held until the statement's own: the
/// read is then the last one before it.
// INV: TX-2 — emptiness is read again under the unit's own locks, before any of its
// statements runs.
async fn still_empty(
    client: &Client,
    tables: &[EmptyAtStart],
    lock: bool,
) -> Result<Option<QualifiedName>, tokio_postgres::Error> {
    for table in tables {
        // A name the unit's own statements give (a table renamed or created by an
        // earlier statement of it) names nothing yet: what it will name is checked
        // under its name now, where the unit locks it first.
        let exists: bool = client
            .query_one(
                "SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL",
                &[&table.relation.to_string()],
            )
            .await?
            .get(0);
        if !exists {
            continue;
        }
        if lock {
            client
                .batch_execute(&format!(
                    "LOCK TABLE {}{} IN {} MODE",
                    if table.only { "ONLY " } else { "" },
                    table.relation,
                    table.mode.sql_name()
                ))
                .await?;
        }
        let bytes: i64 = client
            .query_one(
                // The table itself, and its partitions when it has some (a table that is
                // neither partitioned nor a partition has no tree).
                "SELECT COALESCE(pg_catalog.sum(pg_catalog.pg_relation_size(r.c)), 0)::pg_catalog.int8 \
                   FROM (SELECT $1::pg_catalog.text::pg_catalog.regclass AS c \
                         UNION SELECT t.relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.text::pg_catalog.regclass) t) r",
                &[&table.relation.to_string()],
            )
            .await?
            .get(0);
        if bytes > 0 {
            return Ok(Some(table.relation.clone()));
        }
    }
    Ok(None)
}

async fn attempt_alone(
    client: &Client,
    unit: &Unit,
    lock_timeout_ms: u64,
    statement_timeout_ms: u64,
    search_path: &[String],
    bookkeeping: Option<&str>,
) -> Result<Timing, Failure> {
    // The session's own budgets, to go back to afterwards. `RESET` would not do: it
    // returns to the server's default (often 0, no timeout), not to the budget the
    // session set when it connected.
    let saved = client
        .query_one(
            "SELECT pg_catalog.current_setting('lock_timeout'), pg_catalog.current_setting('statement_timeout')",
            &[],
        )
        .await
        .map_err(|error| Failure::of(&error))?;
    let (saved_lock, saved_statement): (String, String) = (saved.get(0), saved.get(1));
    let run = async {
        client
            .batch_execute(&settings(
                false,
                lock_timeout_ms,
                statement_timeout_ms,
                search_path,
            ))
            .await?;
        if let Some(populated) = still_empty(client, &unit.empty_at_start, false).await? {
            return Ok(Err(populated));
        }
        let mut step_us = Vec::with_capacity(unit.steps.len());
        for step in &unit.steps {
            let started = Instant::now();
            client.batch_execute(&step.sql).await?;
            step_us.push(micros(started.elapsed()));
        }
        Ok::<_, tokio_postgres::Error>(Ok(step_us))
    };
    let mut result = run.await;
    // INV: LK-2 — back to the session's own budgets and catalog-safe search_path.
    let restored = client
        .execute(
            "SELECT pg_catalog.set_config('lock_timeout', $1, false), pg_catalog.set_config('statement_timeout', $2, false), \
                    pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)",
            &[&saved_lock, &saved_statement],
        )
        .await;
    if let (Ok(_), Err(error)) = (&result, restored) {
        result = Err(error);
    }
    if let (Ok(Ok(_)), Some(bookkeeping)) = (&result, bookkeeping) {
        if let Err(error) = client.batch_execute(bookkeeping).await {
            result = Err(error);
        }
    }
    match result {
        Ok(Ok(step_us)) => Ok(Timing {
            strong_lock_held_us: None,
            step_us,
        }),
        Ok(Err(populated)) => Err(no_longer_empty(&populated)),
        Err(error) => Err(Failure::of(&error)),
    }
}

fn no_longer_empty(populated: &QualifiedName) -> Failure {
    Failure::NoLongerEmpty(format!(
        "planned to run as written because {populated} held no rows, but it holds rows now; nothing of the unit ran. Plan again: on a table with rows it runs by its online route"
    ))
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::settings;

    #[test]
    fn settings_quote_the_search_path() {
        let sql = settings(
            true,
            1000,
            60000,
            &["$user".to_owned(), "my schema".to_owned()],
        );
        assert_eq!(
            sql,
            "SET LOCAL lock_timeout = 1000; SET LOCAL statement_timeout = 60000; SET LOCAL search_path = \"$user\", \"my schema\""
        );
        let parsed = pgshift_sql::parse(&sql).expect("valid SQL");
        assert_eq!(parsed.len(), 3);
    }
}
