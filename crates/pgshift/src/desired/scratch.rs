//! A folder of this process's own for the scripts `psql` runs on a throwaway cluster
//! (`diff`'s live rebuild and plan, standard input's desired SQL), removed on drop.

use std::path::PathBuf;

use super::compare::Desired;
use super::layout::MANIFEST;

/// The folder.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty one under the temporary directory.
    pub(crate) fn new() -> std::io::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("pgshift-desired-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    /// Writes `text` as `name` in it.
    pub(crate) fn write(&self, name: &str, text: &str) -> std::io::Result<PathBuf> {
        let path = self.0.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// The file `psql -f` runs for `desired`: a folder's manifest, the file itself, or
    /// standard input's SQL written here.
    pub(crate) fn script_of(&self, desired: &Desired) -> std::io::Result<PathBuf> {
        match desired {
            Desired::Path(path) if path.is_dir() => Ok(path.join(MANIFEST)),
            Desired::Path(path) => Ok(path.clone()),
            Desired::Text(text) => self.write("desired.sql", text),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
