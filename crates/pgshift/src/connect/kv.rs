//! The libpq `key=value` connection string grammar.
//!
//! Pairs are separated by whitespace; spaces around `=` are allowed; a value is either
//! a run of non-space characters or a single-quoted string, and in both a backslash
//! takes the next character literally. Errors report byte offsets only, never text,
//! so a malformed string cannot leak its password into a message.

use super::error::ConnectError;
use super::params::{key_named, Param};

/// Parses `text` into `(key, value)` pairs in order of appearance.
pub(crate) fn parse(text: &str) -> Result<Vec<(Param, String)>, ConnectError> {
    let bytes = text.as_bytes();
    let mut pairs = Vec::new();
    let mut pos = skip_space(bytes, 0);
    while pos < bytes.len() {
        let key_start = pos;
        while pos < bytes.len() && !is_space(bytes[pos]) && bytes[pos] != b'=' {
            pos += 1;
        }
        if pos == key_start {
            return Err(syntax(pos, "missing parameter name before \"=\""));
        }
        let name = &text[key_start..pos];
        pos = skip_space(bytes, pos);
        if bytes.get(pos) != Some(&b'=') {
            return Err(syntax(pos, "missing \"=\" after parameter name"));
        }
        pos = skip_space(bytes, pos + 1);
        let (value, next) = if bytes.get(pos) == Some(&b'\'') {
            quoted_value(bytes, pos)?
        } else {
            bare_value(bytes, pos)
        };
        let value = String::from_utf8(value).map_err(|_| syntax(pos, "value is not utf-8"))?;
        pairs.push((key_named(name)?, value));
        pos = skip_space(bytes, next);
    }
    Ok(pairs)
}

/// Reads an unquoted value starting at `pos`; returns it and the offset after it.
fn bare_value(bytes: &[u8], mut pos: usize) -> (Vec<u8>, usize) {
    let mut value = Vec::new();
    while pos < bytes.len() && !is_space(bytes[pos]) {
        if bytes[pos] == b'\\' {
            pos += 1;
            if pos == bytes.len() {
                break;
            }
        }
        value.push(bytes[pos]);
        pos += 1;
    }
    (value, pos)
}

/// Reads a single-quoted value whose opening quote is at `open`.
fn quoted_value(bytes: &[u8], open: usize) -> Result<(Vec<u8>, usize), ConnectError> {
    let mut value = Vec::new();
    let mut pos = open + 1;
    while pos < bytes.len() {
        match bytes[pos] {
            b'\'' => return Ok((value, pos + 1)),
            b'\\' if pos + 1 < bytes.len() => {
                value.push(bytes[pos + 1]);
                pos += 2;
            }
            byte => {
                value.push(byte);
                pos += 1;
            }
        }
    }
    Err(syntax(open, "unterminated quoted string"))
}

/// Whitespace as C's `isspace` sees it, which is what libpq uses.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn skip_space(bytes: &[u8], mut pos: usize) -> usize {
    while pos < bytes.len() && is_space(bytes[pos]) {
        pos += 1;
    }
    pos
}

fn syntax(position: usize, reason: &'static str) -> ConnectError {
    ConnectError::InvalidSyntax { position, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(&'static str, String)> {
        parse(text)
            .expect("parses")
            .into_iter()
            .map(|(key, value)| (key.name(), value))
            .collect()
    }

    fn position_of(text: &str) -> usize {
        match parse(text) {
            Err(ConnectError::InvalidSyntax { position, .. }) => position,
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn plain_pairs_parse() {
        assert_eq!(
            pairs("host=db.example port=5433 user=alice dbname=app"),
            vec![
                ("host", "db.example".to_owned()),
                ("port", "5433".to_owned()),
                ("user", "alice".to_owned()),
                ("dbname", "app".to_owned()),
            ]
        );
    }

    #[test]
    fn spaces_around_equals_are_allowed() {
        assert_eq!(
            pairs("  host = /tmp \t port =5432\n"),
            vec![("host", "/tmp".to_owned()), ("port", "5432".to_owned())]
        );
    }

    #[test]
    fn quoted_values_keep_spaces_and_unescape() {
        assert_eq!(
            pairs(r"password='a b' options='-c search_path=a\,b' dbname='o\'k \\ x'"),
            vec![
                ("password", "a b".to_owned()),
                ("options", "-c search_path=a,b".to_owned()),
                ("dbname", r"o'k \ x".to_owned()),
            ]
        );
    }

    #[test]
    fn empty_quoted_value_is_empty() {
        assert_eq!(pairs("user=''"), vec![("user", String::new())]);
    }

    #[test]
    fn backslash_escapes_in_bare_values() {
        assert_eq!(
            pairs(r"password=a\ b\\c\'"),
            vec![("password", r"a b\c'".to_owned())]
        );
    }

    #[test]
    fn empty_string_has_no_pairs() {
        assert!(pairs("   ").is_empty());
    }

    #[test]
    fn missing_equals_is_a_syntax_error_with_position() {
        assert_eq!(position_of("host=a user"), 11);
        assert_eq!(position_of("=x"), 0);
    }

    #[test]
    fn unterminated_quote_is_a_syntax_error_at_the_quote() {
        assert_eq!(position_of("host=a password='secret"), 16);
    }

    #[test]
    fn unknown_key_names_the_key_only() {
        let error = parse("passfile=/x/y password=hunter2").expect_err("unknown key");
        assert!(matches!(&error, ConnectError::UnknownParameter { key } if key == "passfile"));
        assert!(!format!("{error} {error:?}").contains("/x/y"));
    }

    #[test]
    fn syntax_errors_never_contain_the_text() {
        let error = parse("password='hunter2").expect_err("unterminated");
        assert!(!format!("{error} {error:?}").contains("hunter2"));
    }
}
