//! The documentation of closed vocabularies is pinned to the code: `docs/REFUSALS.md`
//! lists exactly the refusal causes with their classes, and `docs/LINTS.md` exactly the
//! lint codes with their severities.

use std::path::Path;

use pgshift::lint::Code;
use pgshift::refusal::RefusalCause;

fn doc_rows(name: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    text.lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line
                .split('|')
                .map(|c| c.trim().trim_matches('`'))
                .collect();
            (cells[1].to_owned(), cells[2].to_owned())
        })
        .collect()
}

fn json_name<T: serde::Serialize>(value: T) -> String {
    serde_json::to_value(value)
        .expect("serializes")
        .as_str()
        .expect("a string")
        .to_owned()
}

// INV: RF-1 — the documented list of causes, and each cause's single class, is the code's.
#[test]
fn inv_rf_1_refusals_doc_lists_every_cause_with_its_one_class() {
    let documented = doc_rows("REFUSALS.md");
    let coded: Vec<(String, String)> = RefusalCause::ALL
        .iter()
        .map(|cause| (cause.name().to_owned(), json_name(cause.class())))
        .collect();
    assert_eq!(
        documented, coded,
        "docs/REFUSALS.md and RefusalCause disagree"
    );
}

#[test]
fn lints_doc_lists_every_code_with_its_severity() {
    let documented = doc_rows("LINTS.md");
    let coded: Vec<(String, String)> = Code::ALL
        .iter()
        .map(|code| (code.name().to_owned(), code.severity().name().to_owned()))
        .collect();
    assert_eq!(documented, coded, "docs/LINTS.md and lint::Code disagree");
}

#[test]
fn closed_vocabularies_serialize_as_documented() {
    for cause in RefusalCause::ALL {
        assert_eq!(json_name(cause), cause.name());
    }
    for code in Code::ALL {
        assert_eq!(json_name(code), code.name());
        assert_eq!(Code::from_name(code.name()), Some(*code));
    }
}

/// `docs/LINTS.md` and `docs/REFUSALS.md` are generated from `pgshift::pages`, the text
/// `pgshift explain` prints; with `PGSHIFT_UPDATE_DOCS=1` this test writes them.
#[test]
fn lint_and_refusal_docs_are_generated_from_the_pages() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let update = std::env::var_os("PGSHIFT_UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (name, generated) in [
        ("LINTS.md", pgshift::pages::lints_markdown()),
        ("REFUSALS.md", pgshift::pages::refusals_markdown()),
    ] {
        let path = docs.join(name);
        if update {
            std::fs::write(&path, &generated)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            continue;
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != generated {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/{} differ from crates/pgshift/src/pages/; regenerate them with `{}`",
        stale.join(" and docs/"),
        pgshift::pages::UPDATE_COMMAND
    );
}
