//! The server settings block appended to a cluster's `postgresql.conf`.
//!
//! Settings go into the file rather than onto the command line so that a kept
//! cluster restarts with the same configuration. Later lines win, so appending
//! a second block (as a replica does over its primary's copy) overrides the
//! first.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// The settings every throwaway cluster gets, before the caller's own.
const BASE_SETTINGS: &[(&str, &str)] = &[
    ("wal_level", "logical"),
    ("max_wal_senders", "10"),
    ("max_replication_slots", "10"),
    ("fsync", "off"),
    ("full_page_writes", "off"),
    ("synchronous_commit", "on"),
    ("max_connections", "200"),
    ("max_locks_per_transaction", "256"),
    ("shared_buffers", "128MB"),
    ("log_min_messages", "warning"),
];

/// Where and how a server listens.
#[derive(Debug, Clone)]
pub(crate) struct Listen<'a> {
    /// The port (also names the unix socket file).
    pub(crate) port: u16,
    /// The directory holding the unix socket.
    pub(crate) socket_dir: &'a Path,
    /// Whether to listen on 127.0.0.1 as well.
    pub(crate) tcp: bool,
}

/// Appends the settings block to `<data_dir>/postgresql.conf`.
pub(crate) fn append_settings(
    data_dir: &Path,
    listen: &Listen<'_>,
    extra: &[(String, String)],
) -> Result<()> {
    let text = render(listen, extra)?;
    let path = data_dir.join("postgresql.conf");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

fn render(listen: &Listen<'_>, extra: &[(String, String)]) -> Result<String> {
    let socket_dir = listen
        .socket_dir
        .to_str()
        .ok_or_else(|| Error::InvalidSetting {
            name: "unix_socket_directories".to_owned(),
            value: listen.socket_dir.to_string_lossy().into_owned(),
            reason: "the path is not valid UTF-8".to_owned(),
        })?;
    let mut lines = vec![
        String::new(),
        "# ---- added by pgshift-embedded ----".to_owned(),
        format!(
            "listen_addresses = {}",
            quote(if listen.tcp { "127.0.0.1" } else { "" })
        ),
        format!("port = {}", listen.port),
        format!("unix_socket_directories = {}", quote(socket_dir)),
        "unix_socket_permissions = 0777".to_owned(),
    ];
    for (name, value) in BASE_SETTINGS {
        lines.push(format!("{name} = {}", quote(value)));
    }
    for (name, value) in extra {
        validate(name, value)?;
        lines.push(format!("{name} = {}", quote(value)));
    }
    lines.push(String::new());
    Ok(lines.join("\n"))
}

/// A `postgresql.conf` string literal: single quotes, with `'` and `\` escaped.
fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

fn validate(name: &str, value: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(Error::InvalidSetting {
            name: name.to_owned(),
            value: value.to_owned(),
            reason: reason.to_owned(),
        })
    };
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !name_ok {
        return bad("a setting name is letters, digits, `_` and `.`");
    }
    if value.contains(['\n', '\r', '\0']) {
        return bad("a value cannot contain line breaks or NUL");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_quoted_block() {
        let listen = Listen {
            port: 5555,
            socket_dir: Path::new("/tmp/x/sock"),
            tcp: false,
        };
        let extra = vec![("application_name".to_owned(), "it's a\\b".to_owned())];
        let text = render(&listen, &extra).expect("render");
        assert!(text.contains("listen_addresses = ''\n"), "{text}");
        assert!(text.contains("port = 5555\n"));
        assert!(text.contains("unix_socket_directories = '/tmp/x/sock'\n"));
        assert!(text.contains("wal_level = 'logical'\n"));
        assert!(
            text.contains("application_name = 'it''s a\\\\b'\n"),
            "{text}"
        );
    }

    #[test]
    fn rejects_bad_names_and_values() {
        let listen = Listen {
            port: 1,
            socket_dir: Path::new("/s"),
            tcp: true,
        };
        for (n, v) in [
            ("bad name", "1"),
            ("x = 1\ny", "1"),
            ("", "1"),
            ("ok", "a\nb"),
        ] {
            let extra = vec![(n.to_owned(), v.to_owned())];
            assert!(matches!(
                render(&listen, &extra),
                Err(Error::InvalidSetting { .. })
            ));
        }
        assert!(render(&listen, &[])
            .expect("render")
            .contains("'127.0.0.1'"));
    }
}
