//! Table-driven classification of every statement form, offline: one snapshot shows the
//! operations, locks, work class, transaction use, destructiveness and route of each
//! form in `tests/data/classify/forms.sql`, and every generated step is parsed back with
//! the real grammar.

use std::fmt::Write;

use pgshift::classify::{classify, Classification, Context};
use pgshift::route::Route;

fn render(statement: &str, classification: &Classification) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{statement}");
    let ops: Vec<String> = classification
        .operations
        .iter()
        .map(|op| {
            let mut text = serde_json::to_value(op.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            if let Some(object) = &op.object {
                text.push_str(&format!("({object})"));
            }
            if let Some(detail) = &op.detail {
                text.push_str(&format!(" [{detail}]"));
            }
            text
        })
        .collect();
    let _ = writeln!(
        out,
        "  kind: {}; ops: {}",
        classification.statement,
        ops.join(", ")
    );
    let locks: Vec<String> = classification
        .locks
        .iter()
        .map(|lock| {
            format!(
                "{} {}{}{}",
                lock.relation,
                lock.mode.sql_name(),
                if lock.recurses { " (+partitions)" } else { "" },
                lock.index_mode
                    .map(|m| format!(" (indexes {})", m.sql_name()))
                    .unwrap_or_default()
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "  locks: {}",
        if locks.is_empty() {
            "none".to_owned()
        } else {
            locks.join("; ")
        }
    );
    if !classification.related_locks.is_empty() {
        let related: Vec<String> = classification
            .related_locks
            .iter()
            .map(|lock| format!("{} {}", lock.description, lock.mode.sql_name()))
            .collect();
        let _ = writeln!(out, "  related: {}", related.join("; "));
    }
    let _ = writeln!(
        out,
        "  work: {:?}; transaction: {:?}; destructive: {}",
        classification.work, classification.transaction, classification.destructive
    );
    match &classification.route {
        Route::NativeSequence { steps } => {
            let _ = writeln!(out, "  route: native-sequence");
            for step in steps {
                let _ = writeln!(
                    out,
                    "    - {}{}",
                    step.sql,
                    if step.transactional {
                        ""
                    } else {
                        "  [outside transaction]"
                    }
                );
            }
        }
        Route::Refused { refusal } => {
            let _ = writeln!(
                out,
                "  route: refused ({}, {:?})",
                refusal.cause, refusal.class
            );
        }
        other => {
            let _ = writeln!(out, "  route: {}", other.name());
        }
    }
    out
}

#[test]
fn every_form_classifies_offline() {
    let text = include_str!("data/classify/forms.sql");
    let statements = pgshift_sql::parse(text).expect("the forms file parses");
    assert!(statements.len() > 100, "the forms file covers many forms");
    let mut out = String::new();
    for statement in &statements {
        let classification = classify(statement, &Context::default());
        out.push_str(&render(&statement.text, &classification));
    }
    insta::assert_snapshot!("offline", out);
}

// INV: CO-2 — every step pgshift writes parses back as one statement.
#[test]
fn inv_co_2_every_generated_step_parses_back() {
    let text = include_str!("data/classify/forms.sql");
    for statement in pgshift_sql::parse(text).expect("parses") {
        let classification = classify(&statement, &Context::default());
        if let Route::NativeSequence { steps } = &classification.route {
            assert!(!steps.is_empty(), "{}: empty sequence", statement.text);
            for step in steps {
                let parsed = pgshift_sql::parse(&step.sql)
                    .unwrap_or_else(|err| panic!("step {:?} does not parse: {err}", step.sql));
                assert_eq!(parsed.len(), 1, "one statement per step: {}", step.sql);
            }
        }
    }
}
