//! `docs/INVARIANTS.md` is the registry: every invariant it lists is tagged at an
//! enforcement point in the code (`// INV: <ID>`) and has a test named after it
//! (`inv_<family>_<n>_…`), and every tag in the code names a listed invariant.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn documented_ids() -> Vec<String> {
    let text = std::fs::read_to_string(workspace().join("docs/INVARIANTS.md")).expect("registry");
    text.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|heading| heading.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// `CO-1`, `LK-12`: two capital letters, a dash, digits.
fn is_invariant_id(id: &str) -> bool {
    let mut parts = id.splitn(2, '-');
    let family = parts.next().unwrap_or("");
    let number = parts.next().unwrap_or("");
    family.len() == 2
        && family.chars().all(|c| c.is_ascii_uppercase())
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
}

#[test]
fn every_invariant_is_enforced_tagged_and_tested() {
    let ids = documented_ids();
    assert!(ids.len() >= 8, "the registry lists invariants: {ids:?}");
    let mut files = Vec::new();
    rust_files(&workspace().join("crates"), &mut files);
    let mut tagged_in_src: BTreeSet<String> = BTreeSet::new();
    let mut tagged_anywhere: BTreeSet<String> = BTreeSet::new();
    let mut test_names = String::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        let in_src = file.components().any(|c| c.as_os_str() == "src");
        for line in text.lines() {
            if let Some(rest) = line.split("INV: ").nth(1) {
                let id: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !is_invariant_id(&id) {
                    continue;
                }
                tagged_anywhere.insert(id.clone());
                if in_src && line.trim_start().starts_with("//") {
                    tagged_in_src.insert(id);
                }
            }
            if let Some(name) = line.split("fn inv_").nth(1) {
                test_names.push_str("inv_");
                test_names.push_str(name);
                test_names.push('\n');
            }
        }
    }
    let mut problems = Vec::new();
    for id in &ids {
        if !tagged_in_src.contains(id) {
            problems.push(format!(
                "{id}: no `// INV: {id}` at an enforcement point in src"
            ));
        }
        let prefix = format!("inv_{}_", id.to_lowercase().replace('-', "_"));
        if !test_names.lines().any(|name| name.starts_with(&prefix)) {
            problems.push(format!("{id}: no test named {prefix}…"));
        }
    }
    for id in &tagged_anywhere {
        if !ids.contains(id) {
            problems.push(format!(
                "{id}: tagged in code but not in docs/INVARIANTS.md"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "invariant registry:\n{}",
        problems.join("\n")
    );
}
