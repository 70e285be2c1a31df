//! Errors before a verdict (a bad flag, a bad URL, a refused connection, an unreadable
//! input): one line for people on stderr and, with `--format json`, one versioned error
//! document on stdout — so that stdout under `--format json` always holds exactly one
//! JSON document, whatever happens.
//!
//! The document: `format_version`, `tool`, `tool_version`, `command`, `kind: "error"`,
//! `code` (a closed, kebab-case vocabulary listed in `docs/EXECUTION.md`), `message`,
//! `hint` (what to do, or `null`) and `exit_code`.

use serde::Serialize;

use crate::cli::Format;
use crate::exit;
use crate::render;
use pgshift::report;

/// The error document.
#[derive(Debug, Serialize)]
struct ErrorReport<'a> {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'a str,
    kind: &'static str,
    code: &'static str,
    message: &'a str,
    hint: Option<&'a str>,
    exit_code: u8,
}

/// An error that ends a command before (or instead of) its verdict.
#[derive(Debug)]
pub struct CliError {
    /// The stable code (`usage`, `invalid-url`, `connect-failed`, …).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// The exit code (1 unless said otherwise).
    pub exit: u8,
}

impl CliError {
    /// An error with `code` and `message`, exit code 1.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            hint: None,
            exit: exit::INPUT_ERROR,
        }
    }

    /// With a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// With another exit code.
    pub fn exit(mut self, code: u8) -> Self {
        self.exit = code;
        self
    }

    /// Prints the error (stderr; and the JSON document on stdout under `--format
    /// json`) and returns its exit code.
    pub fn report(&self, command: &str, format: Format) -> u8 {
        eprintln!("pgshift {command}: {}", self.message);
        if let Some(hint) = &self.hint {
            eprint!("{}", render::do_this_line(hint, "  "));
        }
        self.report_json_only(command, format)
    }

    /// Prints only the JSON document (under `--format json`; someone else wrote the
    /// text on stderr) and returns the exit code.
    pub fn report_json_only(&self, command: &str, format: Format) -> u8 {
        if format == Format::Json {
            render::print_json(&ErrorReport {
                format_version: report::FORMAT_VERSION,
                tool: report::TOOL,
                tool_version: report::TOOL_VERSION,
                command,
                kind: "error",
                code: self.code,
                message: &self.message,
                hint: self.hint.as_deref(),
                exit_code: self.exit,
            });
        }
        self.exit
    }
}

/// The connection string could not be parsed.
pub fn invalid_url(err: &impl std::fmt::Display) -> CliError {
    CliError::new(
        "invalid-url",
        format!("the connection string is not valid: {err}"),
    )
    .hint("give --url postgresql://user@host:port/database (or key=value pairs), or set PGSHIFT_URL / the PG* variables")
}

/// Connecting failed. The error already says what the server or the operating system
/// said and what to do next (`pgshift::connect`'s diagnosis), so there is no hint.
pub fn connect_failed(target: &str, err: &impl std::fmt::Display) -> CliError {
    CliError::new(
        "connect-failed",
        format!("cannot connect to {target}: {err}"),
    )
}

/// pgshift refused the connection before setting anything on it (a pooler without a
/// session of its own): a refusal, exit 2, with the cause's next step.
pub fn connection_refused(
    target: &str,
    err: &impl std::fmt::Display,
    refusal: &pgshift::refusal::Refusal,
) -> CliError {
    CliError::new("refused", format!("{target}: {err}"))
        .exit(exit::FINDINGS)
        .hint(refusal.next_step.clone())
}

/// The async runtime could not start.
pub fn no_runtime(err: &impl std::fmt::Display) -> CliError {
    CliError::new("runtime", format!("cannot start the async runtime: {err}"))
}

/// The command line as typed, for commands whose flags did not parse: which command
/// it was and whether it asked for JSON, read from the raw arguments.
pub struct RawCommandLine {
    /// The subcommand, when one was given.
    pub command: Option<String>,
    /// Whether `--format json` (or `--format=json`) was given.
    pub json: bool,
}

impl RawCommandLine {
    /// Reads `args` (without the program name).
    pub fn read(args: impl IntoIterator<Item = String>) -> Self {
        let args: Vec<String> = args.into_iter().collect();
        let commands = [
            "lint", "plan", "apply", "migrate", "status", "resume", "abort", "cutover", "demo",
            "audit",
        ];
        let command = args
            .iter()
            .find(|a| !a.starts_with('-'))
            .filter(|a| commands.contains(&a.as_str()))
            .cloned();
        let json = args
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "json")
            || args.iter().any(|a| a == "--format=json");
        RawCommandLine { command, json }
    }
}

#[cfg(test)]
mod tests {
    use super::RawCommandLine;

    fn read(args: &[&str]) -> RawCommandLine {
        RawCommandLine::read(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn the_raw_command_line_says_the_command_and_the_format() {
        let raw = read(&["apply", "--format", "json", "--bogus"]);
        assert_eq!(raw.command.as_deref(), Some("apply"));
        assert!(raw.json);
        let raw = read(&["status", "--format=json"]);
        assert!(raw.json);
        let raw = read(&["plan", "--format", "text"]);
        assert!(!raw.json);
        let raw = read(&["--bogus"]);
        assert_eq!(raw.command, None);
    }
}
