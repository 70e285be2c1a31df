//! `docs/LINTS.md` and `docs/REFUSALS.md`, generated from the pages.

use std::fmt::Write;

use super::{lint_pages, refusal_pages, Page};

/// The command that regenerates both files.
pub const UPDATE_COMMAND: &str = "PGSHIFT_UPDATE_DOCS=1 cargo test -p pgshift --test docs_pinned";

fn generated_note() -> String {
    format!(
        "<!-- Generated from crates/pgshift/src/pages/, the text `pgshift explain CODE` prints. Do not edit by hand: change the pages, then run `{UPDATE_COMMAND}`. -->"
    )
}

/// The whole of `docs/LINTS.md`.
pub fn lints_markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Lint codes\n\n{}\n", generated_note());
    out.push_str(
        "`pgshift lint` reports findings from this closed list; each code has one severity.\n\
An `error` makes `pgshift lint` exit with 2. A comment `-- pgshift:allow <code>` right before a\n\
statement exempts it from that code. `pgshift explain CODE` prints a code's section below;\n\
`pgshift lint --format sarif` links each rule here.\n\n\
| code | severity | what it means |\n|---|---|---|\n",
    );
    table_and_sections(&mut out, &lint_pages());
    out
}

/// The whole of `docs/REFUSALS.md`.
pub fn refusals_markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Refusals\n\n{}\n", generated_note());
    out.push_str(
        "A refusal has exactly one cause and one class (invariant RF-1). This table is the closed\n\
list; `crates/pgshift/tests/docs_pinned.rs` fails if it and `pgshift::refusal::RefusalCause`\n\
disagree. Every refusal pgshift prints ends with the cause's \"do this\" line below;\n\
`pgshift explain CAUSE` prints a cause's section. Classes:\n\n\
- `unsupported`: pgshift cannot (yet) run this safely; the statement itself may be fine.\n\
- `invalid`: the statement does not fit the live database; PostgreSQL would reject it too.\n\
- `unsafe`: running it would break a promise (a lost write, an unbounded lock).\n\n\
| cause | class | when |\n|---|---|---|\n",
    );
    table_and_sections(&mut out, &refusal_pages());
    out
}

fn table_and_sections(out: &mut String, pages: &[Page]) {
    for page in pages {
        let _ = writeln!(
            out,
            "| `{}` | `{}` | {} |",
            page.code,
            page.kind.level(),
            page.summary
        );
    }
    for page in pages {
        section(out, page);
    }
}

fn section(out: &mut String, page: &Page) {
    let _ = writeln!(out, "\n## {}\n", page.code);
    let _ = writeln!(out, "`{}` · {}\n", page.kind.level(), page.summary);
    let _ = writeln!(out, "**What it means.** {}\n", page.means);
    let _ = writeln!(out, "**Why it matters.** {}\n", page.matters);
    let _ = writeln!(out, "**What to do.** {}", page.do_this);
    if !page.sql.is_empty() {
        let _ = writeln!(out, "\n```sql\n{}\n```", page.sql);
    }
    let _ = writeln!(out, "\n**How pgshift runs it.** {}", page.pgshift);
}
