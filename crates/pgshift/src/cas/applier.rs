//! The change-log applier: keeps the shadow in step with writes to the source.
//!
//! It reads log entries in batches, classifies each key against the copy ledger
//! (under the ledger's lock, INV: CO-5), discards the *uncut* ones, defers those *in
//! flight*, and applies the *landed* ones: in one transaction it deletes those keys
//! from the shadow, inserts the source's *current* rows for them, and deletes the
//! consumed entries. Re-reading the current row makes applying idempotent and
//! convergent: a later change has its own, later entry. There is one applier per run,
//! so no two appliers ever race on a key.
//!
//! An applier works on one session: it prepares its statements there once (the read
//! of the log again only when the ledger's ranges change it), so a batch costs a bind
//! and an execute per statement, not a parse and a plan.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::error::CasError;
use super::keys::{KeySpec, KeyValue};
use super::ledger::{Ledger, Standing};
use super::statements::Statements;

/// What one batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Entries read.
    pub read: usize,
    /// Distinct keys applied.
    pub applied: usize,
    /// Entries discarded (uncut keys).
    pub discarded: usize,
    /// Entries deferred (keys in flight).
    pub deferred: usize,
}

/// The smallest batch the background applier asks for.
pub const BATCH_MIN: i64 = 2_000;
/// The largest: a full batch doubles the next one's size up to here, so that a large
/// backlog is worked off with few statements per entry.
pub const BATCH_MAX: i64 = 16_000;
/// The background applier's pause after a batch that was not full: entries gather
/// for a moment, so that a steady stream of writes is applied in batches of some
/// size rather than a few entries per round of statements (whose fixed cost, on the
/// server's cores, is taken from the writers).
pub const PAUSE: Duration = Duration::from_millis(50);

/// The size of the next batch of the background applier, after a batch that read
/// `read` entries of at most `limit`: twice as large after a full batch (at most
/// [`BATCH_MAX`]), back to [`BATCH_MIN`] otherwise. The second value says whether to
/// pause ([`PAUSE`]) first.
pub fn next_limit(limit: i64, read: usize) -> (i64, bool) {
    if i64::try_from(read).unwrap_or(i64::MAX) >= limit {
        (limit.saturating_mul(2).clamp(BATCH_MIN, BATCH_MAX), false)
    } else {
        (BATCH_MIN, true)
    }
}

/// The statements an applier prepared on its session.
struct Prepared {
    /// The read of the log, and the standing expression's text it was prepared for.
    read: Option<(String, Statement)>,
    delete: Statement,
    insert: Statement,
    consume: Statement,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").finish_non_exhaustive()
    }
}

/// The applier's position in the log.
#[derive(Debug)]
pub struct Applier {
    statements: Statements,
    /// Entries up to here were processed (applied, discarded or deferred).
    after: i64,
    /// The smallest deferred entry, revisited once a chunk lands.
    deferred_min: Option<i64>,
    /// The ledger's landing count when entries were last deferred.
    seen_landings: u64,
    /// Statements prepared on the session of [`Applier::step`].
    prepared: Option<Prepared>,
}

/// The `CASE` expression giving each log entry's standing, with the bounds it needs
/// as parameters from `$first` (appended to `params`).
fn standing_expression(
    key: &KeySpec,
    ledger: &Ledger,
    first: usize,
    params: &mut Vec<String>,
) -> String {
    if ledger.finished() {
        return "'L'".to_owned();
    }
    let mut next = first;
    let mut arms = Vec::new();
    let mut bound = |lo: Option<&KeyValue>, hi: Option<&KeyValue>, params: &mut Vec<String>| {
        let (condition, used) = key.range(None, lo.is_some(), hi.is_some(), next);
        next += used;
        if let Some(lo) = lo {
            params.extend(lo.iter().cloned());
        }
        if let Some(hi) = hi {
            params.extend(hi.iter().cloned());
        }
        condition
    };
    if ledger.started() {
        let condition = bound(None, ledger.prefix(), params);
        arms.push(format!("WHEN {condition} THEN 'L'"));
    }
    for chunk in ledger.landed_ranges() {
        let condition = bound(chunk.lo.as_ref(), chunk.hi.as_ref(), params);
        arms.push(format!("WHEN {condition} THEN 'L'"));
    }
    for chunk in ledger.in_flight() {
        let condition = bound(chunk.lo.as_ref(), chunk.hi.as_ref(), params);
        arms.push(format!("WHEN {condition} THEN 'F'"));
    }
    if !ledger.exhausted() {
        let condition = bound(ledger.cursor(), None, params);
        arms.push(format!("WHEN {condition} THEN 'U'"));
    }
    format!("CASE {} ELSE 'F' END", arms.join(" "))
}

impl Applier {
    /// An applier at the start of the log.
    pub fn new(statements: Statements) -> Self {
        Applier {
            statements,
            after: 0,
            deferred_min: None,
            seen_landings: 0,
            prepared: None,
        }
    }

    /// Reads the log again from its start at the next step. Entries the applier has
    /// passed but not consumed are read again and classified again: deferred ones,
    /// and those of a transaction that committed after a later entry had been read
    /// (log ids are taken in write order, not commit order).
    pub fn rewind(&mut self) {
        self.after = 0;
        self.deferred_min = None;
    }

    /// The statements prepared on `client` (prepared on first use; the read of the
    /// log again when its standing expression changed).
    async fn prepared(
        &mut self,
        client: &Client,
        standing: &str,
    ) -> Result<&Prepared, tokio_postgres::Error> {
        if self.prepared.is_none() {
            let delete = client.prepare(&self.statements.delete_keys()).await?;
            let insert = client.prepare(&self.statements.insert_keys()).await?;
            let consume = client.prepare(&self.statements.consume()).await?;
            self.prepared = Some(Prepared {
                read: None,
                delete,
                insert,
                consume,
            });
        }
        let prepared = self.prepared.as_mut().expect("prepared above");
        if prepared.read.as_ref().map(|(text, _)| text.as_str()) != Some(standing) {
            let read = client.prepare(&self.statements.read_log(standing)).await?;
            prepared.read = Some((standing.to_owned(), read));
        }
        Ok(prepared)
    }

    /// Entries in the log now.
    pub async fn backlog(&self, client: &Client) -> Result<i64, CasError> {
        let row = client
            .query_one(&self.statements.backlog(), &[])
            .await
            .map_err(|e| CasError::db("reading the change-log backlog", e))?;
        Ok(row.get(0))
    }

    /// Processes one batch of at most `limit` entries. `landings` is the ledger's
    /// count of landed chunks, so deferred entries are revisited after one lands.
    pub async fn step(
        &mut self,
        client: &Client,
        ledger: &Mutex<(Ledger, u64)>,
        limit: i64,
    ) -> Result<Batch, CasError> {
        let key = self.statements.key().clone();
        let rows = {
            let guard = ledger.lock().await;
            let (ledger_state, landings) = &*guard;
            if let Some(min) = self.deferred_min {
                if *landings != self.seen_landings {
                    self.after = min - 1;
                    self.deferred_min = None;
                }
            }
            let mut bounds = Vec::new();
            let standing = standing_expression(&key, ledger_state, 3, &mut bounds);
            self.seen_landings = *landings;
            let after = self.after;
            let read = self
                .prepared(client, &standing)
                .await
                .map_err(|e| CasError::db("preparing the applier's statements", e))?
                .read
                .as_ref()
                .map(|(_, read)| read.clone())
                .expect("prepared with the read");
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![&after, &limit];
            params.extend(bounds.iter().map(|b| b as &(dyn ToSql + Sync)));
            client
                .query(&read, &params)
                .await
                .map_err(|e| CasError::db("reading the change log", e))?
        };
        let mut batch = Batch {
            read: rows.len(),
            ..Batch::default()
        };
        if rows.is_empty() {
            return Ok(batch);
        }
        let columns = key.len();
        let mut consumed: Vec<i64> = Vec::new();
        let mut landed: BTreeSet<KeyValue> = BTreeSet::new();
        for row in &rows {
            let id: i64 = row.get(0);
            let value: KeyValue = (0..columns).map(|i| row.get::<_, String>(1 + i)).collect();
            let standing = match row.get::<_, String>(1 + columns).as_str() {
                "L" => Standing::Landed,
                "U" => Standing::Uncut,
                _ => Standing::InFlight,
            };
            match standing {
                Standing::Landed => {
                    landed.insert(value);
                    consumed.push(id);
                }
                Standing::Uncut => {
                    batch.discarded += 1;
                    consumed.push(id);
                }
                Standing::InFlight => {
                    batch.deferred += 1;
                    self.deferred_min = Some(self.deferred_min.map_or(id, |m| m.min(id)));
                }
            }
            self.after = self.after.max(id);
        }
        batch.applied = landed.len();
        self.apply(client, &landed, &consumed).await?;
        Ok(batch)
    }

    /// In one transaction: delete the keys from the shadow, insert the source's current
    /// rows for them, delete the consumed entries (with the statements prepared on
    /// `client` by [`Applier::step`]).
    async fn apply(
        &self,
        client: &Client,
        keys: &BTreeSet<KeyValue>,
        consumed: &[i64],
    ) -> Result<(), CasError> {
        let prepared = self.prepared.as_ref().expect("prepared by step");
        let columns = self.statements.key().len();
        let arrays: Vec<Vec<String>> = (0..columns)
            .map(|i| keys.iter().map(|k| k[i].clone()).collect())
            .collect();
        let array_params: Vec<&(dyn ToSql + Sync)> =
            arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        let run = async {
            client.batch_execute("BEGIN").await?;
            if self.statements.replica() {
                client
                    .batch_execute("SET LOCAL session_replication_role = replica")
                    .await?;
            }
            if !keys.is_empty() {
                client.execute(&prepared.delete, &array_params).await?;
                client.execute(&prepared.insert, &array_params).await?;
            }
            if !consumed.is_empty() {
                client.execute(&prepared.consume, &[&consumed]).await?;
            }
            client.batch_execute("COMMIT").await?;
            Ok::<_, tokio_postgres::Error>(())
        };
        super::session::settle(client, "applying changes to the shadow", run.await).await
    }

    /// The statement counting the log's entries (see [`Applier::backlog`]).
    pub fn backlog_sql(&self) -> String {
        self.statements.backlog()
    }

    /// Prepares the swap's drain of the log (all at once, in one round trip), before
    /// the swap takes its lock: under it, each statement is then one round trip or
    /// less.
    pub async fn prepare_drain(&self, client: &Client) -> Result<DrainStatements, CasError> {
        let read = self.statements.read_log("'L'");
        let delete = self.statements.delete_keys();
        let insert = self.statements.insert_keys();
        let consume = self.statements.consume();
        let (read, delete, insert, consume, role, now) = tokio::try_join!(
            client.prepare(&read),
            client.prepare(&delete),
            client.prepare(&insert),
            client.prepare(&consume),
            client.prepare("SELECT pg_catalog.set_config('session_replication_role', $1, true)"),
            client.query_one(
                "SELECT pg_catalog.current_setting('session_replication_role')",
                &[]
            ),
        )
        .map_err(|e| CasError::db("preparing the drain of the change log", e))?;
        Ok(DrainStatements {
            read,
            delete,
            insert,
            consume,
            role,
            columns: self.statements.key().len(),
            replica: self.statements.replica(),
            session_role: now.get(0),
        })
    }
}

/// The swap's drain of the change log, prepared before its lock
/// ([`Applier::prepare_drain`]): inside the swap's transaction every entry is
/// applied as landed (the copy is over).
pub struct DrainStatements {
    read: Statement,
    delete: Statement,
    insert: Statement,
    consume: Statement,
    /// `set_config('session_replication_role', $1, true)`.
    role: Statement,
    columns: usize,
    replica: bool,
    /// The session's `session_replication_role`, set again after the drain.
    session_role: String,
}

impl std::fmt::Debug for DrainStatements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainStatements").finish_non_exhaustive()
    }
}

/// Entries read from the log by [`DrainStatements::read`], to be applied.
pub struct Drained {
    rows: Vec<tokio_postgres::Row>,
    limit: i64,
}

impl Drained {
    /// Whether the read was full: the log may hold more after it.
    pub fn full(&self) -> bool {
        i64::try_from(self.rows.len()).unwrap_or(i64::MAX) >= self.limit
    }

    /// The last entry read (`after` of the next read).
    pub fn last(&self) -> i64 {
        self.rows
            .iter()
            .map(|r| r.get::<_, i64>(0))
            .max()
            .unwrap_or(0)
    }

    /// Entries read.
    pub fn len(&self) -> i64 {
        i64::try_from(self.rows.len()).unwrap_or(i64::MAX)
    }

    /// Whether none was read.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl DrainStatements {
    /// Reads at most `limit` entries after `after`. The caller holds the swap's lock,
    /// so no entry is added meanwhile: a read that is not [`Drained::full`] was the
    /// last.
    pub async fn read(&self, client: &Client, after: i64, limit: i64) -> Result<Drained, CasError> {
        let rows = client
            .query(&self.read, &[&after, &limit])
            .await
            .map_err(|e| CasError::db("draining the change log", e))?;
        Ok(Drained { rows, limit })
    }

    /// Plans the drain's writes: runs them once with no keys (`Self::write`), so
    /// that under `plan_cache_mode = force_generic_plan` each keeps a generic plan
    /// that its executions under the swap's lock reuse. A plan for the keys would be
    /// no better: the planner estimates the same few rows for the arrays whatever
    /// they hold. Call it in a transaction that is rolled back; nothing is written.
    pub async fn plan(&self, client: &Client) -> Result<(), CasError> {
        let none = vec![Vec::new(); self.columns];
        self.write(client, &none, &[])
            .await
            .map_err(|e| CasError::db("planning the drain of the change log", e))
    }

    /// Applies `drained` as landed (`Self::write`). Returns the entries applied.
    pub async fn apply(&self, client: &Client, drained: &Drained) -> Result<i64, CasError> {
        if drained.is_empty() {
            return Ok(0);
        }
        let mut keys: BTreeSet<KeyValue> = BTreeSet::new();
        let mut ids: Vec<i64> = Vec::new();
        for row in &drained.rows {
            ids.push(row.get(0));
            keys.insert(
                (0..self.columns)
                    .map(|i| row.get::<_, String>(1 + i))
                    .collect(),
            );
        }
        let arrays: Vec<Vec<String>> = (0..self.columns)
            .map(|i| keys.iter().map(|k| k[i].clone()).collect())
            .collect();
        self.write(client, &arrays, &ids)
            .await
            .map_err(|e| CasError::db("draining the change log", e))?;
        Ok(drained.len())
    }

    /// Deletes the keys (`arrays`, one per key column) from the shadow, inserts the
    /// source's rows for them and consumes the entries `ids`, sent together (one round
    /// trip; the server runs them in order, and one failing fails those after it).
    /// With `session_replication_role = replica` around them when the plan applies
    /// so, and the session's role again after them.
    async fn write(
        &self,
        client: &Client,
        arrays: &[Vec<String>],
        ids: &[i64],
    ) -> Result<(), tokio_postgres::Error> {
        let params: Vec<&(dyn ToSql + Sync)> =
            arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        let consumed: [&(dyn ToSql + Sync); 1] = [&ids];
        let replica: [&(dyn ToSql + Sync); 1] = [&"replica"];
        let restore: [&(dyn ToSql + Sync); 1] = [&self.session_role];
        // `biased`: the futures are first polled, and so sent, in this order.
        if self.replica {
            tokio::try_join!(
                biased;
                client.execute(&self.role, &replica),
                client.execute(&self.delete, &params),
                client.execute(&self.insert, &params),
                client.execute(&self.consume, &consumed),
                client.execute(&self.role, &restore),
            )?;
        } else {
            tokio::try_join!(
                biased;
                client.execute(&self.delete, &params),
                client.execute(&self.insert, &params),
                client.execute(&self.consume, &consumed),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::keys::KeyColumn;

    fn key() -> KeySpec {
        KeySpec::new(vec![KeyColumn {
            name: "id".to_owned(),
            type_sql: "bigint".to_owned(),
        }])
        .expect("valid")
    }

    #[test]
    fn batches_grow_while_full_and_pause_when_not() {
        assert_eq!(next_limit(BATCH_MIN, 0), (BATCH_MIN, true));
        assert_eq!(next_limit(BATCH_MIN, 10), (BATCH_MIN, true));
        assert_eq!(next_limit(BATCH_MIN, 2_000), (2 * BATCH_MIN, false));
        assert_eq!(next_limit(BATCH_MAX, 16_000), (BATCH_MAX, false));
        assert_eq!(next_limit(8_000, 7_999), (BATCH_MIN, true));
    }

    #[test]
    fn standing_follows_the_ledger() {
        let mut ledger = Ledger::resume(None, false);
        let mut params = Vec::new();
        assert_eq!(
            standing_expression(&key(), &ledger, 3, &mut params),
            "CASE WHEN true THEN 'U' ELSE 'F' END"
        );
        let a = ledger.cut(Some(vec!["10".to_owned()]));
        ledger.land(a.id);
        let _b = ledger.cut(Some(vec!["20".to_owned()]));
        let mut params = Vec::new();
        let sql = standing_expression(&key(), &ledger, 3, &mut params);
        assert_eq!(params, vec!["10", "10", "20", "20"]);
        assert!(
            sql.starts_with("CASE WHEN (\"id\") OPERATOR(pg_catalog.<) ($3"),
            "{sql}"
        );
        assert!(
            sql.contains("THEN 'F'") && sql.contains("THEN 'U'"),
            "{sql}"
        );
        let finished = Ledger::resume(None, true);
        assert_eq!(
            standing_expression(&key(), &finished, 3, &mut Vec::new()),
            "'L'"
        );
    }
}
