//! pgshift: online schema changes for PostgreSQL.
//!
//! # Brief overview
//! - [`classify`] says, for one parsed statement, which locks PostgreSQL takes, how
//!   heavy the work is, and how pgshift would run it ([`route::Route`]). It is pure:
//!   no connection, optionally informed by live [`catalog`] facts.
//! - [`lock::LockMode`] is PostgreSQL's lock-mode lattice and conflict table.
//! - [`refusal`] is the closed list of reasons pgshift declines a statement.
//! - [`connect`] opens budgeted, search-path-safe sessions.
//! - [`audit`] reads the live database's triggers and says which writes get past them.
//! - [`trace`] runs statements on a throwaway clone and records what the server did.
//! - [`pages`] explains every lint code and refusal cause (`pgshift explain`, the docs).
#![deny(missing_docs)]

pub mod audit;
pub mod capabilities;
pub mod cas;
pub mod catalog;
pub mod classify;
pub mod connect;
pub mod desired;
pub mod exec;
pub mod layout;
pub mod lint;
pub mod lock;
pub mod migrate;
pub mod pages;
pub mod plan;
pub mod procedural;
pub mod refusal;
pub mod report;
pub mod route;
pub mod script;
pub mod source;
pub mod trace;
