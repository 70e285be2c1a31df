//! The shared cluster, scratch folders and schema dumps of the desired-state tests
//! (`pull_cli`, `diff_cli`).

use std::fs;
use std::path::PathBuf;

use pgshift_embedded::{shared_cluster, Cluster};

/// The test binary's cluster (`PGSHIFT_PG_BIN`'s server).
pub fn cluster() -> &'static Cluster {
    shared_cluster().expect("a PostgreSQL cluster starts")
}

/// An empty scratch folder of this process's own.
pub fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pgshift-{label}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// `pg_dump --schema-only` of `db` without the random `\restrict` key lines.
pub fn dump(db: &str) -> String {
    dump_with(db, &[])
}

/// [`dump`] with more `pg_dump` options (`--schema=app`).
pub fn dump_with(db: &str, options: &[&str]) -> String {
    let output = cluster()
        .command("pg_dump")
        .args(["--schema-only"])
        .args(options)
        .arg("-d")
        .arg(cluster().connection_string(db))
        .output()
        .expect("pg_dump runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.starts_with("\\restrict ") && !l.starts_with("\\unrestrict "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `pgshift ARGS --url <db> --format json`: the exit code and its one JSON document.
pub fn pgshift_json(db: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let url = cluster().connection_string(db);
    let mut all = args.to_vec();
    all.extend(["--url", &url, "--format", "json"]);
    let run = super::pgshift(&all);
    let json = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "pgshift {args:?}: one JSON document ({e}):\n{}\n{}",
            run.stdout, run.stderr
        )
    });
    (run.code, json)
}
