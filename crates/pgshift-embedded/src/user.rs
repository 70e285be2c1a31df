//! Which OS user the server runs as.
//!
//! PostgreSQL refuses to run as root. When this process is root, `initdb`,
//! `postgres`, `pg_basebackup` and `pg_ctl` run as the `postgres` OS user
//! (looked up with `getpwnam_r`), and the directories they use are chown-ed to
//! it first. Otherwise everything runs as the current user and nothing changes
//! hands.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// The OS user name the server runs as when this process is root.
pub(crate) const SERVER_OS_USER: &str = "postgres";

/// The identity server-side programs run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunAs {
    /// User name, for messages and for the `pg_ctl` stop command.
    name: String,
    uid: u32,
    gid: u32,
    /// Supplementary groups of the user (for reachability checks).
    groups: Vec<u32>,
    /// Whether programs must switch to `uid`/`gid` (we are root).
    switch: bool,
}

impl RunAs {
    /// The identity for this process: the `postgres` OS user when root,
    /// ourselves otherwise.
    pub(crate) fn for_this_process() -> Result<Self> {
        // SAFETY: geteuid/getegid never fail and have no preconditions.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if euid != 0 {
            return Ok(Self {
                name: current_user_name(euid),
                uid: euid,
                gid: egid,
                groups: Vec::new(),
                switch: false,
            });
        }
        let (uid, gid) = lookup_user(SERVER_OS_USER)?.ok_or(Error::NoPostgresUser)?;
        Ok(Self {
            name: SERVER_OS_USER.to_owned(),
            uid,
            gid,
            groups: group_list(SERVER_OS_USER, gid),
            switch: true,
        })
    }

    /// The OS user name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether programs switch to another user (this process is root).
    pub(crate) fn switches(&self) -> bool {
        self.switch
    }

    /// Makes `cmd` run as this identity.
    pub(crate) fn apply(&self, cmd: &mut Command) {
        if self.switch {
            cmd.uid(self.uid).gid(self.gid);
            cmd.env("USER", &self.name).env("LOGNAME", &self.name);
        }
    }

    /// Gives `path` (not following a symlink) to this identity, if switching.
    pub(crate) fn chown(&self, path: &Path) -> Result<()> {
        if !self.switch {
            return Ok(());
        }
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
            .map_err(|e| Error::io(format!("chown {} to {}", path.display(), self.name), e))
    }

    /// Checks that this identity can traverse every directory down to and
    /// including `dir` (by mode bits; only relevant when switching).
    pub(crate) fn check_reachable(&self, dir: &Path) -> Result<()> {
        if !self.switch {
            return Ok(());
        }
        let full = std::fs::canonicalize(dir)
            .map_err(|e| Error::io(format!("resolving {}", dir.display()), e))?;
        let mut current = PathBuf::new();
        for part in full.components() {
            current.push(part);
            let meta = std::fs::metadata(&current)
                .map_err(|e| Error::io(format!("stat {}", current.display()), e))?;
            let mode = meta.mode();
            let bit = if meta.uid() == self.uid {
                0o100
            } else if meta.gid() == self.gid || self.groups.contains(&meta.gid()) {
                0o010
            } else {
                0o001
            };
            if mode & bit == 0 {
                return Err(Error::NotReachable {
                    path: dir.to_path_buf(),
                    user: self.name.clone(),
                    reason: format!(
                        "{} is mode {:o}, owned by uid {}",
                        current.display(),
                        mode & 0o7777,
                        meta.uid()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Looks up `name` in the user database: `Some((uid, gid))`, or `None` if there
/// is no such user.
fn lookup_user(name: &str) -> Result<Option<(u32, u32)>> {
    let cname = CString::new(name).map_err(|e| Error::io("user name", e.into()))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: a zeroed passwd is a valid (if empty) value; getpwnam_r fills it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    for _ in 0..4 {
        // SAFETY: all pointers are valid for the stated sizes for the call.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 {
            return Err(Error::io(
                format!("looking up OS user `{name}`"),
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        if result.is_null() {
            return Ok(None);
        }
        return Ok(Some((pwd.pw_uid, pwd.pw_gid)));
    }
    Err(Error::io(
        format!("looking up OS user `{name}`"),
        std::io::Error::from_raw_os_error(libc::ERANGE),
    ))
}

/// The supplementary groups of `name` (empty if they cannot be read).
fn group_list(name: &str, gid: u32) -> Vec<u32> {
    let Ok(cname) = CString::new(name) else {
        return Vec::new();
    };
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    for _ in 0..4 {
        let mut count = groups.len() as libc::c_int;
        // SAFETY: `groups` has room for `count` entries; cname is NUL-terminated.
        let rc =
            unsafe { libc::getgrouplist(cname.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        let count = usize::try_from(count).unwrap_or(0);
        if rc >= 0 {
            groups.truncate(count);
            return groups;
        }
        groups.resize(count.max(groups.len() * 2), 0);
    }
    Vec::new()
}

fn current_user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in `lookup_user`.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the stated sizes for the call.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc == 0 && !result.is_null() && !pwd.pw_name.is_null() {
        // SAFETY: getpwuid_r succeeded, so pw_name points to a NUL-terminated
        // string inside `buf`, which is still alive.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        return String::from_utf8_lossy(name.to_bytes()).into_owned();
    }
    std::env::var("USER").unwrap_or_else(|_| format!("uid {uid}"))
}

/// Quotes a path for a POSIX shell, leaving plain paths as they are.
pub(crate) fn shell_quote(arg: &Path) -> String {
    let bytes = arg.as_os_str().as_bytes();
    let plain = !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(b));
    let text = arg.to_string_lossy();
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote(Path::new("/tmp/a-b/c")), "/tmp/a-b/c");
        assert_eq!(shell_quote(Path::new("/tmp/a b")), "'/tmp/a b'");
        assert_eq!(shell_quote(Path::new("it's")), r"'it'\''s'");
    }

    #[test]
    fn looks_up_root_and_a_missing_user() {
        assert_eq!(lookup_user("root").ok().flatten().map(|u| u.0), Some(0));
        assert_eq!(lookup_user("no-such-user-pgshift").ok().flatten(), None);
    }
}
