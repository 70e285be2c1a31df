//! Passwords from a libpq password file (`PGPASSFILE` or `~/.pgpass`).
//!
//! Each line is `hostname:port:database:username:password`; `#` starts a comment
//! line; a field that is exactly `*` matches anything; `\` takes the next character
//! literally (so `\:` and `\\`). The first matching line wins. As in libpq, the file
//! is ignored with a warning unless it is a plain file with no group or world
//! permission bits (0600 or stricter).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The connection a password is looked up for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PassfileQuery<'a> {
    /// The host name, socket directory (or `localhost` for the default socket
    /// directory), or `hostaddr` when no host was given.
    pub(crate) host: &'a str,
    /// The port, as decimal text.
    pub(crate) port: &'a str,
    pub(crate) dbname: &'a str,
    pub(crate) user: &'a str,
}

/// The password for `query` in the file at `path`, if the file is usable and a line
/// matches. A missing file is not an error.
pub(crate) fn read_password(path: &Path, query: &PassfileQuery<'_>) -> Option<String> {
    let metadata = fs::metadata(path).ok()?;
    if !metadata.is_file() {
        tracing::warn!(path = %path.display(), "password file is not a plain file, ignoring it");
        return None;
    }
    if !permissions_ok(metadata.permissions().mode()) {
        tracing::warn!(
            path = %path.display(),
            "password file has group or world access, permissions should be u=rw (0600) or less, ignoring it"
        );
        return None;
    }
    match fs::read_to_string(path) {
        Ok(contents) => lookup(&contents, query),
        Err(error) => {
            tracing::warn!(path = %path.display(), error = %error, "password file is not readable, ignoring it");
            None
        }
    }
}

/// libpq's rule: no permission bits for group or others.
pub(crate) fn permissions_ok(mode: u32) -> bool {
    mode & 0o077 == 0
}

/// The password of the first line of `contents` that matches `query`.
pub(crate) fn lookup(contents: &str, query: &PassfileQuery<'_>) -> Option<String> {
    let wanted = [query.host, query.port, query.dbname, query.user];
    contents
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .find_map(|line| {
            let fields = split_fields(line);
            if fields.len() < 5 {
                return None;
            }
            let matches = fields
                .iter()
                .zip(wanted)
                .all(|(field, value)| field.matches(value));
            matches.then(|| fields[4].text.clone())
        })
        .filter(|password| !password.is_empty())
}

/// One `:`-separated field, unescaped.
struct Field {
    text: String,
    /// The field was exactly an unescaped `*`.
    wildcard: bool,
}

impl Field {
    fn matches(&self, value: &str) -> bool {
        self.wildcard || self.text == value
    }
}

/// Splits a line at unescaped `:` and removes the escapes.
fn split_fields(line: &str) -> Vec<Field> {
    let mut fields = Vec::new();
    let mut text = String::new();
    let mut escaped_any = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                escaped_any = true;
                if let Some(next) = chars.next() {
                    text.push(next);
                }
            }
            ':' => fields.push(finish_field(&mut text, &mut escaped_any)),
            _ => text.push(c),
        }
    }
    fields.push(finish_field(&mut text, &mut escaped_any));
    fields
}

fn finish_field(text: &mut String, escaped_any: &mut bool) -> Field {
    let field = Field {
        wildcard: text == "*" && !*escaped_any,
        text: std::mem::take(text),
    };
    *escaped_any = false;
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUERY: PassfileQuery<'static> = PassfileQuery {
        host: "db.example",
        port: "5432",
        dbname: "app",
        user: "alice",
    };

    #[test]
    fn exact_line_matches() {
        let file = "db.example:5432:app:alice:pw1\n";
        assert_eq!(lookup(file, &QUERY).as_deref(), Some("pw1"));
    }

    #[test]
    fn first_matching_line_wins_and_wildcards_match_anything() {
        let file = "# comment line\n\
                    other:5432:app:alice:nope\n\
                    *:*:app:*:pw2\n\
                    *:*:*:*:pw3\n";
        assert_eq!(lookup(file, &QUERY).as_deref(), Some("pw2"));
        let other_db = PassfileQuery {
            dbname: "other",
            ..QUERY
        };
        assert_eq!(lookup(file, &other_db).as_deref(), Some("pw3"));
    }

    #[test]
    fn star_inside_a_field_is_literal() {
        let file = "db.*:5432:app:alice:nope\n\\*:5432:app:alice:nope\n";
        assert_eq!(lookup(file, &QUERY), None);
        let starred = PassfileQuery { host: "*", ..QUERY };
        assert_eq!(lookup(file, &starred).as_deref(), Some("nope"));
    }

    #[test]
    fn escaped_colons_and_backslashes() {
        let file = "db.example:5432:app:alice:pa\\:ss\\\\word:ignored\r\n";
        assert_eq!(lookup(file, &QUERY).as_deref(), Some("pa:ss\\word"));
        let socket = PassfileQuery {
            host: "/run/pg:x",
            ..QUERY
        };
        let file = "/run/pg\\:x:5432:app:alice:sock\n";
        assert_eq!(lookup(file, &socket).as_deref(), Some("sock"));
    }

    #[test]
    fn short_lines_and_wrong_ports_do_not_match() {
        let file = "db.example:5432:app:alice\ndb.example:5433:app:alice:x\n";
        assert_eq!(lookup(file, &QUERY), None);
    }

    #[test]
    fn empty_password_is_no_password() {
        assert_eq!(lookup("*:*:*:*:\n", &QUERY), None);
    }

    #[test]
    fn permission_rule_matches_libpq() {
        assert!(permissions_ok(0o100600));
        assert!(permissions_ok(0o100400));
        assert!(!permissions_ok(0o100640));
        assert!(!permissions_ok(0o100604));
        assert!(!permissions_ok(0o100660));
    }
}
