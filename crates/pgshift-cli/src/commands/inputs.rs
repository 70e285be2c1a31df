//! Reading and parsing the inputs of `lint` and `plan`, keeping failures per input.
//!
//! A file is read as the layout of its directory reads it (`pgshift::layout`): a
//! dbmate or goose file's up section only, with its runner's transaction rule carried
//! by the statements (a file its runner runs outside a transaction is marked
//! `-- pgshift:no-transaction`).

use crate::errors::CliError;
use pgshift::layout::{forward_sql, FileForm, ForwardError, Readings, TransactionRule};
use pgshift::report::InputErrorReport;
use pgshift::source::{self, SourceError, SourceFile};
use pgshift_sql::{ParseError, Statement};

/// An input that parsed.
pub struct ParsedInput {
    /// The path as given.
    pub path: String,
    /// Its statements.
    pub statements: Vec<Statement>,
}

/// An input that could not be read or parsed.
pub struct InputFailure {
    /// The path as given.
    pub path: String,
    /// The machine-readable error.
    pub report: InputErrorReport,
}

impl InputFailure {
    /// The compiler-style line for people: `path:line:col: error: message`.
    pub fn render(&self) -> String {
        match (self.report.line, self.report.column) {
            (Some(line), Some(column)) => {
                format!(
                    "{}:{line}:{column}: error: {}",
                    self.path, self.report.message
                )
            }
            _ => format!("{}: error: {}", self.path, self.report.message),
        }
    }
}

impl InputFailure {
    /// The error document of an input that stops a command before its verdict.
    pub fn error(&self) -> CliError {
        let code = if self.report.kind == "parse" {
            "input-unparsable"
        } else {
            "input-unreadable"
        };
        CliError::new(code, self.render())
    }
}

/// Reads and parses every input, in order.
pub fn load(paths: &[String], max_file_bytes: u64) -> Vec<Result<ParsedInput, InputFailure>> {
    let mut readings = Readings::default();
    source::expand_inputs(paths)
        .into_iter()
        .map(|input| {
            let input = input.map_err(read_failure)?;
            let reading = match &input {
                source::InputPath::File(path) => readings.of(path),
                source::InputPath::Stdin => None,
            };
            let file = source::read_input(&input, max_file_bytes).map_err(read_failure)?;
            match reading {
                Some((form, rule)) => parse_forward(file, form, rule),
                None => parse(file),
            }
        })
        .collect()
}

/// Parses a file's forward SQL as its layout reads it.
fn parse_forward(
    file: SourceFile,
    form: FileForm,
    rule: TransactionRule,
) -> Result<ParsedInput, InputFailure> {
    match forward_sql(form, rule, &file.text) {
        Ok(forward) => Ok(ParsedInput {
            path: file.path,
            statements: forward.marked_statements(),
        }),
        Err(ForwardError::Parse(err)) => Err(parse_failure(file.path, &err)),
        Err(err) => Err(InputFailure {
            path: file.path,
            report: InputErrorReport {
                kind: "parse",
                message: err.to_string(),
                line: None,
                column: None,
            },
        }),
    }
}

/// Reads and parses schema files, ignoring psql meta-commands.
pub fn load_schema(
    paths: &[String],
    max_file_bytes: u64,
) -> Vec<Result<ParsedInput, InputFailure>> {
    source::expand_inputs(paths)
        .into_iter()
        .map(|input| {
            let input = input.map_err(read_failure)?;
            let mut file = source::read_input(&input, max_file_bytes).map_err(read_failure)?;
            file.text = source::blank_psql_meta_commands(&file.text);
            parse(file)
        })
        .collect()
}

/// Parses SQL given on the command line.
pub fn from_sql(sql: &str) -> Result<ParsedInput, InputFailure> {
    parse(SourceFile {
        path: "<sql>".to_owned(),
        text: sql.to_owned(),
    })
}

fn parse(file: SourceFile) -> Result<ParsedInput, InputFailure> {
    match pgshift_sql::parse(&file.text) {
        Ok(statements) => Ok(ParsedInput {
            path: file.path,
            statements,
        }),
        Err(err) => Err(parse_failure(file.path, &err)),
    }
}

fn parse_failure(path: String, err: &ParseError) -> InputFailure {
    let position = err.position();
    InputFailure {
        path,
        report: InputErrorReport {
            kind: "parse",
            message: err.to_string(),
            line: position.map(|p| p.line),
            column: position.map(|p| p.column),
        },
    }
}

fn read_failure(err: SourceError) -> InputFailure {
    let path = match &err {
        SourceError::NotFound { path }
        | SourceError::Io { path, .. }
        | SourceError::NotUtf8 { path, .. }
        | SourceError::TooLarge { path, .. }
        | SourceError::EmptyDirectory { path } => path.clone(),
        _ => String::new(),
    };
    let position = err.position();
    let full = err.to_string();
    let message = full
        .strip_prefix(&path)
        .map(|rest| rest.trim_start_matches(|c: char| c == ':' || c.is_ascii_digit() || c == ' '))
        .unwrap_or(&full)
        .to_owned();
    InputFailure {
        path,
        report: InputErrorReport {
            kind: "read",
            message,
            line: position.map(|p| p.line),
            column: position.map(|p| p.column),
        },
    }
}
