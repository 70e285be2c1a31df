//! [`TableRef`]: the table the load writes to and the oracle checks, always
//! rendered as a quoted identifier so that any name is safe in SQL text.
//!
//! A name is resolved by the server when a statement runs: after a
//! copy-and-swap, `events` names a different relation than before, which is the
//! point (the oracle checks what the application sees). To check one relation
//! whatever its name becomes, pass its schema-qualified name, e.g.
//! `TableRef::qualified("pgshift", "shadow_x")`.

use std::fmt;

/// A table name, optionally schema-qualified. `Display` quotes each part
/// (doubling embedded `"`), so the result can be pasted into SQL text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRef {
    schema: Option<String>,
    name: String,
}

impl TableRef {
    /// An unqualified name, resolved through the session's `search_path`.
    pub fn new(name: impl Into<String>) -> Self {
        TableRef {
            schema: None,
            name: name.into(),
        }
    }

    /// A schema-qualified name.
    pub fn qualified(schema: impl Into<String>, name: impl Into<String>) -> Self {
        TableRef {
            schema: Some(schema.into()),
            name: name.into(),
        }
    }

    /// The relay's `events` table.
    pub fn events() -> Self {
        TableRef::new("events")
    }

    /// The schema, if qualified.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The table name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for TableRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(schema) = &self.schema {
            write_quoted(f, schema)?;
            f.write_str(".")?;
        }
        write_quoted(f, &self.name)
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, ident: &str) -> fmt::Result {
    f.write_str("\"")?;
    f.write_str(&ident.replace('"', "\"\""))?;
    f.write_str("\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_with_embedded_quotes_doubled() {
        assert_eq!(TableRef::events().to_string(), r#""events""#);
        assert_eq!(
            TableRef::qualified("pgshift", r#"sh"adow x"#).to_string(),
            r#""pgshift"."sh""adow x""#
        );
    }
}
