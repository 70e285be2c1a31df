//! Integration tests of the relay harness on a real PostgreSQL (the shared
//! embedded cluster, one fresh database per test): the schema and seed
//! loaders, the load generator, and the lost-write oracle, including proofs
//! that the oracle fails when writes are lost.

mod common;
mod load;
mod oracle_failures;
mod schema;
