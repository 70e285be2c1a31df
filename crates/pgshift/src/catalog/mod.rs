//! Live catalog facts: what the tables a migration touches look like right now.

pub mod facts;

pub use facts::*;
