//! Rendering for people: compiler-style findings, plan tables, summaries; and the one
//! place JSON is printed.

mod apply;
mod cas_progress;
mod cas_report;
mod explain;
mod findings;
mod github;
mod locate;
mod migrate;
mod plan;
mod progress;
mod sarif;
pub mod style;
mod trace;

pub use apply::apply;
pub use cas_progress::{CasView, Style as ProgressStyle};
pub use cas_report::cas_report;
pub use explain::{list as explain_list, page as explain_page};
pub use findings::{finding, lint_summary, no_statements_finding};
pub use github::github;
pub use migrate::migrate;
pub use plan::plan;
pub use progress::ProgressDisplay;
pub use sarif::sarif;
pub use trace::trace_section;

use pgshift::refusal::Refusal;
use serde::Serialize;

/// The "do this" line that ends every refusal, indented by `indent`.
pub fn do_this(refusal: &Refusal, indent: &str) -> String {
    format!(
        "{indent}{} {}\n",
        style::paint(style::Tone::Heading, "do this:"),
        refusal.next_step
    )
}

/// The "do this" line of a copy-and-swap error that is a refusal, else nothing.
pub fn cas_do_this(err: &pgshift::cas::CasError) -> String {
    use pgshift::cas::CasError;
    match err {
        CasError::Refused(refusal) | CasError::CutoverRefused(refusal) => do_this(refusal, "  "),
        _ => String::new(),
    }
}

/// Prints a report as pretty JSON on stdout.
pub fn print_json<T: Serialize>(report: &T) {
    match serde_json::to_string_pretty(report) {
        Ok(json) => println!("{json}"),
        Err(err) => eprintln!("pgshift: cannot write the JSON report: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use pgshift::cas::CasError;
    use pgshift::refusal::{Refusal, RefusalCause};

    #[test]
    fn a_refused_run_ends_with_its_next_step() {
        let refused = CasError::Refused(Refusal::new(RefusalCause::NoUsableKey, "no key"));
        assert_eq!(
            super::cas_do_this(&refused),
            "  do this: Add a primary key first (built concurrently), then run the change again.\n"
        );
        let refused = CasError::CutoverRefused(
            Refusal::new(RefusalCause::SchemaChanged, "changed").with_next_step("abort it"),
        );
        assert_eq!(super::cas_do_this(&refused), "  do this: abort it\n");
    }
}
