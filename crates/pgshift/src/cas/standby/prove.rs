//! A connection to a standby named with `--standby-url`, proven to be a standby of this
//! primary: in recovery (`pg_is_in_recovery()`), with the primary's system identifier
//! (`pg_control_system()`; a physical standby is a copy of its primary's cluster).
//!
//! What the identifier cannot tell apart: two servers made from copies of one data
//! directory (a clone restored from a base backup, and its own standbys) share it.

use tokio_postgres::Client;

use super::endpoint::StandbyEndpoint;
use crate::cas::error::CasError;
use crate::cas::session::RUN_SESSION;
use crate::connect::{connect, ConnectionSpec, Session};
use crate::refusal::{Refusal, RefusalCause};

/// `system_identifier` of the server behind `client`, as text (it is a `bigint` that
/// may not fit a signed one's text round trip in every driver).
pub(crate) async fn system_identifier(client: &Client) -> Result<String, String> {
    client
        .query_one(
            "SELECT system_identifier::pg_catalog.text FROM pg_catalog.pg_control_system()",
            &[],
        )
        .await
        .map(|row| row.get(0))
        .map_err(|e| match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => e.to_string(),
        })
}

/// How a `--standby-url` failed to prove itself; `cutover`: found at the cutover
/// (the swap is refused, the run resumable), else before any work.
fn not_a_standby(endpoint: &StandbyEndpoint, why: &str, cutover: bool) -> CasError {
    let refusal = Refusal::new(
        RefusalCause::NotAStandby,
        format!("--standby-url {endpoint} is not a standby of this primary: {why}"),
    );
    if cutover {
        CasError::CutoverRefused(refusal)
    } else {
        CasError::Refused(refusal)
    }
}

/// Connects to `spec` and proves it a standby of the primary whose identifier is
/// `primary_id`.
pub(crate) async fn open(
    spec: &ConnectionSpec,
    primary_id: &str,
    cutover: bool,
) -> Result<Session, CasError> {
    let endpoint = StandbyEndpoint::of(spec);
    let session = connect(spec, &RUN_SESSION).await.map_err(|e| {
        if cutover {
            // INV: LK-9 — a standby that cannot be read is not swapped past.
            super::queries::unreadable(&endpoint, "connecting", &e)
        } else {
            CasError::Connect(format!("--standby-url {endpoint}: {e}"))
        }
    })?;
    let client = session.client();
    let _ = client
        .execute(
            "SELECT pg_catalog.set_config('application_name', 'pgshift-standby-check', false)",
            &[],
        )
        .await;
    let in_recovery: bool = client
        .query_one("SELECT pg_catalog.pg_is_in_recovery()", &[])
        .await
        .map(|row| row.get(0))
        .map_err(|e| {
            not_a_standby(
                &endpoint,
                &format!("pg_is_in_recovery() failed: {e}"),
                cutover,
            )
        })?;
    if !in_recovery {
        return Err(not_a_standby(
            &endpoint,
            "it is not in recovery (pg_is_in_recovery() is false): a primary, or a promoted standby",
            cutover,
        ));
    }
    let id = system_identifier(client).await.map_err(|e| {
        not_a_standby(
            &endpoint,
            &format!("its system identifier cannot be read: {e}"),
            cutover,
        )
    })?;
    if id != primary_id {
        return Err(not_a_standby(
            &endpoint,
            &format!("its system identifier is {id}, the primary's {primary_id}: a standby of another cluster"),
            cutover,
        ));
    }
    Ok(session)
}

/// Proves every standby of `standbys` one of the primary behind `primary`, before any
/// work: refused otherwise (nothing recorded, nothing changed).
pub async fn prove_all(primary: &Client, standbys: &[ConnectionSpec]) -> Result<(), CasError> {
    if standbys.is_empty() {
        return Ok(());
    }
    let primary_id = system_identifier(primary).await.map_err(|e| {
        CasError::Refused(Refusal::new(
            RefusalCause::NotAStandby,
            format!("the primary's system identifier cannot be read ({e}), so no --standby-url can be shown to be its standby"),
        ))
    })?;
    for spec in standbys {
        open(spec, &primary_id, false).await?;
    }
    Ok(())
}
