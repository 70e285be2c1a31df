//! [`LoadConfig`]: what a load run does, with the relay's defaults and the
//! bounds [`LoadConfig::validate`] enforces.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ledger::WriteOp;
use crate::pacing::Pace;
use crate::table::TableRef;

/// The relative weights of the kinds of write. A delete or replay drawn when
/// the writer has no suitable row of its own becomes an insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OpMix {
    /// Inserts of new events.
    pub insert: u32,
    /// Inserts older than the floor (refused at COMMIT by the floor guard, or
    /// acknowledged from a `replica` writer, which the guard does not see).
    pub stale_insert: u32,
    /// Soft deletes of the writer's own acknowledged rows.
    pub soft_delete: u32,
    /// Hard deletes of the writer's own acknowledged rows.
    pub hard_delete: u32,
    /// Exact replays of the writer's own acknowledged replaceable events
    /// (origin writers only: a replica writer bypasses the replay skipper).
    pub replay: u32,
}

impl OpMix {
    /// The relay's mix: 90 % inserts, 6 % soft deletes, 4 % hard deletes.
    pub const RELAY: OpMix = OpMix {
        insert: 90,
        stale_insert: 0,
        soft_delete: 6,
        hard_delete: 4,
        replay: 0,
    };

    /// Inserts only.
    pub const INSERTS_ONLY: OpMix = OpMix {
        insert: 1,
        stale_insert: 0,
        soft_delete: 0,
        hard_delete: 0,
        replay: 0,
    };

    /// The weights in [`OpMix::OPS`] order.
    pub(crate) fn weights(&self) -> [u32; 5] {
        [
            self.insert,
            self.stale_insert,
            self.soft_delete,
            self.hard_delete,
            self.replay,
        ]
    }

    /// The writes, in [`OpMix::weights`] order.
    pub(crate) const OPS: [WriteOp; 5] = [
        WriteOp::Insert,
        WriteOp::StaleInsert,
        WriteOp::SoftDelete,
        WriteOp::HardDelete,
        WriteOp::Replay,
    ];
}

impl Default for OpMix {
    fn default() -> Self {
        OpMix::RELAY
    }
}

/// A load run. [`LoadConfig::new`] gives the relay's defaults; adjust the
/// public fields, then [`crate::load::start`] validates them.
#[derive(Clone)]
pub struct LoadConfig {
    /// The libpq-style connection string (`host=… dbname=…` or a URL) of the
    /// one cluster the load is pointed at. Never logged or reported.
    pub conninfo: String,
    /// The table the writers and readers use (default `events`).
    pub table: TableRef,
    /// How long the run lasts at most (1 ms to 24 h).
    pub duration: Duration,
    /// Writer connections (default 4; at most 256).
    pub writers: usize,
    /// How many of the writers run with `session_replication_role = replica`
    /// (default 0; needs superuser).
    pub replica_writers: usize,
    /// The total write rate (default 200 per second).
    pub write_pace: Pace,
    /// The kinds of write (default [`OpMix::RELAY`]).
    pub mix: OpMix,
    /// Keyset reader connections (default 1; at most 64).
    pub readers: usize,
    /// The total rate of pages read (default 20 per second).
    pub read_pace: Pace,
    /// Rows per page (default 50).
    pub page_size: u32,
    /// `relay.created_at_floor` of the writers, in seconds (default 600, at
    /// least 5). Stale inserts are an hour older than that.
    pub created_at_floor_secs: u32,
    /// `statement_timeout` of every session (default 60 s). A write is given
    /// this plus 5 s before the client stops waiting for it.
    pub statement_timeout: Duration,
    /// How long one connection attempt may take (default 5 s).
    pub connect_timeout: Duration,
    /// The longest pause between reconnection attempts (default 1 s; pauses
    /// double from 50 ms up to it).
    pub reconnect_backoff_max: Duration,
    /// How far the writers may fall behind their schedule before older slots
    /// are skipped (default 1 s).
    pub catch_up: Duration,
    /// Errors kept in full in the report (default 100; all are counted).
    pub max_error_samples: usize,
    /// Acknowledged rows each writer remembers as targets for deletes
    /// (default 10,000; the oldest are forgotten first).
    pub rows_remembered: usize,
    /// The seed of the writers' choices (default 1).
    pub seed: u64,
    /// Keeps the ids of this run apart from any other run's (default: drawn
    /// from the clock and the process id).
    pub id_namespace: u64,
}

impl LoadConfig {
    /// The relay's defaults for a run of `duration` against `conninfo`.
    pub fn new(conninfo: impl Into<String>, duration: Duration) -> Self {
        LoadConfig {
            conninfo: conninfo.into(),
            table: TableRef::events(),
            duration,
            writers: 4,
            replica_writers: 0,
            write_pace: Pace::PerSecond(200.0),
            mix: OpMix::RELAY,
            readers: 1,
            read_pace: Pace::PerSecond(20.0),
            page_size: 50,
            created_at_floor_secs: 600,
            statement_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            reconnect_backoff_max: Duration::from_secs(1),
            catch_up: Duration::from_secs(1),
            max_error_samples: 100,
            rows_remembered: 10_000,
            seed: 1,
            id_namespace: fresh_namespace(),
        }
    }

    /// Checks every bound.
    pub fn validate(&self) -> Result<()> {
        let day = Duration::from_secs(24 * 3600);
        within("duration", self.duration, Duration::from_millis(1), day)?;
        count("writers", self.writers, 0, 256)?;
        count("readers", self.readers, 0, 64)?;
        if self.writers + self.readers == 0 {
            return Err(config("writers", "and readers cannot both be 0"));
        }
        count("replica_writers", self.replica_writers, 0, self.writers)?;
        pace("write_pace", self.write_pace)?;
        pace("read_pace", self.read_pace)?;
        if self.writers > 0 && self.mix.weights().iter().all(|w| *w == 0) {
            return Err(config("mix", "has no non-zero weight"));
        }
        count("page_size", self.page_size as usize, 1, 10_000)?;
        count(
            "created_at_floor_secs",
            self.created_at_floor_secs as usize,
            5,
            10 * 365 * 24 * 3600,
        )?;
        let hour = Duration::from_secs(3600);
        let ms = Duration::from_millis(1);
        within("statement_timeout", self.statement_timeout, ms, hour)?;
        within(
            "connect_timeout",
            self.connect_timeout,
            ms,
            Duration::from_secs(300),
        )?;
        within(
            "reconnect_backoff_max",
            self.reconnect_backoff_max,
            ms,
            Duration::from_secs(60),
        )?;
        within("catch_up", self.catch_up, Duration::ZERO, hour)?;
        count("max_error_samples", self.max_error_samples, 0, 100_000)?;
        count("rows_remembered", self.rows_remembered, 1, 10_000_000)?;
        Ok(())
    }

    /// How long one write may take before the client gives up on it.
    pub(crate) fn op_timeout(&self) -> Duration {
        self.statement_timeout + Duration::from_secs(5)
    }

    /// The settings worth reporting (no connection string).
    pub fn settings(&self) -> LoadSettings {
        LoadSettings {
            table: self.table.to_string(),
            duration_ms: self.duration.as_millis() as u64,
            writers: self.writers,
            replica_writers: self.replica_writers,
            write_pace: self.write_pace,
            mix: self.mix,
            readers: self.readers,
            read_pace: self.read_pace,
            page_size: self.page_size,
            created_at_floor_secs: self.created_at_floor_secs,
            seed: self.seed,
        }
    }
}

impl fmt::Debug for LoadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connection string may hold a password: never print it.
        f.debug_struct("LoadConfig")
            .field("conninfo", &"<redacted>")
            .field("settings", &self.settings())
            .finish_non_exhaustive()
    }
}

/// The reportable part of a [`LoadConfig`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadSettings {
    /// The table, quoted.
    pub table: String,
    /// The configured duration.
    pub duration_ms: u64,
    /// Writer connections.
    pub writers: usize,
    /// Of which with `session_replication_role = replica`.
    pub replica_writers: usize,
    /// The write rate.
    pub write_pace: Pace,
    /// The kinds of write.
    pub mix: OpMix,
    /// Reader connections.
    pub readers: usize,
    /// The read rate.
    pub read_pace: Pace,
    /// Rows per page.
    pub page_size: u32,
    /// The writers' floor, in seconds.
    pub created_at_floor_secs: u32,
    /// The seed.
    pub seed: u64,
}

fn fresh_namespace() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 48)
}

fn config(field: &'static str, reason: &str) -> Error {
    Error::Config {
        field,
        reason: reason.to_owned(),
    }
}

fn within(field: &'static str, value: Duration, min: Duration, max: Duration) -> Result<()> {
    if value < min || value > max {
        return Err(config(
            field,
            &format!("must be between {min:?} and {max:?}, not {value:?}"),
        ));
    }
    Ok(())
}

fn count(field: &'static str, value: usize, min: usize, max: usize) -> Result<()> {
    if value < min || value > max {
        return Err(config(
            field,
            &format!("must be between {min} and {max}, not {value}"),
        ));
    }
    Ok(())
}

fn pace(field: &'static str, pace: Pace) -> Result<()> {
    match pace {
        Pace::PerSecond(rate) if !(rate.is_finite() && rate > 0.0 && rate <= 1_000_000.0) => {
            Err(config(
                field,
                &format!("must be a rate in (0, 1000000] per second, not {rate}"),
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bounds_are_enforced() {
        let config = LoadConfig::new("host=/nowhere", Duration::from_secs(1));
        assert!(config.validate().is_ok());
        let mut bad = config.clone();
        bad.replica_writers = 5;
        assert!(matches!(
            bad.validate(),
            Err(Error::Config {
                field: "replica_writers",
                ..
            })
        ));
        let mut bad = config.clone();
        bad.write_pace = Pace::PerSecond(f64::NAN);
        assert!(bad.validate().is_err());
        let mut bad = config;
        bad.mix = OpMix {
            insert: 0,
            ..OpMix::INSERTS_ONLY
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn debug_output_hides_the_connection_string() {
        let config = LoadConfig::new("password=hunter2", Duration::from_secs(1));
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
