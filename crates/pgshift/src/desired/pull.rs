//! `pull`: the live schema into a new folder, proven on a throwaway cluster first.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::error::PullError;
use super::layout::{self, Layout, MANIFEST};
use crate::trace::{clone::Clone, install, read_target, schema};

/// `pg_dump`'s options for a pull: the schema with its grants, without owners (the
/// files are applied by whoever runs them).
pub(super) const DUMP_OPTIONS: [&str; 1] = ["--no-owner"];

/// What a pull wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Pulled {
    /// The live server's `server_version_num`.
    pub server_version_num: u32,
    /// The `pg_dump` that read it.
    pub pg_dump: String,
    /// The folder written.
    pub out: PathBuf,
    /// Every file, in the manifest's order, with its statements.
    pub files: Vec<PulledFileSummary>,
    /// Foreign keys in `foreign_keys.sql` because the tables' keys form a cycle.
    pub moved_foreign_keys: usize,
    /// The files were run on a throwaway cluster of the same major and rebuilt the
    /// schema (always true: otherwise nothing is written); how exactly is
    /// [`Pulled::fidelity`].
    pub reproduced: bool,
    /// How the rebuilt schema compares with the live one.
    pub fidelity: Fidelity,
    /// Milliseconds spent reading the live schema, proving the files, and in all.
    pub timings_ms: PullTimings,
}

/// How the files' schema compares with the live one.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Fidelity {
    /// Its `pg_dump --schema-only` equals the live one, byte for byte.
    Exact,
    /// It equals what `pg_dump`'s own output rebuilds, which prints some
    /// expressions otherwise than the live catalog does: PostgreSQL reads an
    /// expression it printed back into another form (`(ARRAY['a'::varchar])::text[]`
    /// comes back as `ARRAY[('a'::varchar)::text]`), the same meaning, another tree.
    AsPgDumpRebuilds {
        /// Dump lines that differ from the live dump.
        lines: usize,
        /// The first of them, marked `live:` or `files:`.
        first: String,
    },
}

/// One pulled file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PulledFileSummary {
    /// Its path in the folder.
    pub path: String,
    /// Its statements.
    pub statements: usize,
}

/// Where a pull's time went.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct PullTimings {
    /// Connecting, reading globals and `pg_dump`.
    pub read_ms: u64,
    /// The throwaway cluster: start, run the files, dump, compare.
    pub prove_ms: u64,
    /// Everything.
    pub total_ms: u64,
}

/// Pulls the schema of the database `conninfo` names into `out`, a folder that must
/// not exist or be empty. The files are written beside it first, run on a throwaway
/// cluster of the live server's major version, and moved into place only when that
/// cluster's schema dump equals the live one.
pub async fn pull(conninfo: &str, out: &Path) -> Result<Pulled, PullError> {
    let started = Instant::now();
    if out.exists() && !is_empty_dir(out) {
        return Err(PullError::OutputExists(out.to_owned()));
    }
    let (version_num, globals) = read_target(conninfo).await?;
    let install = install::for_major(version_num / 10_000)?;
    let live = unrestricted(&schema::dump_with(&install, conninfo, &DUMP_OPTIONS)?);
    let layout = layout::split(&live)?;
    let read_ms = elapsed_ms(started);
    let staging = staging_dir(out);
    let result = async {
        write(&staging, &layout)?;
        let clone = Clone::start(&install)?;
        clone.provide(&globals).await?;
        prove(&clone, &install, &staging, &layout, &live)
    }
    .await;
    let fidelity = match result {
        Ok(fidelity) => fidelity,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(err);
        }
    };
    let prove_ms = elapsed_ms(started).saturating_sub(read_ms);
    if out.exists() {
        std::fs::remove_dir(out).map_err(|source| PullError::Write {
            path: out.to_owned(),
            source,
        })?;
    }
    std::fs::rename(&staging, out).map_err(|source| {
        let _ = std::fs::remove_dir_all(&staging);
        PullError::Write {
            path: out.to_owned(),
            source,
        }
    })?;
    Ok(Pulled {
        server_version_num: version_num,
        pg_dump: install.bin("pg_dump").display().to_string(),
        out: out.to_owned(),
        files: layout
            .files
            .iter()
            .map(|f| PulledFileSummary {
                path: f.path.clone(),
                statements: f.statements,
            })
            .collect(),
        moved_foreign_keys: layout.moved_foreign_keys,
        reproduced: true,
        fidelity,
        timings_ms: PullTimings {
            read_ms,
            prove_ms,
            total_ms: elapsed_ms(started),
        },
    })
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

/// A sibling of `out` no other pull uses: `.NAME.pgshift-pull-PID`.
fn staging_dir(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "schema".to_owned());
    out.with_file_name(format!(".{name}.pgshift-pull-{}", std::process::id()))
}

/// Writes the layout's files and manifest under `root`.
pub(crate) fn write(root: &Path, layout: &Layout) -> Result<(), PullError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| PullError::Write { path, source }
    };
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root).map_err(io(root))?;
    for file in &layout.files {
        let path = root.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, &file.text).map_err(io(&path))?;
    }
    let manifest = root.join(MANIFEST);
    std::fs::write(&manifest, &layout.manifest).map_err(io(&manifest))
}

/// Runs the files on the clone and compares its dump with the live one; where they
/// differ, runs the dump itself, in its own order, on a second database of the clone
/// and requires the files to rebuild exactly what it rebuilds.
// INV: DS-1 — pulled files are written only when, run on a throwaway cluster of the
// live major, they rebuild the live schema, or exactly what pg_dump's own output
// rebuilds from it.
fn prove(
    clone: &Clone,
    install: &pgshift_embedded::PgInstall,
    staging: &Path,
    layout: &Layout,
    live: &str,
) -> Result<Fidelity, PullError> {
    clone
        .run_file(&staging.join(MANIFEST))
        .map_err(|e| PullError::DidNotRun(e.to_string()))?;
    let rebuilt = unrestricted(&schema::dump_with(
        install,
        &clone.conninfo(),
        &DUMP_OPTIONS,
    )?);
    let Err(PullError::NotReproduced { count, first }) = compare(live, &rebuilt) else {
        return Ok(Fidelity::Exact);
    };
    let cluster = clone.cluster();
    let database = cluster
        .fresh_database("reference")
        .map_err(crate::trace::TraceError::from)?;
    let script = staging.with_extension("reference.sql");
    std::fs::write(&script, &layout.reference).map_err(|source| PullError::Write {
        path: script.clone(),
        source,
    })?;
    let restored = cluster.psql_file(&database, &script);
    let _ = std::fs::remove_file(&script);
    if restored.is_err() {
        // pg_dump's own output does not restore either: the live difference stands.
        return Err(PullError::NotReproduced { count, first });
    }
    let reference = unrestricted(&schema::dump_with(
        install,
        &cluster.connection_string(&database),
        &DUMP_OPTIONS,
    )?);
    compare(&reference, &rebuilt)?;
    Ok(Fidelity::AsPgDumpRebuilds {
        lines: count,
        first,
    })
}

/// A dump without what differs between two dumps of one schema: `pg_dump`'s
/// `\restrict` key lines (random per run) and the version header.
pub(crate) fn unrestricted(dump: &str) -> String {
    let key = dump
        .lines()
        .find_map(|line| line.strip_prefix("\\restrict "))
        .map(str::to_owned);
    dump.lines()
        .filter(|line| {
            let restrict = key.as_deref().is_some_and(|key| {
                line.strip_prefix("\\restrict ") == Some(key)
                    || line.strip_prefix("\\unrestrict ") == Some(key)
            });
            !restrict
                && !line.starts_with("-- Dumped from database version")
                && !line.starts_with("-- Dumped by pg_dump version")
        })
        .flat_map(|line| [line, "\n"])
        .collect()
}

/// Equal dumps, or the lines that differ.
fn compare(live: &str, rebuilt: &str) -> Result<(), PullError> {
    if live == rebuilt {
        return Ok(());
    }
    let live_lines: Vec<&str> = live.lines().collect();
    let rebuilt_lines: Vec<&str> = rebuilt.lines().collect();
    let only = |a: &[&str], b: &[&str], mark: &str| -> Vec<String> {
        let mut rest: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
        for line in b {
            *rest.entry(line).or_default() += 1;
        }
        a.iter()
            .filter(|line| match rest.get_mut(**line) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .map(|line| format!("{mark} {line}"))
            .collect()
    };
    let mut differing = only(&live_lines, &rebuilt_lines, "live:");
    differing.extend(only(&rebuilt_lines, &live_lines, "files:"));
    let first = differing
        .first()
        .cloned()
        .unwrap_or_else(|| "the same lines in another order".to_owned());
    Err(PullError::NotReproduced {
        count: differing.len().max(1),
        first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restrict_key_and_version_header_are_not_compared() {
        let dump = "-- Dumped from database version 15.20\n\\restrict abc\nCREATE TABLE t ();\n\\unrestrict abc\n";
        assert_eq!(unrestricted(dump), "CREATE TABLE t ();\n");
        let other = "-- Dumped from database version 15.18\n\\restrict xyz\nCREATE TABLE t ();\n\\unrestrict xyz\n";
        assert!(compare(&unrestricted(dump), &unrestricted(other)).is_ok());
    }

    #[test]
    fn a_differing_line_is_named_with_its_side() {
        match compare("a\nb\n", "a\nc\n") {
            Err(PullError::NotReproduced { count, first }) => {
                assert_eq!(count, 2);
                assert_eq!(first, "live: b");
            }
            other => panic!("expected a difference, got {other:?}"),
        }
        assert!(matches!(
            compare("a\nb\n", "b\na\n"),
            Err(PullError::NotReproduced { .. })
        ));
    }
}
