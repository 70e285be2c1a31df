//! The libpq connection URI grammar.
//!
//! `postgres[ql]://[user[:password]@][host][:port][,host[:port]…][/dbname][?key=value&…]`
//! where every part is percent-decoded, a host may be a bracketed IPv6 literal or a
//! percent-encoded socket directory (`%2Ftmp`), and query parameters use the same
//! names as `key=value` strings (plus libpq's `ssl=true`, meaning
//! `sslmode=require`). Errors report byte offsets only, never text.

use super::error::ConnectError;
use super::params::{key_named, Param};

/// The byte offset after the URL scheme, if `text` is a connection URI.
pub(crate) fn strip_scheme(text: &str) -> Option<usize> {
    ["postgresql://", "postgres://"]
        .into_iter()
        .find(|scheme| text.starts_with(scheme))
        .map(str::len)
}

/// Parses the URI `text` whose authority starts at byte `start`.
pub(crate) fn parse(text: &str, start: usize) -> Result<Vec<(Param, String)>, ConnectError> {
    let mut cursor = Cursor { text, pos: start };
    let mut pairs = Vec::new();
    cursor.user_info(&mut pairs)?;
    cursor.hosts(&mut pairs)?;
    if cursor.eat(b'/') {
        let from = cursor.pos;
        let raw = cursor.take_until(b"?");
        let dbname = decode(raw, from)?;
        if !dbname.is_empty() {
            pairs.push((Param::DbName, dbname));
        }
    }
    if cursor.eat(b'?') {
        cursor.query(&mut pairs)?;
    }
    if cursor.pos != text.len() {
        return Err(syntax(cursor.pos, "unexpected character in connection uri"));
    }
    Ok(pairs)
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.pos += 1;
        }
        found
    }

    /// Advances to the next byte in `stops` (or the end) and returns what was skipped.
    fn take_until(&mut self, stops: &[u8]) -> &'a str {
        let from = self.pos;
        while self.peek().is_some_and(|byte| !stops.contains(&byte)) {
            self.pos += 1;
        }
        &self.text[from..self.pos]
    }

    /// `user[:password]@`, present only when an `@` comes before the path or query.
    fn user_info(&mut self, pairs: &mut Vec<(Param, String)>) -> Result<(), ConnectError> {
        let rest = &self.text.as_bytes()[self.pos..];
        let Some(at) = rest
            .iter()
            .position(|byte| matches!(byte, b'@' | b'/' | b'?'))
            .filter(|&index| rest[index] == b'@')
        else {
            return Ok(());
        };
        let from = self.pos;
        let info = &self.text[from..from + at];
        let (user, password) = match info.find(':') {
            Some(colon) => (&info[..colon], Some((&info[colon + 1..], from + colon + 1))),
            None => (info, None),
        };
        let user = decode(user, from)?;
        if !user.is_empty() {
            pairs.push((Param::User, user));
        }
        if let Some((password, offset)) = password {
            pairs.push((Param::Password, decode(password, offset)?));
        }
        self.pos = from + at + 1;
        Ok(())
    }

    /// `host[:port][,host[:port]…]`; stores `host` and `port` as comma lists.
    fn hosts(&mut self, pairs: &mut Vec<(Param, String)>) -> Result<(), ConnectError> {
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        loop {
            hosts.push(self.host()?);
            let port = if self.eat(b':') {
                let from = self.pos;
                decode(self.take_until(b"/?,"), from)?
            } else {
                String::new()
            };
            ports.push(port);
            if !self.eat(b',') {
                break;
            }
        }
        if hosts.iter().any(|host| !host.is_empty()) || hosts.len() > 1 {
            pairs.push((Param::Host, hosts.join(",")));
        }
        if ports.iter().any(|port| !port.is_empty()) {
            pairs.push((Param::Port, ports.join(",")));
        }
        Ok(())
    }

    /// One host: a bracketed IPv6 literal or a percent-encoded name or socket path.
    fn host(&mut self) -> Result<String, ConnectError> {
        let open = self.pos;
        if self.eat(b'[') {
            let literal = self.take_until(b"]");
            if !self.eat(b']') {
                return Err(syntax(open, "unterminated ipv6 address, missing \"]\""));
            }
            if literal.is_empty() {
                return Err(syntax(open, "empty ipv6 address"));
            }
            return decode(literal, open + 1);
        }
        decode(self.take_until(b":/?,"), open)
    }

    /// `key=value&key=value…` up to the end of the text.
    fn query(&mut self, pairs: &mut Vec<(Param, String)>) -> Result<(), ConnectError> {
        while self.pos < self.text.len() {
            let from = self.pos;
            let item = self.take_until(b"&");
            self.eat(b'&');
            if item.is_empty() {
                continue;
            }
            let Some(equals) = item.find('=') else {
                return Err(syntax(from, "missing \"=\" in uri query parameter"));
            };
            let value_at = from + equals + 1;
            if item[equals + 1..].contains('=') {
                return Err(syntax(value_at, "extra \"=\" in uri query parameter"));
            }
            let name = decode(&item[..equals], from)?;
            let value = decode(&item[equals + 1..], value_at)?;
            pairs.push(query_pair(&name, value)?);
        }
        Ok(())
    }
}

/// Maps a query parameter to a key, including libpq's `ssl=true` alias.
fn query_pair(name: &str, value: String) -> Result<(Param, String), ConnectError> {
    if name == "ssl" {
        return match value.as_str() {
            "true" => Ok((Param::SslMode, "require".to_owned())),
            _ => Err(ConnectError::InvalidParameter {
                key: "ssl".to_owned(),
                reason: "only ssl=true is accepted",
            }),
        };
    }
    Ok((key_named(name)?, value))
}

/// Percent-decodes `raw`, which starts at byte `offset` of the connection string.
fn decode(raw: &str, offset: usize) -> Result<String, ConnectError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'%' {
            out.push(bytes[index]);
            index += 1;
            continue;
        }
        let high = bytes.get(index + 1).copied().and_then(hex_value);
        let low = bytes.get(index + 2).copied().and_then(hex_value);
        let (Some(high), Some(low)) = (high, low) else {
            return Err(syntax(offset + index, "invalid percent-encoded token"));
        };
        let byte = high * 16 + low;
        if byte == 0 {
            return Err(syntax(
                offset + index,
                "forbidden value %00 in percent-encoded value",
            ));
        }
        out.push(byte);
        index += 3;
    }
    String::from_utf8(out).map_err(|_| syntax(offset, "percent-decoded value is not utf-8"))
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

fn syntax(position: usize, reason: &'static str) -> ConnectError {
    ConnectError::InvalidSyntax { position, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(&'static str, String)> {
        let start = strip_scheme(text).expect("a uri");
        parse(text, start)
            .expect("parses")
            .into_iter()
            .map(|(key, value)| (key.name(), value))
            .collect()
    }

    fn pair(key: &'static str, value: &str) -> (&'static str, String) {
        (key, value.to_owned())
    }

    #[test]
    fn both_schemes_are_recognised() {
        assert_eq!(strip_scheme("postgres://h"), Some(11));
        assert_eq!(strip_scheme("postgresql://h"), Some(13));
        assert_eq!(strip_scheme("mysql://h"), None);
        assert_eq!(strip_scheme("host=postgres://"), None);
    }

    #[test]
    fn full_uri_parses() {
        assert_eq!(
            pairs("postgresql://alice:s3cret@db.example:5433/app?sslmode=verify-full"),
            vec![
                pair("user", "alice"),
                pair("password", "s3cret"),
                pair("host", "db.example"),
                pair("port", "5433"),
                pair("dbname", "app"),
                pair("sslmode", "verify-full"),
            ]
        );
    }

    #[test]
    fn bare_scheme_sets_nothing() {
        assert!(pairs("postgres://").is_empty());
        assert!(pairs("postgres:///").is_empty());
    }

    #[test]
    fn percent_encoding_is_decoded_everywhere() {
        assert_eq!(
            pairs("postgres://us%40er:p%3Ass%2Fw@%2Fvar%2Frun%2Fpostgresql/my%20db?options=-c%20x%3D1"),
            vec![
                pair("user", "us@er"),
                pair("password", "p:ss/w"),
                pair("host", "/var/run/postgresql"),
                pair("dbname", "my db"),
                pair("options", "-c x=1"),
            ]
        );
    }

    #[test]
    fn socket_directory_in_query_parameters() {
        assert_eq!(
            pairs("postgres:///app?host=/tmp&port=5499&sslmode=disable"),
            vec![
                pair("dbname", "app"),
                pair("host", "/tmp"),
                pair("port", "5499"),
                pair("sslmode", "disable"),
            ]
        );
    }

    #[test]
    fn ipv6_literals_keep_their_colons() {
        assert_eq!(
            pairs("postgres://[::1]:5433/db"),
            vec![
                pair("host", "::1"),
                pair("port", "5433"),
                pair("dbname", "db")
            ]
        );
        assert_eq!(
            pairs("postgres://[fe80::1%25eth0]/db"),
            vec![pair("host", "fe80::1%eth0"), pair("dbname", "db")]
        );
    }

    #[test]
    fn multiple_hosts_become_comma_lists() {
        assert_eq!(
            pairs("postgres://a:1,[::1],c:3/db"),
            vec![
                pair("host", "a,::1,c"),
                pair("port", "1,,3"),
                pair("dbname", "db")
            ]
        );
    }

    #[test]
    fn user_without_password_and_empty_password() {
        assert_eq!(
            pairs("postgres://bob@h"),
            vec![pair("user", "bob"), pair("host", "h")]
        );
        assert_eq!(
            pairs("postgres://bob:@h"),
            vec![pair("user", "bob"), pair("password", ""), pair("host", "h")]
        );
    }

    #[test]
    fn ssl_true_means_require() {
        assert_eq!(
            pairs("postgres://h?ssl=true"),
            vec![pair("host", "h"), pair("sslmode", "require")]
        );
    }

    #[test]
    fn unknown_query_parameter_names_the_key() {
        let text = "postgres://u:hunter2@h/db?fallback_application_name=x";
        let error = parse(text, 11).expect_err("unknown key");
        assert!(
            matches!(&error, ConnectError::UnknownParameter { key } if key == "fallback_application_name")
        );
        assert!(!format!("{error} {error:?}").contains("hunter2"));
    }

    #[test]
    fn malformed_uris_report_positions() {
        let cases = [
            ("postgres://h/db?sslmode", 16),
            ("postgres://h/db?a=b=c", 18),
            ("postgres://[::1/db", 11),
            ("postgres://[]/db", 11),
            ("postgres://h%zz/db", 12),
            ("postgres://h%00/db", 12),
            ("postgres://[::1]x", 16),
        ];
        for (text, expected) in cases {
            match parse(text, 11) {
                Err(ConnectError::InvalidSyntax { position, .. }) => {
                    assert_eq!(position, expected, "{text}")
                }
                other => panic!("{text}: expected a syntax error, got {other:?}"),
            }
        }
    }

    #[test]
    fn password_never_appears_in_syntax_errors() {
        let error = parse("postgres://u:hun%zzter2@h", 11).expect_err("bad escape");
        assert!(!format!("{error} {error:?}").contains("hun"));
    }
}
