//! A migration file's forward SQL, and whether its runner runs it in one transaction.
//!
//! Where the SQL is ([`FileForm`]): the whole file, or the up section of a file that
//! holds both directions — dbmate's `-- migrate:up` / `-- migrate:down`, goose's
//! `-- +goose Up` / `-- +goose Down`. The markers are found by PostgreSQL's scanner
//! (`pgshift_sql::sections`), never by text search, so a marker inside a string or a
//! dollar-quoted body is not one; goose's `StatementBegin` / `StatementEnd` only guide
//! goose's own splitter and are comments to PostgreSQL's grammar.
//!
//! Each runner's transaction rule ([`TransactionRule`]), as its documentation states:
//! - sqlx (and pgshift's numbered files, pop, golang-migrate): one transaction per
//!   file unless its first comment is `-- no-transaction`;
//! - Flyway: one transaction per file, unless a statement cannot run in one (such as
//!   `CREATE INDEX CONCURRENTLY`): then the file runs outside a transaction;
//! - diesel: one transaction unless the folder's `metadata.toml` says
//!   `run_in_transaction = false`;
//! - dbmate: one transaction unless the up marker says `transaction:false`; goose: one
//!   transaction unless the file says `-- +goose NO TRANSACTION`.

use serde::Serialize;
use thiserror::Error;

use crate::classify::TransactionUse;
use crate::script::{analyze, transaction_mode_for, Knowledge, TransactionMode};
use pgshift_sql::{ParseError, Statement};

/// Where a file's forward SQL is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileForm {
    /// The whole file.
    Plain,
    /// dbmate: the section after `-- migrate:up`, up to `-- migrate:down`.
    Dbmate,
    /// goose: the section after `-- +goose Up`, up to `-- +goose Down`.
    Goose,
}

/// How a file's runner decides whether the file runs in one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionRule {
    /// One transaction, unless the first comment is `-- no-transaction` (sqlx).
    Marker,
    /// One transaction, unless a statement cannot run in one (Flyway).
    Detected,
    /// Set outside the SQL (diesel's `metadata.toml`).
    Fixed(TransactionMode),
    /// Said by the section markers (dbmate, goose).
    Sections,
}

/// A file's forward SQL, parsed.
#[derive(Clone, Debug)]
pub struct ForwardSql {
    /// Its statements (positions are the file's).
    pub statements: Vec<Statement>,
    /// How its runner runs it, when the layout decides; `None` under
    /// [`TransactionRule::Marker`], where the file's own first comment does (with the
    /// caller's default).
    pub mode: Option<TransactionMode>,
}

/// pgshift's own marker for a file that runs outside a transaction.
const OUTSIDE_MARKER: &str = "pgshift:no-transaction";

impl ForwardSql {
    /// The statements, with the runner's rule carried as pgshift's own marker: a file
    /// its runner runs outside a transaction gets `-- pgshift:no-transaction` before
    /// its first statement (unless a marker is there), the form every planning step
    /// reads ([`transaction_mode_for`]).
    pub fn marked_statements(self) -> Vec<Statement> {
        let mut statements = self.statements;
        if self.mode == Some(TransactionMode::Statement)
            && transaction_mode_for(&statements, TransactionMode::File) == TransactionMode::File
        {
            if let Some(first) = statements.first_mut() {
                first.leading_comments.push(OUTSIDE_MARKER.to_owned());
            }
        }
        statements
    }
}

/// Why a file's forward SQL cannot be read.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardError {
    /// A sectioned file without its up section, or with two.
    #[error("{0}")]
    Sections(String),
    /// The text is not SQL.
    #[error("{0}")]
    Parse(#[from] ParseError),
}

impl ForwardError {
    /// Where in the file, when the grammar said.
    pub fn position(&self) -> Option<pgshift_sql::Position> {
        match self {
            ForwardError::Parse(err) => err.position(),
            ForwardError::Sections(_) => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marker {
    Up { outside_transaction: bool },
    Down,
}

/// A dbmate marker: `migrate:up` or `migrate:down`, with options such as
/// `transaction:false`.
fn dbmate_marker(comment: &str) -> Option<Marker> {
    let mut words = comment.split_whitespace();
    match words.next()? {
        "migrate:up" => Some(Marker::Up {
            outside_transaction: words.any(|w| w == "transaction:false"),
        }),
        "migrate:down" => Some(Marker::Down),
        _ => None,
    }
}

/// A goose command: the comment after `+goose`.
fn goose_command(comment: &str) -> Option<String> {
    comment
        .strip_prefix("+goose")
        .map(|rest| rest.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn goose_marker(comment: &str) -> Option<Marker> {
    let command = goose_command(comment)?;
    if command.eq_ignore_ascii_case("up") {
        Some(Marker::Up {
            outside_transaction: false,
        })
    } else if command.eq_ignore_ascii_case("down") {
        Some(Marker::Down)
    } else {
        None
    }
}

/// The form a file's markers show; a file the scanner cannot read is plain (its
/// parse says why).
pub fn form_of(bytes: &[u8]) -> FileForm {
    let mentions = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if !mentions(b"migrate:") && !mentions(b"+goose") {
        return FileForm::Plain;
    }
    let text = String::from_utf8_lossy(bytes);
    let Ok(comments) = pgshift_sql::line_comments(&text) else {
        return FileForm::Plain;
    };
    let up = |marker: fn(&str) -> Option<Marker>| {
        comments
            .iter()
            .any(|c| matches!(marker(&c.text), Some(Marker::Up { .. })))
    };
    if up(dbmate_marker) {
        FileForm::Dbmate
    } else if up(goose_marker) {
        FileForm::Goose
    } else {
        FileForm::Plain
    }
}

/// The forward SQL of a file's text, and how its runner runs it.
pub fn forward_sql(
    form: FileForm,
    rule: TransactionRule,
    text: &str,
) -> Result<ForwardSql, ForwardError> {
    let (sql, section_mode) = match form {
        FileForm::Plain => (None, None),
        FileForm::Dbmate => {
            let (sql, outside) = up_section(text, dbmate_marker, "-- migrate:up")?;
            (Some(sql), Some(outside))
        }
        FileForm::Goose => {
            let (sql, _) = up_section(text, goose_marker, "-- +goose Up")?;
            let outside = pgshift_sql::line_comments(text)?.iter().any(|c| {
                goose_command(&c.text).is_some_and(|cmd| cmd.eq_ignore_ascii_case("no transaction"))
            });
            (Some(sql), Some(outside))
        }
    };
    let statements = pgshift_sql::parse(sql.as_deref().unwrap_or(text))?;
    let mode = match rule {
        TransactionRule::Marker => None,
        TransactionRule::Fixed(mode) => Some(mode),
        TransactionRule::Detected => Some(flyway_mode(&statements)),
        TransactionRule::Sections => Some(if section_mode.unwrap_or(false) {
            TransactionMode::Statement
        } else {
            TransactionMode::File
        }),
    };
    Ok(ForwardSql { statements, mode })
}

/// The one up section of a sectioned file, and whether its marker takes it outside a
/// transaction.
fn up_section(
    text: &str,
    marker: fn(&str) -> Option<Marker>,
    name: &str,
) -> Result<(String, bool), ForwardError> {
    let sections = pgshift_sql::sections(text, marker)?;
    let mut ups = sections.into_iter().filter_map(|s| match s.marker {
        Marker::Up {
            outside_transaction,
        } => Some((s.text, outside_transaction)),
        Marker::Down => None,
    });
    let first = ups
        .next()
        .ok_or_else(|| ForwardError::Sections(format!("no `{name}` section")))?;
    if ups.next().is_some() {
        return Err(ForwardError::Sections(format!(
            "two `{name}` sections; the runner reads one"
        )));
    }
    Ok(first)
}

/// Flyway's rule: outside a transaction when a statement cannot run in one.
fn flyway_mode(statements: &[Statement]) -> TransactionMode {
    let script = analyze(
        statements.to_vec(),
        TransactionMode::Statement,
        Knowledge::offline(),
    );
    let outside = script
        .statements
        .iter()
        .any(|s| s.classification.transaction == TransactionUse::OutsideOnly);
    if outside {
        TransactionMode::Statement
    } else {
        TransactionMode::File
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(sql: &ForwardSql) -> Vec<&str> {
        sql.statements.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn dbmate_reads_the_up_section_and_its_transaction_option() {
        let text = "-- migrate:up\nCREATE TABLE t (a int);\n\n-- migrate:down\nDROP TABLE t;\n";
        assert_eq!(form_of(text.as_bytes()), FileForm::Dbmate);
        let sql = forward_sql(FileForm::Dbmate, TransactionRule::Sections, text).expect("reads");
        assert_eq!(texts(&sql), vec!["CREATE TABLE t (a int)"]);
        assert_eq!(sql.mode, Some(TransactionMode::File));
        let outside = "-- migrate:up transaction:false\nCREATE INDEX CONCURRENTLY i ON t (a);\n-- migrate:down\nDROP INDEX i;\n";
        let sql = forward_sql(FileForm::Dbmate, TransactionRule::Sections, outside).expect("reads");
        assert_eq!(sql.mode, Some(TransactionMode::Statement));
        assert_eq!(sql.statements[0].position.line, 2);
    }

    #[test]
    fn goose_reads_the_up_section_and_no_transaction() {
        let text = "-- +goose Up\n-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n-- +goose Down\nRETURN 1; END $$;\n-- +goose StatementEnd\nSELECT 1;\n\n-- +goose Down\nDROP FUNCTION f();\n";
        assert_eq!(form_of(text.as_bytes()), FileForm::Goose);
        let sql = forward_sql(FileForm::Goose, TransactionRule::Sections, text).expect("reads");
        assert_eq!(sql.statements.len(), 2, "{:?}", texts(&sql));
        assert!(sql.statements[0].text.starts_with("CREATE FUNCTION"));
        assert_eq!(sql.mode, Some(TransactionMode::File));
        let outside = "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY i ON t (a);\n-- +goose Down\nDROP INDEX CONCURRENTLY i;\n";
        let sql = forward_sql(FileForm::Goose, TransactionRule::Sections, outside).expect("reads");
        assert_eq!(sql.mode, Some(TransactionMode::Statement));
        assert_eq!(texts(&sql), vec!["CREATE INDEX CONCURRENTLY i ON t (a)"]);
    }

    #[test]
    fn a_marker_only_in_a_string_is_a_plain_file() {
        let text = "INSERT INTO notes VALUES ('-- migrate:up');\n";
        assert_eq!(form_of(text.as_bytes()), FileForm::Plain);
        assert_eq!(form_of(b"CREATE TABLE t (a int);"), FileForm::Plain);
    }

    #[test]
    fn sectioned_files_need_exactly_one_up_section() {
        let none = forward_sql(
            FileForm::Dbmate,
            TransactionRule::Sections,
            "-- migrate:down\nDROP TABLE t;\n",
        );
        assert!(matches!(none, Err(ForwardError::Sections(_))), "{none:?}");
        let two = forward_sql(
            FileForm::Goose,
            TransactionRule::Sections,
            "-- +goose Up\nSELECT 1;\n-- +goose Up\nSELECT 2;\n",
        );
        assert!(matches!(two, Err(ForwardError::Sections(_))), "{two:?}");
    }

    #[test]
    fn flyway_runs_a_file_outside_a_transaction_when_a_statement_needs_it() {
        let inside = "CREATE TABLE t (a int);\nCREATE INDEX i ON t (a);\n";
        let sql = forward_sql(FileForm::Plain, TransactionRule::Detected, inside).expect("reads");
        assert_eq!(sql.mode, Some(TransactionMode::File));
        let outside = "CREATE INDEX CONCURRENTLY i ON t (a);\n";
        let sql = forward_sql(FileForm::Plain, TransactionRule::Detected, outside).expect("reads");
        assert_eq!(sql.mode, Some(TransactionMode::Statement));
        // The statements carry the rule as pgshift's marker.
        let marked = sql.marked_statements();
        assert_eq!(
            transaction_mode_for(&marked, TransactionMode::File),
            TransactionMode::Statement
        );
        // sqlx's rule is the file's own marker, read by the caller.
        let sql = forward_sql(FileForm::Plain, TransactionRule::Marker, outside).expect("reads");
        assert_eq!(sql.mode, None);
        let statements = sql.marked_statements();
        assert_eq!(
            transaction_mode_for(&statements, TransactionMode::File),
            TransactionMode::File
        );
        let fixed = forward_sql(
            FileForm::Plain,
            TransactionRule::Fixed(TransactionMode::Statement),
            inside,
        )
        .expect("reads");
        assert_eq!(fixed.mode, Some(TransactionMode::Statement));
    }
}
