//! Fuzz targets of pgshift's front door: every way text from outside gets in.
//!
//! Each target is one function `fn(&[u8])` that must not panic, hang or grow memory
//! without bound, whatever the bytes. Where a property is cheap to check (SQL that
//! pgshift writes parses back as one statement, a password never shows, a position
//! points inside its text), the target asserts it, so a broken property is a crash too.
//!
//! The same functions run in two harnesses:
//! - `fuzz/` (cargo-fuzz, libFuzzer): long coverage-guided runs;
//! - `tests/fuzz_replay.rs` (stable, inside `cargo test --workspace`): the committed
//!   corpus `fuzz/corpus/<target>/` plus a fixed-seed batch of mutations of it
//!   ([`replay`]).
//!
//! How each target reads its bytes is in its module's documentation; `docs/FUZZING.md`
//! says how to run both harnesses.
#![deny(missing_docs)]

pub mod input;
pub mod mutate;
pub mod replay;
pub mod targets;

mod facts;
mod scratch;

/// One fuzz target: a name (the cargo-fuzz target and the corpus directory) and the
/// function that takes the bytes.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The name, as in `cargo fuzz run <name>` and `fuzz/corpus/<name>/`.
    pub name: &'static str,
    /// Runs one input.
    pub run: fn(&[u8]),
}

/// Every target, in the order the documentation lists them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "sql_parse",
        run: targets::sql::sql_parse,
    },
    Target {
        name: "classify_offline",
        run: targets::classify::classify_offline,
    },
    Target {
        name: "classify_facts",
        run: targets::classify::classify_facts,
    },
    Target {
        name: "script_analyze",
        run: targets::script::script_analyze,
    },
    Target {
        name: "lint_render",
        run: targets::lint::lint_render,
    },
    Target {
        name: "connection_string",
        run: targets::connect::connection_string,
    },
    Target {
        name: "migrations_dir",
        run: targets::migrations::migrations_dir,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().copied().find(|target| target.name == name)
}
