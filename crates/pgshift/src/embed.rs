//! A migrations directory embedded in the binary: what
//! [`embed_migrations!`](crate::embed_migrations) expands to.
//!
//! The engine reads migrations from a directory (its layout is detected from the
//! entries' names, diesel's `metadata.toml` and dbmate's or goose's markers are read
//! from the files: [`crate::layout`]). An embedded tree is written, as it was at
//! compile time, into a private temporary directory for the length of one run
//! ([`EmbeddedMigrations::materialize`]), so that the engine sees exactly the entries it
//! would see on disk, and nothing of it is read differently.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// One embedded file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddedFile {
    path: &'static str,
    contents: &'static [u8],
}

impl EmbeddedFile {
    /// Used by [`embed_migrations!`](crate::embed_migrations); not meant to be called
    /// by hand.
    #[doc(hidden)]
    pub const fn __new(path: &'static str, contents: &'static [u8]) -> Self {
        EmbeddedFile { path, contents }
    }

    /// Its path relative to the embedded directory, with `/` between components
    /// (`0001_init.sql`, `2023-01-01-000000_users/up.sql`).
    pub const fn path(&self) -> &'static str {
        self.path
    }

    /// Its bytes as they were at compile time.
    pub const fn contents(&self) -> &'static [u8] {
        self.contents
    }
}

/// A migrations directory embedded at compile time, with every file and folder of its
/// tree. Made by [`embed_migrations!`](crate::embed_migrations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddedMigrations {
    directory: &'static str,
    files: &'static [EmbeddedFile],
    folders: &'static [&'static str],
}

impl EmbeddedMigrations {
    /// Used by [`embed_migrations!`](crate::embed_migrations); not meant to be called
    /// by hand.
    #[doc(hidden)]
    pub const fn __new(
        directory: &'static str,
        files: &'static [EmbeddedFile],
        folders: &'static [&'static str],
    ) -> Self {
        EmbeddedMigrations {
            directory,
            files,
            folders,
        }
    }

    /// The directory as the macro was given it (`migrations`), relative to the crate
    /// that embedded it: the name reports and errors use for it.
    pub const fn directory(&self) -> &'static str {
        self.directory
    }

    /// Every file of the tree, in name order (a folder's files after its name).
    pub const fn files(&self) -> &'static [EmbeddedFile] {
        self.files
    }

    /// Every folder of the tree (relative paths), including empty ones.
    pub const fn folders(&self) -> &'static [&'static str] {
        self.folders
    }

    /// Writes the tree into a new private directory (mode 0700) under the system's
    /// temporary directory, removed when the returned value is dropped.
    pub fn materialize(&self) -> std::io::Result<MaterializedDir> {
        let root = private_dir()?;
        let dir = MaterializedDir { root };
        for folder in self.folders {
            std::fs::create_dir_all(dir.root.join(relative(folder)?))?;
        }
        for file in self.files {
            let path = dir.root.join(relative(file.path)?);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, file.contents)?;
        }
        Ok(dir)
    }
}

/// An embedded tree written to disk for one run; removed on drop.
#[derive(Debug)]
pub struct MaterializedDir {
    root: PathBuf,
}

impl MaterializedDir {
    /// The directory the engine reads.
    pub fn path(&self) -> &Path {
        &self.root
    }
}

impl Drop for MaterializedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A relative path of the tree, checked: no absolute path, no `..` (the macro never
/// makes one; a hand-made tree must not write outside its directory).
fn relative(path: &str) -> std::io::Result<PathBuf> {
    let path = Path::new(path);
    let plain = path
        .components()
        .all(|component| matches!(component, Component::Normal(_)));
    if plain && !path.as_os_str().is_empty() {
        Ok(path.to_path_buf())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{}: an embedded path must be relative, without `..`",
                path.display()
            ),
        ))
    }
}

/// A new directory only this user may read, under the temporary directory.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = base.join(format!(
            "pgshift-embedded-{}-{n}-{nanos:09}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TREE: EmbeddedMigrations = EmbeddedMigrations::__new(
        "migrations",
        &[
            EmbeddedFile::__new("0001_a.sql", b"CREATE TABLE a (id int);"),
            EmbeddedFile::__new("2023-01-01-000000_b/up.sql", b"SELECT 1;"),
        ],
        &["2023-01-01-000000_b", "empty"],
    );

    #[test]
    fn a_tree_is_written_as_embedded_and_removed_on_drop() {
        let dir = TREE.materialize().expect("writes");
        let root = dir.path().to_path_buf();
        assert_eq!(
            std::fs::read(root.join("0001_a.sql")).expect("file"),
            b"CREATE TABLE a (id int);"
        );
        assert!(root.join("2023-01-01-000000_b/up.sql").is_file());
        assert!(root.join("empty").is_dir());
        drop(dir);
        assert!(!root.exists());
    }

    #[test]
    fn paths_outside_the_tree_are_refused() {
        for bad in ["../x.sql", "/etc/x.sql", "a/../../x.sql", ""] {
            let tree =
                EmbeddedMigrations::__new("m", &[], std::slice::from_ref(Box::leak(Box::new(bad))));
            assert!(tree.materialize().is_err(), "{bad}");
        }
    }
}
