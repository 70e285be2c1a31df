//! The differential harness: PostgreSQL's own blocking statement is the oracle of
//! what pgshift must produce. For each generated table shape, a database is seeded
//! once and cloned twice per statement form; the statement runs natively on one clone
//! and through pgshift on the other, and the two are compared — the catalog as a user
//! sees it and every row. Cases run concurrently, several databases in one cluster.

pub mod allowance;
pub mod case;
pub mod shape;
pub mod snapshot;
pub mod statement;
pub mod views;

use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use case::{admin, client_as, drop_database, snapshot_of, Case, CaseResult};
use shape::Shape;
use statement::{Form, TABLESPACE};

use crate::common::cluster;

/// What a corpus run found.
pub struct CorpusReport {
    /// Every case's result.
    pub results: Vec<CaseResult>,
    /// Shapes that could not be seeded (a harness bug), with the error.
    pub seed_failures: Vec<(usize, String)>,
    /// Features left out on this server, with the reason.
    pub skipped: Vec<String>,
    /// The server's `server_version_num`.
    pub version: i32,
    /// Wall time.
    pub elapsed: Duration,
}

/// How many shapes run at once, and how many cases of one shape at once.
const SHAPES_AT_ONCE: usize = 3;
const CASES_AT_ONCE: usize = 3;

/// Roles, role settings and the tablespace every shape uses (cluster-wide, once).
pub async fn prepare_cluster() -> Result<(i32, bool), String> {
    for role in shape::ROLES {
        admin(&format!(
            "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        ))
        .await?;
    }
    // The owner's sessions have other output settings than the superuser's: a
    // statement must mean what it means in the session that runs it.
    admin(&format!(
        "ALTER ROLE {owner} SET TimeZone = 'Asia/Kolkata'; ALTER ROLE {owner} SET DateStyle = 'SQL, DMY'",
        owner = shape::OWNER_ROLE
    ))
    .await?;
    let client = client_as("postgres", None).await?;
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    let citext: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'citext'",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    let exists: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tablespace WHERE spcname = $1",
            &[&TABLESPACE],
        )
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    if exists == 0 {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata(cluster().data_dir()).map_err(|e| e.to_string())?;
        let dir = cluster().dir().join("differential-tablespace");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::os::unix::fs::chown(&dir, Some(owner.uid()), Some(owner.gid()))
            .map_err(|e| e.to_string())?;
        admin(&format!(
            "CREATE TABLESPACE {TABLESPACE} LOCATION '{}'",
            dir.display()
        ))
        .await?;
        admin(&format!(
            "GRANT CREATE ON TABLESPACE {TABLESPACE} TO {}",
            shape::OWNER_ROLE
        ))
        .await?;
    }
    Ok((version, citext > 0))
}

/// Seeds the template of shape `index`.
pub async fn seed(index: usize, shape: &Shape, version: i32) -> Result<String, String> {
    let name = format!("diff_{}_{index}", std::process::id());
    admin(&format!("CREATE DATABASE \"{name}\"")).await?;
    let sql = shape.seed_sql(version);
    let db = name.clone();
    tokio::task::spawn_blocking(move || cluster().psql(&db, &sql).map(|_| ()))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("seeding shape {index} ({}): {e}", shape.label()))?;
    Ok(name)
}

/// Runs every applicable form on every shape of `corpus`.
pub async fn run(corpus: &[Shape], forms: &[Form]) -> CorpusReport {
    let started = Instant::now();
    let (version, citext) = prepare_cluster().await.expect("the cluster is prepared");
    let mut skipped = Vec::new();
    let corpus: Vec<Shape> = corpus
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if s.citext && !citext {
                s.citext = false;
            }
            s
        })
        .collect();
    if !citext {
        skipped.push(format!(
            "citext: the server ({version}) has no citext extension (contrib not installed); {} shapes ran without their citext column",
            corpus.len()
        ));
    }
    let outcomes: Vec<Result<Vec<CaseResult>, (usize, String)>> =
        stream::iter(corpus.iter().enumerate())
            .map(|(index, shape)| run_shape(index, shape, forms, version))
            .buffer_unordered(SHAPES_AT_ONCE)
            .collect()
            .await;
    let mut results = Vec::new();
    let mut seed_failures = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(r) => results.extend(r),
            Err(f) => seed_failures.push(f),
        }
    }
    results.sort_by_key(|r| (r.shape, r.form.name()));
    CorpusReport {
        results,
        seed_failures,
        skipped,
        version,
        elapsed: started.elapsed(),
    }
}

async fn run_shape(
    index: usize,
    shape: &Shape,
    forms: &[Form],
    version: i32,
) -> Result<Vec<CaseResult>, (usize, String)> {
    let template = seed(index, shape, version).await.map_err(|e| (index, e))?;
    let before = snapshot_of(&template, version)
        .await
        .map_err(|e| (index, e))?;
    let native_name = format!("{template}_native");
    case::clone(&template, &native_name, shape, version)
        .await
        .map_err(|e| (index, e))?;
    let native = tokio::sync::Mutex::new(native_name.clone());
    let cases: Vec<Case<'_>> = forms
        .iter()
        .filter_map(|&form| {
            form.sql(shape, version).map(|sql| Case {
                shape_index: index,
                shape,
                form,
                sql,
                template: &template,
                native: &native,
                before: &before,
                version,
            })
        })
        .collect();
    let results: Vec<CaseResult> = stream::iter(cases.iter())
        .map(Case::run)
        .buffer_unordered(CASES_AT_ONCE)
        .collect()
        .await;
    if std::env::var_os("PGSHIFT_DIFF_KEEP").is_none() {
        drop_database(&native_name).await;
        drop_database(&template).await;
    }
    Ok(results)
}
