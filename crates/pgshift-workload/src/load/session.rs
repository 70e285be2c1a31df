//! Opening the load's sessions: one connection attempt, bounded in time, then
//! the session settings of its role, and the bounded backoff between attempts.
//!
//! Writers set `relay.created_at_floor` like the relay's own writer pool, and
//! `session_replication_role = replica` when asked (superuser only). Every
//! session sets `statement_timeout`. Connections use no TLS: the load is meant
//! for a local throwaway cluster (the benchmark's, the demo's, a test's).
//!
//! Sessions are named `pgshift-bench writer N`, `pgshift-bench reader N` and
//! `pgshift-bench probe`, from before this crate was split out of the benchmark:
//! the recorded benchmark runs, `docs/COPY-AND-SWAP.md` and the engine's throttle
//! tests name the writers so.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, Config, NoTls};

use super::config::LoadConfig;
use super::Shared;
use crate::ledger::WriteError;

/// What a session is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// A writer, `replica` when it runs with `session_replication_role = replica`.
    Writer {
        /// Index of the writer.
        index: u32,
        /// Whether it bypasses ORIGIN triggers.
        replica: bool,
    },
    /// A keyset reader.
    Reader {
        /// Index of the reader.
        index: u32,
    },
    /// The session that reads the communities and channels at start.
    Probe,
}

impl Role {
    fn application_name(self) -> String {
        match self {
            Role::Writer { index, replica } => format!(
                "pgshift-bench writer {index}{}",
                if replica { " (replica)" } else { "" }
            ),
            Role::Reader { index } => format!("pgshift-bench reader {index}"),
            Role::Probe => "pgshift-bench probe".to_owned(),
        }
    }
}

/// Connects as `role`: one attempt, bounded by `connect_timeout` (plus one
/// second for the settings).
pub(super) async fn connect(
    pg: &Config,
    config: &LoadConfig,
    role: Role,
) -> Result<Client, WriteError> {
    let bound = config.connect_timeout + Duration::from_secs(1);
    match tokio::time::timeout(bound, connect_unbounded(pg, config, role)).await {
        Ok(result) => result,
        Err(_) => Err(WriteError {
            sqlstate: None,
            message: format!("connecting took longer than {bound:?}"),
        }),
    }
}

async fn connect_unbounded(
    pg: &Config,
    config: &LoadConfig,
    role: Role,
) -> Result<Client, WriteError> {
    let mut pg = pg.clone();
    pg.application_name(role.application_name());
    if pg.get_connect_timeout().is_none() {
        pg.connect_timeout(config.connect_timeout);
    }
    let (client, connection) = pg
        .connect(NoTls)
        .await
        .map_err(|e| WriteError::from_client(&e))?;
    tokio::spawn(async move {
        // The connection's end is seen by the client (`is_closed`, errors).
        let _ = connection.await;
    });
    client
        .batch_execute(&settings(config, role))
        .await
        .map_err(|e| WriteError::from_client(&e))?;
    Ok(client)
}

/// The session settings of `role` (only validated integers are formatted in).
fn settings(config: &LoadConfig, role: Role) -> String {
    let mut sql = format!(
        "SET statement_timeout = '{}ms';",
        config.statement_timeout.as_millis()
    );
    if let Role::Writer { replica, .. } = role {
        sql.push_str(&format!(
            " SET relay.created_at_floor = '{}';",
            config.created_at_floor_secs
        ));
        if replica {
            sql.push_str(" SET session_replication_role = replica;");
        }
    }
    sql
}

/// A worker's connection state across reconnects: the backoff between failed
/// attempts, and whether it was connected before (a reconnect is counted).
#[derive(Debug)]
pub(super) struct Reconnect {
    backoff: Backoff,
    connected_before: bool,
}

impl Reconnect {
    /// Never pausing longer than `max` between attempts.
    pub fn new(max: Duration) -> Self {
        Reconnect {
            backoff: Backoff::new(max),
            connected_before: false,
        }
    }

    /// One attempt to connect as `role` and `prepare` the session. On failure the
    /// failure is recorded and the worker pauses (bounded backoff, or until the run
    /// ends): `None`, to try again later.
    pub async fn open<S, Fut>(
        &mut self,
        shared: &Shared,
        role: Role,
        prepare: impl FnOnce(Client) -> Fut,
    ) -> Option<S>
    where
        Fut: Future<Output = Result<S, WriteError>>,
    {
        let result = match connect(&shared.pg, &shared.config, role).await {
            Ok(client) => prepare(client).await,
            Err(error) => Err(error),
        };
        match result {
            Ok(session) => {
                if self.connected_before {
                    tracing::info!(?role, "load session reconnected");
                    shared.recorder.note_reconnect();
                }
                self.connected_before = true;
                self.backoff.reset();
                Some(session)
            }
            Err(error) => {
                tracing::warn!(
                    ?role,
                    sqlstate = error.code(),
                    message = %error.message,
                    "load session could not connect"
                );
                let at = shared.recorder.offset(Instant::now());
                shared.recorder.note_connect_failure(&error, at);
                let pause = self.backoff.pause();
                shared.pause_until(Instant::now() + pause).await;
                None
            }
        }
    }
}

/// Pauses between connection attempts: 50 ms, doubling up to a maximum.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    const INITIAL: Duration = Duration::from_millis(50);

    /// A backoff that never pauses longer than `max`.
    pub fn new(max: Duration) -> Self {
        Backoff {
            next: Self::INITIAL.min(max),
            max,
        }
    }

    /// The next pause.
    pub fn pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(self.max);
        pause
    }

    /// Starts again from the shortest pause.
    pub fn reset(&mut self) {
        self.next = Self::INITIAL.min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_bound_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(300));
        let pauses: Vec<u64> = (0..5).map(|_| backoff.pause().as_millis() as u64).collect();
        assert_eq!(pauses, vec![50, 100, 200, 300, 300]);
        backoff.reset();
        assert_eq!(backoff.pause(), Duration::from_millis(50));
    }

    #[test]
    fn replica_writers_set_the_floor_and_the_role() {
        let config = LoadConfig::new("", Duration::from_secs(1));
        let sql = settings(
            &config,
            Role::Writer {
                index: 0,
                replica: true,
            },
        );
        assert_eq!(
            sql,
            "SET statement_timeout = '60000ms'; SET relay.created_at_floor = '600'; \
             SET session_replication_role = replica;"
        );
        assert_eq!(
            settings(&config, Role::Reader { index: 0 }),
            "SET statement_timeout = '60000ms';"
        );
    }
}
