//! `pgshift pull` on what published packages' directories leave: the directory run
//! natively on one database, pulled, and the pulled manifest run by `psql` on an
//! empty database must give the same `pg_dump --schema-only` (the history tables
//! included: they are tables like any other). A second pull gives the same bytes, and
//! a pull into the written folder is refused with nothing touched.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::harness::{cluster, dump, entry, prepare, psql, run_natively, unified_diff, Prepared};
use crate::common::pgshift;

/// The whole check of one directory.
pub(crate) fn pull_round_trip(name: &str) {
    let entry = entry(name);
    let Prepared {
        work,
        prelude,
        files,
        ..
    } = prepare(entry, &format!("{name}-pull"));
    let live = cluster()
        .fresh_database(&format!("{name}_live"))
        .expect("database");
    if !entry.setup.is_empty() {
        cluster()
            .psql(&live, &entry.setup)
            .expect("the runner's setup runs");
    }
    let major = cluster().version().major;
    let native = run_natively(entry, &live, &prelude, &files);
    if entry
        .native_fails
        .as_ref()
        .is_some_and(|f| major >= f.from_major)
    {
        // Nothing to pull that the directory's own test does not already check fails.
        let _ = fs::remove_dir_all(&work);
        return;
    }
    native.unwrap_or_else(|err| panic!("{name}: the native run fails: {err}"));

    let out = work.join("pulled");
    let url = cluster().connection_string(&live);
    let out_text = out.to_str().expect("UTF-8 path");
    let run = pgshift(&["pull", "--url", &url, "--out", out_text, "--format", "json"]);
    assert_eq!(run.code, 0, "{name}: pull: {}\n{}", run.stdout, run.stderr);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(report["command"], "pull");
    assert_eq!(report["reproduced"], true);
    eprintln!("{name}: pull fidelity {}", report["fidelity"]);
    let listed = report["files"].as_array().map_or(0, Vec::len);
    assert!(listed > 1, "{name}: {report}");

    // Not pull's own proof: the manifest run by psql on an empty database.
    let rebuilt = cluster()
        .fresh_database(&format!("{name}_rebuilt"))
        .expect("database");
    psql(
        &rebuilt,
        &["-f".as_ref(), out.join("manifest.sql").as_os_str()],
    )
    .unwrap_or_else(|err| panic!("{name}: the pulled manifest fails: {err}"));
    let got = dump(&rebuilt, &[]);
    let want = if report["fidelity"]["kind"] == "exact" {
        dump(&live, &[])
    } else {
        // PostgreSQL prints some expression in a form it reads back otherwise: the
        // files must rebuild what pg_dump's own output of the live schema rebuilds.
        assert_eq!(
            report["fidelity"]["kind"], "as-pg-dump-rebuilds",
            "{report}"
        );
        let script = work.join("live-dump.sql");
        fs::write(&script, dump(&live, &[])).expect("dump written");
        let reference = cluster()
            .fresh_database(&format!("{name}_reference"))
            .expect("database");
        psql(&reference, &["-f".as_ref(), script.as_os_str()])
            .unwrap_or_else(|err| panic!("{name}: pg_dump's own output fails: {err}"));
        assert_ne!(dump(&live, &[]), got, "{name}: reported inexact, but equal");
        dump(&reference, &[])
    };
    assert!(
        want == got,
        "{name}: the pulled files rebuild another schema:\n{}",
        unified_diff(&work, &want, &got)
    );

    // Canonical: a second pull writes the same bytes.
    let again = work.join("again");
    let again_text = again.to_str().expect("UTF-8 path");
    let run = pgshift(&["pull", "--url", &url, "--out", again_text]);
    assert_eq!(run.code, 0, "{name}: second pull: {}", run.stderr);
    assert_eq!(tree(&out), tree(&again), "{name}: two pulls differ");

    // Never overwrites.
    let before = tree(&out);
    let run = pgshift(&["pull", "--url", &url, "--out", out_text, "--format", "json"]);
    assert_eq!(
        run.code, 2,
        "{name}: a pull into a written folder: {}",
        run.stdout
    );
    let refused: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
    assert_eq!(refused["code"], "output-exists", "{refused}");
    assert_eq!(
        tree(&out),
        before,
        "{name}: the refused pull touched the folder"
    );
    let _ = fs::remove_dir_all(&work);
}

/// Every file under `root` with its bytes, by relative path.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for item in fs::read_dir(&dir).expect("folder readable") {
            let path = item.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .expect("under the root")
                    .to_string_lossy()
                    .into_owned();
                files.insert(relative, fs::read(&path).expect("file readable"));
            }
        }
    }
    files
}
