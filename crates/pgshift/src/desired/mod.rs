//! Desired state: the live schema as files people review, and those files compared
//! with a live database into a plan proven to converge (`docs/DESIRED.md`).
//!
//! [`pull`] dumps the live schema with the `pg_dump` of its own major version, cuts
//! the dump into one file per object by each statement's syntax tree ([`objects`]),
//! orders the files by the names their statements refer to ([`references`],
//! [`layout`]), and before a byte reaches the output folder runs the files' manifest
//! on a throwaway cluster of the same major and compares that cluster's dump with the
//! live one (DS-1). Where PostgreSQL itself prints an expression in a form it reads
//! back otherwise, the files must rebuild exactly what `pg_dump`'s own output
//! rebuilds, and the report says so ([`Fidelity`]); otherwise nothing is written.
//!
//! [`compare`] builds the live schema and the desired files side by side on a
//! throwaway cluster, compares them statement by statement ([`units`]), writes the
//! changes ([`diff`]) and runs them on the rebuilt live schema until nothing is left
//! to change (DS-2). [`fmt`] runs desired files on a throwaway cluster and pulls them
//! back into the canonical layout.

mod compare;
pub mod diff;
mod error;
mod fmt;
pub mod layout;
pub mod objects;
mod pull;
pub mod references;
mod scratch;
pub mod units;

pub use compare::{compare, CompareError, Compared, Desired};
pub use error::PullError;
pub use fmt::fmt;
pub use pull::{pull, Fidelity, PullTimings, Pulled, PulledFileSummary};
