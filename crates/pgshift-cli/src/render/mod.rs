//! Rendering for people: compiler-style findings, plan tables, summaries; and the one
//! place JSON is printed.

mod apply;
mod audit;
mod baseline;
mod capabilities;
mod cas_progress;
mod cas_report;
mod diff;
mod explain;
mod findings;
mod github;
mod locate;
mod migrate;
pub mod output_flags;
mod plan;
mod progress;
mod pull;
mod sarif;
pub mod style;
mod trace;

pub use apply::apply;
pub use audit::audit;
pub use baseline::baseline;
pub use capabilities::capabilities;
pub use cas_progress::{CasView, Style as ProgressStyle};
pub use cas_report::cas_report;
pub use diff::{diff, impact_words};
pub use explain::{list as explain_list, page as explain_page};
pub use findings::{finding, lint_summary, no_statements_finding};
pub use github::github;
pub use migrate::migrate;
pub use plan::plan;
pub use progress::ProgressDisplay;
pub use pull::pull;
pub use sarif::sarif;
pub use trace::trace_section;

use pgshift::refusal::Refusal;
use serde::Serialize;

/// The "do this" line that ends every refusal, indented by `indent`.
pub fn do_this(refusal: &Refusal, indent: &str) -> String {
    do_this_line(&refusal.next_step, indent)
}

/// A "do this" line: what to do next, after an error or a refusal.
pub fn do_this_line(next_step: &str, indent: &str) -> String {
    format!(
        "{indent}{} {next_step}\n",
        style::paint(style::Tone::Heading, "do this:"),
    )
}

/// Prints a report as pretty JSON on stdout.
pub fn print_json<T: Serialize>(report: &T) {
    match serde_json::to_string_pretty(report) {
        Ok(json) => println!("{json}"),
        Err(err) => eprintln!("pgshift: cannot write the JSON report: {err}"),
    }
}
