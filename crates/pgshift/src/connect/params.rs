//! The closed set of connection parameters, and the raw values a connection string
//! gives them.
//!
//! This layer only splits text into `key → value`; it knows no defaults and does no
//! I/O. [`super::dsn`] turns [`RawParams`] into a resolved
//! [`ConnectionSpec`](super::ConnectionSpec).

use std::collections::BTreeMap;

use super::env::Environment;
use super::error::ConnectError;
use super::{kv, url};

/// A connection parameter pgshift understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Param {
    Host,
    HostAddr,
    Port,
    User,
    Password,
    DbName,
    SslMode,
    SslRootCert,
    SslCert,
    SslKey,
    ConnectTimeout,
    ApplicationName,
    Options,
    TargetSessionAttrs,
}

impl Param {
    /// Every key, in the order connection strings are rendered.
    pub(crate) const ALL: [Param; 14] = [
        Param::Host,
        Param::HostAddr,
        Param::Port,
        Param::User,
        Param::Password,
        Param::DbName,
        Param::SslMode,
        Param::SslRootCert,
        Param::SslCert,
        Param::SslKey,
        Param::ConnectTimeout,
        Param::ApplicationName,
        Param::Options,
        Param::TargetSessionAttrs,
    ];

    /// The libpq name of the key.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Param::Host => "host",
            Param::HostAddr => "hostaddr",
            Param::Port => "port",
            Param::User => "user",
            Param::Password => "password",
            Param::DbName => "dbname",
            Param::SslMode => "sslmode",
            Param::SslRootCert => "sslrootcert",
            Param::SslCert => "sslcert",
            Param::SslKey => "sslkey",
            Param::ConnectTimeout => "connect_timeout",
            Param::ApplicationName => "application_name",
            Param::Options => "options",
            Param::TargetSessionAttrs => "target_session_attrs",
        }
    }

    /// The key with this libpq name.
    pub(crate) fn from_name(name: &str) -> Option<Param> {
        Param::ALL.into_iter().find(|key| key.name() == name)
    }

    /// The environment variable libpq reads when the key is not set.
    ///
    /// `application_name` has none here: pgshift always identifies itself as
    /// `pgshift`, so `PGAPPNAME` is not read.
    pub(crate) fn env_var(self) -> Option<&'static str> {
        match self {
            Param::Host => Some("PGHOST"),
            Param::HostAddr => Some("PGHOSTADDR"),
            Param::Port => Some("PGPORT"),
            Param::User => Some("PGUSER"),
            Param::Password => Some("PGPASSWORD"),
            Param::DbName => Some("PGDATABASE"),
            Param::SslMode => Some("PGSSLMODE"),
            Param::SslRootCert => Some("PGSSLROOTCERT"),
            Param::SslCert => Some("PGSSLCERT"),
            Param::SslKey => Some("PGSSLKEY"),
            Param::ConnectTimeout => Some("PGCONNECT_TIMEOUT"),
            Param::ApplicationName => None,
            Param::Options => Some("PGOPTIONS"),
            Param::TargetSessionAttrs => Some("PGTARGETSESSIONATTRS"),
        }
    }
}

/// The values a connection string sets, then the environment, before defaults.
///
/// A key set twice keeps its last value, as in libpq. Empty values are stored as
/// given; [`RawParams::get`] treats them as unset, as libpq does.
#[derive(Clone, Default)]
pub(crate) struct RawParams {
    /// Each value, with the environment variable it came from (if it did).
    values: BTreeMap<Param, (String, Option<&'static str>)>,
}

impl RawParams {
    /// Parses a `postgres://` / `postgresql://` URL or a `key=value` string.
    pub(crate) fn parse(text: &str) -> Result<RawParams, ConnectError> {
        let pairs = match url::strip_scheme(text) {
            Some(offset) => url::parse(text, offset)?,
            None => kv::parse(text)?,
        };
        let mut params = RawParams::default();
        for (key, value) in pairs {
            params.values.insert(key, (value, None));
        }
        Ok(params)
    }

    /// The non-empty value of `key`, if any.
    pub(crate) fn get(&self, key: Param) -> Option<&str> {
        self.values
            .get(&key)
            .map(|(value, _)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    /// Sets every key the string left unset (or empty) from its environment variable.
    pub(crate) fn fill_from_env(&mut self, env: &dyn Environment) {
        for key in Param::ALL {
            let Some(var) = key.env_var() else { continue };
            if self.get(key).is_some() {
                continue;
            }
            if let Some(value) = env.var(var) {
                self.values.insert(key, (value, Some(var)));
            }
        }
    }

    /// How errors name `key`: `port`, or `port (from PGPORT)` when the value came from
    /// the environment.
    pub(crate) fn label(&self, key: Param) -> String {
        match self.values.get(&key) {
            Some((_, Some(var))) => format!("{} (from {var})", key.name()),
            _ => key.name().to_owned(),
        }
    }

    /// An error about the value of `key`; the value itself is never included.
    pub(crate) fn invalid(&self, key: Param, reason: &'static str) -> ConnectError {
        ConnectError::InvalidParameter {
            key: self.label(key),
            reason,
        }
    }
}

/// Resolves a parameter name found in a connection string.
pub(crate) fn key_named(name: &str) -> Result<Param, ConnectError> {
    Param::from_name(name).ok_or_else(|| ConnectError::UnknownParameter {
        key: name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_round_trips_through_its_name() {
        for key in Param::ALL {
            assert_eq!(Param::from_name(key.name()), Some(key));
        }
        assert_eq!(Param::from_name("passfile"), None);
    }

    struct Vars(&'static [(&'static str, &'static str)]);

    impl Environment for Vars {
        fn var(&self, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(var, _)| *var == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn environment_fills_only_unset_keys_and_is_named_in_errors() {
        let mut params = RawParams::parse("port=1 user=''").expect("parses");
        params.fill_from_env(&Vars(&[
            ("PGPORT", "2"),
            ("PGUSER", "env_user"),
            ("PGAPPNAME", "x"),
        ]));
        assert_eq!(params.get(Param::Port), Some("1"));
        assert_eq!(params.get(Param::User), Some("env_user"));
        assert_eq!(params.get(Param::ApplicationName), None);
        assert_eq!(params.label(Param::Port), "port");
        assert_eq!(params.label(Param::User), "user (from PGUSER)");
    }

    #[test]
    fn last_value_wins_and_empty_is_unset() {
        let params = RawParams::parse("port=1 port=2 user=''").expect("parses");
        assert_eq!(params.get(Param::Port), Some("2"));
        assert_eq!(params.get(Param::User), None);
    }
}
