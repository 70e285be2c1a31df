//! `classify_offline` and `classify_facts`: the classifier, statement by statement.
//!
//! `classify_offline` takes a file of SQL and classifies each statement with no facts,
//! inside and outside a transaction block. `classify_facts` takes `SQL \0 choices`: the
//! SQL before the first NUL byte, and bytes after it that choose synthetic catalog
//! facts for every relation the SQL names (found, missing or unknown; tables,
//! partitioned tables, indexes, views…; their columns, keys, triggers, sizes) and the
//! server version.

use std::collections::BTreeSet;

use pgshift::classify::{classify, Classification, Context};
use pgshift_sql::QualifiedName;

use super::{check_written_sql, parsed};
use crate::facts::synthetic;
use crate::input::{split_nul, Choices};

/// Runs one input of `classify_offline`.
pub fn classify_offline(data: &[u8]) {
    let Some(statements) = parsed(data) else {
        return;
    };
    let created = BTreeSet::new();
    for statement in &statements {
        for in_transaction in [false, true] {
            let context = Context {
                facts: None,
                server_version_num: None,
                created_earlier: Some(&created),
                in_transaction,
                added_columns: None,
            };
            check(&classify(statement, &context));
        }
    }
}

/// Runs one input of `classify_facts`.
pub fn classify_facts(data: &[u8]) {
    let [sql, facts] = split_nul(data, 2)[..] else {
        return;
    };
    let Some(statements) = parsed(sql) else {
        return;
    };
    let mut choices = Choices::new(facts);
    let synthetic = synthetic(&statements, &mut choices);
    let mut created: BTreeSet<QualifiedName> = BTreeSet::new();
    let mut added: BTreeSet<(QualifiedName, String)> = BTreeSet::new();
    for statement in &statements {
        let context = Context {
            facts: Some(&synthetic.snapshot),
            server_version_num: synthetic.server_version_num,
            created_earlier: Some(&created),
            in_transaction: choices.flag(),
            added_columns: Some(&added),
        };
        let classification = classify(statement, &context);
        check(&classification);
        created.extend(classification.created_relations().cloned());
        added.extend(classification.added_columns());
    }
}

/// What holds of every classification: SQL pgshift writes parses back, and the
/// classification serializes to the JSON `plan` prints.
fn check(classification: &Classification) {
    check_written_sql(classification);
    serde_json::to_string(classification).expect("a classification serializes");
}
