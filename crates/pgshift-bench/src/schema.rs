//! Loads the relay workload into a database: `workloads/relay/schema.sql` and
//! `workloads/relay/seed.sql`, built into the library (so it works from any
//! working directory) and run through the crate's interpreter of the psql
//! features they use, with the same meaning as
//! `psql -v ON_ERROR_STOP=1 [-v rows_per_partition=N] -f`.
//!
//! The seed is server-side (`generate_series`, one statement per partition)
//! and deterministic: two seeds with the same `rows_per_partition` produce the
//! same rows.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::error::{Error, Result};
use crate::psql::{run_script, run_script_observed, Variables};

/// `workloads/relay/schema.sql`, as built into the library.
pub const SCHEMA_SQL: &str = include_str!("../../../workloads/relay/schema.sql");

/// `workloads/relay/seed.sql`, as built into the library.
pub const SEED_SQL: &str = include_str!("../../../workloads/relay/seed.sql");

/// Rows per partition that `seed.sql` uses when none is given.
pub const DEFAULT_ROWS_PER_PARTITION: u32 = 1000;

/// Events per partition after a seed, as the seed's last query reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedReport {
    /// `(partition, events)`, oldest partition first.
    pub partitions: Vec<(String, u64)>,
}

impl SeedReport {
    /// Events in all partitions.
    pub fn total(&self) -> u64 {
        self.partitions.iter().map(|(_, n)| n).sum()
    }
}

/// How far a seed is: reported after each partition's `INSERT` (one statement, one
/// transaction: nothing of a partition is visible to another session before it
/// commits).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeedProgress {
    /// Partitions seeded (or skipped: already holding rows).
    pub partitions_done: usize,
    /// Partitions of `events`.
    pub partitions_total: usize,
    /// Events the partitions done were given (`partitions_done × rows_per_partition`).
    pub events_done: u64,
    /// Events of the whole seed.
    pub events_total: u64,
    /// Since the seed started.
    pub elapsed: Duration,
}

impl SeedProgress {
    /// Events per second so far.
    pub fn rate(&self) -> f64 {
        self.events_done as f64 / self.elapsed.as_secs_f64().max(0.001)
    }

    /// The seconds left at the rate so far (`None` before the first partition).
    pub fn eta(&self) -> Option<Duration> {
        let rate = self.rate();
        (self.events_done > 0 && self.events_total > self.events_done)
            .then(|| Duration::from_secs_f64((self.events_total - self.events_done) as f64 / rate))
    }
}

/// Creates the relay schema (tables, partitions, indexes, trigger functions and
/// triggers) in the connected database, within `timeout`. The script is one
/// transaction and can be run again over itself.
pub async fn load_schema(client: &Client, timeout: Duration) -> Result<()> {
    bounded("loading schema.sql", timeout, async {
        run_script(client, "schema.sql", SCHEMA_SQL, Variables::new()).await
    })
    .await
    .map(drop)
}

/// Seeds the relay schema with `rows_per_partition` events in each of the 8
/// partitions (3 communities, 12 channels), within `timeout`. Partitions that
/// already hold rows are left alone.
pub async fn seed(
    client: &Client,
    rows_per_partition: u32,
    timeout: Duration,
) -> Result<SeedReport> {
    seed_with_progress(client, rows_per_partition, timeout, &mut |_| {}).await
}

/// [`seed`], reporting on `progress` after each partition.
pub async fn seed_with_progress(
    client: &Client,
    rows_per_partition: u32,
    timeout: Duration,
    progress: &mut (dyn FnMut(SeedProgress) + Send),
) -> Result<SeedReport> {
    if rows_per_partition == 0 {
        return Err(Error::Config {
            field: "rows_per_partition",
            reason: "must be at least 1".to_owned(),
        });
    }
    let vars = Variables::from([(
        "rows_per_partition".to_owned(),
        rows_per_partition.to_string(),
    )]);
    let started = Instant::now();
    let mut generated = |done: usize, of: usize| {
        progress(SeedProgress {
            partitions_done: done,
            partitions_total: of,
            events_done: done as u64 * u64::from(rows_per_partition),
            events_total: of as u64 * u64::from(rows_per_partition),
            elapsed: started.elapsed(),
        });
    };
    let output = bounded("running seed.sql", timeout, async {
        run_script_observed(client, "seed.sql", SEED_SQL, vars, &mut generated).await
    })
    .await?;
    let partitions = output
        .last_rows
        .into_iter()
        .map(|row| match row.as_slice() {
            [Some(partition), Some(events)] => events
                .parse()
                .ok()
                .map(|events| (partition.clone(), events)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::Script {
            script: "seed.sql",
            line: SEED_SQL.lines().count(),
            detail: "the final query does not report (partition, events)".to_owned(),
        })?;
    Ok(SeedReport { partitions })
}

async fn bounded<T>(
    what: &str,
    timeout: Duration,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| Error::Timeout {
            what: what.to_owned(),
            waited: timeout,
        })?
}
