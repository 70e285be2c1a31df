//! `diff`: the live schema against desired files, both built on one throwaway
//! cluster of the live major, and the plan proven there to converge.
//!
//! The live schema is dumped and rebuilt in one database of the clone, the desired
//! files run in another; both are dumped by the same `pg_dump`, so an expression
//! PostgreSQL prints otherwise after a round trip reads the same on both sides. The
//! changes ([`super::diff`]) then run on the rebuilt live database, and comparing it
//! with the desired one again must find nothing left: a plan that does not converge
//! (an ordering the statements cannot run in, a difference they do not cover) is an
//! error with what is left, before anything touches the live database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::diff::{
    access_changes, changes, leftover, storage_to_read, AccessChange, Change, DiffError, Facts,
};
use super::layout;
use super::pull::{unrestricted, DUMP_OPTIONS};
use super::scratch::Scratch;
use super::units::Units;
use crate::connect::{connect, ConnectionSpec, SessionBudgets};
use crate::trace::{clone::Clone, install, read_target, schema, TraceError};

/// Where the desired schema is.
#[derive(Clone, Debug)]
pub enum Desired {
    /// A folder with `manifest.sql` (as `pull` writes), or one SQL file, run by `psql`.
    Path(PathBuf),
    /// SQL text (stdin).
    Text(String),
}

/// The plan from the live schema to the desired one.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Compared {
    /// The live server's `server_version_num`.
    pub server_version_num: u32,
    /// The schemas the desired files name: nothing outside them is changed.
    pub managed_schemas: Vec<String>,
    /// The statements, in the order they run.
    pub changes: Vec<Change>,
    /// The changes of row-level security, policies and grants among them, with their
    /// access impact: a plan with any runs only with the review's fingerprint.
    pub access: Vec<AccessChange>,
    /// SHA-256 of the access changes (hex), when there are some: what `apply --desired
    /// --expect-rls-review` requires.
    pub access_review: Option<String>,
    /// SHA-256 of the live `pg_dump --schema-only` read (hex).
    pub live_fingerprint: String,
    /// SHA-256 of the plan's SQL (hex).
    pub plan_fingerprint: String,
    /// SHA-256 of both fingerprints (hex): what a review approves, and what `apply
    /// --desired --expect-fingerprint` requires to be unchanged (neither the database
    /// nor the plan changed since).
    pub fingerprint: String,
    /// The plan ran on the rebuilt live schema and left nothing to change (always true
    /// when there are changes: otherwise [`CompareError::NotConverged`]).
    pub converged: bool,
    /// Milliseconds in all.
    pub total_ms: u64,
}

impl Compared {
    /// The plan as one SQL script, each statement ending with `;`.
    pub fn script(&self) -> String {
        script(&self.changes)
    }
}

/// Why `diff` gave no plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// The desired files could not be read or did not run.
    #[error("the desired schema did not build on a throwaway cluster: {0}")]
    DesiredDidNotRun(String),
    /// The live schema did not rebuild on the throwaway cluster.
    #[error("the live schema did not rebuild on a throwaway cluster: {0}")]
    LiveDidNotRebuild(String),
    /// A difference the comparison does not cover.
    #[error(transparent)]
    Diff(#[from] DiffError),
    /// The live schema holds something desired state does not cover.
    #[error(transparent)]
    Layout(#[from] layout::LayoutError),
    /// The plan, run on the rebuilt live schema, failed or left differences.
    #[error("the plan does not converge on a throwaway copy of the live schema: {0}")]
    NotConverged(String),
    /// Reading the live schema or running the throwaway cluster failed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A file could not be written or read.
    #[error("{0}")]
    Io(String),
}

impl CompareError {
    /// Whether pgshift declined (the schemas are the reason), as opposed to failing.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            CompareError::Diff(_) | CompareError::Layout(_) | CompareError::NotConverged(_)
        )
    }
}

/// The plan that takes the database `conninfo` names to `desired`, managing the
/// `schemas` given, or (none given) those the desired files name.
pub async fn compare(
    conninfo: &str,
    desired: &Desired,
    schemas: &[String],
) -> Result<Compared, CompareError> {
    let started = Instant::now();
    let (version_num, globals) = read_target(conninfo).await?;
    let install = install::for_major(version_num / 10_000)?;
    let live_dump = unrestricted(&schema::dump_with(&install, conninfo, &DUMP_OPTIONS)?);
    let reference = layout::split(&live_dump)?.reference;
    let clone = Clone::start(&install)?;
    clone.provide(&globals).await?;
    let cluster = clone.cluster();
    let scratch = Scratch::new().map_err(io)?;
    let live_db = cluster.fresh_database("live").map_err(TraceError::from)?;
    let reference_file = scratch.write("live.sql", &reference).map_err(io)?;
    cluster
        .psql_file(&live_db, &reference_file)
        .map_err(|e| CompareError::LiveDidNotRebuild(e.to_string()))?;
    let desired_db = cluster
        .fresh_database("desired")
        .map_err(TraceError::from)?;
    let desired_file = scratch.script_of(desired).map_err(io)?;
    if !desired_file.is_file() {
        return Err(CompareError::DesiredDidNotRun(format!(
            "{} is not a file (give a folder with {}, a SQL file, or -)",
            desired_file.display(),
            layout::MANIFEST
        )));
    }
    cluster
        .psql_file(&desired_db, &desired_file)
        .map_err(|e| CompareError::DesiredDidNotRun(e.to_string()))?;
    let units_of = |db: &str| -> Result<Units, CompareError> {
        let dump = unrestricted(&schema::dump_with(
            &install,
            &cluster.connection_string(db),
            &DUMP_OPTIONS,
        )?);
        let statements = pgshift_sql::parse(&dump)
            .map_err(|e| CompareError::Io(format!("a schema dump does not parse: {e}")))?;
        Ok(Units::read(&statements).map_err(DiffError::from)?)
    };
    let live = units_of(&live_db)?;
    let wanted = units_of(&desired_db)?;
    let managed: BTreeSet<String> = if schemas.is_empty() {
        wanted
            .by_key
            .keys()
            .filter_map(|k| match k.kind {
                super::units::Kind::Schema => k.parts.first().cloned(),
                _ => k.schema().map(str::to_owned),
            })
            .collect()
    } else {
        schemas.iter().cloned().collect()
    };
    // What a schema dump does not say: which materialized views hold rows. The live
    // database's are made to hold rows on its rebuild too (empty, so at no cost), so
    // the proof starts where the live database is.
    let live_populated = Catalog::open(conninfo).await?.populated().await?;
    let mut refresh = String::new();
    // In dump order, so a view reading another is refreshed after it.
    let mut views: Vec<(&super::units::Key, &super::units::Unit)> = live
        .by_key
        .iter()
        .filter(|(k, _)| k.kind == super::units::Kind::MaterializedView)
        .collect();
    views.sort_by_key(|(_, u)| u.position);
    for (key, _) in views {
        let (schema, name) = (&key.parts[0], &key.parts[1]);
        if live_populated.contains(&(schema.clone(), name.clone())) {
            let name = pgshift_sql::QualifiedName::qualified(schema, name);
            refresh.push_str(&format!("REFRESH MATERIALIZED VIEW {name};\n"));
        }
    }
    if !refresh.is_empty() {
        let file = scratch.write("refresh.sql", &refresh).map_err(io)?;
        cluster
            .psql_file(&live_db, &file)
            .map_err(|e| CompareError::LiveDidNotRebuild(e.to_string()))?;
    }
    let desired_catalog = Catalog::open(&cluster.connection_string(&desired_db)).await?;
    let facts = Facts {
        server_version_num: version_num,
        storage: desired_catalog
            .storage(storage_to_read(&live, &wanted, &managed))
            .await?,
        populated: desired_catalog.populated().await?,
        live_populated,
    };
    let planned = changes(&live, &wanted, &managed, &facts)?;
    let access = access_changes(&live, &wanted, &managed);
    // INV: DS-2 — a plan is given only once it has run on a rebuilt copy of the live
    // schema and a second comparison finds nothing left to change.
    if !planned.is_empty() {
        let plan_file = scratch.write("plan.sql", &script(&planned)).map_err(io)?;
        cluster
            .psql_file(&live_db, &plan_file)
            .map_err(|e| CompareError::NotConverged(e.to_string()))?;
        let after = units_of(&live_db)?;
        let mut left = leftover(&after, &wanted, &managed);
        let after_populated = Catalog::open(&cluster.connection_string(&live_db))
            .await?
            .populated()
            .await?;
        for name in after_populated.symmetric_difference(&facts.populated) {
            if managed.contains(&name.0) {
                left.push(format!(
                    "materialized view {}.{} holds rows on one side only",
                    name.0, name.1
                ));
            }
        }
        if let Some(first) = left.first() {
            return Err(CompareError::NotConverged(format!(
                "{} differences are left, first: {first}",
                left.len()
            )));
        }
    }
    let live_fingerprint = hex(&Sha256::digest(live_dump.as_bytes()));
    let access_review = (!access.is_empty()).then(|| {
        let listed: String = access
            .iter()
            .map(|a| format!("{:?}\t{}\t{}\n", a.impact, a.object, a.sql))
            .collect();
        hex(&Sha256::digest(listed.as_bytes()))
    });
    let plan_fingerprint = hex(&Sha256::digest(script(&planned).as_bytes()));
    Ok(Compared {
        server_version_num: version_num,
        managed_schemas: managed.into_iter().collect(),
        fingerprint: hex(&Sha256::digest(
            format!("{live_fingerprint}:{plan_fingerprint}").as_bytes(),
        )),
        live_fingerprint,
        plan_fingerprint,
        converged: true,
        changes: planned,
        access,
        access_review,
        total_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// A session on one database of the throwaway cluster, for what its catalog says
/// where a dump says nothing.
struct Catalog(crate::connect::Session);

impl Catalog {
    async fn open(conninfo: &str) -> Result<Self, CompareError> {
        let spec = ConnectionSpec::parse(conninfo).map_err(TraceError::from)?;
        let session = connect(&spec, &SessionBudgets::READ_ONLY_PLAN)
            .await
            .map_err(TraceError::from)?;
        Ok(Catalog(session))
    }

    /// The storage the database gives each of `columns` (schema, table, column).
    async fn storage(
        &self,
        columns: Vec<(String, String, String)>,
    ) -> Result<BTreeMap<(String, String, String), String>, CompareError> {
        let mut out = BTreeMap::new();
        for (schema, table, column) in columns {
            let row = self
                .0
                .client()
                .query_opt(
                    "SELECT CASE a.attstorage WHEN 'p' THEN 'plain' WHEN 'e' THEN 'external' \
                     WHEN 'm' THEN 'main' ELSE 'extended' END \
                     FROM pg_catalog.pg_attribute a \
                     JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = $3 \
                     AND NOT a.attisdropped",
                    &[&schema, &table, &column],
                )
                .await
                .map_err(catalog_error)?;
            if let Some(row) = row {
                out.insert((schema, table, column), row.get(0));
            }
        }
        Ok(out)
    }

    /// The materialized views that hold rows (`pg_dump --schema-only` writes every one
    /// `WITH NO DATA`).
    async fn populated(&self) -> Result<BTreeSet<(String, String)>, CompareError> {
        let rows = self
            .0
            .client()
            .query(
                "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind = 'm' AND c.relispopulated",
                &[],
            )
            .await
            .map_err(catalog_error)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

fn catalog_error(e: tokio_postgres::Error) -> CompareError {
    CompareError::Io(format!("cannot read the throwaway cluster's catalog: {e}"))
}

fn script(changes: &[Change]) -> String {
    changes.iter().map(|c| format!("{};\n", c.sql)).collect()
}

fn io(err: std::io::Error) -> CompareError {
    CompareError::Io(format!(
        "cannot write a script for the throwaway cluster: {err}"
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
