//! One keyset reader: pages through a channel window newest first,
//! `ORDER BY created_at DESC, id` with a `(created_at, id)` cursor, one page
//! per slot of the shared read schedule, and starts over on the next channel
//! when a window is exhausted. Each page is checked: its rows must be in order
//! and strictly after the cursor, otherwise a keyset anomaly is counted.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio_postgres::{Client, Statement};

use super::session::{Reconnect, Role};
use super::Shared;
use crate::event::Channel;
use crate::ledger::WriteError;

/// A reader's session with its prepared statements.
struct Session {
    client: Client,
    first: Statement,
    next: Statement,
}

/// The position in the current window: the last row returned.
type Cursor = (SystemTime, Vec<u8>);

/// One reader.
pub(super) struct Reader {
    index: u32,
    shared: Arc<Shared>,
    session: Option<Session>,
    reconnect: Reconnect,
    channel: usize,
    cursor: Option<Cursor>,
}

impl Reader {
    /// Reader `index` of the run.
    pub fn new(index: u32, shared: Arc<Shared>) -> Self {
        let channels = shared.targets.channels.len().max(1);
        Reader {
            index,
            reconnect: Reconnect::new(shared.config.reconnect_backoff_max),
            shared,
            session: None,
            channel: index as usize % channels,
            cursor: None,
        }
    }

    /// Reads until the run ends.
    pub async fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        while shared.next_slot(&shared.reads).await.is_some() {
            if self.ensure_session().await {
                self.read_page().await;
            }
        }
    }

    async fn ensure_session(&mut self) -> bool {
        if self.session.is_some() {
            return true;
        }
        let shared = Arc::clone(&self.shared);
        let role = Role::Reader { index: self.index };
        self.session = self
            .reconnect
            .open(&shared, role, |client| prepare(client, &shared))
            .await;
        self.session.is_some()
    }

    async fn read_page(&mut self) {
        let shared = Arc::clone(&self.shared);
        let Some(session) = self.session.as_ref() else {
            return;
        };
        let Channel { community_id, id } = shared.targets.channels[self.channel];
        let limit = i64::from(shared.config.page_size);
        let started = Instant::now();
        let query = async {
            match &self.cursor {
                None => {
                    session
                        .client
                        .query(&session.first, &[&community_id, &id, &limit])
                        .await
                }
                Some((at, last_id)) => {
                    let last_id: &[u8] = last_id;
                    session
                        .client
                        .query(&session.next, &[&community_id, &id, &limit, at, &last_id])
                        .await
                }
            }
        };
        let result = tokio::time::timeout(shared.config.op_timeout(), query).await;
        let latency = started.elapsed();
        let offset = shared.recorder.offset(started);
        let rows = match result {
            Ok(Ok(rows)) => rows,
            Ok(Err(error)) => {
                if error.is_closed() || error.as_db_error().is_none() {
                    self.session = None;
                }
                let error = WriteError::from_client(&error);
                shared.recorder.record_read(offset, latency, Some(error));
                return;
            }
            Err(_) => {
                self.session = None;
                let error = WriteError {
                    sqlstate: None,
                    message: "a page read timed out; the session was dropped".to_owned(),
                };
                shared.recorder.record_read(offset, latency, Some(error));
                return;
            }
        };
        let page: Result<Vec<Cursor>, _> = rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>();
        let page = match page {
            Ok(page) => page,
            Err(error) => {
                let error = WriteError::from_client(&error);
                shared.recorder.record_read(offset, latency, Some(error));
                return;
            }
        };
        shared.recorder.record_read(offset, latency, None);
        if !in_keyset_order(self.cursor.as_ref(), &page) {
            shared.recorder.note_keyset_anomaly();
        }
        let exhausted = page.len() < shared.config.page_size as usize;
        self.cursor = page.into_iter().last();
        if exhausted {
            self.cursor = None;
            self.channel = (self.channel + 1) % shared.targets.channels.len().max(1);
        }
    }
}

/// Whether `page` is strictly after `cursor` and in `(created_at DESC, id)`
/// order.
fn in_keyset_order(cursor: Option<&Cursor>, page: &[Cursor]) -> bool {
    let after = |earlier: &Cursor, later: &Cursor| {
        later.0 < earlier.0 || (later.0 == earlier.0 && later.1 > earlier.1)
    };
    let mut previous = cursor;
    for row in page {
        if previous.is_some_and(|p| !after(p, row)) {
            return false;
        }
        previous = Some(row);
    }
    true
}

async fn prepare(client: Client, shared: &Shared) -> Result<Session, WriteError> {
    let table = &shared.config.table;
    let first = format!(
        "SELECT created_at, id FROM {table} WHERE community_id = $1::uuid \
         AND channel_id = $2::uuid AND deleted_at IS NULL \
         ORDER BY created_at DESC, id LIMIT $3::int8"
    );
    let next = format!(
        "SELECT created_at, id FROM {table} WHERE community_id = $1::uuid \
         AND channel_id = $2::uuid AND deleted_at IS NULL \
         AND (created_at < $4::timestamptz OR (created_at = $4::timestamptz AND id > $5::bytea)) \
         ORDER BY created_at DESC, id LIMIT $3::int8"
    );
    let bound = shared.config.connect_timeout;
    let prepared = tokio::time::timeout(bound, async {
        Ok::<_, tokio_postgres::Error>((
            client.prepare(&first).await?,
            client.prepare(&next).await?,
        ))
    })
    .await;
    match prepared {
        Ok(Ok((first, next))) => Ok(Session {
            client,
            first,
            next,
        }),
        Ok(Err(error)) => Err(WriteError::from_client(&error)),
        Err(_) => Err(WriteError {
            sqlstate: None,
            message: format!("preparing the reader's statements took longer than {bound:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(secs: u64, id: u8) -> Cursor {
        (UNIX_EPOCH + Duration::from_secs(secs), vec![id])
    }

    #[test]
    fn keyset_order_is_created_at_descending_then_id_ascending() {
        assert!(in_keyset_order(None, &[at(9, 1), at(9, 2), at(8, 0)]));
        assert!(in_keyset_order(Some(&at(9, 1)), &[at(9, 2), at(8, 0)]));
        assert!(!in_keyset_order(Some(&at(9, 2)), &[at(9, 2)]));
        assert!(!in_keyset_order(None, &[at(8, 0), at(9, 1)]));
        assert!(!in_keyset_order(None, &[at(9, 2), at(9, 1)]));
    }
}
