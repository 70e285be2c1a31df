//! The standbys named with `--standby-url`, read on their own connections: what the
//! primary cannot see of them (their queries, `max_standby_streaming_delay`,
//! `hot_standby_feedback`, the queries the swap's replay cancelled there).
//!
//! - `endpoint`: a standby as the run record keeps it (host, port, database; never a
//!   role or password), and the check that a resume names every recorded one.
//! - `prove`: a connection to a standby, proven to be one of this primary (in
//!   recovery, the primary's system identifier) before any work and at the cutover.
//! - `queries`: the cutover's check before the swap takes its lock (INV: LK-9).
//! - `conflicts`: after the swap, how many queries its replay cancelled on each.

mod conflicts;
mod endpoint;
mod prove;
mod queries;

pub use conflicts::after_swap;
pub(crate) use endpoint::union;
pub use endpoint::{require_recorded, StandbyEndpoint};
pub use prove::prove_all;
pub use queries::{
    before_swap, cancelled_note, clear_note, QueriedStandby, StandbyLockHolder, Watched,
};
