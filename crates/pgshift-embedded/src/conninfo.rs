//! Connection strings: libpq `key=value` form and `postgresql://` URLs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The superuser every throwaway cluster has (`initdb -U postgres`).
pub(crate) const SUPERUSER: &str = "postgres";

/// Where a server can be reached: its unix socket directory and port, and
/// whether it also listens on 127.0.0.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) socket_dir: PathBuf,
    pub(crate) port: u16,
    pub(crate) tcp: bool,
}

impl Endpoint {
    /// `host=<socket dir> port=<port> user=postgres dbname=<db>`.
    pub(crate) fn connection_string(&self, dbname: &str) -> String {
        let host = self.socket_dir.to_string_lossy();
        let port = self.port.to_string();
        key_value(&[
            ("host", &host),
            ("port", &port),
            ("user", SUPERUSER),
            ("dbname", dbname),
        ])
    }

    /// `host=127.0.0.1 port=<port> user=postgres dbname=<db>`, if listening on TCP.
    pub(crate) fn tcp_connection_string(&self, dbname: &str) -> Option<String> {
        let port = self.port.to_string();
        self.tcp.then(|| {
            key_value(&[
                ("host", "127.0.0.1"),
                ("port", &port),
                ("user", SUPERUSER),
                ("dbname", dbname),
            ])
        })
    }

    /// `postgresql://postgres@<percent-encoded socket dir>:<port>/<db>`.
    pub(crate) fn url(&self, dbname: &str) -> String {
        format!(
            "postgresql://{SUPERUSER}@{}:{}/{}",
            percent_encode(&self.socket_dir.to_string_lossy()),
            self.port,
            percent_encode(dbname)
        )
    }

    /// The socket directory.
    pub(crate) fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }
}

/// A libpq `key=value` pair list, values quoted when needed.
pub(crate) fn key_value(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(key);
        out.push('=');
        out.push_str(&quote_value(value));
    }
    out
}

/// Quotes a libpq connection-string value: single quotes when it is empty or
/// holds whitespace, `'` or `\`, with `'` and `\` backslash-escaped inside.
pub(crate) fn quote_value(value: &str) -> String {
    let needs_quotes = value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c == '\'' || c == '\\');
    if !needs_quotes {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Percent-encodes everything except RFC 3986 unreserved characters.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_libpq() {
        assert_eq!(quote_value("/tmp/x"), "/tmp/x");
        assert_eq!(quote_value(""), "''");
        assert_eq!(quote_value("a b"), "'a b'");
        assert_eq!(quote_value(r"it's\"), r"'it\'s\\'");
        assert_eq!(
            key_value(&[("host", "/tmp/a b"), ("port", "5432")]),
            "host='/tmp/a b' port=5432"
        );
    }

    #[test]
    fn encodes_socket_dirs() {
        assert_eq!(percent_encode("/tmp/pg-1/sock"), "%2Ftmp%2Fpg-1%2Fsock");
        assert_eq!(percent_encode("db name"), "db%20name");
    }
}
