//! Embeds the git commit in the binary as `PGSHIFT_GIT_COMMIT`, for `--version`
//! ("unknown" when built outside the project's git checkout).

#[path = "build/git_commit.rs"]
mod git_commit;

fn main() {
    let crate_dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/git_commit.rs");
    let commit = match git_commit::commit_of(&crate_dir) {
        Some((commit, watch)) => {
            for path in watch.iter().filter(|p| p.exists()) {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            commit
        }
        None => git_commit::UNKNOWN.to_owned(),
    };
    println!("cargo:rustc-env=PGSHIFT_GIT_COMMIT={commit}");
}
