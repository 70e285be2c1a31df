//! The files of a run before anything runs: each read once, its checksum taken and
//! compared with the history (an applied file that changed stops the run before
//! anything is written), and parsed into statements for planning.

use super::directory::MigrationFile;
use super::error::MigrateError;
use super::history::{self, HistoryRow};
use crate::exec::allow_blocking;
use crate::plan::PlanInput;
use crate::script::{analyze, transaction_mode_for, Knowledge, TransactionMode};
use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

/// One file of the directory, read.
pub(super) struct Source<'a> {
    /// The file.
    pub file: &'a MigrationFile,
    /// Its history row, if it has one.
    pub row: Option<&'a HistoryRow>,
    /// Its bytes, or why they cannot be read.
    pub bytes: Result<Vec<u8>, String>,
    /// The sha-256 of its bytes (empty when unreadable).
    pub checksum: String,
}

impl Source<'_> {
    /// Whether the history says it is applied.
    pub fn applied(&self) -> bool {
        self.row.is_some_and(|row| row.outcome == "done")
    }

    /// Its history row, when that row is of these very bytes and not done: the run of
    /// this file resumes from that row's recorded units.
    pub fn resumable(&self) -> Option<&HistoryRow> {
        self.row
            .filter(|row| row.outcome != "done" && row.checksum == self.checksum)
    }
}

/// Reads every file, refusing an applied (or partly applied) file whose checksum
/// changed.
pub(super) async fn read_all<'a>(
    client: &Client,
    files: &'a [MigrationFile],
    rows: &'a [HistoryRow],
) -> Result<Vec<Source<'a>>, MigrateError> {
    let mut sources = Vec::with_capacity(files.len());
    for file in files {
        let row = rows.iter().find(|row| row.version == file.version);
        let bytes = std::fs::read(&file.path).map_err(|err| format!("cannot read: {err}"));
        let checksum = match &bytes {
            Ok(bytes) => history::checksum(client, bytes).await?,
            Err(_) => String::new(),
        };
        if let (Some(row), Ok(_)) = (row, &bytes) {
            if row.checksum != checksum && (row.outcome == "done" || row.units_committed > 0) {
                return Err(MigrateError::ChangedAfterApply {
                    version: row.version,
                    name: row.name.clone(),
                    recorded: row.checksum.clone(),
                    current: checksum,
                });
            }
        }
        sources.push(Source {
            file,
            row,
            bytes,
            checksum,
        });
    }
    Ok(sources)
}

/// Decodes and parses a file; `Err(message)` when the file itself is unusable.
pub(super) fn parse(source: &Source<'_>, max_file_bytes: u64) -> Result<PlanInput, String> {
    let bytes = source.bytes.as_ref().map_err(Clone::clone)?;
    if bytes.len() as u64 > max_file_bytes {
        return Err(format!(
            "{} bytes is larger than the {max_file_bytes}-byte limit",
            bytes.len()
        ));
    }
    let decoded = crate::source::decode(source.file.path.display().to_string(), bytes.clone())
        .map_err(|err| err.to_string())?;
    let statements = pgshift_sql::parse(&decoded.text).map_err(|err| {
        let at = err
            .position()
            .map_or_else(String::new, |p| format!("{}:{}: ", p.line, p.column));
        format!("{at}{err}")
    })?;
    Ok(PlanInput {
        path: decoded.path,
        statements,
    })
}

/// The `--allow-blocking` names that no statement of the pending files (those that
/// parse) touches, judged offline: the names as written are what is compared.
pub(super) fn untouched_offline<'a>(
    sources: &[Source<'_>],
    allowed: &'a [QualifiedName],
    max_file_bytes: u64,
) -> Vec<&'a QualifiedName> {
    let scripts: Vec<_> = sources
        .iter()
        .filter(|source| !source.applied())
        .filter_map(|source| parse(source, max_file_bytes).ok())
        .map(|input| {
            let mode = transaction_mode_for(&input.statements, TransactionMode::Statement);
            analyze(input.statements, mode, Knowledge::offline())
        })
        .collect();
    allow_blocking::untouched(allowed, &scripts)
}

/// The `--allow-procedural` values that name no procedural statement of the pending
/// files (those that parse).
pub(super) fn unmatched_procedural<'a>(
    sources: &[Source<'_>],
    allowed: &'a [crate::procedural::AllowProcedural],
    max_file_bytes: u64,
) -> Vec<&'a crate::procedural::AllowProcedural> {
    let inputs: Vec<_> = sources
        .iter()
        .filter(|source| !source.applied())
        .filter_map(|source| parse(source, max_file_bytes).ok())
        .collect();
    let files: Vec<(&str, &[pgshift_sql::Statement])> = inputs
        .iter()
        .map(|input| (input.path.as_str(), input.statements.as_slice()))
        .collect();
    crate::procedural::unmatched(allowed, &files)
}
