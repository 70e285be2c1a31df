//! The short fuzz run of `cargo test --workspace`: every target over its committed
//! corpus (`fuzz/corpus/<target>/`) and a fixed-seed batch of mutations of it. Longer
//! runs: `PGSHIFT_FUZZ_MUTATIONS=200000 cargo test -p pgshift-fuzz --release`, or
//! cargo-fuzz (`docs/FUZZING.md`).

use std::path::PathBuf;

use pgshift_fuzz::replay::{corpus, replay, ReplayConfig};
use pgshift_fuzz::{target, TARGETS};

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(name: &str) {
    let target = target(name).expect("a registered target");
    let dir = repository().join("fuzz/corpus").join(name);
    let inputs = corpus(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    assert!(!inputs.is_empty(), "{} holds a corpus", dir.display());
    let failures = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let config = ReplayConfig::from_env();
    match replay(target, &inputs, &config, &failures) {
        Ok(summary) => assert_eq!(summary.corpus, inputs.len()),
        Err(failure) => panic!("{failure}"),
    }
}

#[test]
fn sql_parse_survives_its_corpus_and_mutations() {
    run("sql_parse");
}

#[test]
fn classify_offline_survives_its_corpus_and_mutations() {
    run("classify_offline");
}

#[test]
fn classify_facts_survives_its_corpus_and_mutations() {
    run("classify_facts");
}

#[test]
fn script_analyze_survives_its_corpus_and_mutations() {
    run("script_analyze");
}

#[test]
fn lint_render_survives_its_corpus_and_mutations() {
    run("lint_render");
}

#[test]
fn connection_string_survives_its_corpus_and_mutations() {
    run("connection_string");
}

#[test]
fn migrations_dir_survives_its_corpus_and_mutations() {
    run("migrations_dir");
}

#[test]
fn every_target_has_a_test_and_a_cargo_fuzz_binary() {
    let source = include_str!("fuzz_replay.rs");
    let fuzz_targets = repository().join("fuzz/fuzz_targets");
    let manifest = std::fs::read_to_string(repository().join("fuzz/Cargo.toml"))
        .expect("fuzz/Cargo.toml exists");
    for target in TARGETS {
        assert!(
            source.contains(&format!("run(\"{}\")", target.name)),
            "{} has a replay test",
            target.name
        );
        let binary = fuzz_targets.join(format!("{}.rs", target.name));
        let text = std::fs::read_to_string(&binary)
            .unwrap_or_else(|err| panic!("{}: {err}", binary.display()));
        assert!(
            text.contains("pgshift_fuzz::targets::") && text.contains(target.name),
            "{} drives the shared target",
            binary.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{}\"", target.name)),
            "fuzz/Cargo.toml declares {}",
            target.name
        );
    }
}

#[test]
fn the_cargo_fuzz_dictionary_is_the_mutators_dictionary() {
    let path = repository().join("fuzz/pgshift.dict");
    if std::env::var_os("PGSHIFT_FUZZ_BLESS").is_some() {
        std::fs::write(&path, pgshift_fuzz::mutate::dictionary_file()).expect("writes");
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        written,
        pgshift_fuzz::mutate::dictionary_file(),
        "{} is out of date: rerun with PGSHIFT_FUZZ_BLESS=1",
        path.display()
    );
}
