//! Removing what dead processes left in the cache root.
//!
//! A process killed outright (SIGKILL, a crash) cannot remove its clusters;
//! parent-death signals stop the servers, but the directories stay. Cluster
//! directories are named `c-<pid>-<n>` and half-built templates
//! `t-….tmp-<pid>`, so before creating a cluster the cache root is swept: an
//! entry is removed when its owning pid is dead, no live postmaster still uses
//! it (`data/postmaster.pid`), and it was not deliberately kept (`KEPT` marker).

use std::path::Path;

use crate::error::{Error, Result};
use crate::fsutil::remove_tree;
use crate::process::pid_alive;
use crate::root::cache_root;
use crate::server::recorded_postmaster_pid;
use crate::template::TMP_MARK;

/// Prefix of cluster directory names.
pub(crate) const CLUSTER_PREFIX: &str = "c-";
/// Name of the marker file that protects a kept cluster from the sweep.
pub(crate) const KEPT_MARKER: &str = "KEPT";

/// Sweeps the cache root (see [`cache_root`]) and returns how many stale
/// directories were removed. A missing cache root is not an error.
pub fn sweep_stale_clusters() -> Result<usize> {
    sweep(&cache_root())
}

/// Sweeps `root`; see the module docs for what counts as stale.
pub(crate) fn sweep(root: &Path) -> Result<usize> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(format!("listing {}", root.display()), e)),
    };
    let mut removed = 0;
    for entry in entries.filter_map(|e| e.ok()) {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some(owner) = owner_pid(&name) else {
            continue;
        };
        if owner == std::process::id() || pid_alive(owner) {
            continue;
        }
        let dir = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || dir.join(KEPT_MARKER).exists() {
            continue;
        }
        let data = if name.starts_with(CLUSTER_PREFIX) {
            dir.join("data")
        } else {
            dir.clone()
        };
        if recorded_postmaster_pid(&data).is_some_and(pid_alive) {
            continue;
        }
        // Another process may be sweeping the same entry; losing that race is fine.
        if remove_tree(&dir).is_ok() && !dir.exists() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// The owning pid encoded in a cache-root entry name, if it is one of ours:
/// `c-<pid>-<n>` or `t-<…>.tmp-<pid>`.
pub(crate) fn owner_pid(name: &str) -> Option<u32> {
    if let Some(rest) = name.strip_prefix(CLUSTER_PREFIX) {
        let (pid, n) = rest.split_once('-')?;
        n.parse::<u64>().ok()?;
        return pid.parse().ok().filter(|p| *p > 0);
    }
    if name.starts_with("t-") {
        let (_, pid) = name.rsplit_once(TMP_MARK)?;
        return pid.parse().ok().filter(|p| *p > 0);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_owner_pids() {
        assert_eq!(owner_pid("c-1234-0"), Some(1234));
        assert_eq!(owner_pid("c-1234-17"), Some(1234));
        assert_eq!(owner_pid("c-0-1"), None);
        assert_eq!(owner_pid("c-x-1"), None);
        assert_eq!(owner_pid("c-12"), None);
        assert_eq!(owner_pid("t-15.18-abcd0123.tmp-99"), Some(99));
        assert_eq!(owner_pid("t-15.18-abcd0123"), None);
        assert_eq!(owner_pid("t-15.18-abcd0123.lock"), None);
        assert_eq!(owner_pid("other"), None);
    }
}
