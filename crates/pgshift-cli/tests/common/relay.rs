//! The relay migrations directory (`crates/pgshift/tests/data/migrations/relay`) on a
//! real database: files by version, applied natively with `psql` (what the
//! project's own runner did), and the trigger state of the relay as rows to compare.

use pgshift_embedded::Cluster;

use super::workspace_root;

/// The directory, relative to the workspace root (as a user would type it).
pub const DIR: &str = "crates/pgshift/tests/data/migrations/relay";

/// The relay schema, relative to the workspace root.
pub const SCHEMA: &str = "workloads/relay/schema.sql";

/// The newest version of the directory.
pub const NEWEST: u32 = 39;

/// The file of `version`, relative to the workspace root.
pub fn file(version: u32) -> String {
    let prefix = format!("{version:04}_");
    let mut names: Vec<String> = std::fs::read_dir(workspace_root().join(DIR))
        .expect("the relay directory is readable")
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix) && name.ends_with(".sql"))
        .collect();
    assert_eq!(names.len(), 1, "one file of version {version}: {names:?}");
    format!("{DIR}/{}", names.remove(0))
}

/// The files of `versions`, relative to the workspace root.
pub fn files(versions: std::ops::RangeInclusive<u32>) -> Vec<String> {
    versions.map(file).collect()
}

/// A fresh database holding the relay schema (no rows).
pub fn schema_database(cluster: &Cluster, prefix: &str) -> String {
    let db = cluster.fresh_database(prefix).expect("database");
    cluster
        .psql_file(&db, workspace_root().join(SCHEMA))
        .expect("relay schema loads");
    db
}

/// Applies the files of `versions` to `db` natively, each with
/// `psql -v ON_ERROR_STOP=1 -f` (autocommit, as the directory's README verifies).
pub fn apply_natively(cluster: &Cluster, db: &str, versions: std::ops::RangeInclusive<u32>) {
    for path in files(versions) {
        cluster
            .psql_file(db, workspace_root().join(&path))
            .unwrap_or_else(|err| panic!("{path} applies natively: {err}"));
    }
}

/// Every user trigger of the database, one line each, sorted: table, name, enable
/// state, the table and name of the trigger it is a clone of (partitions), and its
/// definition with the table name in place. No OIDs, so two databases compare.
/// Clones on partitions are included on every major (before PostgreSQL 15 they are
/// `tgisinternal`); foreign-key triggers are not.
pub fn triggers(cluster: &Cluster, db: &str) -> String {
    cluster
        .psql(
            db,
            "SELECT c.relname, t.tgname, t.tgenabled, \
                    coalesce(pc.relname || '.' || p.tgname, '-'), \
                    pg_get_triggerdef(t.oid) \
               FROM pg_trigger t \
               JOIN pg_class c ON c.oid = t.tgrelid \
               JOIN pg_namespace n ON n.oid = c.relnamespace \
               LEFT JOIN pg_trigger p ON p.oid = t.tgparentid \
               LEFT JOIN pg_class pc ON pc.oid = p.tgrelid \
              WHERE (NOT t.tgisinternal OR t.tgparentid <> 0) \
                AND NOT EXISTS (SELECT 1 FROM pg_constraint k \
                                 WHERE k.oid = t.tgconstraint AND k.contype <> 't') \
                AND n.nspname = 'public' \
              ORDER BY 1, 2",
        )
        .expect("pg_trigger readable")
}

/// The triggers of `triggers` on `events` and its partitions.
pub fn events_triggers(all: &str, partitions: &[String]) -> String {
    all.lines()
        .filter(|line| {
            let table = line.split('|').next().unwrap_or("");
            table == "events" || partitions.iter().any(|p| p == table)
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The partitions of `events`, by name.
pub fn partitions(cluster: &Cluster, db: &str) -> Vec<String> {
    cluster
        .psql(
            db,
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
              WHERE i.inhparent = 'public.events'::regclass ORDER BY 1",
        )
        .expect("pg_inherits readable")
        .lines()
        .map(str::to_owned)
        .collect()
}
