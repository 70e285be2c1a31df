//! The capabilities matrix (`pgshift capabilities`): every statement form pgshift
//! classifies, with the route, work class, strongest lock and transaction use the
//! classifier gives it on each PostgreSQL major it supports.
//!
//! Nothing here is typed by hand. The forms are the classifier's own form table,
//! `tests/data/classify/forms.sql`, which `tests/classify_forms.rs` snapshots offline
//! and `tests/lock_modes.rs` runs against a live server's `pg_locks`; each form is
//! parsed with PostgreSQL's grammar and run through [`classify`] once per major, offline
//! (no facts: the worst case a live table could present, as `lint` judges it), with that
//! major's `server_version_num` in the [`Context`]. A test fails when
//! [`OperationKind::ALL`] holds a kind that no form produces, so a new kind cannot go
//! unlisted.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::classify::{
    classify, Classification, Context, OperationKind, TransactionUse, WorkClass,
};
use crate::lock::LockMode;
use crate::route::Route;

/// The classifier's form table: one statement per form, the same file its offline
/// snapshot and its live lock-mode test read.
pub const FORMS_SQL: &str = include_str!("../tests/data/classify/forms.sql");

/// Where [`FORMS_SQL`] lives in the repository, for readers of the matrix.
pub const FORMS_PATH: &str = "crates/pgshift/tests/data/classify/forms.sql";

/// What the classifier is told when it answers for the matrix.
pub const ASSUMPTIONS: &str = "offline: no live facts, so each form is judged for the worst case a live table could present (as lint judges it), outside a transaction block; plan refines this with the live table";

/// The PostgreSQL majors pgshift supports, oldest first.
pub const MAJORS: [u32; 5] = [14, 15, 16, 17, 18];

/// One statement form and how the classifier answers for it on each major.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Form {
    /// The sample statement, as the form table writes it.
    pub sql: String,
    /// The statement's kind in one word (`alter-table`, `create-index`).
    pub statement: &'static str,
    /// The operation kinds the classifier finds in it, in order of first appearance.
    pub operations: Vec<OperationKind>,
    /// One answer per group of majors answered alike, oldest majors first: a single
    /// entry when the form runs the same way on every supported major.
    pub outcomes: Vec<Outcome>,
}

/// How the classifier answers for a form on some majors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The majors this answer holds for.
    pub majors: Vec<u32>,
    /// The route's stable name (`native`, `native-sequence`, `copy-and-swap`,
    /// `refused`), as `Route::name` gives it and `plan` reports it.
    pub route: &'static str,
    /// The refusal cause, when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<&'static str>,
    /// The steps of a safer native sequence, as SQL, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// The heaviest work among its operations.
    pub work: WorkClass,
    /// The strongest lock mode the statement as written takes on any relation (related
    /// relations described by role included); none for statements that lock nothing.
    pub lock: Option<LockMode>,
    /// Where it may run relative to transaction blocks.
    pub transaction: TransactionUse,
}

impl Outcome {
    fn of(major: u32, classification: &Classification) -> Self {
        let steps = match &classification.route {
            Route::NativeSequence { steps } => steps.iter().map(|step| step.sql.clone()).collect(),
            _ => Vec::new(),
        };
        Outcome {
            majors: vec![major],
            route: classification.route.name(),
            refusal: classification
                .route
                .refusal()
                .map(|refusal| refusal.cause.name()),
            steps,
            work: classification.work,
            lock: classification.strongest_mode(),
            transaction: classification.transaction,
        }
    }

    /// Whether two answers are the same but for their majors.
    fn same_answer(&self, other: &Outcome) -> bool {
        Outcome {
            majors: Vec::new(),
            ..self.clone()
        } == Outcome {
            majors: Vec::new(),
            ..other.clone()
        }
    }
}

/// The context the matrix classifies in on `major`: offline, outside a transaction
/// block, with the major's `server_version_num`.
pub fn context_for(major: u32) -> Context<'static> {
    Context {
        server_version_num: i32::try_from(major * 10_000).ok(),
        ..Context::default()
    }
}

/// Every form of [`FORMS_SQL`], classified on every major of [`MAJORS`].
pub fn matrix() -> Result<Vec<Form>, pgshift_sql::ParseError> {
    let statements = pgshift_sql::parse(FORMS_SQL)?;
    Ok(statements
        .iter()
        .map(|statement| {
            let mut form = Form {
                sql: statement.text.clone(),
                statement: "unclassified",
                operations: Vec::new(),
                outcomes: Vec::new(),
            };
            for major in MAJORS {
                let classification = classify(statement, &context_for(major));
                form.statement = classification.statement;
                for op in &classification.operations {
                    if !form.operations.contains(&op.kind) {
                        form.operations.push(op.kind);
                    }
                }
                let outcome = Outcome::of(major, &classification);
                match form.outcomes.last_mut() {
                    Some(last) if last.same_answer(&outcome) => last.majors.push(major),
                    _ => form.outcomes.push(outcome),
                }
            }
            form
        })
        .collect())
}

/// The operation kinds of [`OperationKind::ALL`] that no form of the matrix produces on
/// any major: empty while the form table covers the classifier's vocabulary.
pub fn uncovered_kinds(forms: &[Form]) -> Vec<OperationKind> {
    let covered: BTreeSet<usize> = forms
        .iter()
        .flat_map(|form| &form.operations)
        .filter_map(|kind| OperationKind::ALL.iter().position(|k| k == kind))
        .collect();
    OperationKind::ALL
        .iter()
        .enumerate()
        .filter(|(index, _)| !covered.contains(index))
        .map(|(_, kind)| *kind)
        .collect()
}

/// How many forms take each route on one major.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MajorSummary {
    /// The major.
    pub major: u32,
    /// Forms that run as written.
    pub native: usize,
    /// Forms run as a safer native sequence.
    pub native_sequence: usize,
    /// Forms run through copy-and-swap.
    pub copy_and_swap: usize,
    /// Forms refused.
    pub refused: usize,
}

/// The route counts of the matrix per major, oldest first.
pub fn summary(forms: &[Form]) -> Vec<MajorSummary> {
    MAJORS
        .iter()
        .map(|&major| {
            let mut summary = MajorSummary {
                major,
                ..MajorSummary::default()
            };
            for outcome in forms
                .iter()
                .flat_map(|form| &form.outcomes)
                .filter(|outcome| outcome.majors.contains(&major))
            {
                match outcome.route {
                    "native" => summary.native += 1,
                    "native-sequence" => summary.native_sequence += 1,
                    "copy-and-swap" => summary.copy_and_swap += 1,
                    _ => summary.refused += 1,
                }
            }
            summary
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forms() -> Vec<Form> {
        matrix().expect("the form table parses")
    }

    fn form<'a>(forms: &'a [Form], sql: &str) -> &'a Form {
        forms
            .iter()
            .find(|form| form.sql == sql)
            .unwrap_or_else(|| panic!("no form {sql:?}"))
    }

    #[test]
    fn every_operation_kind_has_a_form() {
        let missing = uncovered_kinds(&forms());
        assert!(
            missing.is_empty(),
            "add a form producing each of these kinds to {FORMS_PATH}: {missing:?}"
        );
    }

    #[test]
    fn every_form_answers_for_every_major_once() {
        for form in forms() {
            let majors: Vec<u32> = form
                .outcomes
                .iter()
                .flat_map(|outcome| outcome.majors.clone())
                .collect();
            assert_eq!(majors, MAJORS, "{}", form.sql);
            for pair in form.outcomes.windows(2) {
                assert!(!pair[0].same_answer(&pair[1]), "{}: split alike", form.sql);
            }
        }
    }

    #[test]
    fn each_outcome_is_the_classifiers_own_answer() {
        let statements = pgshift_sql::parse(FORMS_SQL).expect("parses");
        let forms = forms();
        assert_eq!(statements.len(), forms.len());
        for (statement, form) in statements.iter().zip(&forms) {
            for outcome in &form.outcomes {
                for &major in &outcome.majors {
                    let classification = classify(statement, &context_for(major));
                    assert_eq!(outcome.route, classification.route.name(), "{}", form.sql);
                    assert_eq!(outcome.work, classification.work, "{}", form.sql);
                    assert_eq!(
                        outcome.lock,
                        classification.strongest_mode(),
                        "{}",
                        form.sql
                    );
                }
            }
        }
    }

    #[test]
    fn version_dependent_forms_differ_by_major() {
        let forms = forms();
        let virtual_column = form(
            &forms,
            "ALTER TABLE events ADD COLUMN body_len_v int GENERATED ALWAYS AS (length(content)) VIRTUAL",
        );
        let routes: Vec<(&[u32], &str, Option<&str>)> = virtual_column
            .outcomes
            .iter()
            .map(|o| (o.majors.as_slice(), o.route, o.refusal))
            .collect();
        assert_eq!(
            routes,
            [
                (&[14, 15, 16, 17][..], "refused", Some("server-too-old")),
                (&[18][..], "native", None),
            ]
        );
        let set_expression = form(
            &forms,
            "ALTER TABLE events ALTER COLUMN search_tsv SET EXPRESSION AS (to_tsvector('english', content))",
        );
        assert_eq!(set_expression.outcomes.len(), 2);
        assert_eq!(set_expression.outcomes[0].majors, [14, 15, 16]);
        assert_eq!(set_expression.outcomes[0].route, "refused");
    }

    #[test]
    fn forms_alike_on_every_major_have_one_outcome() {
        let forms = forms();
        let index = form(&forms, "CREATE INDEX events_kind_idx ON events (kind)");
        assert_eq!(index.outcomes.len(), 1);
        assert_eq!(index.outcomes[0].majors, MAJORS);
        assert_eq!(index.outcomes[0].route, "native-sequence");
        assert_eq!(index.operations, [OperationKind::CreateIndex]);
    }

    #[test]
    fn summary_counts_every_form_on_every_major() {
        let forms = forms();
        for summary in summary(&forms) {
            let total =
                summary.native + summary.native_sequence + summary.copy_and_swap + summary.refused;
            assert_eq!(total, forms.len(), "PostgreSQL {}", summary.major);
        }
    }
}
