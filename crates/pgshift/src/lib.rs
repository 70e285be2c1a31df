//! pgshift: online schema changes for PostgreSQL.
#![deny(missing_docs)]

pub mod connect;
