//! The read's own transaction: make sure the client is idle, then
//! `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY` … `COMMIT` (or `ROLLBACK`).
//!
//! A `BEGIN` sent inside a caller's transaction is only a warning, and the `COMMIT`
//! that follows would end the caller's transaction. So the read first asks twice, in
//! two separate simple-protocol statements, for the session's virtual transaction ID:
//! outside a transaction block each statement is a transaction of its own and the IDs
//! differ; inside one they are equal, and the read stops there, having touched
//! nothing.

use tokio_postgres::{Client, SimpleQueryMessage};

use super::error::CatalogError;

const STEP: &str = "transaction";

const VIRTUAL_XID_SQL: &str = "\
SELECT l.virtualtransaction FROM pg_catalog.pg_locks l
 WHERE l.locktype OPERATOR(pg_catalog.=) 'virtualxid'
   AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()";

const BEGIN_SQL: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// Opens the read's transaction, or fails with
/// [`CatalogError::AlreadyInTransaction`] when the client is inside one.
pub(crate) async fn begin(client: &Client) -> Result<(), CatalogError> {
    let first = virtual_xid(client).await?;
    let second = virtual_xid(client).await?;
    if first == second {
        return Err(CatalogError::AlreadyInTransaction);
    }
    client
        .batch_execute(BEGIN_SQL)
        .await
        .map_err(|source| CatalogError::query("begin", source))
}

/// Runs `work` in the read's own transaction: [`begin`], then [`commit`] when it
/// succeeds, [`rollback`] when it fails (its error is returned).
pub(crate) async fn within<T, F>(client: &Client, work: F) -> Result<T, CatalogError>
where
    F: std::future::Future<Output = Result<T, CatalogError>>,
{
    begin(client).await?;
    match work.await {
        Ok(value) => {
            commit(client).await?;
            Ok(value)
        }
        Err(error) => {
            rollback(client).await;
            Err(error)
        }
    }
}

/// Commits the read's transaction.
pub(crate) async fn commit(client: &Client) -> Result<(), CatalogError> {
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|source| CatalogError::query("commit", source))
}

/// Rolls the read's transaction back, best effort: the error that caused the
/// rollback says more than a failed rollback would.
pub(crate) async fn rollback(client: &Client) {
    let _ = client.batch_execute("ROLLBACK").await;
}

/// The virtual transaction ID the statement runs in.
async fn virtual_xid(client: &Client) -> Result<String, CatalogError> {
    let messages = client
        .simple_query(VIRTUAL_XID_SQL)
        .await
        .map_err(|source| CatalogError::query(STEP, source))?;
    for message in &messages {
        if let SimpleQueryMessage::Row(row) = message {
            let value = row.try_get(0).map_err(|source| CatalogError::Decode {
                step: STEP,
                column: "virtualtransaction",
                source,
            })?;
            if let Some(value) = value {
                return Ok(value.to_owned());
            }
        }
    }
    Err(CatalogError::UnexpectedValue {
        step: STEP,
        what: "virtual transaction id",
    })
}
