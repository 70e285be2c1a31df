//! libpq's `sslmode` semantics on rustls.
//!
//! | sslmode       | TLS used                    | server certificate check                     |
//! |---------------|-----------------------------|----------------------------------------------|
//! | `disable`     | never                       | none                                         |
//! | `allow`       | if the server offers it     | as `prefer` (pgshift treats `allow` as `prefer`) |
//! | `prefer`      | if the server offers it     | chain, if a root certificate is configured   |
//! | `require`     | always                      | chain, if a root certificate is configured   |
//! | `verify-ca`   | always                      | chain                                        |
//! | `verify-full` | always                      | chain and host name (or IP address)          |
//!
//! "A root certificate is configured" means `sslrootcert` is set, or
//! `~/.postgresql/root.crt` exists, as in libpq. `sslrootcert=system` uses the
//! webpki (Mozilla) roots and, as in libpq, is only accepted with `verify-full`
//! (the default sslmode when it is given): any public CA would otherwise vouch for
//! any server. Unix-socket targets never use TLS. A client certificate is sent when
//! `sslcert` is set or `~/.postgresql/postgresql.crt` exists, with its key from
//! `sslkey` or `~/.postgresql/postgresql.key`.
//!
//! The ring crypto provider is passed explicitly; nothing here reads or installs a
//! process-wide rustls default.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::env::Environment;
use super::error::ConnectError;
use super::params::{Param, RawParams};
use super::pem;
use super::verifier::{ChainOnlyVerifier, EncryptOnlyVerifier};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// Never use TLS.
    Disable,
    /// Treated as [`SslMode::Prefer`]: libpq's `allow` first tries without TLS, which
    /// pgshift does not do.
    Allow,
    /// Use TLS when the server offers it, otherwise connect in plain text.
    Prefer,
    /// Always use TLS; verify the chain only if a root certificate is configured.
    Require,
    /// Always use TLS and verify the chain, but not the host name.
    VerifyCa,
    /// Always use TLS and verify the chain and the host name.
    VerifyFull,
}

impl SslMode {
    /// The libpq spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether the server certificate's chain is always verified.
    fn verifies_chain(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }

    /// How tokio-postgres negotiates TLS for a TCP target in this mode.
    pub(crate) fn negotiation(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Pg;
        match self {
            SslMode::Disable => Pg::Disable,
            SslMode::Allow | SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        }
    }
}

impl FromStr for SslMode {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [
            SslMode::Disable,
            SslMode::Allow,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ]
        .into_iter()
        .find(|mode| mode.as_str() == text)
        .ok_or("expected disable, allow, prefer, require, verify-ca or verify-full")
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where trusted root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of CA certificates.
    File(PathBuf),
    /// The webpki (Mozilla) roots compiled into pgshift (`sslrootcert=system`).
    System,
}

/// The resolved TLS settings of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    mode: SslMode,
    root_cert: Option<RootCert>,
    client_cert: Option<PathBuf>,
    client_key: Option<PathBuf>,
}

impl TlsSettings {
    /// The sslmode.
    pub fn mode(&self) -> SslMode {
        self.mode
    }

    /// The trusted roots, if any are configured.
    pub fn root_cert(&self) -> Option<&RootCert> {
        self.root_cert.as_ref()
    }

    /// The client certificate file, if one is sent.
    pub fn client_cert(&self) -> Option<&Path> {
        self.client_cert.as_deref()
    }

    /// The client key file, when a client certificate is sent.
    pub fn client_key(&self) -> Option<&Path> {
        self.client_key.as_deref()
    }

    /// Resolves sslmode and the TLS files from the parameters, `~/.postgresql/` and
    /// the libpq rules in the module docs. Files are only checked for existence here;
    /// they are read when connecting.
    pub(crate) fn resolve(
        raw: &RawParams,
        home: Option<&Path>,
        env: &dyn Environment,
    ) -> Result<TlsSettings, ConnectError> {
        let root_cert = raw.get(Param::SslRootCert).map(|text| match text {
            "system" => RootCert::System,
            path => RootCert::File(PathBuf::from(path)),
        });
        let mode = match raw.get(Param::SslMode) {
            Some(text) => text
                .parse::<SslMode>()
                .map_err(|reason| raw.invalid(Param::SslMode, reason))?,
            None if root_cert == Some(RootCert::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if root_cert == Some(RootCert::System) && mode != SslMode::VerifyFull {
            return Err(raw.invalid(
                Param::SslMode,
                "sslrootcert=system may only be used with sslmode=verify-full",
            ));
        }
        let dir = home.map(|home| home.join(".postgresql"));
        let default_file = |name: &str, required: bool| {
            let path = dir.as_ref()?.join(name);
            (required || env.is_file(&path)).then_some(path)
        };
        let root_cert = root_cert
            .or_else(|| default_file("root.crt", mode.verifies_chain()).map(RootCert::File));
        let client_cert = raw
            .get(Param::SslCert)
            .map(PathBuf::from)
            .or_else(|| default_file("postgresql.crt", false));
        let client_key = match client_cert {
            Some(_) => raw
                .get(Param::SslKey)
                .map(PathBuf::from)
                .or_else(|| default_file("postgresql.key", true)),
            None => None,
        };
        Ok(TlsSettings {
            mode,
            root_cert,
            client_cert,
            client_key,
        })
    }
}

/// The rustls connector for these settings, or `None` for `sslmode=disable`.
///
/// Reads the root, certificate and key files.
pub(crate) fn connector(settings: &TlsSettings) -> Result<Option<MakeRustlsConnect>, ConnectError> {
    if settings.mode == SslMode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|source| ConnectError::TlsConfig { source })?;
    let roots = match &settings.root_cert {
        Some(root) => Some(Arc::new(root_store(root)?)),
        None if settings.mode.verifies_chain() => {
            return Err(ConnectError::InvalidParameter {
                key: Param::SslRootCert.name().to_owned(),
                reason: "verify-ca and verify-full need a root certificate, and no home directory was found for ~/.postgresql/root.crt",
            })
        }
        None => None,
    };
    let builder = match (settings.mode, roots) {
        (SslMode::VerifyFull, Some(roots)) => builder.with_root_certificates(roots),
        (_, Some(roots)) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnlyVerifier::new(roots, algorithms))),
        (_, None) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnlyVerifier::new(algorithms))),
    };
    let mut config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(pem::load_certs(cert)?, pem::load_key(key)?)
            .map_err(|source| ConnectError::TlsConfig { source })?,
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn root_store(root: &RootCert) -> Result<RootCertStore, ConnectError> {
    match root {
        RootCert::System => Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        }),
        RootCert::File(path) => {
            let mut store = RootCertStore::empty();
            let (added, _ignored) = store.add_parsable_certificates(pem::load_certs(path)?);
            if added == 0 {
                return Err(ConnectError::TlsFile {
                    path: path.clone(),
                    problem: super::error::TlsFileProblem::NoCertificate,
                });
            }
            Ok(store)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Home {
        files: Vec<PathBuf>,
    }

    impl Environment for Home {
        fn var(&self, _name: &str) -> Option<String> {
            None
        }

        fn is_file(&self, path: &Path) -> bool {
            self.files.iter().any(|file| file == path)
        }
    }

    fn resolve(text: &str, files: &[&str]) -> Result<TlsSettings, ConnectError> {
        let raw = RawParams::parse(text).expect("parses");
        let env = Home {
            files: files.iter().map(PathBuf::from).collect(),
        };
        TlsSettings::resolve(&raw, Some(Path::new("/home/u")), &env)
    }

    #[test]
    fn sslmode_parses_every_libpq_spelling() {
        for mode in [
            SslMode::Disable,
            SslMode::Allow,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            assert_eq!(mode.as_str().parse(), Ok(mode));
        }
        assert!("verify_full".parse::<SslMode>().is_err());
        assert!("REQUIRE".parse::<SslMode>().is_err());
    }

    #[test]
    fn allow_and_prefer_negotiate_like_prefer() {
        use tokio_postgres::config::SslMode as Pg;
        assert_eq!(SslMode::Allow.negotiation(), Pg::Prefer);
        assert_eq!(SslMode::Prefer.negotiation(), Pg::Prefer);
        assert_eq!(SslMode::Require.negotiation(), Pg::Require);
        assert_eq!(SslMode::VerifyCa.negotiation(), Pg::Require);
        assert_eq!(SslMode::Disable.negotiation(), Pg::Disable);
    }

    #[test]
    fn default_mode_is_prefer_without_files() {
        let settings = resolve("", &[]).expect("resolves");
        assert_eq!(settings.mode(), SslMode::Prefer);
        assert_eq!(settings.root_cert(), None);
        assert_eq!(settings.client_cert(), None);
    }

    #[test]
    fn default_root_crt_is_used_when_present() {
        let settings =
            resolve("sslmode=require", &["/home/u/.postgresql/root.crt"]).expect("resolves");
        assert_eq!(
            settings.root_cert(),
            Some(&RootCert::File(PathBuf::from(
                "/home/u/.postgresql/root.crt"
            )))
        );
    }

    #[test]
    fn verify_modes_expect_the_default_root_crt_even_if_missing() {
        let settings = resolve("sslmode=verify-ca", &[]).expect("resolves");
        assert_eq!(
            settings.root_cert(),
            Some(&RootCert::File(PathBuf::from(
                "/home/u/.postgresql/root.crt"
            )))
        );
    }

    #[test]
    fn system_roots_default_to_verify_full_and_refuse_weaker_modes() {
        let settings = resolve("sslrootcert=system", &[]).expect("resolves");
        assert_eq!(settings.mode(), SslMode::VerifyFull);
        assert_eq!(settings.root_cert(), Some(&RootCert::System));
        for weaker in ["require", "verify-ca", "prefer"] {
            let error = resolve(&format!("sslrootcert=system sslmode={weaker}"), &[])
                .expect_err("weak mode with system roots");
            assert!(
                matches!(error, ConnectError::InvalidParameter { ref key, .. } if key == "sslmode")
            );
        }
    }

    #[test]
    fn client_key_follows_client_cert() {
        let settings = resolve("sslcert=/c.pem", &[]).expect("resolves");
        assert_eq!(settings.client_cert(), Some(Path::new("/c.pem")));
        assert_eq!(
            settings.client_key(),
            Some(Path::new("/home/u/.postgresql/postgresql.key"))
        );
        let settings = resolve("sslkey=/k.pem", &[]).expect("resolves");
        assert_eq!(settings.client_key(), None);
        let settings = resolve("", &["/home/u/.postgresql/postgresql.crt"]).expect("resolves");
        assert!(settings.client_cert().is_some());
    }

    #[test]
    fn invalid_sslmode_is_a_typed_error_naming_the_key() {
        let error = resolve("sslmode=verify_full", &[]).expect_err("invalid");
        assert!(
            matches!(error, ConnectError::InvalidParameter { ref key, .. } if key == "sslmode")
        );
    }

    #[test]
    fn disable_needs_no_connector() {
        let settings = resolve("sslmode=disable", &[]).expect("resolves");
        assert!(connector(&settings).expect("no files to read").is_none());
    }

    #[test]
    fn encrypt_only_and_system_roots_build_connectors() {
        let settings = resolve("sslmode=require", &[]).expect("resolves");
        assert!(connector(&settings).expect("builds").is_some());
        let settings = resolve("sslrootcert=system", &[]).expect("resolves");
        assert!(connector(&settings).expect("builds").is_some());
    }

    #[test]
    fn missing_root_file_is_a_tls_file_error() {
        let settings = resolve("sslmode=verify-ca", &[]).expect("resolves");
        let Err(error) = connector(&settings) else {
            panic!("root.crt does not exist, the connector must fail");
        };
        assert!(
            matches!(error, ConnectError::TlsFile { ref path, .. } if path.ends_with("root.crt"))
        );
    }
}
