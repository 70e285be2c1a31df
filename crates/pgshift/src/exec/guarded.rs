//! Running a unit guarded by PC-5: the block's guard copy runs on live in a
//! `READ ONLY` transaction under the step's `lock_timeout` and `statement_timeout`,
//! with a [`NoticeTap`] open on its marker, and is always rolled back. What it
//! reported decides ([`crate::procedural::judge_guarded`]): a no-op is done (the
//! unit's record, if any, is written after, in a transaction of its own, since the
//! guarded one cannot write); a block that would change something fails with
//! [`Failure::GuardWouldChange`], which `apply` reports as a refusal
//! (`procedural-blocking`); a block that fails for its own reasons fails.

use tokio_postgres::Client;

use super::errors::Failure;
use crate::connect::NoticeTap;
use crate::procedural::{judge_guarded, Guard, GuardOutcome};

/// One guarded attempt: `Ok` when the block is a no-op here (and the record, if
/// any, is written).
pub(super) async fn attempt_guarded(
    client: &Client,
    guard: &Guard,
    settings: &str,
    bookkeeping: Option<&str>,
) -> Result<(), Failure> {
    let tap = NoticeTap::open(&guard.marker);
    client
        .batch_execute("BEGIN")
        .await
        .map_err(|error| Failure::of(&error))?;
    // INV: PC-5 — the guard's copy runs only in a READ ONLY transaction, rolled back.
    let ran = match client
        .batch_execute(&format!(
            "SET TRANSACTION READ ONLY; {settings}; SET LOCAL client_min_messages = notice"
        ))
        .await
    {
        Ok(()) => client.batch_execute(&guard.sql).await,
        Err(error) => Err(error),
    };
    let failure = ran.as_ref().err().map(Failure::of);
    if failure != Some(Failure::ConnectionLost) {
        if let Err(error) = client.batch_execute("ROLLBACK").await {
            return Err(Failure::of(&error));
        }
    }
    let notices = tap.take();
    let sqlstate = ran
        .as_ref()
        .err()
        .and_then(|error| error.code())
        .map(|code| code.code().to_owned());
    let outcome = judge_guarded(&guard.marker, &notices, sqlstate.as_deref());
    match (outcome, failure) {
        (outcome @ GuardOutcome::WouldChange { .. }, _) => Err(Failure::GuardWouldChange(format!(
            "{}; {}",
            outcome.describe(),
            guard.otherwise
        ))),
        (_, Some(failure)) => Err(failure),
        (_, None) => {
            if let Some(bookkeeping) = bookkeeping {
                client
                    .batch_execute(bookkeeping)
                    .await
                    .map_err(|error| Failure::of(&error))?;
            }
            Ok(())
        }
    }
}
