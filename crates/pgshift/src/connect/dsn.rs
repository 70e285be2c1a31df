//! [`ConnectionSpec`]: a connection string resolved the way libpq resolves it.
//!
//! Resolution order, per parameter: the connection string, then its `PG*`
//! environment variable, then (for the password only) the password file, then
//! libpq's defaults: host is the first existing directory of `/var/run/postgresql`
//! and `/tmp` (else `localhost`), port 5432, user is the operating system user,
//! dbname is the user.
//!
//! The password is never shown: `Debug`, `Display` and [`ConnectionSpec::redacted`]
//! print `password=********`, and no error carries it.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use super::env::{Environment, ProcessEnvironment};
use super::error::ConnectError;
use super::params::{Param, RawParams};
use super::passfile::{self, PassfileQuery};
use super::target::{Host, Target, TargetSessionAttrs};
use super::tls::{RootCert, TlsSettings};

/// The socket directories libpq builds may default to, in order of preference.
const DEFAULT_SOCKET_DIRS: [&str; 2] = ["/var/run/postgresql", "/tmp"];

/// The default port.
const DEFAULT_PORT: u16 = 5432;

/// What replaces the password wherever a spec is shown.
const REDACTED: &str = "********";

/// A password; its `Debug` prints `********` and it has no `Display`.
#[derive(Clone)]
pub(crate) struct Password(String);

impl Password {
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

// INV: SE-2 — a password prints as a fixed mask, whatever is asked of it.
impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Where a password comes from, for messages (never the password itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PasswordOrigin {
    /// The connection string or `PGPASSWORD`.
    Given,
    /// The password file (`PGPASSFILE`, else `~/.pgpass`).
    Passfile,
}

/// A resolved connection: every server to try, the role, the database, the password
/// (never shown) and the TLS settings.
///
/// ```
/// use pgshift::connect::{ConnectionSpec, Environment};
///
/// struct NoEnv;
/// impl Environment for NoEnv {
///     fn var(&self, _name: &str) -> Option<String> {
///         None
///     }
/// }
///
/// # fn main() -> Result<(), pgshift::connect::ConnectError> {
/// let spec = ConnectionSpec::parse_with_env(
///     "postgres://alice:s3cret@db.example:5433/app?sslmode=require",
///     &NoEnv,
/// )?;
/// assert_eq!(spec.user(), "alice");
/// assert_eq!(
///     spec.redacted(),
///     "host=db.example port=5433 user=alice password=******** dbname=app sslmode=require"
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ConnectionSpec {
    targets: Vec<Target>,
    user: String,
    dbname: String,
    password: Option<Password>,
    tls: TlsSettings,
    connect_timeout: Option<Duration>,
    options: Option<String>,
    target_session_attrs: TargetSessionAttrs,
}

impl ConnectionSpec {
    /// Parses a URL or `key=value` connection string and resolves it against the
    /// process environment, the password file and libpq's defaults.
    pub fn parse(text: &str) -> Result<ConnectionSpec, ConnectError> {
        ConnectionSpec::parse_with_env(text, &ProcessEnvironment)
    }

    /// Like [`ConnectionSpec::parse`], with an injected environment.
    pub fn parse_with_env(
        text: &str,
        env: &dyn Environment,
    ) -> Result<ConnectionSpec, ConnectError> {
        let mut raw = RawParams::parse(text)?;
        raw.fill_from_env(env);
        resolve(&raw, env)
    }

    /// The servers to try, in order.
    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The role name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The database name.
    pub fn dbname(&self) -> &str {
        &self.dbname
    }

    /// Whether a password will be sent (from the string, `PGPASSWORD` or the
    /// password file).
    pub fn has_password(&self) -> bool {
        self.password.is_some()
            || self
                .targets
                .iter()
                .any(|target| target.passfile_password().is_some())
    }

    /// The TLS settings.
    pub fn tls(&self) -> &TlsSettings {
        &self.tls
    }

    /// The per-host connect timeout, when one was given (`connect_timeout` or
    /// `PGCONNECT_TIMEOUT`; zero or negative means unset, one means two seconds, as
    /// in libpq).
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// Command-line options sent to the server (`options` / `PGOPTIONS`).
    pub fn options(&self) -> Option<&str> {
        self.options.as_deref()
    }

    /// Which kind of server is acceptable.
    pub fn target_session_attrs(&self) -> TargetSessionAttrs {
        self.target_session_attrs
    }

    /// The spec as a `key=value` string with the password shown as `********`,
    /// for logs and messages.
    pub fn redacted(&self) -> String {
        self.to_string()
    }

    /// Where the password sent to `target` comes from, if one is sent.
    pub(crate) fn password_origin(&self, target: &Target) -> Option<PasswordOrigin> {
        if self.password.is_some() {
            Some(PasswordOrigin::Given)
        } else if target.passfile_password().is_some() {
            Some(PasswordOrigin::Passfile)
        } else {
            None
        }
    }

    /// The password to send to `target`: the explicit one, else the password file's.
    pub(crate) fn password_for<'a>(&'a self, target: &'a Target) -> Option<&'a str> {
        self.password
            .as_ref()
            .or(target.passfile_password())
            .map(Password::expose)
    }
}

impl FromStr for ConnectionSpec {
    type Err = ConnectError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ConnectionSpec::parse(text)
    }
}

/// Renders a libpq `key=value` string; the password is always `********`.
impl fmt::Display for ConnectionSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if self.targets.iter().any(|target| target.host().is_some()) {
            pairs.push(("host", join(&self.targets, host_text)));
        }
        if self
            .targets
            .iter()
            .any(|target| target.hostaddr().is_some())
        {
            pairs.push(("hostaddr", join(&self.targets, addr_text)));
        }
        let ports = join(&self.targets, |target| target.port().to_string());
        let same_port = self.targets.windows(2).all(|w| w[0].port() == w[1].port());
        match (same_port, self.targets.first()) {
            (true, Some(first)) => pairs.push(("port", first.port().to_string())),
            _ => pairs.push(("port", ports)),
        }
        pairs.push(("user", self.user.clone()));
        if self.has_password() {
            pairs.push(("password", REDACTED.to_owned()));
        }
        pairs.push(("dbname", self.dbname.clone()));
        pairs.push(("sslmode", self.tls.mode().to_string()));
        self.push_tls_files(&mut pairs);
        if let Some(timeout) = self.connect_timeout {
            pairs.push(("connect_timeout", timeout.as_secs().to_string()));
        }
        if let Some(options) = &self.options {
            pairs.push(("options", options.clone()));
        }
        if self.target_session_attrs != TargetSessionAttrs::Any {
            pairs.push((
                "target_session_attrs",
                self.target_session_attrs.to_string(),
            ));
        }
        for (index, (key, value)) in pairs.iter().enumerate() {
            let separator = if index == 0 { "" } else { " " };
            write!(f, "{separator}{key}={}", quote(value))?;
        }
        Ok(())
    }
}

impl ConnectionSpec {
    fn push_tls_files(&self, pairs: &mut Vec<(&str, String)>) {
        match self.tls.root_cert() {
            Some(RootCert::System) => pairs.push(("sslrootcert", "system".to_owned())),
            Some(RootCert::File(path)) => pairs.push(("sslrootcert", path_text(path))),
            None => {}
        }
        if let Some(cert) = self.tls.client_cert() {
            pairs.push(("sslcert", path_text(cert)));
        }
        if let Some(key) = self.tls.client_key() {
            pairs.push(("sslkey", path_text(key)));
        }
    }
}

fn resolve(raw: &RawParams, env: &dyn Environment) -> Result<ConnectionSpec, ConnectError> {
    let user = match raw.get(Param::User) {
        Some(user) => user.to_owned(),
        None => env.os_user().ok_or_else(|| {
            raw.invalid(
                Param::User,
                "not set, and the operating system user is unknown",
            )
        })?,
    };
    let dbname = raw.get(Param::DbName).unwrap_or(&user).to_owned();
    let mut targets = targets(raw, env)?;
    let password = raw
        .get(Param::Password)
        .map(|text| Password(text.to_owned()));
    let home = env.home_dir();
    if password.is_none() {
        if let Some(path) = passfile_path(env, home.as_deref()) {
            for target in &mut targets {
                let found = passfile_password(&path, target, &user, &dbname);
                target.set_passfile_password(found);
            }
        }
    }
    let target_session_attrs = match raw.get(Param::TargetSessionAttrs) {
        Some(text) => text
            .parse()
            .map_err(|reason| raw.invalid(Param::TargetSessionAttrs, reason))?,
        None => TargetSessionAttrs::Any,
    };
    Ok(ConnectionSpec {
        targets,
        user,
        dbname,
        password,
        tls: TlsSettings::resolve(raw, home.as_deref(), env)?,
        connect_timeout: connect_timeout(raw)?,
        options: raw.get(Param::Options).map(str::to_owned),
        target_session_attrs,
    })
}

/// Builds the target list from the comma lists in `host`, `hostaddr` and `port`.
fn targets(raw: &RawParams, env: &dyn Environment) -> Result<Vec<Target>, ConnectError> {
    let list = |key| -> Vec<&str> {
        raw.get(key)
            .map(|v| v.split(',').collect())
            .unwrap_or_default()
    };
    let hosts = list(Param::Host);
    let addrs = list(Param::HostAddr);
    let ports = list(Param::Port);
    if !hosts.is_empty() && !addrs.is_empty() && hosts.len() != addrs.len() {
        return Err(raw.invalid(
            Param::HostAddr,
            "must list as many addresses as host lists hosts",
        ));
    }
    let count = hosts.len().max(addrs.len()).max(1);
    if ports.len() > 1 && ports.len() != count {
        return Err(raw.invalid(Param::Port, "must be one port, or one port per host"));
    }
    let mut targets = Vec::with_capacity(count);
    for index in 0..count {
        let host = hosts.get(index).copied().filter(|text| !text.is_empty());
        let addr = match addrs.get(index).copied().filter(|text| !text.is_empty()) {
            Some(text) => Some(
                text.parse::<IpAddr>()
                    .map_err(|_| raw.invalid(Param::HostAddr, "not a numeric ip address"))?,
            ),
            None => None,
        };
        let host = match (host, addr) {
            (Some(text), _) => Some(Host::from_text(text)),
            (None, Some(_)) => None,
            (None, None) => Some(default_host(env)),
        };
        let port_text = ports
            .get(index)
            .or(ports.first().filter(|_| ports.len() == 1));
        let port = match port_text
            .map(|text| text.trim())
            .filter(|text| !text.is_empty())
        {
            Some(text) => parse_port(text)
                .ok_or_else(|| raw.invalid(Param::Port, "not a port number (1 to 65535)"))?,
            None => DEFAULT_PORT,
        };
        targets.push(Target::new(host, addr, port));
    }
    Ok(targets)
}

fn parse_port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|port| *port != 0)
}

fn default_host(env: &dyn Environment) -> Host {
    DEFAULT_SOCKET_DIRS
        .iter()
        .map(Path::new)
        .find(|dir| env.is_dir(dir))
        .map(|dir| Host::Unix(dir.to_path_buf()))
        .unwrap_or_else(|| Host::Tcp("localhost".to_owned()))
}

/// `connect_timeout` in whole seconds, libpq style.
fn connect_timeout(raw: &RawParams) -> Result<Option<Duration>, ConnectError> {
    let Some(text) = raw.get(Param::ConnectTimeout) else {
        return Ok(None);
    };
    let seconds: i64 = text
        .trim()
        .parse()
        .map_err(|_| raw.invalid(Param::ConnectTimeout, "not an integer number of seconds"))?;
    Ok(match seconds {
        i64::MIN..=0 => None,
        1 => Some(Duration::from_secs(2)),
        _ => Some(Duration::from_secs(seconds.unsigned_abs())),
    })
}

/// `PGPASSFILE`, else `~/.pgpass`.
fn passfile_path(env: &dyn Environment, home: Option<&Path>) -> Option<PathBuf> {
    env.var("PGPASSFILE")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".pgpass")))
}

fn passfile_password(path: &Path, target: &Target, user: &str, dbname: &str) -> Option<Password> {
    let host = passfile_host(target);
    let port = target.port().to_string();
    let query = PassfileQuery {
        host: &host,
        port: &port,
        dbname,
        user,
    };
    passfile::read_password(path, &query).map(Password)
}

/// The host field a password file line must match for `target`: the host as
/// written, `localhost` for libpq's default socket directories.
pub(crate) fn passfile_host(target: &Target) -> String {
    match (target.host(), target.hostaddr()) {
        (Some(Host::Unix(dir)), _) if DEFAULT_SOCKET_DIRS.iter().any(|d| Path::new(d) == dir) => {
            "localhost".to_owned()
        }
        (Some(host), _) => host_name(host),
        (None, Some(addr)) => addr.to_string(),
        (None, None) => "localhost".to_owned(),
    }
}

fn host_name(host: &Host) -> String {
    match host {
        Host::Tcp(name) => name.clone(),
        Host::Unix(dir) => path_text(dir),
    }
}

fn host_text(target: &Target) -> String {
    target.host().map(host_name).unwrap_or_default()
}

fn addr_text(target: &Target) -> String {
    target
        .hostaddr()
        .map(|addr| addr.to_string())
        .unwrap_or_default()
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn join(targets: &[Target], render: impl Fn(&Target) -> String) -> String {
    targets.iter().map(render).collect::<Vec<_>>().join(",")
}

/// Quotes a value for a `key=value` string when it needs it.
fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c == '\'' || c == '\\');
    if plain {
        return value.to_owned();
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
#[path = "dsn_tests.rs"]
mod tests;
