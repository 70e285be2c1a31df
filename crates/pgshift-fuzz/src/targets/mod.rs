//! The targets, one module per front door, and the checks they share.

pub mod classify;
pub mod connect;
pub mod lint;
pub mod migrations;
pub mod script;
pub mod sql;

use pgshift::classify::Classification;
use pgshift::route::Route;
use pgshift_sql::Statement;

/// Parses the input as a file of SQL, the way `lint`, `plan` and `apply` do; `None`
/// when it is too large, not UTF-8 or not valid SQL.
pub(crate) fn parsed(data: &[u8]) -> Option<Vec<Statement>> {
    if !crate::input::within_limit(data) {
        return None;
    }
    let text = crate::input::text(data)?;
    pgshift_sql::parse(&text).ok()
}

/// The SQL pgshift writes itself (the steps of a safer sequence) must be one complete
/// statement of PostgreSQL's grammar: anything else would mean a name was pasted into
/// SQL unquoted, or a step that cannot run.
pub(crate) fn check_written_sql(classification: &Classification) {
    if let Route::NativeSequence { steps } = &classification.route {
        assert!(!steps.is_empty(), "a native sequence has steps");
        for step in steps {
            assert_one_statement(&step.sql);
        }
    }
}

/// `sql` parses as exactly one statement.
pub(crate) fn assert_one_statement(sql: &str) {
    match pgshift_sql::parse(sql) {
        Ok(statements) => assert_eq!(
            statements.len(),
            1,
            "SQL written by pgshift is one statement: {sql}"
        ),
        Err(err) => panic!("SQL written by pgshift parses ({err}): {sql}"),
    }
}
