//! The renderers of `pgshift lint`'s text output, as a library, so that harnesses (the
//! fuzz targets of `crates/pgshift-fuzz`) drive the very code the command prints with.
//!
//! The binary (`main.rs`) compiles the same source file as its own module; this
//! library only gives it a public path and changes nothing in it.

#[path = "render/findings.rs"]
mod findings;
// The binary uses all of it; the lint renderer only colour and verbosity.
#[allow(dead_code)]
#[path = "render/style.rs"]
mod style;

/// Compiler-style lint findings and the closing summary line, exactly as
/// `pgshift lint` writes them.
pub mod lint_text {
    pub use crate::findings::{finding, lint_summary, no_statements_finding};
}
