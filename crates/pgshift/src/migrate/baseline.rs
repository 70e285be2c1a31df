//! Adopting pgshift on a database whose migrations another runner applied:
//! `migrate --baseline VERSION` records the files up to `VERSION` as applied without
//! running them; `migrate --baseline sqlx` records the versions sqlx's
//! `_sqlx_migrations` says succeeded, after checking each against the file on disk.
//! Either way each record carries the file's checksum and how it was baselined, so a
//! later `migrate` refuses an edited file and continues with the files after it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::directory::scan_layout;
use super::error::MigrateError;
use super::history::{self, HistoryRow};
use super::sqlx::{self, SqlxRow};
use crate::connect::Session;
use crate::layout::LayoutReport;

/// What to baseline from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaselineSource {
    /// Every file up to and including this version.
    UpTo(i64),
    /// The versions sqlx's `_sqlx_migrations` records as successful.
    Sqlx,
}

impl BaselineSource {
    /// The value recorded in `pgshift.migrations.baselined`.
    fn recorded_as(&self) -> String {
        match self {
            BaselineSource::UpTo(version) => format!("--baseline {version}"),
            BaselineSource::Sqlx => "--baseline sqlx (_sqlx_migrations)".to_owned(),
        }
    }
}

/// What happens to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaselineStatus {
    /// Recorded as applied now, without running it.
    Baselined,
    /// Would be recorded (`--dry-run`).
    WouldBaseline,
    /// Already recorded as applied in `pgshift.migrations`.
    AlreadyApplied,
    /// After the baseline: `migrate` applies it.
    Pending,
}

/// One file of the directory.
#[derive(Clone, Debug, Serialize)]
pub struct BaselineFile {
    /// Its version.
    pub version: i64,
    /// Its name.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// What happens to it.
    pub status: BaselineStatus,
}

/// The verdict of a baseline.
#[derive(Clone, Debug, Serialize)]
pub struct BaselineVerdict {
    /// What was baselined from (`--baseline 5`, `--baseline sqlx (…)`).
    pub source: String,
    /// Whether nothing was written (`--dry-run`).
    pub dry_run: bool,
    /// The directory's layout.
    pub layout: LayoutReport,
    /// The schema of `_sqlx_migrations`, for an import from sqlx.
    pub sqlx_schema: Option<String>,
    /// Every file of the directory, in order.
    pub files: Vec<BaselineFile>,
}

/// A disagreement between sqlx's record and the directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SqlxMismatch {
    /// The version.
    pub version: i64,
    /// What disagrees.
    pub problem: String,
}

/// Records files as applied without running them. Nothing is written when anything
/// disagrees (an edited applied file, a failed or running history row among them, a
/// sqlx record that does not match its file), or with `dry_run`.
pub async fn baseline(
    session: &Session,
    dir: &Path,
    source: &BaselineSource,
    dry_run: bool,
) -> Result<BaselineVerdict, MigrateError> {
    let client = session.client();
    let (layout, files) = scan_layout(dir)?;
    let mut sqlx_schema = None;
    let selected: Vec<i64> = match source {
        BaselineSource::UpTo(version) => {
            if !files.iter().any(|f| f.version == *version) {
                return Err(MigrateError::BaselineVersionUnknown { version: *version });
            }
            files
                .iter()
                .map(|f| f.version)
                .filter(|v| v <= version)
                .collect()
        }
        BaselineSource::Sqlx => {
            let schema =
                sqlx::find_table(client, session.user_search_path(), session.current_user())
                    .await?
                    .ok_or(MigrateError::SqlxTableMissing)?;
            let recorded = sqlx::rows(client, &schema).await?;
            sqlx_schema = Some(schema);
            check_sqlx(client, &files, &recorded).await?;
            recorded.iter().map(|r| r.version).collect()
        }
    };
    if dry_run {
        let rows = history::rows(client).await.unwrap_or_default();
        return judge(
            client,
            &files,
            &rows,
            &selected,
            source,
            layout,
            sqlx_schema,
            true,
        )
        .await;
    }
    history::lock(client).await?;
    let result = async {
        history::ensure(client).await?;
        let rows = history::rows(client).await?;
        judge(
            client,
            &files,
            &rows,
            &selected,
            source,
            layout,
            sqlx_schema,
            false,
        )
        .await
    }
    .await;
    let unlocked = history::unlock(client).await;
    let verdict = result?;
    unlocked?;
    Ok(verdict)
}

/// What happens to each file; records the selected ones unless `dry_run`.
#[allow(clippy::too_many_arguments)]
async fn judge(
    client: &tokio_postgres::Client,
    files: &[super::MigrationFile],
    rows: &[HistoryRow],
    selected: &[i64],
    source: &BaselineSource,
    layout: crate::layout::Layout,
    sqlx_schema: Option<String>,
    dry_run: bool,
) -> Result<BaselineVerdict, MigrateError> {
    let mut verdict = BaselineVerdict {
        source: source.recorded_as(),
        dry_run,
        layout: LayoutReport::of(&layout),
        sqlx_schema,
        files: Vec::new(),
    };
    let mut to_record = Vec::new();
    for file in files {
        let row = rows.iter().find(|r| r.version == file.version);
        let status = if !selected.contains(&file.version) {
            BaselineStatus::Pending
        } else {
            let bytes = std::fs::read(&file.path).map_err(|source| MigrateError::Directory {
                path: file.path.display().to_string(),
                source,
            })?;
            let checksum = history::checksum(client, &bytes).await?;
            match row {
                Some(row) => {
                    already_recorded(row, &checksum)?;
                    BaselineStatus::AlreadyApplied
                }
                None => {
                    to_record.push((file, checksum));
                    if dry_run {
                        BaselineStatus::WouldBaseline
                    } else {
                        BaselineStatus::Baselined
                    }
                }
            }
        };
        verdict.files.push(BaselineFile {
            version: file.version,
            name: file.name.clone(),
            path: file.path.clone(),
            status,
        });
    }
    if !dry_run && !to_record.is_empty() {
        record(client, &to_record, &source.recorded_as()).await?;
    }
    Ok(verdict)
}

/// A file already in the history must be done, with the same bytes.
fn already_recorded(row: &HistoryRow, checksum: &str) -> Result<(), MigrateError> {
    if row.outcome != "done" {
        return Err(MigrateError::BaselineConflict {
            version: row.version,
            outcome: row.outcome.clone(),
        });
    }
    if row.checksum != checksum {
        return Err(MigrateError::ChangedAfterApply {
            version: row.version,
            name: row.name.clone(),
            recorded: row.checksum.clone(),
            current: checksum.to_owned(),
        });
    }
    Ok(())
}

/// Every version sqlx records must be successful and match its file's SHA-384.
async fn check_sqlx(
    client: &tokio_postgres::Client,
    files: &[super::MigrationFile],
    recorded: &[SqlxRow],
) -> Result<(), MigrateError> {
    let mut mismatches = Vec::new();
    for row in recorded {
        let Some(file) = files.iter().find(|f| f.version == row.version) else {
            mismatches.push(SqlxMismatch {
                version: row.version,
                problem: format!(
                    "sqlx recorded version {} ({}) but no file of the directory has it",
                    row.version, row.description
                ),
            });
            continue;
        };
        if !row.success {
            mismatches.push(SqlxMismatch {
                version: row.version,
                problem: format!(
                    "sqlx recorded version {} ({}) as failed (success = false): it is partly applied; repair it and its row first",
                    row.version, row.description
                ),
            });
            continue;
        }
        let bytes = std::fs::read(&file.path).map_err(|source| MigrateError::Directory {
            path: file.path.display().to_string(),
            source,
        })?;
        let on_disk = sqlx::checksum(client, &bytes).await?;
        if on_disk != row.checksum {
            mismatches.push(SqlxMismatch {
                version: row.version,
                problem: format!(
                    "{}: its SHA-384 is {}, but sqlx recorded {} when it applied version {}: the file changed after it was applied",
                    file.path.display(),
                    sqlx::hex(&on_disk),
                    sqlx::hex(&row.checksum),
                    row.version
                ),
            });
        }
    }
    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(MigrateError::SqlxMismatch { mismatches })
    }
}

/// Records the files in one transaction.
async fn record(
    client: &tokio_postgres::Client,
    files: &[(&super::MigrationFile, String)],
    how: &str,
) -> Result<(), MigrateError> {
    let db = |what: &'static str| move |source| MigrateError::Database { what, source };
    client
        .batch_execute("BEGIN; SET LOCAL lock_timeout = 2000")
        .await
        .map_err(db("starting the baseline transaction"))?;
    for (file, checksum) in files {
        if let Err(err) =
            history::record_baselined(client, file.version, &file.name, checksum, how).await
        {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(err);
        }
    }
    client
        .batch_execute("COMMIT")
        .await
        .map_err(db("committing the baseline"))
}
