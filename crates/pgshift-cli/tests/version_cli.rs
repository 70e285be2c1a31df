//! `pgshift --version`: the crate version and the git commit the binary was built
//! from, "unknown" outside the project's git checkout.

mod common;

#[path = "../build/git_commit.rs"]
mod git_commit;

use std::path::Path;

use common::pgshift;

#[test]
fn version_names_the_commit_it_was_built_from() {
    let run = pgshift(&["--version"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Cargo rebuilt the binary for this test run if HEAD moved, so the commit of
    // the checkout now is the commit it was built from.
    let commit = git_commit::commit_of(crate_dir)
        .map(|(commit, _)| commit)
        .unwrap_or_else(|| git_commit::UNKNOWN.to_owned());
    assert_eq!(
        run.stdout,
        format!("pgshift {} (commit {commit})\n", env!("CARGO_PKG_VERSION"))
    );
    if commit != git_commit::UNKNOWN {
        assert_eq!(commit.len(), 12, "{commit}");
        assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
    }
}

#[test]
fn outside_the_checkout_the_commit_is_unknown() {
    // A copy of the crate directory that no git repository holds (as in a
    // crates.io download): the build script finds no commit for it.
    let dir = std::env::temp_dir().join(format!(
        "pgshift-version-{}/crates/pgshift-cli",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("dir");
    let found = git_commit::commit_of(&dir);
    let _ = std::fs::remove_dir_all(dir.parent().and_then(Path::parent).expect("root"));
    assert_eq!(found.map(|(c, _)| c), None);

    // Inside some other repository, the commit is not ours either.
    let other = std::env::temp_dir().join(format!("pgshift-version-git-{}", std::process::id()));
    let nested = other.join("vendor/pgshift-cli");
    std::fs::create_dir_all(&nested).expect("dir");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&other)
            .status()
            .is_ok_and(|s| s.success())
    };
    let made = git(&["init", "-q"]) && git(&["commit", "-q", "--allow-empty", "-m", "x"]);
    let found = git_commit::commit_of(&nested);
    let _ = std::fs::remove_dir_all(&other);
    if made {
        assert_eq!(found.map(|(c, _)| c), None);
    }
}
