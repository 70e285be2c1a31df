//! A table named on the command line (`--allow-blocking TABLE`, `resume TABLE`, …):
//! `table` or `schema.table`, each part an SQL identifier, unquoted (folded to lower
//! case as PostgreSQL folds it) or double-quoted (kept as written, `""` for a quote).
//! Anything else — an empty name, three parts, a stray quote, a character an unquoted
//! identifier cannot hold — is rejected with a message saying what is wrong, so that a
//! typo never silently names nothing.

use pgshift_sql::QualifiedName;

/// The longest identifier PostgreSQL keeps (`NAMEDATALEN - 1` bytes); longer ones it
/// truncates, which would name a different table than the one written.
const MAX_IDENTIFIER_BYTES: usize = 63;

/// Parses `text` as `table` or `schema.table` (a clap value parser).
pub fn parse(text: &str) -> Result<QualifiedName, String> {
    let parts = split(text)?;
    match parts.as_slice() {
        [name] => Ok(QualifiedName::bare(name.clone())),
        [schema, name] => Ok(QualifiedName::qualified(schema.clone(), name.clone())),
        _ => Err(format!(
            "{text:?} has {} dot-separated parts; give `table` or `schema.table` (quote a name that holds a dot: \"my.table\")",
            parts.len()
        )),
    }
}

/// The identifiers of `text`, split at dots outside double quotes.
fn split(text: &str) -> Result<Vec<String>, String> {
    if text.trim().is_empty() {
        return Err("the table name is empty; give `table` or `schema.table`".to_owned());
    }
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let part = if chars.peek() == Some(&'"') {
            chars.next();
            quoted(&mut chars, text)?
        } else {
            unquoted(&mut chars, text)?
        };
        if part.len() > MAX_IDENTIFIER_BYTES {
            return Err(format!(
                "{part:?} is longer than {MAX_IDENTIFIER_BYTES} bytes, which PostgreSQL would truncate to another name"
            ));
        }
        parts.push(part);
        match chars.next() {
            None => return Ok(parts),
            Some('.') => {}
            Some(other) => {
                return Err(format!(
                    "{text:?}: unexpected {other:?} after a name; give `table` or `schema.table`"
                ))
            }
        }
    }
}

/// A double-quoted identifier after its opening quote: up to the closing quote, `""`
/// standing for one quote.
fn quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    text: &str,
) -> Result<String, String> {
    let mut part = String::new();
    loop {
        match chars.next() {
            None => return Err(format!("{text:?}: a double quote is not closed")),
            Some('"') if chars.peek() == Some(&'"') => {
                chars.next();
                part.push('"');
            }
            Some('"') => break,
            Some(c) => part.push(c),
        }
    }
    if part.is_empty() {
        return Err(format!("{text:?}: a quoted name is empty"));
    }
    Ok(part)
}

/// An unquoted identifier: a letter, `_` or a non-ASCII character first, then also
/// digits and `$`; folded to lower case (ASCII only, as the server folds it).
fn unquoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    text: &str,
) -> Result<String, String> {
    let mut part = String::new();
    while let Some(&c) = chars.peek() {
        let allowed = if part.is_empty() {
            c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
        } else {
            c.is_ascii_alphanumeric() || c == '_' || c == '$' || !c.is_ascii()
        };
        if !allowed {
            break;
        }
        part.push(c.to_ascii_lowercase());
        chars.next();
    }
    if part.is_empty() {
        return Err(match chars.peek() {
            Some(&c) => format!(
                "{text:?}: {c:?} cannot start an unquoted name; double-quote a name that is not a plain identifier"
            ),
            None => format!("{text:?}: a name is missing after the dot"),
        });
    }
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::parse;
    use pgshift_sql::QualifiedName;

    #[test]
    fn names_fold_case_unless_quoted() {
        assert_eq!(parse("Events"), Ok(QualifiedName::bare("events")));
        assert_eq!(
            parse("app.events"),
            Ok(QualifiedName::qualified("app", "events"))
        );
        assert_eq!(
            parse("\"My\".\"Tab\"\"le\""),
            Ok(QualifiedName::qualified("My", "Tab\"le"))
        );
        assert_eq!(parse("\"a.b\""), Ok(QualifiedName::bare("a.b")));
        assert_eq!(parse("t$1"), Ok(QualifiedName::bare("t$1")));
        assert_eq!(parse("données"), Ok(QualifiedName::bare("données")));
    }

    #[test]
    fn malformed_names_are_rejected_with_a_reason() {
        for (text, says) in [
            ("", "empty"),
            ("  ", "empty"),
            ("a.b.c", "3 dot-separated parts"),
            ("\"abc", "not closed"),
            ("ab\"c", "unexpected '\"'"),
            ("\"\"", "quoted name is empty"),
            ("a.", "missing after the dot"),
            (".a", "cannot start"),
            ("1abc", "cannot start"),
            ("a b", "unexpected ' '"),
            ("a;drop", "unexpected ';'"),
            ("'items'", "cannot start"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(says), "{text:?}: {err}");
        }
        let long = "x".repeat(64);
        assert!(parse(&long).expect_err("long").contains("longer than 63"));
        assert!(parse(&"x".repeat(63)).is_ok());
    }
}
