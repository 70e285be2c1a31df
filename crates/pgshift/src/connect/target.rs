//! Which servers a connection tries, in order, and what kind of server it accepts.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::dsn::Password;

/// Where one server is reached: a host name (or IP literal) over TCP, or a Unix
/// socket directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Host {
    /// A DNS name or IP literal, reached over TCP.
    Tcp(String),
    /// A directory holding the server's `.s.PGSQL.<port>` socket. TLS is never used
    /// over Unix sockets, as in libpq.
    Unix(PathBuf),
}

impl Host {
    /// Classifies a host string the libpq way: a leading `/` is a socket directory.
    pub(crate) fn from_text(text: &str) -> Host {
        if text.starts_with('/') {
            Host::Unix(PathBuf::from(text))
        } else {
            Host::Tcp(text.to_owned())
        }
    }
}

/// One server to try: a host and/or a numeric address, a port, and the password the
/// password file holds for it.
#[derive(Debug, Clone)]
pub struct Target {
    host: Option<Host>,
    hostaddr: Option<IpAddr>,
    port: u16,
    passfile_password: Option<Password>,
}

impl Target {
    /// Builds a target; at least one of `host` and `hostaddr` is set by the caller.
    pub(crate) fn new(host: Option<Host>, hostaddr: Option<IpAddr>, port: u16) -> Target {
        Target {
            host,
            hostaddr,
            port,
            passfile_password: None,
        }
    }

    /// The host as written, if one was given (with only `hostaddr`, there is none).
    pub fn host(&self) -> Option<&Host> {
        self.host.as_ref()
    }

    /// The numeric address connected to instead of resolving `host`, if given.
    pub fn hostaddr(&self) -> Option<IpAddr> {
        self.hostaddr
    }

    /// The TCP port, or the number in the socket file name for Unix sockets.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether this target is a Unix socket (and so never uses TLS).
    pub fn is_unix_socket(&self) -> bool {
        self.hostaddr.is_none() && matches!(self.host, Some(Host::Unix(_)))
    }

    /// The socket directory, when this target is a Unix socket.
    pub(crate) fn socket_dir(&self) -> Option<&Path> {
        match (&self.host, self.hostaddr) {
            (Some(Host::Unix(dir)), None) => Some(dir),
            _ => None,
        }
    }

    /// The name TLS verifies the server certificate against: the host name, or the
    /// address when no TCP host name was given. `None` for Unix sockets.
    pub(crate) fn tls_name(&self) -> Option<String> {
        match (&self.host, self.hostaddr) {
            (Some(Host::Tcp(name)), _) => Some(name.clone()),
            (_, Some(addr)) => Some(addr.to_string()),
            (_, None) => None,
        }
    }

    pub(crate) fn passfile_password(&self) -> Option<&Password> {
        self.passfile_password.as_ref()
    }

    pub(crate) fn set_passfile_password(&mut self, password: Option<Password>) {
        self.passfile_password = password;
    }
}

/// Renders the endpoint for messages: `host:port`, `[v6]:port`,
/// `host (addr):port`, or the socket file path.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(dir) = self.socket_dir() {
            return write!(f, "{}/.s.PGSQL.{}", dir.display(), self.port);
        }
        match (&self.host, self.hostaddr) {
            (Some(Host::Tcp(name)), Some(addr)) => {
                write!(f, "{} ({}):{}", name, addr, self.port)
            }
            (Some(Host::Tcp(name)), None) if name.contains(':') => {
                write!(f, "[{}]:{}", name, self.port)
            }
            (Some(Host::Tcp(name)), None) => write!(f, "{}:{}", name, self.port),
            (_, Some(IpAddr::V6(addr))) => write!(f, "[{}]:{}", addr, self.port),
            (_, Some(addr)) => write!(f, "{}:{}", addr, self.port),
            (_, None) => write!(f, "(no host):{}", self.port),
        }
    }
}

/// Which kind of server is acceptable (libpq's `target_session_attrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetSessionAttrs {
    /// Any server.
    Any,
    /// A server whose sessions are read-write by default.
    ReadWrite,
    /// A server whose sessions are read-only by default.
    ReadOnly,
    /// A server that is not in recovery.
    Primary,
    /// A server in recovery.
    Standby,
    /// A server in recovery if any host is one, otherwise any server.
    PreferStandby,
}

impl TargetSessionAttrs {
    /// The libpq spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetSessionAttrs::Any => "any",
            TargetSessionAttrs::ReadWrite => "read-write",
            TargetSessionAttrs::ReadOnly => "read-only",
            TargetSessionAttrs::Primary => "primary",
            TargetSessionAttrs::Standby => "standby",
            TargetSessionAttrs::PreferStandby => "prefer-standby",
        }
    }

    /// The passes over the host list: `prefer-standby` first looks for a standby, then
    /// accepts any server, as libpq does.
    pub(crate) fn passes(self) -> &'static [TargetSessionAttrs] {
        match self {
            TargetSessionAttrs::PreferStandby => {
                &[TargetSessionAttrs::Standby, TargetSessionAttrs::Any]
            }
            TargetSessionAttrs::Any => &[TargetSessionAttrs::Any],
            TargetSessionAttrs::ReadWrite => &[TargetSessionAttrs::ReadWrite],
            TargetSessionAttrs::ReadOnly => &[TargetSessionAttrs::ReadOnly],
            TargetSessionAttrs::Primary => &[TargetSessionAttrs::Primary],
            TargetSessionAttrs::Standby => &[TargetSessionAttrs::Standby],
        }
    }
}

impl FromStr for TargetSessionAttrs {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [
            TargetSessionAttrs::Any,
            TargetSessionAttrs::ReadWrite,
            TargetSessionAttrs::ReadOnly,
            TargetSessionAttrs::Primary,
            TargetSessionAttrs::Standby,
            TargetSessionAttrs::PreferStandby,
        ]
        .into_iter()
        .find(|attrs| attrs.as_str() == text)
        .ok_or("expected any, read-write, read-only, primary, standby or prefer-standby")
    }
}

impl fmt::Display for TargetSessionAttrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_render_for_messages() {
        let unix = Target::new(Some(Host::from_text("/tmp")), None, 5432);
        assert_eq!(unix.to_string(), "/tmp/.s.PGSQL.5432");
        assert!(unix.is_unix_socket());
        let tcp = Target::new(Some(Host::from_text("db")), None, 5433);
        assert_eq!(tcp.to_string(), "db:5433");
        let v6 = Target::new(Some(Host::from_text("::1")), None, 5432);
        assert_eq!(v6.to_string(), "[::1]:5432");
        let addr: IpAddr = "10.0.0.1".parse().expect("ip");
        let both = Target::new(Some(Host::from_text("db")), Some(addr), 1);
        assert_eq!(both.to_string(), "db (10.0.0.1):1");
        let only_addr = Target::new(None, Some(addr), 2);
        assert_eq!(only_addr.to_string(), "10.0.0.1:2");
        assert_eq!(only_addr.tls_name().as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn target_session_attrs_parse_libpq_spellings() {
        for attrs in [
            TargetSessionAttrs::Any,
            TargetSessionAttrs::ReadWrite,
            TargetSessionAttrs::ReadOnly,
            TargetSessionAttrs::Primary,
            TargetSessionAttrs::Standby,
            TargetSessionAttrs::PreferStandby,
        ] {
            assert_eq!(attrs.as_str().parse(), Ok(attrs));
        }
        assert!("readwrite".parse::<TargetSessionAttrs>().is_err());
    }
}
