//! `pgshift explain CODE`: the page of a lint code or refusal cause, from the same
//! source as `docs/LINTS.md` and `docs/REFUSALS.md`.

use serde::Serialize;

use pgshift::pages::{self, Page};
use pgshift::report;

use crate::cli::{ExplainArgs, Format};
use crate::exit;
use crate::render;

/// The JSON document of `explain`.
#[derive(Serialize)]
struct ExplainReport {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    /// The pages asked for (two when a name is both a lint code and a refusal cause).
    pages: Vec<Page>,
    /// Why nothing was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Known codes close to the one asked for, when it is unknown.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    close_matches: Vec<&'static str>,
}

/// Runs `pgshift explain` and returns the exit code.
pub fn run(args: &ExplainArgs) -> u8 {
    let (found, asked) = match (&args.code, args.list) {
        (_, true) | (None, _) => (
            pages::lint_pages()
                .into_iter()
                .chain(pages::refusal_pages())
                .collect(),
            None,
        ),
        (Some(code), false) => (pages::find(code), Some(code.as_str())),
    };
    let mut document = ExplainReport {
        format_version: report::FORMAT_VERSION,
        tool: report::TOOL,
        tool_version: report::TOOL_VERSION,
        command: "explain",
        pages: found,
        error: None,
        close_matches: Vec::new(),
    };
    if let (Some(code), true) = (asked, document.pages.is_empty()) {
        document.close_matches = pages::close_matches(code);
        document.error = Some(format!(
            "no lint code or refusal cause is named `{}`",
            code.trim()
        ));
    }
    match args.format {
        Format::Json => render::print_json(&document),
        Format::Text => match &document.error {
            Some(error) => {
                eprintln!("pgshift explain: {error}");
                if document.close_matches.is_empty() {
                    eprintln!("`pgshift explain --list` lists every code and cause");
                } else {
                    eprintln!("did you mean: {}", document.close_matches.join(", "));
                }
            }
            None if asked.is_none() => print!("{}", render::explain_list(&document.pages)),
            None => {
                let pages: Vec<String> = document.pages.iter().map(render::explain_page).collect();
                print!("{}", pages.join("\n"));
            }
        },
    }
    if document.error.is_some() {
        exit::INPUT_ERROR
    } else {
        exit::OK
    }
}
