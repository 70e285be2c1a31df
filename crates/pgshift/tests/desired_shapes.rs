//! `pull` of the differential corpus's table shapes, with PostgreSQL as the oracle:
//! each shape (keys of every kind, identity and serial columns, generated columns,
//! TOAST settings, enums, domains, collations, partial and expression indexes,
//! exclusion and deferrable constraints, foreign keys both ways, row-level security,
//! column grants, inheritance, every kind of partitioning, owners, triggers in every
//! enable state, storage tuning, views with triggers, rules and options, materialized
//! views) is seeded as the differential test seeds it, pulled with
//! `pgshift::desired::pull`, and the pulled manifest run by `psql` on an empty database
//! must dump as the shape does (owners left out: `pull` writes none). Publications
//! (with row filters and column lists from 15) are pulled too.
//!
//! `PGSHIFT_PULL_SHAPES=N` pulls N shapes of the corpus (12 by default).

mod common;
// The differential test's harness; this test uses its shapes and seeding only.
#[allow(dead_code)]
#[path = "common/differential/mod.rs"]
mod differential;

use common::cluster;
use differential::shape::{corpus, DEFAULT_SEED};
use pgshift::desired::{pull, Fidelity};

fn dump(db: &str) -> String {
    let output = cluster()
        .command("pg_dump")
        .args(["--schema-only", "--no-owner", "-d"])
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_rebuilds_every_differential_shape() {
    let count = std::env::var("PGSHIFT_PULL_SHAPES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(12);
    let (version, citext) = differential::prepare_cluster()
        .await
        .expect("the cluster is prepared");
    let work = std::env::temp_dir().join(format!("pgshift-pull-shapes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("scratch");
    let mut rebuilt = 0;
    for (index, mut shape) in corpus(DEFAULT_SEED, count).into_iter().enumerate() {
        shape.citext &= citext;
        let label = shape.label();
        let live = differential::seed(10_000 + index, &shape, version)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let out = work.join(format!("shape-{index}"));
        match pull(&cluster().connection_string(&live), &out).await {
            Ok(pulled) => {
                let copy = cluster().fresh_database("shape_rebuilt").expect("database");
                cluster()
                    .psql_file(&copy, out.join("manifest.sql"))
                    .unwrap_or_else(|e| panic!("{label}: the pulled manifest fails: {e}"));
                let want = match &pulled.fidelity {
                    Fidelity::Exact => dump(&live),
                    // What pg_dump's own output of the shape rebuilds.
                    Fidelity::AsPgDumpRebuilds { .. } => {
                        let reference = cluster().fresh_database("shape_ref").expect("db");
                        let script = work.join(format!("shape-{index}.sql"));
                        std::fs::write(&script, dump(&live)).expect("written");
                        cluster()
                            .psql_file(&reference, &script)
                            .unwrap_or_else(|e| panic!("{label}: pg_dump's output fails: {e}"));
                        dump(&reference)
                    }
                };
                assert!(
                    want == dump(&copy),
                    "{label}: the pulled files rebuild another schema ({:?})",
                    pulled.fidelity
                );
                rebuilt += 1;
            }
            Err(err) => panic!("{label}: {err}"),
        }
    }
    eprintln!("pulled shapes: {rebuilt} rebuilt");
    let _ = std::fs::remove_dir_all(&work);
}
