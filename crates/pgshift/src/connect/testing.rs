//! Test helpers shared by the unit tests of this module.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub(crate) fn new(label: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "pgshift-connect-{label}-{}-{unique}",
            std::process::id()
        ));
        fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to `name` with permission bits `mode`.
    pub(crate) fn write(&self, name: &str, contents: &str, mode: u32) -> PathBuf {
        let path = self.path.join(name);
        fs::write(&path, contents).expect("write temp file");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// An injected environment: variables, an OS user and the directories and files that
/// "exist". Nothing is read from the process.
#[derive(Default)]
pub(crate) struct FakeEnv {
    vars: std::collections::BTreeMap<String, String>,
    os_user: Option<String>,
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

impl FakeEnv {
    /// An environment whose OS user is `user` and where `/tmp` exists.
    pub(crate) fn new(user: &str) -> FakeEnv {
        FakeEnv {
            os_user: Some(user.to_owned()),
            dirs: vec![PathBuf::from("/tmp")],
            ..FakeEnv::default()
        }
    }

    pub(crate) fn var(mut self, name: &str, value: &str) -> FakeEnv {
        self.vars.insert(name.to_owned(), value.to_owned());
        self
    }

    pub(crate) fn dirs(mut self, dirs: &[&str]) -> FakeEnv {
        self.dirs = dirs.iter().map(PathBuf::from).collect();
        self
    }

    pub(crate) fn file(mut self, path: &str) -> FakeEnv {
        self.files.push(PathBuf::from(path));
        self
    }

    pub(crate) fn without_os_user(mut self) -> FakeEnv {
        self.os_user = None;
        self
    }
}

impl super::Environment for FakeEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    fn os_user(&self) -> Option<String> {
        self.os_user.clone()
    }

    fn home_dir(&self) -> Option<PathBuf> {
        self.vars.get("HOME").map(PathBuf::from)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.dirs.iter().any(|dir| dir == path)
    }

    fn is_file(&self, path: &Path) -> bool {
        self.files.iter().any(|file| file == path)
    }
}
