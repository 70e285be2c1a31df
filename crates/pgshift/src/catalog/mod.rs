//! Live catalog facts: what the tables a migration touches look like right now.

pub mod declared;
pub mod evolve;
pub mod facts;
pub mod read;
pub mod volume;

pub use declared::DeclaredSchema;
pub use facts::*;
pub use read::{read_snapshot, read_snapshot_with, resolve_relation, CatalogError};
