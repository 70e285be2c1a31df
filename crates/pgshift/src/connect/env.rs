//! Where connection defaults come from: environment variables, the OS user, the file
//! system.
//!
//! [`Environment`] is a trait so that parsing a connection string can be tested without
//! touching the process environment; [`ProcessEnvironment`] is the real one.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A source of environment variables and of the facts libpq derives defaults from.
///
/// Only [`Environment::var`] is required; the other methods default to the real
/// operating system, resolved through `var` where libpq reads a variable.
pub trait Environment {
    /// The value of an environment variable, if set.
    fn var(&self, name: &str) -> Option<String>;

    /// The operating system user name, the default role name.
    ///
    /// The default looks up the effective uid in `/etc/passwd`, then falls back to
    /// `USER` and `LOGNAME`.
    fn os_user(&self) -> Option<String> {
        passwd_entry()
            .map(|entry| entry.name)
            .or_else(|| self.var("USER"))
            .or_else(|| self.var("LOGNAME"))
            .filter(|name| !name.is_empty())
    }

    /// The home directory, where `.pgpass` and `.postgresql/` live.
    ///
    /// The default is `HOME`, then the `/etc/passwd` entry of the effective uid.
    fn home_dir(&self) -> Option<PathBuf> {
        self.var("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from)
            .or_else(|| passwd_entry().map(|entry| entry.home))
    }

    /// Whether `path` is an existing directory (used to pick the default socket
    /// directory).
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    /// Whether `path` is an existing file (used to pick up the default TLS files in
    /// `~/.postgresql/`).
    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }
}

/// The environment of the running process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// The fields of one `/etc/passwd` line that libpq uses.
struct PasswdEntry {
    name: String,
    home: PathBuf,
}

/// The `/etc/passwd` entry of the effective uid.
///
/// The effective uid is read as the owner of `/proc/self`. Users known only through
/// NSS (LDAP, sssd) are not found here, so callers fall back to `USER`.
fn passwd_entry() -> Option<PasswdEntry> {
    let uid = fs::metadata("/proc/self").ok()?.uid();
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    find_passwd_entry(&passwd, uid)
}

/// Finds the line for `uid` in the text of a passwd file.
fn find_passwd_entry(passwd: &str, uid: u32) -> Option<PasswdEntry> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        match fields.as_slice() {
            [name, _, line_uid, _, _, home, ..] if line_uid.parse::<u32>().ok() == Some(uid) => {
                Some(PasswdEntry {
                    name: (*name).to_owned(),
                    home: PathBuf::from(home),
                })
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_entry_is_found_by_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      # comment\n\
                      postgres:x:104:105:PostgreSQL:/var/lib/postgresql:/bin/bash\n";
        let entry = find_passwd_entry(passwd, 104).expect("entry for uid 104");
        assert_eq!(entry.name, "postgres");
        assert_eq!(entry.home, PathBuf::from("/var/lib/postgresql"));
        assert!(find_passwd_entry(passwd, 7).is_none());
    }

    #[test]
    fn process_environment_knows_an_os_user() {
        assert!(ProcessEnvironment.os_user().is_some());
    }
}
