//! The git commit a checkout is at, for `pgshift --version`: shared by the build
//! script (which embeds it) and the test that checks it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `--version` says when the crate is not built from its own git checkout.
#[allow(dead_code)]
pub const UNKNOWN: &str = "unknown";

/// The commit (12 hex digits) of the git checkout whose `crates/pgshift-cli` is
/// `crate_dir`, and the files whose change means a new commit; `None` outside
/// such a checkout (a crates.io download, a tarball, a copy vendored into some
/// other repository).
pub fn commit_of(crate_dir: &Path) -> Option<(String, Vec<PathBuf>)> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git")
            .args(args)
            .current_dir(crate_dir)
            .output()
            .ok()?;
        let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
        (output.status.success() && !text.is_empty()).then_some(text)
    };
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    let ours = std::fs::canonicalize(top.join("crates/pgshift-cli")).ok()?;
    if std::fs::canonicalize(crate_dir).ok()? != ours {
        return None;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    if !commit.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut watch = Vec::new();
    let mut git_path = |name: &str| {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            watch.push(crate_dir.join(path));
        }
    };
    git_path("HEAD");
    git_path("packed-refs");
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        git_path(&branch);
    }
    Some((commit, watch))
}
