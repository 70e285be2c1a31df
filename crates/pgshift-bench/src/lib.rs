//! pgshift's benchmark harness: the side-by-side comparisons of
//! `BENCHMARKS.md` ([`bench`](mod@bench), run by the `pgshift-bench` binary)
//! and a keyset reader for a standby ([`standby_reader`]).
//!
//! The relay workload it puts under load (schema, load generator, ledger,
//! lost-write oracle, statistics, charts) is `pgshift-workload`, which
//! `pgshift demo` uses as well; this crate is the part only the benchmark
//! needs, and the product does not link it.
//!
//! # Brief overview
//!
//! * [`bench`](mod@bench) runs the scenarios P1–P8 and D1 on a throwaway cluster and
//!   writes versioned JSON, SVG charts and a markdown section.
//! * [`standby_reader`] reads a table in `(created_at, id)` pages behind a fence,
//!   on a standby through a copy-and-swap run, and checks every pass for skipped
//!   and repeated rows and cancelled queries.

#![deny(missing_docs)]

pub mod bench;
pub mod standby_reader;
