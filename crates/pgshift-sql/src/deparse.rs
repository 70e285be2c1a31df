//! Syntax tree back to SQL text, for the statements pgshift writes itself.

use pg_query::NodeEnum;
use thiserror::Error;

/// Why a syntax tree could not be turned back into SQL.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("cannot write this statement back as SQL: {message}")]
pub struct DeparseError {
    message: String,
}

/// Writes one statement node back as SQL text (without a trailing `;`).
///
/// ```
/// let stmts = pgshift_sql::parse("create index i on t(a)").unwrap();
/// assert_eq!(pgshift_sql::deparse(&stmts[0].node).unwrap(), "CREATE INDEX i ON t USING btree (a)");
/// ```
pub fn deparse(node: &NodeEnum) -> Result<String, DeparseError> {
    // The C deparser reports unknown nodes as errors; a panic in the wrapper would be a
    // bug there, which is still turned into an error here rather than a crash.
    std::panic::catch_unwind(|| node.deparse(Default::default()))
        .map_err(|_| DeparseError {
            message: "the deparser panicked".to_owned(),
        })?
        .map_err(|err| DeparseError {
            message: err.to_string(),
        })
}
