//! Differential testing against PostgreSQL itself: for a generated corpus of table
//! shapes × every statement form pgshift routes to copy-and-swap, the statement runs
//! natively (blocking) on one `CREATE DATABASE … TEMPLATE` clone and through pgshift
//! on the other, and the catalog as a user sees it and every row must be equal — up
//! to the intended differences of `docs/COPY-AND-SWAP.md`, each an allowance that is
//! itself checked. Where pgshift refuses, the refusal must be typed and documented.
//!
//! `PGSHIFT_DIFF_CASES=N` runs N shapes instead of the default corpus's 44 (a longer
//! run), `PGSHIFT_DIFF_SEED=S` draws them with another seed, `PGSHIFT_DIFF_KEEP=1`
//! keeps the databases of each case for a look.

mod common;
#[path = "common/differential/mod.rs"]
mod differential;

use std::collections::{BTreeMap, BTreeSet};

use differential::allowance::{self, ALLOWANCES};
use differential::case::Verdict;
use differential::shape::{
    corpus, IdColumn, Inheritance, KeyKind, Owner, Partitioning, Rls, Shape, Toast, DEFAULT_SEED,
};
use differential::statement::{Form, FORMS};
use differential::views::VIEW_TIES;

/// Shapes in the default run.
const DEFAULT_SHAPES: usize = 44;

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn chosen_corpus() -> (u64, Vec<Shape>) {
    let seed = env_number("PGSHIFT_DIFF_SEED").unwrap_or(DEFAULT_SEED);
    let count = env_number("PGSHIFT_DIFF_CASES")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(DEFAULT_SHAPES);
    (seed, corpus(seed, count))
}

/// Every value of every dimension appears in the default corpus, so that the corpus,
/// although drawn at random, covers each feature the issue lists.
#[test]
fn the_default_corpus_covers_every_feature() {
    let shapes = corpus(DEFAULT_SEED, DEFAULT_SHAPES);
    assert_eq!(shapes.len(), DEFAULT_SHAPES, "the corpus has no duplicates");
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for s in &shapes {
        seen.insert(format!("key {:?}", s.key));
        seen.insert(format!("id {:?}", s.id));
        seen.insert(format!("toast {:?}", s.toast));
        seen.insert(format!("rls {:?}", s.rls));
        seen.insert(format!("owner {:?}", s.owner));
        seen.insert(format!("inheritance {:?}", s.inheritance));
        seen.insert(format!("partitioning {:?}", s.partitioning));
        seen.insert(format!("view ties {:?}", s.view_ties));
        for (on, name) in [
            (s.generated, "generated"),
            (s.array, "array"),
            (s.enumerated, "enum"),
            (s.domain, "domain"),
            (s.citext, "citext"),
            (s.collation, "collation"),
            (s.partial_index, "partial index"),
            (s.expression_index, "expression index"),
            (s.exclusion, "exclusion"),
            (s.deferrable_unique, "deferrable unique"),
            (s.fk_out, "fk out"),
            (s.fk_in, "fk in"),
            (s.column_grants, "column grants"),
            (s.publication, "publication"),
            (s.triggers, "triggers"),
            (s.tuning, "tuning"),
            (s.view, "view"),
        ] {
            if on {
                seen.insert(name.to_owned());
            }
        }
        if s.generated && s.partitioned() {
            seen.insert("generated partitioned".to_owned());
        }
        if s.fk_in && s.partitioned() {
            seen.insert("fk in partitioned".to_owned());
        }
    }
    let mut wanted: Vec<String> = Vec::new();
    for k in [
        KeyKind::Int,
        KeyKind::Bigint,
        KeyKind::Uuid,
        KeyKind::Text,
        KeyKind::Bytea,
        KeyKind::Timestamptz,
        KeyKind::Composite,
    ] {
        wanted.push(format!("key {k:?}"));
    }
    for i in [
        IdColumn::None,
        IdColumn::IdentityAlways,
        IdColumn::IdentityByDefault,
        IdColumn::Serial,
        IdColumn::KeyIdentity,
    ] {
        wanted.push(format!("id {i:?}"));
    }
    for t in [Toast::None, Toast::Compressed, Toast::External] {
        wanted.push(format!("toast {t:?}"));
    }
    for r in [Rls::Off, Rls::Enabled, Rls::Forced] {
        wanted.push(format!("rls {r:?}"));
    }
    for o in [Owner::Runner, Owner::OtherRole, Owner::RoleRuns] {
        wanted.push(format!("owner {o:?}"));
    }
    for i in [Inheritance::None, Inheritance::Child, Inheritance::Parent] {
        wanted.push(format!("inheritance {i:?}"));
    }
    for p in [
        Partitioning::None,
        Partitioning::Range { default: false },
        Partitioning::Range { default: true },
        Partitioning::List,
        Partitioning::Hash,
    ] {
        wanted.push(format!("partitioning {p:?}"));
    }
    for v in VIEW_TIES {
        wanted.push(format!("view ties {v:?}"));
    }
    for name in [
        "generated",
        "array",
        "enum",
        "domain",
        "citext",
        "collation",
        "partial index",
        "expression index",
        "exclusion",
        "deferrable unique",
        "fk out",
        "fk in",
        "column grants",
        "publication",
        "triggers",
        "tuning",
        "view",
        "generated partitioned",
        "fk in partitioned",
    ] {
        wanted.push(name.to_owned());
    }
    let missing: Vec<&String> = wanted.iter().filter(|w| !seen.contains(*w)).collect();
    assert!(missing.is_empty(), "the default corpus misses {missing:?}");
}

/// Every allowance is documented in `docs/COPY-AND-SWAP.md` under its id.
#[test]
fn every_allowance_is_documented() {
    let doc = std::fs::read_to_string(common::workspace().join("docs/COPY-AND-SWAP.md"))
        .expect("docs/COPY-AND-SWAP.md");
    for id in allowance::ids() {
        assert!(
            doc.contains(&format!("`{id}`")),
            "allowance {id} is not documented in docs/COPY-AND-SWAP.md"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_and_copy_and_swap_agree_on_every_shape_and_statement() {
    let (seed, shapes) = chosen_corpus();
    let report = differential::run(&shapes, FORMS).await;
    let mut failures = Vec::new();
    for (index, error) in &report.seed_failures {
        failures.push(format!("shape {index} could not be seeded: {error}"));
    }
    let mut per_form: BTreeMap<&str, [usize; 5]> = BTreeMap::new();
    let mut allowed_seen: BTreeSet<&str> = BTreeSet::new();
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    let mut rejections: BTreeMap<String, usize> = BTreeMap::new();
    for r in &report.results {
        let shape = &shapes[r.shape];
        let counts = per_form.entry(r.form.name()).or_default();
        match &r.verdict {
            Verdict::Same { cas, allowed } => {
                counts[usize::from(!*cas)] += 1;
                allowed_seen.extend(allowed.iter().copied());
            }
            Verdict::RefusedAsDocumented(cause) => {
                counts[2] += 1;
                *refusals
                    .entry(format!("{} {cause}", r.form.name()))
                    .or_default() += 1;
            }
            Verdict::BothRejected(rejected) => {
                counts[3] += 1;
                *rejections.entry(rejected.clone()).or_default() += 1;
            }
            Verdict::Differs(message) => {
                counts[4] += 1;
                failures.push(format!(
                    "shape {} [{}] × {} ({}):\n{}",
                    r.shape,
                    shape.label(),
                    r.form.name(),
                    r.form.sql(shape, report.version).unwrap_or_default(),
                    message
                ));
            }
        }
    }
    let slowest = report
        .results
        .iter()
        .map(|r| r.elapsed)
        .max()
        .unwrap_or_default();
    eprintln!(
        "differential: PostgreSQL {}, seed {seed:#x}, {} shapes, {} cases in {:.1?} (slowest case {:.1?})",
        report.version,
        shapes.len(),
        report.results.len(),
        report.elapsed,
        slowest
    );
    eprintln!(
        "  form: copy-and-swap / native route / refused as documented / both rejected / differs"
    );
    for (form, c) in &per_form {
        eprintln!(
            "  {form}: {} / {} / {} / {} / {}",
            c[0], c[1], c[2], c[3], c[4]
        );
    }
    for (what, n) in &refusals {
        eprintln!("  refused as documented: {what} × {n}");
    }
    for (what, n) in &rejections {
        eprintln!("  rejected by both: {what} × {n}");
    }
    for note in &report.skipped {
        eprintln!("  skipped: {note}");
    }
    // Every copy-and-swap form reached copy-and-swap somewhere.
    for form in FORMS {
        let ran = report
            .results
            .iter()
            .any(|r| r.form == *form && matches!(r.verdict, Verdict::Same { cas: true, .. }));
        let applies = report.results.iter().any(|r| r.form == *form);
        if applies && *form != Form::SetUnlogged && !ran {
            failures.push(format!(
                "{} never ran through copy-and-swap with the same result as PostgreSQL",
                form.name()
            ));
        }
    }
    // Every allowance excused something (else it is stale), in the default corpus.
    if shapes.len() >= DEFAULT_SHAPES {
        // Those that apply on this server: every allowance's own, the data mask and
        // the dependents' oracle everywhere, PostgreSQL 14's CLUSTER before 15 only.
        let applies_here = |id: &str| match ALLOWANCES.iter().find(|a| a.id == id) {
            Some(a) => shapes
                .iter()
                .any(|s| FORMS.iter().any(|f| (a.applies)(s, *f, report.version))),
            None => id != allowance::CLUSTER_BEFORE_15 || report.version < 150000,
        };
        for id in allowance::ids() {
            if applies_here(id) && !allowed_seen.contains(id) {
                failures.push(format!(
                    "allowance {id} excused nothing: remove it (and its entry in docs/COPY-AND-SWAP.md)"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n\n{}",
        failures.len(),
        report.results.len(),
        failures.join("\n\n")
    );
}
