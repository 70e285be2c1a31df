//! Reading PEM certificates and private keys, with errors that name the file.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::{ConnectError, TlsFileProblem};

/// Every certificate in the PEM file at `path`; at least one.
pub(crate) fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ConnectError> {
    let bytes = fs::read(path).map_err(|error| file_error(path, error.into()))?;
    let certs = rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| file_error(path, TlsFileProblem::InvalidPem))?;
    if certs.is_empty() {
        return Err(file_error(path, TlsFileProblem::NoCertificate));
    }
    Ok(certs)
}

/// The first private key in the PEM file at `path`.
///
/// As in libpq, the file must not be accessible by group or others (`0600`), except
/// that a root-owned file may be group-readable (`0640`).
pub(crate) fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, ConnectError> {
    let metadata = fs::metadata(path).map_err(|error| file_error(path, error.into()))?;
    if !key_permissions_ok(metadata.permissions().mode(), metadata.uid()) {
        return Err(file_error(path, TlsFileProblem::KeyPermissions));
    }
    let bytes = fs::read(path).map_err(|error| file_error(path, error.into()))?;
    match rustls_pemfile::private_key(&mut bytes.as_slice()) {
        Ok(Some(key)) => Ok(key),
        Ok(None) => Err(file_error(path, TlsFileProblem::NoPrivateKey)),
        Err(_) => Err(file_error(path, TlsFileProblem::InvalidPem)),
    }
}

/// libpq's rule for private key files.
fn key_permissions_ok(mode: u32, owner_uid: u32) -> bool {
    if owner_uid == 0 {
        mode & 0o037 == 0
    } else {
        mode & 0o077 == 0
    }
}

fn file_error(path: &Path, problem: TlsFileProblem) -> ConnectError {
    ConnectError::TlsFile {
        path: path.to_path_buf(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::testing::TempDir;

    fn problem_of(result: Result<impl Sized, ConnectError>) -> TlsFileProblem {
        match result {
            Err(ConnectError::TlsFile { problem, .. }) => problem,
            Err(other) => panic!("expected a tls file error, got {other:?}"),
            Ok(_) => panic!("expected a tls file error, got success"),
        }
    }

    #[test]
    fn missing_file_names_the_path() {
        let dir = TempDir::new("pem-missing");
        let path = dir.path().join("root.crt");
        let error = load_certs(&path).expect_err("missing");
        assert!(error.to_string().contains(&path.display().to_string()));
        assert_eq!(problem_of(load_certs(&path)), TlsFileProblem::NotFound);
    }

    #[test]
    fn file_without_certificates_is_rejected() {
        let dir = TempDir::new("pem-empty");
        let path = dir.write("root.crt", "not pem at all\n", 0o644);
        assert_eq!(problem_of(load_certs(&path)), TlsFileProblem::NoCertificate);
    }

    #[test]
    fn corrupt_pem_is_rejected() {
        let dir = TempDir::new("pem-corrupt");
        let body = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let path = dir.write("root.crt", body, 0o644);
        assert_eq!(problem_of(load_certs(&path)), TlsFileProblem::InvalidPem);
    }

    #[test]
    fn group_readable_key_is_refused_before_it_is_read() {
        let dir = TempDir::new("pem-key");
        let path = dir.write("client.key", "whatever", 0o644);
        assert_eq!(problem_of(load_key(&path)), TlsFileProblem::KeyPermissions);
        let path = dir.write("client2.key", "no key here", 0o600);
        assert_eq!(problem_of(load_key(&path)), TlsFileProblem::NoPrivateKey);
    }

    #[test]
    fn key_permission_rule_matches_libpq() {
        assert!(key_permissions_ok(0o100600, 1000));
        assert!(!key_permissions_ok(0o100640, 1000));
        assert!(key_permissions_ok(0o100640, 0));
        assert!(!key_permissions_ok(0o100660, 0));
        assert!(!key_permissions_ok(0o100604, 0));
    }
}
