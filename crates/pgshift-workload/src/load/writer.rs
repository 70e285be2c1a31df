//! One writer connection: claims slots of the shared write schedule, draws a
//! write from the mix, runs it in a transaction of its own (`BEGIN`, the
//! statement, `COMMIT`) and records what the client saw.
//!
//! A writer only deletes or replays rows it inserted itself, and forgets a
//! row after an unknown or skipped outcome, so each key's writes reach the
//! ledger in commit order. A lost connection is dropped and made again before
//! the next write, with bounded backoff.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::recorder::PlannedWrite;
use super::session::{Reconnect, Role};
use super::Shared;
use crate::event::{purged_on_soft_delete, EventRow, Generator, REPLACEABLE_KIND};
use crate::key::{system_time_from_unix_us, unix_us};
use crate::ledger::{Outcome, RowState, WriteError, WriteOp};
use crate::load::config::OpMix;

/// Stale inserts are this much older than the floor.
const STALE_MARGIN_SECS: u64 = 3600;

/// A writer's session with its prepared statements.
struct Session {
    client: Client,
    insert: Statement,
    soft_delete: Statement,
    hard_delete: Statement,
}

/// Rows a writer may target, oldest first, at most `capacity`.
struct Pool {
    rows: VecDeque<EventRow>,
    capacity: usize,
}

impl Pool {
    fn new(capacity: usize) -> Self {
        Pool {
            rows: VecDeque::new(),
            capacity,
        }
    }

    fn push(&mut self, row: EventRow) {
        if self.rows.len() >= self.capacity {
            self.rows.pop_front();
        }
        self.rows.push_back(row);
    }

    fn take(&mut self, index: usize) -> Option<EventRow> {
        self.rows.swap_remove_back(index)
    }
}

/// Where the target of a write came from, to return it there if refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    New,
    Live,
    Tombstoned,
    Replayable,
}

/// A write ready to run: the row as the write leaves it.
struct Planned {
    op: WriteOp,
    origin: Origin,
    /// The row before the write (the target of a delete or replay).
    before: Option<EventRow>,
    /// The row after the write (for inserts, the new row).
    row: EventRow,
    after: Option<RowState>,
}

/// What running a write gave.
enum Exec {
    Committed(u64),
    Failed {
        error: WriteError,
        connection_lost: bool,
    },
    Unknown {
        reason: String,
    },
}

/// One writer.
pub(super) struct Writer {
    index: u32,
    replica: bool,
    shared: Arc<Shared>,
    generator: Generator,
    live: Pool,
    tombstoned: Pool,
    replayable: Pool,
    session: Option<Session>,
    reconnect: Reconnect,
}

impl Writer {
    /// Writer `index` of the run.
    pub fn new(index: u32, replica: bool, shared: Arc<Shared>) -> Self {
        let config = &shared.config;
        let generator = Generator::new(
            config.seed,
            config.id_namespace,
            index,
            Arc::clone(&shared.targets),
        );
        let capacity = config.rows_remembered;
        Writer {
            index,
            replica,
            generator,
            live: Pool::new(capacity),
            tombstoned: Pool::new(capacity),
            replayable: Pool::new(capacity.min(1024)),
            session: None,
            reconnect: Reconnect::new(config.reconnect_backoff_max),
            shared,
        }
    }

    /// Writes until the run ends.
    pub async fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        while let Some(claim) = shared.next_slot(&shared.writes).await {
            let started = Instant::now();
            shared.recorder.note_schedule(
                shared.recorder.offset(started),
                claim.skipped,
                started.saturating_duration_since(claim.due),
            );
            if self.ensure_session().await {
                self.write_once(started).await;
            }
        }
    }

    /// Connects if needed; on failure, counts it and pauses (bounded,
    /// interrupted by the end of the run).
    async fn ensure_session(&mut self) -> bool {
        if self.session.is_some() {
            return true;
        }
        let shared = Arc::clone(&self.shared);
        let role = Role::Writer {
            index: self.index,
            replica: self.replica,
        };
        self.session = self
            .reconnect
            .open(&shared, role, |client| prepare(client, &shared))
            .await;
        self.session.is_some()
    }

    async fn write_once(&mut self, started: Instant) {
        let now_us = unix_us(SystemTime::now());
        let planned = self.plan(now_us);
        let shared = Arc::clone(&self.shared);
        let ticket = shared.recorder.begin_write(PlannedWrite {
            key: planned.row.key,
            op: planned.op,
            after: planned.after,
            writer: self.index,
            replica_role: self.replica,
            started: shared.recorder.offset(started),
        });
        let exec = match self.session.as_mut() {
            Some(session) => execute(session, &planned, shared.config.op_timeout()).await,
            None => Exec::Failed {
                error: WriteError {
                    sqlstate: None,
                    message: "no session".to_owned(),
                },
                connection_lost: true,
            },
        };
        let latency = started.elapsed();
        let outcome = match exec {
            Exec::Committed(rows) if rows == planned.op.expected_rows() => Outcome::Acknowledged,
            Exec::Committed(rows) => Outcome::Skipped { rows },
            Exec::Failed {
                error,
                connection_lost,
            } => {
                if connection_lost {
                    self.session = None;
                }
                Outcome::Refused(error)
            }
            Exec::Unknown { reason } => {
                self.session = None;
                Outcome::Unknown { reason }
            }
        };
        if self.session.as_ref().is_some_and(|s| s.client.is_closed()) {
            self.session = None;
        }
        self.remember(planned, &outcome);
        shared.recorder.finish_write(ticket, outcome, latency);
    }

    /// Draws the next write; a delete or replay without a suitable row
    /// becomes an insert.
    fn plan(&mut self, now_us: i64) -> Planned {
        let mix: OpMix = self.shared.config.mix;
        let op = self
            .generator
            .rng()
            .weighted(&mix.weights())
            .map_or(WriteOp::Insert, |i| OpMix::OPS[i]);
        let planned = match op {
            WriteOp::Insert => None,
            WriteOp::StaleInsert => {
                let age = u64::from(self.shared.config.created_at_floor_secs) + STALE_MARGIN_SECS;
                let row = self.generator.stale_event(now_us, age);
                Some(self.insert(WriteOp::StaleInsert, row))
            }
            WriteOp::SoftDelete => self.plan_soft_delete(now_us),
            WriteOp::HardDelete => self.plan_hard_delete(),
            WriteOp::Replay => self.plan_replay(),
        };
        planned.unwrap_or_else(|| {
            let row = self.generator.event(now_us);
            self.insert(WriteOp::Insert, row)
        })
    }

    fn insert(&self, op: WriteOp, row: EventRow) -> Planned {
        Planned {
            op,
            origin: Origin::New,
            before: None,
            after: Some(RowState::Present(row.content.hash())),
            row,
        }
    }

    fn plan_soft_delete(&mut self, now_us: i64) -> Option<Planned> {
        let index = self.generator.rng().index(self.live.rows.len());
        let before = self.live.take(index)?;
        let mut row = before.clone();
        row.content.deleted_at_us = Some(now_us);
        // The purge trigger is ORIGIN-enabled: a replica session does not fire it.
        let after = if !self.replica && purged_on_soft_delete(&row.content) {
            RowState::Absent
        } else {
            RowState::Present(row.content.hash())
        };
        Some(Planned {
            op: WriteOp::SoftDelete,
            origin: Origin::Live,
            before: Some(before),
            row,
            after: Some(after),
        })
    }

    fn plan_hard_delete(&mut self) -> Option<Planned> {
        let live = self.live.rows.len();
        let total = live + self.tombstoned.rows.len();
        let pick = self.generator.rng().index(total);
        let (origin, row) = if pick < live {
            (Origin::Live, self.live.take(pick)?)
        } else {
            (Origin::Tombstoned, self.tombstoned.take(pick - live)?)
        };
        Some(Planned {
            op: WriteOp::HardDelete,
            origin,
            before: Some(row.clone()),
            row,
            after: Some(RowState::Absent),
        })
    }

    fn plan_replay(&mut self) -> Option<Planned> {
        if self.replica {
            // The replay skipper is ORIGIN-enabled: from a replica session the
            // replay would be a plain duplicate insert.
            return None;
        }
        let index = self.generator.rng().index(self.replayable.rows.len());
        let row = self.replayable.rows.get(index)?.clone();
        Some(Planned {
            op: WriteOp::Replay,
            origin: Origin::Replayable,
            before: Some(row.clone()),
            row,
            after: None,
        })
    }

    /// Files the row of a finished write where later writes may find it.
    fn remember(&mut self, planned: Planned, outcome: &Outcome) {
        match outcome {
            Outcome::Acknowledged => match (planned.op, planned.after) {
                (WriteOp::Insert | WriteOp::StaleInsert, _) => {
                    if planned.row.content.kind == REPLACEABLE_KIND && !self.replica {
                        self.replayable.push(planned.row.clone());
                    }
                    self.live.push(planned.row);
                }
                (WriteOp::SoftDelete, Some(RowState::Present(_))) => {
                    self.tombstoned.push(planned.row);
                }
                _ => {}
            },
            Outcome::Refused(_) => match (planned.origin, planned.before) {
                (Origin::Live, Some(row)) => self.live.push(row),
                (Origin::Tombstoned, Some(row)) => self.tombstoned.push(row),
                _ => {}
            },
            // Nothing more is done to a row whose state the writer does not know.
            Outcome::Skipped { .. } | Outcome::Unknown { .. } => {}
        }
    }
}

/// Prepares the writer's statements on a new connection.
async fn prepare(client: Client, shared: &Shared) -> Result<Session, WriteError> {
    let table = &shared.config.table;
    let insert = format!(
        "INSERT INTO {table} (community_id, id, pubkey, created_at, kind, tags, content, \
         channel_id, d_tag) VALUES ($1::uuid, $2::bytea, $3::bytea, $4::timestamptz, $5::int4, \
         $6::text::jsonb, $7::text, $8::uuid, $9::text)"
    );
    let soft_delete = format!(
        "UPDATE {table} SET deleted_at = $4::timestamptz WHERE community_id = $1::uuid \
         AND created_at = $2::timestamptz AND id = $3::bytea AND deleted_at IS NULL"
    );
    let hard_delete = format!(
        "DELETE FROM {table} WHERE community_id = $1::uuid AND created_at = $2::timestamptz \
         AND id = $3::bytea"
    );
    let bound = shared.config.connect_timeout;
    let prepared = tokio::time::timeout(bound, async {
        Ok::<_, tokio_postgres::Error>((
            client.prepare(&insert).await?,
            client.prepare(&soft_delete).await?,
            client.prepare(&hard_delete).await?,
        ))
    })
    .await;
    match prepared {
        Ok(Ok((insert, soft_delete, hard_delete))) => Ok(Session {
            client,
            insert,
            soft_delete,
            hard_delete,
        }),
        Ok(Err(error)) => Err(WriteError::from_client(&error)),
        Err(_) => Err(WriteError {
            sqlstate: None,
            message: format!("preparing the writer's statements took longer than {bound:?}"),
        }),
    }
}

/// Runs one write in a transaction of its own, within `bound`.
async fn execute(session: &mut Session, planned: &Planned, bound: Duration) -> Exec {
    let Session {
        client,
        insert,
        soft_delete,
        hard_delete,
    } = session;
    let row = &planned.row;
    let key = &row.key;
    let created_at = key.created_at();
    let tags = row.content.tags_json();
    let deleted_at = row.content.deleted_at_us.map(system_time_from_unix_us);
    let id: &[u8] = &key.id;
    let pubkey: &[u8] = &row.content.pubkey;
    let (statement, params): (&Statement, Vec<&(dyn ToSql + Sync)>) = match planned.op {
        WriteOp::Insert | WriteOp::StaleInsert | WriteOp::Replay => (
            &*insert,
            vec![
                &key.community_id,
                &id,
                &pubkey,
                &created_at,
                &row.content.kind,
                &tags,
                &row.content.content,
                &row.content.channel_id,
                &row.content.d_tag,
            ],
        ),
        WriteOp::SoftDelete => (
            &*soft_delete,
            vec![&key.community_id, &created_at, &id, &deleted_at],
        ),
        WriteOp::HardDelete => (&*hard_delete, vec![&key.community_id, &created_at, &id]),
    };
    let mut committing = false;
    let result = tokio::time::timeout(bound, async {
        let transaction = client.transaction().await?;
        let rows = transaction.execute(statement, &params).await?;
        committing = true;
        transaction.commit().await?;
        Ok::<u64, tokio_postgres::Error>(rows)
    })
    .await;
    match result {
        Ok(Ok(rows)) => Exec::Committed(rows),
        Ok(Err(error)) if committing && commit_outcome_unknown(&error) => Exec::Unknown {
            reason: format!("COMMIT failed without a definite answer: {error}"),
        },
        Ok(Err(error)) => Exec::Failed {
            connection_lost: error.is_closed() || error.as_db_error().is_none(),
            error: WriteError::from_client(&error),
        },
        Err(_) if committing => Exec::Unknown {
            reason: format!("no answer to COMMIT within {bound:?}"),
        },
        Err(_) => Exec::Failed {
            error: WriteError {
                sqlstate: None,
                message: format!("no answer within {bound:?}; the session was dropped"),
            },
            connection_lost: true,
        },
    }
}

/// Whether an error answering COMMIT leaves its outcome open: no server error
/// (the connection broke), a fatal one, or one of the classes where the
/// server may have committed before reporting (operator intervention such as
/// a terminated backend waiting for synchronous replication, connection and
/// system errors, internal errors).
fn commit_outcome_unknown(error: &tokio_postgres::Error) -> bool {
    let Some(db) = error.as_db_error() else {
        return true;
    };
    let class = db.code().code().get(..2).unwrap_or("");
    matches!(db.severity(), "FATAL" | "PANIC") || matches!(class, "08" | "57" | "58" | "XX")
}
