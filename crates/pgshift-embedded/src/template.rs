//! One `initdb`-ed template data directory per installation, made once and
//! copied for every cluster.
//!
//! The template lives in the cache root as `t-<version>-<hash of the bindir>`.
//! It is built under a temporary name (`….tmp-<pid>`) and renamed into place,
//! all under an `flock` on `t-….lock`, so concurrent test binaries neither race
//! nor see a half-built template.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fsutil::remove_tree;
use crate::install::PgInstall;
use crate::lock::lock_exclusive;
use crate::process::run_checked;
use crate::root::set_mode;
use crate::user::RunAs;

/// How long to wait for another process building the same template.
const LOCK_TIMEOUT: Duration = Duration::from_secs(180);
/// How long `initdb` may take.
const INITDB_TIMEOUT: Duration = Duration::from_secs(120);
/// Marks the name of a template under construction; followed by the builder's pid.
pub(crate) const TMP_MARK: &str = ".tmp-";

/// Returns the template data directory for `install`, building it if needed.
pub(crate) fn ensure_template(install: &PgInstall, root: &Path, run_as: &RunAs) -> Result<PathBuf> {
    let name = template_name(install);
    let dir = root.join(&name);
    if is_complete(&dir) {
        return Ok(dir);
    }
    let _lock = lock_exclusive(
        &root.join(format!("{name}.lock")),
        LOCK_TIMEOUT,
        "another process is building the template",
    )?;
    if is_complete(&dir) {
        return Ok(dir);
    }
    run_as.check_reachable(install.bindir())?;
    let tmp = root.join(format!("{name}{TMP_MARK}{}", std::process::id()));
    remove_tree(&tmp)?;
    let built = initdb(install, &tmp, run_as);
    if let Err(e) = built {
        let _ = remove_tree(&tmp);
        return Err(e);
    }
    // A leftover incomplete directory under the final name would block the rename.
    remove_tree(&dir)?;
    std::fs::rename(&tmp, &dir).map_err(|e| {
        let _ = remove_tree(&tmp);
        Error::io(
            format!("renaming {} to {}", tmp.display(), dir.display()),
            e,
        )
    })?;
    Ok(dir)
}

/// Runs `initdb` into the new directory `tmp` (the template's settings).
pub(crate) fn initdb(install: &PgInstall, tmp: &Path, run_as: &RunAs) -> Result<()> {
    std::fs::create_dir(tmp).map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    set_mode(tmp, 0o700)?;
    run_as.chown(tmp)?;
    let mut cmd = install.command("initdb");
    cmd.arg("-D")
        .arg(tmp)
        .args([
            "--no-sync",
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-instructions",
        ])
        .current_dir(tmp);
    run_as.apply(&mut cmd);
    run_checked(cmd, INITDB_TIMEOUT)?;
    Ok(())
}

/// `t-<major>.<minor>-<8 hex digits of a hash of the bindir>`.
fn template_name(install: &PgInstall) -> String {
    let key = install.bindir().as_os_str().as_encoded_bytes();
    format!("t-{}-{:08x}", install.version(), fnv1a(key) as u32)
}

/// A complete template has `PG_VERSION` (written last-ish by initdb, and the
/// rename makes the whole directory appear at once anyway).
fn is_complete(dir: &Path) -> bool {
    dir.join("PG_VERSION").is_file() && dir.join("global").is_dir()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(
            fnv1a(b"/usr/lib/postgresql/15/bin"),
            fnv1a(b"/opt/pg/15/bin")
        );
    }
}
