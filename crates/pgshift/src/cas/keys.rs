//! The key a run copies, applies and verifies by: the source's primary key, of any
//! btree-orderable types, possibly composite.
//!
//! Key values travel as text (each column's output form) and are cast back to the
//! column's type in SQL (`$1::pg_catalog.text::<type>`), which round-trips exactly in
//! a session with pgshift's fixed settings (`TimeZone = UTC`, `DateStyle = ISO`,
//! `bytea_output = hex`, `extra_float_digits = 3`). Comparisons are row comparisons,
//! `(k1, k2) >= ($1, $2)`, which PostgreSQL evaluates in the key's btree order.

use serde::{Deserialize, Serialize};

use pgshift_sql::{quote_ident, NodeEnum};

/// One key column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyColumn {
    /// Column name.
    pub name: String,
    /// Its type as `format_type` writes it (`uuid`, `timestamp with time zone`).
    pub type_sql: String,
}

/// A key value: each column's text form.
pub type KeyValue = Vec<String>;

/// The key of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySpec {
    columns: Vec<KeyColumn>,
}

/// A type name that is not a single type (it would not be safe to put into SQL).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a type name pgshift can use in a key")]
pub struct BadTypeName(pub String);

impl KeySpec {
    /// A key over `columns`; every type name is checked to parse as exactly one type
    /// in a cast, so it can be written into SQL.
    pub fn new(columns: Vec<KeyColumn>) -> Result<Self, BadTypeName> {
        for column in &columns {
            check_type_name(&column.type_sql)?;
        }
        Ok(KeySpec { columns })
    }

    /// The columns.
    pub fn columns(&self) -> &[KeyColumn] {
        &self.columns
    }

    /// `("a", "b")`, optionally qualified with `alias.`.
    pub fn tuple(&self, alias: Option<&str>) -> String {
        format!("({})", self.order_by(alias))
    }

    /// `($n::pg_catalog.text::t1, $n+1::pg_catalog.text::t2)`: a key value as
    /// parameters starting at `$first`.
    pub fn params(&self, first: usize) -> String {
        let parts: Vec<String> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("${}::pg_catalog.text::{}", first + i, c.type_sql))
            .collect();
        format!("({})", parts.join(", "))
    }

    /// The select list reading a key as text: `a::pg_catalog.text, b::pg_catalog.text`.
    pub fn as_text(&self, alias: Option<&str>) -> String {
        self.columns
            .iter()
            .map(|c| match alias {
                Some(alias) => format!("{alias}.{}::pg_catalog.text", quote_ident(&c.name)),
                None => format!("{}::pg_catalog.text", quote_ident(&c.name)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `WHERE` condition for the half-open range `[lo, hi)` (either end open), with
    /// the bounds as parameters from `$first`; returns the condition and the number of
    /// parameters it uses.
    pub fn range(&self, alias: Option<&str>, lo: bool, hi: bool, first: usize) -> (String, usize) {
        let tuple = self.tuple(alias);
        let n = self.columns.len();
        let mut conditions = Vec::new();
        let mut used = 0;
        if lo {
            conditions.push(format!(
                "{tuple} OPERATOR(pg_catalog.>=) {}",
                self.params(first)
            ));
            used += n;
        }
        if hi {
            conditions.push(format!(
                "{tuple} OPERATOR(pg_catalog.<) {}",
                self.params(first + used)
            ));
            used += n;
        }
        if conditions.is_empty() {
            ("true".to_owned(), 0)
        } else {
            (conditions.join(" AND "), used)
        }
    }

    /// `"a", "b"`, optionally qualified with `alias.`: the key's columns as a list (an
    /// `ORDER BY`, a `SELECT` list, a `DISTINCT`).
    pub fn order_by(&self, alias: Option<&str>) -> String {
        let parts: Vec<String> = self
            .columns
            .iter()
            .map(|c| match alias {
                Some(alias) => format!("{alias}.{}", quote_ident(&c.name)),
                None => quote_ident(&c.name),
            })
            .collect();
        parts.join(", ")
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether the key has no columns (never, for a valid key).
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }
}

/// Checks that `type_sql` is exactly one type name, by parsing `NULL::<type>`.
fn check_type_name(type_sql: &str) -> Result<(), BadTypeName> {
    let sql = format!("SELECT NULL::{type_sql}");
    let ok = pgshift_sql::parse(&sql).ok().is_some_and(|statements| {
        statements.len() == 1
            && matches!(&statements[0].node, NodeEnum::SelectStmt(select)
                if select.target_list.len() == 1 && select.from_clause.is_empty() && select.where_clause.is_none())
    });
    if ok {
        Ok(())
    } else {
        Err(BadTypeName(type_sql.to_owned()))
    }
}

/// Key value parameters for `tokio-postgres`, in order.
pub fn params_of(values: &[&KeyValue]) -> Vec<String> {
    values.iter().flat_map(|v| v.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> KeySpec {
        KeySpec::new(vec![
            KeyColumn {
                name: "community_id".to_owned(),
                type_sql: "uuid".to_owned(),
            },
            KeyColumn {
                name: "created_at".to_owned(),
                type_sql: "timestamp with time zone".to_owned(),
            },
        ])
        .expect("valid types")
    }

    #[test]
    fn the_key_list_and_tuple_keep_names_with_parentheses_whole() {
        let key = KeySpec::new(vec![
            KeyColumn {
                name: "(a".to_owned(),
                type_sql: "integer".to_owned(),
            },
            KeyColumn {
                name: "b)".to_owned(),
                type_sql: "integer".to_owned(),
            },
        ])
        .expect("valid types");
        assert_eq!(key.order_by(None), r#""(a", "b)""#);
        assert_eq!(key.tuple(Some("l")), r#"(l."(a", l."b)")"#);
    }

    #[test]
    fn ranges_are_row_comparisons_with_typed_parameters() {
        let (sql, used) = spec().range(Some("s"), true, true, 1);
        assert_eq!(used, 4);
        assert_eq!(
            sql,
            "(s.\"community_id\", s.\"created_at\") OPERATOR(pg_catalog.>=) ($1::pg_catalog.text::uuid, $2::pg_catalog.text::timestamp with time zone) AND (s.\"community_id\", s.\"created_at\") OPERATOR(pg_catalog.<) ($3::pg_catalog.text::uuid, $4::pg_catalog.text::timestamp with time zone)"
        );
        assert_eq!(spec().range(None, false, false, 1), ("true".to_owned(), 0));
    }

    #[test]
    fn type_names_must_be_single_types() {
        assert!(KeySpec::new(vec![KeyColumn {
            name: "a".into(),
            type_sql: "integer); DROP TABLE x; --".into()
        }])
        .is_err());
        assert!(KeySpec::new(vec![KeyColumn {
            name: "a".into(),
            type_sql: "\"my type\"".into()
        }])
        .is_ok());
        assert!(KeySpec::new(vec![KeyColumn {
            name: "a".into(),
            type_sql: "character varying(32)".into()
        }])
        .is_ok());
    }
}
