//! `pgshift pull` as text.

use std::fmt::Write as _;

use pgshift::desired::Fidelity;
use pgshift::report::PullReport;

/// What a pull wrote: the folder, the counts by kind of file, and how to apply it.
pub fn pull(report: &PullReport) -> String {
    let pulled = &report.pulled;
    let statements: usize = pulled.files.iter().map(|f| f.statements).sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Pulled {} files ({statements} statements) into {}",
        pulled.files.len() + 1,
        pulled.out.display()
    );
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for file in &pulled.files {
        let kind = file
            .path
            .rsplit('/')
            .nth(1)
            .unwrap_or_else(|| file.path.trim_end_matches(".sql"));
        *kinds.entry(kind).or_default() += 1;
    }
    for (kind, count) in kinds {
        let _ = writeln!(out, "  {kind:<20} {count}");
    }
    if pulled.moved_foreign_keys > 0 {
        let _ = writeln!(
            out,
            "  {} foreign keys are in foreign_keys.sql: their tables reference each other in a cycle",
            pulled.moved_foreign_keys
        );
    }
    let major = pulled.server_version_num / 10_000;
    match &pulled.fidelity {
        Fidelity::Exact => {
            let _ = writeln!(
                out,
                "Proven: run on a throwaway PostgreSQL {major} cluster, the files rebuild the live schema exactly (pg_dump --schema-only equal)."
            );
        }
        Fidelity::AsPgDumpRebuilds { lines, first } => {
            let _ = writeln!(
                out,
                "Proven: run on a throwaway PostgreSQL {major} cluster, the files rebuild exactly what pg_dump's own output rebuilds; {lines} dump lines print otherwise than the live catalog (PostgreSQL reads some expressions it printed back into another form of the same meaning), first: {first}"
            );
        }
    }
    let _ = writeln!(
        out,
        "Read {} ms, proof {} ms.",
        pulled.timings_ms.read_ms, pulled.timings_ms.prove_ms
    );
    let _ = writeln!(
        out,
        "Apply elsewhere with: psql -v ON_ERROR_STOP=1 -f {}",
        pulled.out.join("manifest.sql").display()
    );
    out
}
