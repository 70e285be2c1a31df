//! Copy-and-swap: an online rewrite of a live table.
//!
//! A shadow table is built with the change applied, rows are copied in keyset chunks
//! while a capture trigger logs every changed key, an applier keeps the shadow in
//! step, a verification pass proves shadow and source equal chunk by chunk, and the
//! names are swapped in one short, bounded ACCESS EXCLUSIVE window. Every phase is
//! recorded in `pgshift.runs` and resumable; `abort` removes every artifact. The
//! design and its argument are in `docs/COPY-AND-SWAP.md`.

pub mod applier;
pub mod capture;
pub mod copier;
pub mod cutover;
pub mod digest;
pub mod disk_watch;
pub mod error;
pub mod index_watch;
pub mod keys;
pub mod ledger;
pub mod liveness;
pub mod names;
pub mod plan;
pub mod preflight;
pub mod privileges;
pub mod run;
pub mod session;
pub mod shadow;
pub mod source;
pub mod standby;
pub mod statements;
pub mod store;
pub mod throttle;
pub mod verify;

pub use error::CasError;
pub use index_watch::IndexBuild;
pub use liveness::{await_cutover, CutoverOutcome, RunStatus};
pub use plan::{CutoverBudgets, Mode, RunOptions, VerifyMethod};
pub use preflight::{preflight, preflight_read_only, Preflight};
pub use run::{
    abort, request_cutover, resume, resume_id, resume_id_with, resume_with, start, start_request,
    status, CasProgress, CleanupStep, CutoverRequest, LeftBehind, Request, RunReport, Silent,
};
pub use run::{request_throttle, ThrottleRequest};
pub use store::{Phase, RunRecord};
pub use throttle::{Pace, ThrottleEvent, ThrottleLimits, DEFAULT_WRITER_SLOWDOWN};
