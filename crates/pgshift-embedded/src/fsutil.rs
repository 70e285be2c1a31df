//! File-tree helpers: copying a template data directory (modes kept, ownership
//! given to the server's user) and reading the tail of a log file.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::user::RunAs;

/// How deep a copied tree may be; a PostgreSQL data directory is a few levels.
const MAX_DEPTH: usize = 32;

/// Copies the directory tree `src` to `dst` (which must not exist), keeping
/// permission bits and symlinks, and chown-ing every entry to `run_as`.
pub(crate) fn copy_tree(src: &Path, dst: &Path, run_as: &RunAs) -> Result<()> {
    copy_dir(src, dst, run_as, 0)
}

fn copy_dir(src: &Path, dst: &Path, run_as: &RunAs, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::io(
            format!("copying {}: tree deeper than {MAX_DEPTH}", src.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidData),
        ));
    }
    let meta = fs::metadata(src).map_err(|e| Error::io(format!("stat {}", src.display()), e))?;
    fs::create_dir(dst).map_err(|e| Error::io(format!("creating {}", dst.display()), e))?;
    fs::set_permissions(dst, fs::Permissions::from_mode(meta.permissions().mode()))
        .map_err(|e| Error::io(format!("chmod {}", dst.display()), e))?;
    run_as.chown(dst)?;
    let entries =
        fs::read_dir(src).map_err(|e| Error::io(format!("listing {}", src.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", src.display()), e))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(format!("stat {}", from.display()), e))?;
        if kind.is_dir() {
            copy_dir(&from, &to, run_as, depth + 1)?;
        } else if kind.is_symlink() {
            let target = fs::read_link(&from)
                .map_err(|e| Error::io(format!("reading link {}", from.display()), e))?;
            std::os::unix::fs::symlink(&target, &to)
                .map_err(|e| Error::io(format!("creating link {}", to.display()), e))?;
            run_as.chown(&to)?;
        } else if kind.is_file() {
            // fs::copy keeps the permission bits.
            fs::copy(&from, &to).map_err(|e| {
                Error::io(format!("copying {} to {}", from.display(), to.display()), e)
            })?;
            run_as.chown(&to)?;
        }
        // Sockets, fifos and devices do not belong in a stopped data directory.
    }
    Ok(())
}

/// Removes a directory tree; a tree that is already gone is fine.
pub(crate) fn remove_tree(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("removing {}", dir.display()), e)),
    }
}

/// The last `lines` lines of a text file (at most its last 64 KiB), or a note
/// saying why it could not be read.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 64 * 1024;
    let read = || -> std::io::Result<String> {
        let mut file = fs::File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(WINDOW)))?;
        let mut bytes = Vec::new();
        file.take(WINDOW).read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}
