//! Identifier and literal quoting: the only way pgshift puts a name or a value into SQL
//! text that it writes itself.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Quotes an identifier for PostgreSQL, always (even when it would be valid bare), so
/// that reserved words, mixed case, spaces and quotes are all safe.
///
/// ```
/// assert_eq!(pgshift_sql::quote_ident("user"), "\"user\"");
/// assert_eq!(pgshift_sql::quote_ident("a\"b"), "\"a\"\"b\"");
/// ```
pub fn quote_ident(name: &str) -> String {
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for ch in name.chars() {
        if ch == '"' {
            quoted.push('"');
        }
        quoted.push(ch);
    }
    quoted.push('"');
    quoted
}

/// Quotes a string literal for PostgreSQL with standard conforming strings (`E''` is
/// never produced; a backslash stays a backslash).
///
/// Prefer query parameters; this exists for the few places PostgreSQL does not accept
/// one (for example `SET LOCAL` values and DDL).
///
/// ```
/// assert_eq!(pgshift_sql::quote_literal("it's"), "'it''s'");
/// ```
pub fn quote_literal(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for ch in value.chars() {
        if ch == '\'' {
            quoted.push('\'');
        }
        quoted.push(ch);
    }
    quoted.push('\'');
    quoted
}

/// A relation name as written in a statement: an optional schema and a name, both
/// already case-folded by the grammar (unquoted names are lower case).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QualifiedName {
    /// The schema, when the statement named one.
    pub schema: Option<String>,
    /// The relation's own name.
    pub name: String,
}

impl QualifiedName {
    /// A name with no schema.
    pub fn bare(name: impl Into<String>) -> Self {
        QualifiedName {
            schema: None,
            name: name.into(),
        }
    }

    /// A schema-qualified name.
    pub fn qualified(schema: impl Into<String>, name: impl Into<String>) -> Self {
        QualifiedName {
            schema: Some(schema.into()),
            name: name.into(),
        }
    }

    /// Whether `other` names the same relation as written (same schema when both have
    /// one, else the same name).
    pub fn matches(&self, other: &QualifiedName) -> bool {
        self.name == other.name
            && match (&self.schema, &other.schema) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

impl fmt::Display for QualifiedName {
    /// Writes the name quoted and ready for SQL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(schema) = &self.schema {
            write!(f, "{}.", quote_ident(schema))?;
        }
        write!(f, "{}", quote_ident(&self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_every_part() {
        let name = QualifiedName::qualified("my schema", "Order");
        assert_eq!(name.to_string(), "\"my schema\".\"Order\"");
        assert_eq!(QualifiedName::bare("t").to_string(), "\"t\"");
    }

    #[test]
    fn matches_ignores_missing_schema() {
        let bare = QualifiedName::bare("t");
        let qualified = QualifiedName::qualified("s", "t");
        assert!(bare.matches(&qualified));
        assert!(!QualifiedName::qualified("x", "t").matches(&qualified));
    }

    #[test]
    fn quoted_identifiers_round_trip_through_the_grammar() {
        for name in ["select", "a b", "x\"y", "Çé", "", "semi;colon"] {
            if name.is_empty() {
                continue;
            }
            let sql = format!("SELECT 1 FROM {}", quote_ident(name));
            let parsed = crate::parse(&sql).expect("quoted identifier parses");
            assert_eq!(parsed.len(), 1);
        }
    }
}
