//! The lost-write oracle: compares a ledger with a table, on the server.
//!
//! The ledger is folded into one expectation per key
//! ([`Ledger::expectations`]), and those are streamed into a temporary table
//! with one binary `COPY` (key, whether an absent row is acceptable, the
//! acceptable content hashes). One query then joins it with the table by
//! primary key, computes the content hash of each matching row
//! ([`crate::content::hash_sql`]) and returns only the keys that disagree;
//! the table is never fetched row by row. Everything runs in one transaction
//! that is rolled back, so the check leaves nothing behind.
//!
//! A disagreement is classified as:
//! * **lost**: an acknowledged insert or update whose row is absent;
//! * **wrong content**: the row is present with a hash no acknowledged (or
//!   unknown) write produced (an acknowledged soft delete reverted, say);
//! * **resurrected**: an acknowledged delete whose row is present;
//! * **phantom**: a row for a key whose writes were all refused or skipped
//!   (the client was told nothing was written);
//! * **duplicated**: more than one row with the key (a table without the
//!   primary key, such as a broken shadow copy).
//!
//! Keys with an unknown outcome accept the state before and after that
//! write; they are counted in the report.

use std::time::{Duration, Instant};

use futures_util::pin_mut;
use serde::Serialize;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use tokio_postgres::Client;

use crate::content::hash_sql;
use crate::error::{Error, Result};
use crate::key::{ContentHash, EventKey};
use crate::ledger::{KeyExpectation, Ledger, LedgerCounts, RowState, WriteOp};
use crate::table::TableRef;

/// Bounds of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OracleOptions {
    /// The whole check (upload, join, classification) must finish within this;
    /// it is also the session's `statement_timeout` for the check.
    pub timeout: Duration,
    /// Findings kept in full per category (all are counted).
    pub max_examples: usize,
}

impl OracleOptions {
    /// Ten minutes, 100 examples per category.
    pub const DEFAULT: OracleOptions = OracleOptions {
        timeout: Duration::from_secs(600),
        max_examples: 100,
    };
}

/// What the table holds for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Actual {
    /// No row.
    Absent,
    /// One row, with this content hash.
    Present(ContentHash),
    /// This many rows (more than one).
    Copies(u64),
}

/// One key the table disagrees on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The key.
    pub key: EventKey,
    /// The states the ledger allows.
    pub expected: Vec<RowState>,
    /// What the table holds.
    pub actual: Actual,
    /// The last acknowledged write of the key.
    pub last_acknowledged: Option<WriteOp>,
    /// The writer of the key.
    pub writer: u32,
    /// Whether that writer ran as `replica`.
    pub replica_role: bool,
}

/// The findings of one category.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Category {
    /// Keys in the category.
    pub count: u64,
    /// The first of them, in ledger order, at most `max_examples`.
    pub examples: Vec<Finding>,
}

impl Category {
    fn add(&mut self, finding: Finding, max_examples: usize) {
        self.count += 1;
        if self.examples.len() < max_examples {
            self.examples.push(finding);
        }
    }
}

/// The verdict of a check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OracleReport {
    /// The table as asked for (quoted).
    pub table: String,
    /// The relation it named when checked (`regclass` text).
    pub relation: String,
    /// That relation's OID: after a copy-and-swap, the same name names another.
    pub relation_oid: u32,
    /// The ledger's counts (acknowledged, refused by SQLSTATE, skipped, unknown).
    pub ledger: LedgerCounts,
    /// Keys checked.
    pub keys_checked: u64,
    /// Keys with an unknown outcome (accepted either way).
    pub unknown_keys: u64,
    /// Acknowledged inserts or updates whose row is absent.
    pub lost: Category,
    /// Acknowledged deletes whose row is present.
    pub resurrected: Category,
    /// Rows whose content no acknowledged write produced.
    pub wrong_content: Category,
    /// Rows for keys whose writes were all refused or skipped.
    pub phantom: Category,
    /// Keys with more than one row.
    pub duplicated: Category,
    /// How long the check took.
    pub elapsed: Duration,
}

impl OracleReport {
    /// Whether the table agrees with the ledger on every key.
    pub fn is_clean(&self) -> bool {
        [
            &self.lost,
            &self.resurrected,
            &self.wrong_content,
            &self.phantom,
            &self.duplicated,
        ]
        .iter()
        .all(|c| c.count == 0)
    }
}

/// A key the server reported as disagreeing: `(index, rows, hash of the row)`.
type Mismatch = (i64, i64, Option<Vec<u8>>);

/// Checks `table` against `ledger`, on `client` (which must not be inside a
/// transaction).
pub async fn check(
    client: &mut Client,
    ledger: &Ledger,
    table: &TableRef,
    options: &OracleOptions,
) -> Result<OracleReport> {
    let started = Instant::now();
    let expectations = ledger.expectations();
    let work = compare(client, &expectations, table, options.timeout);
    let (relation_oid, relation, mismatches) = tokio::time::timeout(options.timeout, work)
        .await
        .map_err(|_| Error::Timeout {
        what: format!("the oracle's check of {table}"),
        waited: options.timeout,
    })??;
    let mut report = OracleReport {
        table: table.to_string(),
        relation,
        relation_oid,
        ledger: ledger.counts(),
        keys_checked: expectations.len() as u64,
        unknown_keys: expectations.iter().filter(|e| e.had_unknown).count() as u64,
        lost: Category::default(),
        resurrected: Category::default(),
        wrong_content: Category::default(),
        phantom: Category::default(),
        duplicated: Category::default(),
        elapsed: Duration::ZERO,
    };
    for (index, copies, hash) in mismatches {
        let Some(expectation) = usize::try_from(index)
            .ok()
            .and_then(|i| expectations.get(i))
        else {
            continue;
        };
        classify(&mut report, expectation, copies, hash, options.max_examples);
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

fn classify(
    report: &mut OracleReport,
    expectation: &KeyExpectation,
    copies: i64,
    hash: Option<Vec<u8>>,
    max_examples: usize,
) {
    let hash = hash
        .and_then(|h| <[u8; 32]>::try_from(h.as_slice()).ok())
        .map(ContentHash);
    let actual = match (copies, hash) {
        (0, _) => Actual::Absent,
        (1, Some(hash)) => Actual::Present(hash),
        (n, _) => Actual::Copies(n.unsigned_abs()),
    };
    let finding = Finding {
        key: expectation.key,
        expected: expectation.accept.clone(),
        actual,
        last_acknowledged: expectation.last_acknowledged,
        writer: expectation.writer,
        replica_role: expectation.replica_role,
    };
    let category = match actual {
        Actual::Copies(_) => &mut report.duplicated,
        Actual::Absent => &mut report.lost,
        Actual::Present(_) if expectation.hashes().next().is_some() => &mut report.wrong_content,
        Actual::Present(_) if expectation.deleted => &mut report.resurrected,
        Actual::Present(_) => &mut report.phantom,
    };
    category.add(finding, max_examples);
}

/// Uploads the expectations and returns the relation checked and the keys
/// that disagree.
async fn compare(
    client: &mut Client,
    expectations: &[KeyExpectation],
    table: &TableRef,
    timeout: Duration,
) -> Result<(u32, String, Vec<Mismatch>)> {
    let transaction = client
        .transaction()
        .await
        .map_err(|e| Error::sql("oracle: BEGIN", e))?;
    transaction
        .batch_execute(&format!(
            "SET LOCAL statement_timeout = '{}ms'; \
             CREATE TEMP TABLE pgshift_workload_ledger (n int8 PRIMARY KEY, community_id uuid NOT NULL, \
             created_at timestamptz NOT NULL, id bytea NOT NULL, absent_ok bool NOT NULL, \
             accept bytea[] NOT NULL) ON COMMIT DROP",
            timeout.as_millis()
        ))
        .await
        .map_err(|e| Error::sql("oracle: creating the temporary ledger table", e))?;
    let relation = transaction
        .query_opt(
            "SELECT c.oid, c.oid::regclass::text FROM pg_class c WHERE c.oid = to_regclass($1::text)",
            &[&table.to_string()],
        )
        .await
        .map_err(|e| Error::sql("oracle: resolving the table", e))?
        .ok_or_else(|| Error::NoSuchRelation {
            table: table.to_string(),
        })?;
    let oid: u32 = relation
        .try_get(0)
        .map_err(|e| Error::sql("oracle: resolving the table", e))?;
    let name: String = relation
        .try_get(1)
        .map_err(|e| Error::sql("oracle: resolving the table", e))?;
    upload(&transaction, expectations).await?;
    transaction
        .batch_execute("ANALYZE pg_temp.pgshift_workload_ledger")
        .await
        .map_err(|e| Error::sql("oracle: ANALYZE of the ledger table", e))?;
    let sql = format!(
        "SELECT s.n, s.copies, s.actual FROM ( \
           SELECT l.n, l.absent_ok, l.accept, count(e.id) AS copies, \
                  (array_agg({hash}) FILTER (WHERE e.id IS NOT NULL))[1] AS actual \
             FROM pg_temp.pgshift_workload_ledger l \
             LEFT JOIN {table} e ON e.community_id = l.community_id \
                  AND e.created_at = l.created_at AND e.id = l.id \
            GROUP BY l.n) s \
          WHERE (s.copies = 0 AND NOT s.absent_ok) OR s.copies > 1 \
             OR (s.copies = 1 AND NOT coalesce(s.actual = ANY (s.accept), false)) \
          ORDER BY s.n",
        hash = hash_sql("e"),
    );
    let rows = transaction
        .query(&sql, &[])
        .await
        .map_err(|e| Error::sql(format!("oracle: comparing with {table}"), e))?;
    let mismatches = rows
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect::<std::result::Result<Vec<Mismatch>, tokio_postgres::Error>>()
        .map_err(|e| Error::sql("oracle: reading the comparison", e))?;
    transaction
        .rollback()
        .await
        .map_err(|e| Error::sql("oracle: ROLLBACK", e))?;
    Ok((oid, name, mismatches))
}

/// Streams the expectations into the temporary table with one binary COPY.
async fn upload(
    transaction: &tokio_postgres::Transaction<'_>,
    expectations: &[KeyExpectation],
) -> Result<()> {
    let step = "oracle: COPY of the ledger";
    let sink = transaction
        .copy_in(
            "COPY pg_temp.pgshift_workload_ledger (n, community_id, created_at, id, absent_ok, accept) \
             FROM STDIN (FORMAT binary)",
        )
        .await
        .map_err(|e| Error::sql(step, e))?;
    let types = [
        Type::INT8,
        Type::UUID,
        Type::TIMESTAMPTZ,
        Type::BYTEA,
        Type::BOOL,
        Type::BYTEA_ARRAY,
    ];
    let writer = BinaryCopyInWriter::new(sink, &types);
    pin_mut!(writer);
    for (n, expectation) in expectations.iter().enumerate() {
        let n = n as i64;
        let created_at = expectation.key.created_at();
        let id: &[u8] = &expectation.key.id;
        let absent_ok = expectation.absent_ok();
        let accept: Vec<&[u8]> = expectation.hashes().map(|h| h.0.as_slice()).collect();
        writer
            .as_mut()
            .write(&[
                &n,
                &expectation.key.community_id,
                &created_at,
                &id,
                &absent_ok,
                &accept,
            ])
            .await
            .map_err(|e| Error::sql(step, e))?;
    }
    writer
        .as_mut()
        .finish()
        .await
        .map_err(|e| Error::sql(step, e))?;
    Ok(())
}
