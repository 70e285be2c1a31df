//! The files of a run before anything runs: each read once, its checksum taken and
//! compared with the history (an applied file that changed stops the run before
//! anything is written), and its forward SQL parsed into statements for planning.
//!
//! A file's row in the history is the row of its version, or for a repeatable the
//! newest row of its name: a repeatable is applied when that row is done with the
//! file's current checksum, and runs again when the checksum changed.
//!
//! The runner's transaction rule for the file (its layout's: diesel's metadata.toml,
//! dbmate's and goose's markers, Flyway's detection) reaches the planner as pgshift's
//! own marker, `-- pgshift:no-transaction` before the first statement, which every
//! planning step reads (`crate::script::transaction_mode_for`).

use super::directory::MigrationFile;
use super::error::MigrateError;
use super::history::{self, HistoryRow};
use crate::exec::allow_blocking;
use crate::layout::forward_sql;
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
    /// Whether the history says it is applied (a repeatable: with these very bytes).
    pub fn applied(&self) -> bool {
        self.row.is_some_and(|row| {
            row.outcome == "done" && (!self.file.repeatable() || row.checksum == self.checksum)
        })
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
        let row = row_of(file, rows);
        let bytes = std::fs::read(&file.path).map_err(|err| format!("cannot read: {err}"));
        let checksum = match &bytes {
            Ok(bytes) => history::checksum(client, bytes).await?,
            Err(_) => String::new(),
        };
        if let (Some(row), Ok(_)) = (row, &bytes) {
            // A repeatable that changed after it ran runs again; one that changed
            // part-way through a run cannot be finished.
            let kept = if file.repeatable() {
                row.outcome != "done" && row.units_committed > 0
            } else {
                row.outcome == "done" || row.units_committed > 0
            };
            if row.checksum != checksum && kept {
                return Err(MigrateError::ChangedAfterApply {
                    version: row.describe(),
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

/// The history row of a file: its version's, or a repeatable's newest by name.
pub(super) fn row_of<'a>(file: &MigrationFile, rows: &'a [HistoryRow]) -> Option<&'a HistoryRow> {
    match file.key() {
        Some(key) => rows
            .iter()
            .find(|row| row.version.as_deref() == Some(key.as_str())),
        None => rows
            .iter()
            .rev()
            .find(|row| row.version.is_none() && row.name == file.name),
    }
}

/// Decodes a file and parses its forward SQL; `Err(message)` when the file itself is
/// unusable.
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
    let forward =
        forward_sql(source.file.form, source.file.transaction, &decoded.text).map_err(|err| {
            let at = err
                .position()
                .map_or_else(String::new, |p| format!("{}:{}: ", p.line, p.column));
            format!("{at}{err}")
        })?;
    let statements = forward.marked_statements();
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
