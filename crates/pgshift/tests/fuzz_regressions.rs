//! Inputs the fuzz targets (`crates/pgshift-fuzz`, `docs/FUZZING.md`) found breaking a
//! property, each pinned to the behaviour that is right.

use pgshift::classify::{classify, Context};
use pgshift::refusal::RefusalCause;
use pgshift::route::Route;

fn classify_one(sql: &str) -> pgshift::classify::Classification {
    let statements = pgshift_sql::parse(sql).expect("valid SQL");
    classify(&statements[0], &Context::default())
}

/// `$0` parses, but the deparser writes it as `?`: the safer sequence pgshift wrote
/// for a CHECK constraint was not SQL. Such a statement is refused instead, and no
/// route carries SQL that does not parse.
#[test]
fn check_constraint_with_parameter_zero_is_refused_rather_than_rewritten_to_invalid_sql() {
    for sql in [
        "ALTER TABLE t ADD CONSTRAINT c CHECK (a >= $0)",
        "ALTER TABLE \"select\" ADD CONSTRAINT \"check: \"\"table\"\"\" CHECK (\"table\" >= $0)",
    ] {
        let classification = classify_one(sql);
        if let Route::NativeSequence { steps } = &classification.route {
            for step in steps {
                let parsed = pgshift_sql::parse(&step.sql);
                assert!(
                    parsed.is_ok_and(|s| s.len() == 1),
                    "a step of {sql} is not one statement: {}",
                    step.sql
                );
            }
        }
        let refusal = classification.route.refusal().expect("refused");
        assert_eq!(refusal.cause, RefusalCause::UnclassifiedStatement, "{sql}");
    }
}

/// The same constraint with a real parameter number keeps its safer sequence.
#[test]
fn check_constraint_with_parameter_one_keeps_its_safer_sequence() {
    let classification = classify_one("ALTER TABLE t ADD CONSTRAINT c CHECK (a >= $1)");
    let Route::NativeSequence { steps } = &classification.route else {
        panic!("{:?}", classification.route);
    };
    assert!(
        steps.iter().any(|step| step.sql.contains("$1")),
        "{steps:?}"
    );
}
