//! Running one catalog query and reading its rows without panicking.
//!
//! `Row::get` panics on a NULL or a type mismatch; everything here goes through
//! `try_get` and turns surprises into [`CatalogError`]s.

use pgshift_sql::QualifiedName;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{Client, Row};

use super::error::CatalogError;

/// Runs `sql` for the fact family `step`.
pub(crate) async fn query(
    client: &Client,
    step: &'static str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, CatalogError> {
    client
        .query(sql, params)
        .await
        .map_err(|source| CatalogError::query(step, source))
}

/// One decoded row of the query of `step`.
#[derive(Clone, Copy)]
pub(crate) struct Fields<'a> {
    row: &'a Row,
    step: &'static str,
}

impl<'a> Fields<'a> {
    /// Wraps a row of the query of `step`.
    pub(crate) fn new(row: &'a Row, step: &'static str) -> Self {
        Fields { row, step }
    }

    /// The column `column`, decoded as `T` (use `Option<T>` where NULL may appear).
    pub(crate) fn get<T: FromSql<'a>>(&self, column: &'static str) -> Result<T, CatalogError> {
        self.row
            .try_get(column)
            .map_err(|source| CatalogError::Decode {
                step: self.step,
                column,
                source,
            })
    }

    /// A `"char"` column, `None` when it is NULL or the zero byte (`''`).
    pub(crate) fn char(&self, column: &'static str) -> Result<Option<char>, CatalogError> {
        Ok(self.get::<Option<i8>>(column)?.and_then(char_of))
    }

    /// A `"char"` column that must hold a character.
    pub(crate) fn required_char(&self, column: &'static str) -> Result<char, CatalogError> {
        self.char(column)?.ok_or(CatalogError::UnexpectedValue {
            step: self.step,
            what: column,
        })
    }

    /// A text column computed by a `pg_get_*` function for the object `oid`: NULL
    /// means the object was dropped after the snapshot was taken.
    pub(crate) fn rendered(&self, column: &'static str, oid: u32) -> Result<String, CatalogError> {
        self.get::<Option<String>>(column)?
            .ok_or(CatalogError::ChangedDuringRead {
                step: self.step,
                oid,
            })
    }

    /// A schema-qualified name from two columns.
    pub(crate) fn name(
        &self,
        schema: &'static str,
        name: &'static str,
    ) -> Result<QualifiedName, CatalogError> {
        Ok(QualifiedName::qualified(
            self.get::<String>(schema)?,
            self.get::<String>(name)?,
        ))
    }

    /// A schema-qualified name from two nullable columns (both NULL: `None`).
    pub(crate) fn optional_name(
        &self,
        schema: &'static str,
        name: &'static str,
    ) -> Result<Option<QualifiedName>, CatalogError> {
        match (
            self.get::<Option<String>>(schema)?,
            self.get::<Option<String>>(name)?,
        ) {
            (Some(schema), Some(name)) => Ok(Some(QualifiedName::qualified(schema, name))),
            _ => Ok(None),
        }
    }
}

/// The character of a `"char"` value, `None` for the zero byte.
pub(crate) fn char_of(value: i8) -> Option<char> {
    match value.to_ne_bytes()[0] {
        0 => None,
        byte => Some(char::from(byte)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_of_maps_zero_to_none() {
        assert_eq!(char_of(0), None);
        assert_eq!(char_of(b'p' as i8), Some('p'));
        assert_eq!(char_of(-1), Some('\u{ff}'));
    }
}
