//! Rendering for people: compiler-style findings, plan tables, summaries; and the one
//! place JSON is printed.

mod findings;
mod plan;

pub use findings::{finding, lint_summary, no_statements_finding};
pub use plan::plan;

use serde::Serialize;

/// Prints a report as pretty JSON on stdout.
pub fn print_json<T: Serialize>(report: &T) {
    match serde_json::to_string_pretty(report) {
        Ok(json) => println!("{json}"),
        Err(err) => eprintln!("pgshift: cannot write the JSON report: {err}"),
    }
}
