//! The cache root: one directory holding the per-version templates and every
//! throwaway cluster (`$PGSHIFT_EMBEDDED_DIR`, or `/tmp/pgshift-embedded-<uid>`).
//!
//! The path is kept short on purpose: a cluster's unix socket lives below it,
//! and socket paths are limited to about 100 bytes.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::user::RunAs;

/// Environment variable overriding the cache root.
pub const EMBEDDED_DIR_ENV: &str = "PGSHIFT_EMBEDDED_DIR";

/// The cache root this process uses: `$PGSHIFT_EMBEDDED_DIR` if set and
/// non-empty, else `/tmp/pgshift-embedded-<uid>`. It may not exist yet.
pub fn cache_root() -> PathBuf {
    match std::env::var_os(EMBEDDED_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let uid = unsafe { libc::geteuid() };
            PathBuf::from(format!("/tmp/pgshift-embedded-{uid}"))
        }
    }
}

/// Creates the cache root if needed, checks it belongs to us (it may live in a
/// world-writable `/tmp`), makes it traversable by the server's user, and
/// returns its absolute path.
pub(crate) fn ensure_cache_root(run_as: &RunAs) -> Result<PathBuf> {
    let root = cache_root();
    std::fs::create_dir_all(&root)
        .map_err(|e| Error::io(format!("creating the cache root {}", root.display()), e))?;
    let root = std::fs::canonicalize(&root)
        .map_err(|e| Error::io(format!("resolving {}", root.display()), e))?;
    let meta =
        std::fs::metadata(&root).map_err(|e| Error::io(format!("stat {}", root.display()), e))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != euid {
        return Err(Error::io(
            format!(
                "the cache root {} belongs to uid {}, not to us (uid {euid}); remove it or set {EMBEDDED_DIR_ENV}",
                root.display(),
                meta.uid()
            ),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        ));
    }
    if run_as.switches() && meta.mode() & 0o005 != 0o005 {
        set_mode(&root, 0o755)?;
    }
    run_as.check_reachable(&root)?;
    Ok(root)
}

/// Sets the permission bits of `path`.
pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io(format!("chmod {mode:o} {}", path.display()), e))
}
