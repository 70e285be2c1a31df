//! A scratch directory per thread, emptied before each use, for the targets whose
//! front door is the file system (password files, migrations directories).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A directory removed when the thread that made it ends.
struct Scratch {
    path: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Memory-backed `/dev/shm` when there is one (the targets make and remove files on
/// every input), else the system temp directory.
fn scratch_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Runs `work` with an empty directory of this thread's own.
pub(crate) fn with_empty_dir<R>(work: impl FnOnce(&Path) -> R) -> R {
    SCRATCH.with(|cell| {
        let mut slot = cell.borrow_mut();
        let scratch = slot.get_or_insert_with(|| Scratch {
            path: scratch_root().join(format!(
                "pgshift-fuzz-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            )),
        });
        let _ = std::fs::remove_dir_all(&scratch.path);
        std::fs::create_dir_all(&scratch.path).expect("the scratch directory can be made");
        work(&scratch.path)
    })
}
