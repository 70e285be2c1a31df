//! Rendering for people: compiler-style findings, plan tables, summaries; and the one
//! place JSON is printed.

mod apply;
mod cas_progress;
mod cas_report;
mod findings;
mod migrate;
mod plan;
mod progress;

pub use apply::apply;
pub use cas_progress::{CasView, Style as ProgressStyle};
pub use cas_report::cas_report;
pub use findings::{finding, lint_summary, no_statements_finding};
pub use migrate::migrate;
pub use plan::plan;
pub use progress::ProgressDisplay;

use serde::Serialize;

/// Prints a report as pretty JSON on stdout.
pub fn print_json<T: Serialize>(report: &T) {
    match serde_json::to_string_pretty(report) {
        Ok(json) => println!("{json}"),
        Err(err) => eprintln!("pgshift: cannot write the JSON report: {err}"),
    }
}
