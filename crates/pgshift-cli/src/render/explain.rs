//! `pgshift explain`: a page for people, with the same sections and text as its
//! section of `docs/LINTS.md` or `docs/REFUSALS.md`.
//!
//! ```text
//! table-rewrite: lint code, severity error
//! A rewrite of an existing table under ACCESS EXCLUSIVE.
//!
//! What it means
//!   PostgreSQL writes a new copy of every row …
//! ```

use std::fmt::Write;

use pgshift::pages::{Page, PageKind};

use super::style::{paint, Tone};

/// Width text is wrapped to.
const WIDTH: usize = 88;

/// One page.
pub fn page(page: &Page) -> String {
    let mut out = String::new();
    let what = match page.kind {
        PageKind::Lint { severity } => format!("lint code, severity {}", severity.name()),
        PageKind::Refusal { class } => format!("refusal cause, class {}", class.name()),
    };
    let _ = writeln!(out, "{}: {what}", paint(Tone::Heading, page.code));
    let _ = writeln!(out, "{}", wrap(page.summary, ""));
    for (heading, text) in [
        ("What it means", page.means),
        ("Why it matters", page.matters),
        ("What to do", page.do_this),
    ] {
        let _ = writeln!(out, "\n{}", paint(Tone::Heading, heading));
        let _ = writeln!(out, "{}", wrap(text, "  "));
    }
    if !page.sql.is_empty() {
        out.push('\n');
        for line in page.sql.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(out, "\n{}", paint(Tone::Heading, "How pgshift runs it"));
    let _ = writeln!(out, "{}", wrap(page.pgshift, "  "));
    let _ = writeln!(out, "\nSee docs/{}#{}", page.kind.doc_file(), page.anchor());
    out
}

/// Every page's code and summary, one line each, lint codes first.
pub fn list(pages: &[Page]) -> String {
    let width = pages.iter().map(|p| p.code.len()).max().unwrap_or(0);
    let mut out = String::new();
    let mut kind = "";
    for page in pages {
        if page.kind.name() != kind {
            kind = page.kind.name();
            let heading = if kind == "lint" {
                "Lint codes"
            } else {
                "Refusal causes"
            };
            let _ = writeln!(
                out,
                "{}{}",
                if out.is_empty() { "" } else { "\n" },
                paint(Tone::Heading, heading)
            );
        }
        let _ = writeln!(
            out,
            "  {:<width$}  {:<11}  {}",
            page.code,
            page.kind.level(),
            page.summary
        );
    }
    out
}

/// `text` wrapped at word boundaries to [`WIDTH`], each line starting with `indent`.
fn wrap(text: &str, indent: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = line.chars().count() + 1 + word.chars().count();
        if !line.is_empty() && indent.len() + candidate > WIDTH {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
        .iter()
        .map(|l| format!("{indent}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_and_the_width() {
        let text = "one two three four five six seven eight nine ten ".repeat(10);
        let wrapped = wrap(&text, "  ");
        assert!(wrapped
            .lines()
            .all(|l| l.chars().count() <= WIDTH && l.starts_with("  ")));
        let words: Vec<&str> = wrapped.split_whitespace().collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
    }
}
