//! Loads the relay workload into a database: `workloads/relay/schema.sql` and
//! `workloads/relay/seed.sql`, built into the library (so it works from any
//! working directory) and run by psql itself ([`Psql`]), as
//! `psql -X -v ON_ERROR_STOP=1 [-v rows_per_partition=N] -f -` with the script
//! on standard input.
//!
//! The seed is server-side (`generate_series`, one statement per partition)
//! and deterministic: two seeds with the same `rows_per_partition` produce the
//! same rows. After each partition's `INSERT` it prints a progress row,
//! which [`seed_with_progress`] turns into a callback.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
pub use crate::psql::Psql;

/// `workloads/relay/schema.sql`, as built into the library.
pub const SCHEMA_SQL: &str = include_str!("../../../workloads/relay/schema.sql");

/// `workloads/relay/seed.sql`, as built into the library.
pub const SEED_SQL: &str = include_str!("../../../workloads/relay/seed.sql");

/// The first cell of the row `seed.sql` prints after each partition's `INSERT`:
/// `seeded|<partitions done>|<partitions>|<partition>|<events in it>`.
const SEED_PROGRESS: &str = "seeded";

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
/// triggers) in the database `psql` connects to, within `timeout`. The script
/// is one transaction and can be run again over itself.
pub async fn load_schema(psql: &Psql, timeout: Duration) -> Result<()> {
    psql.run_lines("schema.sql", SCHEMA_SQL, &[], timeout, &mut |_| {})
        .await
}

/// Seeds the relay schema with `rows_per_partition` events in each of the 8
/// partitions (3 communities, 12 channels), within `timeout`. Partitions that
/// already hold rows are left alone.
pub async fn seed(psql: &Psql, rows_per_partition: u32, timeout: Duration) -> Result<SeedReport> {
    seed_with_progress(psql, rows_per_partition, timeout, &mut |_| {}).await
}

/// [`seed`], reporting on `progress` after each partition (skipped ones too).
pub async fn seed_with_progress(
    psql: &Psql,
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
    let per_partition = u64::from(rows_per_partition);
    let started = Instant::now();
    // The lines of the final query, and the first line that is not as expected.
    let mut report_lines: Vec<String> = Vec::new();
    let mut unexpected: Option<String> = None;
    let mut on_line = |line: &str| match line.split('|').collect::<Vec<_>>().as_slice() {
        [SEED_PROGRESS, done, total, _partition, _events] => {
            match (done.parse::<usize>(), total.parse::<usize>()) {
                (Ok(done), Ok(total)) => progress(SeedProgress {
                    partitions_done: done,
                    partitions_total: total,
                    events_done: done as u64 * per_partition,
                    events_total: total as u64 * per_partition,
                    elapsed: started.elapsed(),
                }),
                _ => {
                    unexpected.get_or_insert_with(|| line.to_owned());
                }
            }
        }
        [""] => {}
        _ => report_lines.push(line.to_owned()),
    };
    let vars = [("rows_per_partition", rows_per_partition.to_string())];
    psql.run_lines("seed.sql", SEED_SQL, &vars, timeout, &mut on_line)
        .await?;
    if let Some(line) = unexpected {
        return Err(Error::PsqlOutput {
            script: "seed.sql",
            detail: format!("a progress row that does not parse: {line:?}"),
        });
    }
    let partitions = report_lines
        .iter()
        .map(
            |line| match line.split('|').collect::<Vec<_>>().as_slice() {
                [partition, events] => events
                    .parse()
                    .map(|events| ((*partition).to_owned(), events))
                    .map_err(|_| line),
                _ => Err(line),
            },
        )
        .collect::<Result<Vec<_>, _>>()
        .map_err(|line| Error::PsqlOutput {
            script: "seed.sql",
            detail: format!("the final query should print partition|events, not {line:?}"),
        })?;
    Ok(SeedReport { partitions })
}
