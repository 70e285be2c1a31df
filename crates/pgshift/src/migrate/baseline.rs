//! Adopting pgshift on a database whose migrations another runner applied:
//! `migrate --baseline VERSION` records the files up to `VERSION` as applied without
//! running them; `migrate --baseline sqlx` records the versions sqlx's
//! `_sqlx_migrations` says succeeded, after checking each against the file on disk.
//! `migrate --baseline RUNNER` (flyway, golang-migrate, dbmate, rails, pop, diesel,
//! refinery, goose) records the versions that runner's history table holds, each of
//! which must have its file ([`super::adopt`]).
//! Either way each record carries the file's checksum and how it was baselined, so a
//! later `migrate` refuses an edited file and continues with the files after it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::adopt::{self, ForeignHistory, Runner};
use super::directory::{key_version, scan_layout, MigrationFile};
use super::error::MigrateError;
use super::history::{self, HistoryRow};
use super::sqlx::{self, SqlxRow};
use crate::connect::Session;
use crate::layout::LayoutReport;

/// What to baseline from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaselineSource {
    /// Every versioned file up to and including this version, as written
    /// (`20240101120000`, `1.1`, `2023-01-01-000000`); repeatables are not baselined.
    UpTo(String),
    /// The versions sqlx's `_sqlx_migrations` records as successful.
    Sqlx,
    /// The versions another runner's history table records as applied (see
    /// [`super::adopt`]); every one must have its file.
    Runner(Runner),
}

impl BaselineSource {
    /// The value recorded in `pgshift.migrations.baselined`.
    fn recorded_as(&self) -> String {
        match self {
            BaselineSource::UpTo(version) => format!("--baseline {version}"),
            BaselineSource::Sqlx => "--baseline sqlx (_sqlx_migrations)".to_owned(),
            BaselineSource::Runner(runner) => {
                format!("--baseline {runner} ({})", runner.table())
            }
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
    /// Its version key; `None` for a repeatable.
    pub version: Option<String>,
    /// Its name.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// What happens to it.
    pub status: BaselineStatus,
    /// The history row its record replaces: a run of it that failed after committing
    /// part of it, which the operator finished by hand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
}

/// A file to record as applied.
struct Recorded<'a> {
    file: &'a MigrationFile,
    checksum: String,
    /// The failed row it replaces: id, units committed and total.
    replaces: Option<(i64, i32, i32)>,
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
/// disagrees (an edited applied file, a running history row among them, a sqlx record
/// that does not match its file), or with `dry_run`. A file whose pgshift run failed
/// part-way (finished by hand) is recorded over its failed row, which the record names.
pub async fn baseline(
    session: &Session,
    dir: &Path,
    source: &BaselineSource,
    dry_run: bool,
) -> Result<BaselineVerdict, MigrateError> {
    let client = session.client();
    let (layout, files) = scan_layout(dir)?;
    let mut sqlx_schema = None;
    let selected: Vec<String> = match source {
        BaselineSource::UpTo(text) => {
            let target = key_version(layout.kind, text)
                .filter(|target| files.iter().any(|f| f.version.as_ref() == Some(target)))
                .ok_or_else(|| MigrateError::BaselineVersionUnknown {
                    version: text.clone(),
                })?;
            files
                .iter()
                .filter(|f| f.version.as_ref().is_some_and(|v| *v <= target))
                .filter_map(MigrationFile::key)
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
            recorded
                .iter()
                .filter_map(|r| sqlx_file(&files, r.version))
                .filter_map(MigrationFile::key)
                .collect()
        }
        BaselineSource::Runner(runner) => {
            let foreign = adopt::read(
                client,
                *runner,
                session.user_search_path(),
                session.current_user(),
            )
            .await?
            .ok_or(MigrateError::RunnerTableMissing {
                runner: *runner,
                table: runner.table(),
            })?;
            recorded_files(layout.kind, &files, &foreign)?
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
    files: &[MigrationFile],
    rows: &[HistoryRow],
    selected: &[String],
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
        let row = super::pending::row_of(file, rows);
        let mut replaced = None;
        let status = if !file.key().is_some_and(|key| selected.contains(&key)) {
            BaselineStatus::Pending
        } else {
            let bytes = std::fs::read(&file.path).map_err(|source| MigrateError::Directory {
                path: file.path.display().to_string(),
                source,
            })?;
            let checksum = history::checksum(client, &bytes).await?;
            match row {
                // A file whose run failed part-way, finished by hand: the failed row
                // is replaced, and the new one says what it replaced.
                Some(row) if row.outcome == "failed" => {
                    replaced = Some(format!(
                        "a failed run that had committed {} of {} units{}",
                        row.units_committed,
                        row.units_total,
                        row.error
                            .as_deref()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default()
                    ));
                    to_record.push(Recorded {
                        file,
                        checksum,
                        replaces: Some((row.id()?, row.units_committed, row.units_total)),
                    });
                    if dry_run {
                        BaselineStatus::WouldBaseline
                    } else {
                        BaselineStatus::Baselined
                    }
                }
                Some(row) => {
                    already_recorded(row, &checksum)?;
                    BaselineStatus::AlreadyApplied
                }
                None => {
                    to_record.push(Recorded {
                        file,
                        checksum,
                        replaces: None,
                    });
                    if dry_run {
                        BaselineStatus::WouldBaseline
                    } else {
                        BaselineStatus::Baselined
                    }
                }
            }
        };
        verdict.files.push(BaselineFile {
            version: file.key(),
            name: file.name.clone(),
            path: file.path.clone(),
            status,
            replaced,
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
            version: row.describe(),
            outcome: row.outcome.clone(),
        });
    }
    if row.checksum != checksum {
        return Err(MigrateError::ChangedAfterApply {
            version: row.describe(),
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
    files: &[MigrationFile],
    recorded: &[SqlxRow],
) -> Result<(), MigrateError> {
    let mut mismatches = Vec::new();
    for row in recorded {
        let Some(file) = sqlx_file(files, row.version) else {
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

/// The keys of the files another runner recorded as applied; every recorded version
/// must have its file and none may be recorded as failed.
fn recorded_files(
    kind: crate::layout::LayoutKind,
    files: &[MigrationFile],
    foreign: &ForeignHistory,
) -> Result<Vec<String>, MigrateError> {
    let runner = foreign.runner;
    let mut problems: Vec<String> = foreign
        .failed
        .iter()
        .map(|v| format!("{runner} recorded version {v} as failed (dirty): it is partly applied; repair it and its row first"))
        .collect();
    let find = |text: &str| {
        let version = key_version(kind, text)?;
        files.iter().find(|f| f.version.as_ref() == Some(&version))
    };
    let mut selected = Vec::new();
    for text in &foreign.applied {
        match find(text) {
            Some(file) if runner.records_current_only() => {
                // Its one row is the current version: every file up to it is applied.
                let upto = file.version.clone();
                selected.extend(
                    files
                        .iter()
                        .filter(|f| f.version.is_some() && f.version <= upto)
                        .filter_map(MigrationFile::key),
                );
            }
            Some(file) => selected.extend(file.key()),
            None => problems.push(format!(
                "{runner} recorded version {text} but no file of the directory has it"
            )),
        }
    }
    if problems.is_empty() {
        Ok(selected)
    } else {
        Err(MigrateError::RunnerMismatch { runner, problems })
    }
}

/// The file of the version sqlx recorded (sqlx keys by `BIGINT`).
fn sqlx_file(files: &[MigrationFile], version: i64) -> Option<&MigrationFile> {
    files
        .iter()
        .find(|f| f.version.as_ref().and_then(|v| v.as_i64()) == Some(version))
}

/// Records the files in one transaction.
async fn record(
    client: &tokio_postgres::Client,
    files: &[Recorded<'_>],
    how: &str,
) -> Result<(), MigrateError> {
    let db = |what: &'static str| move |source| MigrateError::Database { what, source };
    client
        .batch_execute("BEGIN; SET LOCAL lock_timeout = 2000")
        .await
        .map_err(db("starting the baseline transaction"))?;
    for recorded in files {
        let file = recorded.file;
        let result = async {
            let how = match recorded.replaces {
                Some((id, committed, total)) => {
                    history::forget(client, id, "replacing a failed run by its baseline").await?;
                    format!(
                        "{how}, over a failed run that had committed {committed} of {total} units"
                    )
                }
                None => how.to_owned(),
            };
            history::record_baselined(client, &file.label(), &file.name, &recorded.checksum, &how)
                .await
        }
        .await;
        if let Err(err) = result {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(err);
        }
    }
    client
        .batch_execute("COMMIT")
        .await
        .map_err(db("committing the baseline"))
}
