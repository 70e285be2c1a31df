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
/// The text is parsed back before it is returned: a tree the deparser cannot write
/// faithfully (for example a `$0` parameter, which it writes as `?`) is an error, not
/// SQL that pgshift would then run.
///
/// ```
/// let stmts = pgshift_sql::parse("create index i on t(a)").unwrap();
/// assert_eq!(pgshift_sql::deparse(&stmts[0].node).unwrap(), "CREATE INDEX i ON t USING btree (a)");
/// ```
pub fn deparse(node: &NodeEnum) -> Result<String, DeparseError> {
    // The C deparser reports unknown nodes as errors; a panic in the wrapper would be a
    // bug there, which is still turned into an error here rather than a crash.
    let sql = std::panic::catch_unwind(|| node.deparse(Default::default()))
        .map_err(|_| DeparseError {
            message: "the deparser panicked".to_owned(),
        })?
        .map_err(|err| DeparseError {
            message: err.to_string(),
        })?;
    match crate::parse(&sql) {
        Ok(statements) if statements.len() == 1 => Ok(sql),
        _ => Err(DeparseError {
            message: format!(
                "the deparser wrote SQL that does not parse back as one statement: {sql}"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deparse_refuses_a_parameter_it_cannot_write_back() {
        let statements = crate::parse("ALTER TABLE t ADD CONSTRAINT c CHECK (a >= $0) NOT VALID")
            .expect("the grammar takes $0");
        let err = deparse(&statements[0].node).expect_err("$0 is written as ?");
        assert!(err.to_string().contains("does not parse back"), "{err}");
    }

    #[test]
    fn deparse_keeps_numbered_parameters() {
        let statements = crate::parse("ALTER TABLE t ADD CONSTRAINT c CHECK (a >= $1) NOT VALID")
            .expect("valid SQL");
        let sql = deparse(&statements[0].node).expect("$1 deparses");
        assert!(sql.contains("$1"), "{sql}");
    }
}
