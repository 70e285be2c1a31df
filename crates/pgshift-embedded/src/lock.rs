//! Exclusive `flock`s on lock files, so that concurrent processes (test binaries
//! started at once, a demo beside a test run) build a template or download a
//! server one at a time.
//!
//! `flock` locks belong to an open file description, so two opens of the same
//! file conflict even within one process, and the kernel releases the lock when
//! the holder dies.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::process::Backoff;

/// An exclusive `flock` on a lock file, held until dropped (closing the file
/// releases it, also when the process dies).
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

/// Takes an exclusive `flock` on `path` (created if missing) without waiting:
/// `Ok(None)` when another holder has it.
pub(crate) fn try_lock_exclusive(path: &Path) -> Result<Option<FileLock>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))?;
    loop {
        // SAFETY: flock on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(FileLock { _file: file }));
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(None),
            Some(libc::EINTR) => continue,
            _ => return Err(Error::io(format!("locking {}", path.display()), err)),
        }
    }
}

/// Takes an exclusive `flock` on `path`, polling until `timeout`; `holder` says
/// who is presumed to hold it, for the timeout message.
pub(crate) fn lock_exclusive(path: &Path, timeout: Duration, holder: &str) -> Result<FileLock> {
    let deadline = Instant::now() + timeout;
    let mut backoff = Backoff::new();
    loop {
        if let Some(lock) = try_lock_exclusive(path)? {
            return Ok(lock);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("the lock on {} ({holder})", path.display()),
                waited: timeout,
                log_tail: None,
            });
        }
        backoff.sleep(deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_is_exclusive_within_a_process() {
        let path = std::env::temp_dir().join(format!("pgshift-lock-test-{}", std::process::id()));
        let first = lock_exclusive(&path, Duration::from_secs(1), "first").expect("first lock");
        assert!(matches!(try_lock_exclusive(&path), Ok(None)));
        let second = lock_exclusive(&path, Duration::from_millis(100), "the first lock");
        match second {
            Err(Error::Timeout { what, .. }) => {
                assert!(what.contains("(the first lock)"), "{what}")
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        drop(first);
        let third = lock_exclusive(&path, Duration::from_secs(1), "first");
        assert!(third.is_ok());
        let _ = std::fs::remove_file(&path);
    }
}
