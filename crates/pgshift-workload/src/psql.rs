//! Runs SQL scripts through psql, the client that ships with the server, so
//! that `\set`, `\if`, `\gexec` and `:name` in the relay's scripts mean
//! exactly what psql says they mean.
//!
//! The script goes to psql on standard input. psql runs with
//! `-X -q -A -t -F '|' -v ON_ERROR_STOP=1`: no `~/.psqlrc`, no command tags,
//! one line per result row with `|` between the cells, and a stop at the
//! first error. Standard output is read line by line while psql runs, and
//! standard error beside it, so neither pipe can fill up and block psql.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use pgshift_embedded::Cluster;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::error::{Error, Result};

/// How psql names a script read from standard input when it reports a line.
const STDIN_PREFIX: &str = "psql:<stdin>:";

/// The psql program and the database it connects to.
///
/// The connection string is given to psql on its command line, where other
/// users of the machine can see it (`ps`): keep a password out of it (use
/// `PGPASSWORD` or `~/.pgpass`).
#[derive(Clone)]
pub struct Psql {
    program: PathBuf,
    conninfo: String,
    /// Changes to psql's environment: set (`Some`) or removed (`None`).
    env: Vec<(OsString, Option<OsString>)>,
}

impl fmt::Debug for Psql {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the connection string: it may hold a password.
        f.debug_struct("Psql")
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl Psql {
    /// `program` (a path, or a name to look up in `PATH`) connecting with
    /// `conninfo` (a libpq connection string or URL), in this process's
    /// environment.
    pub fn new(program: impl Into<PathBuf>, conninfo: impl Into<String>) -> Self {
        Psql {
            program: program.into(),
            conninfo: conninfo.into(),
            env: Vec::new(),
        }
    }

    /// The psql of the installation `cluster` runs from, connecting to
    /// `dbname` over the cluster's socket, with the environment that
    /// installation's programs get ([`Cluster::command`]).
    pub fn of_cluster(cluster: &Cluster, dbname: &str) -> Self {
        let command = cluster.command("psql");
        Psql {
            program: PathBuf::from(command.get_program()),
            conninfo: cluster.connection_string(dbname),
            env: command
                .get_envs()
                .map(|(name, value)| (name.to_owned(), value.map(OsStr::to_owned)))
                .collect(),
        }
    }

    /// The program run.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Runs `script` (named `name` in errors) within `timeout` and returns
    /// what it printed: one line per result row, cells separated by `|`.
    ///
    /// A script that fails gives [`Error::Psql`] with the line psql names;
    /// one that runs too long has psql killed (and the server ends its statement
    /// within about a second) and gives [`Error::Timeout`].
    pub async fn run(&self, name: &'static str, script: &str, timeout: Duration) -> Result<String> {
        let mut output = String::new();
        self.run_lines(name, script, &[], timeout, &mut |line| {
            output.push_str(line);
            output.push('\n');
        })
        .await?;
        Ok(output)
    }

    /// [`Psql::run`] with psql variables set (`-v name=value`), calling
    /// `on_line` with each line psql prints as soon as it is printed.
    pub(crate) async fn run_lines(
        &self,
        name: &'static str,
        script: &str,
        vars: &[(&str, String)],
        timeout: Duration,
        on_line: &mut (dyn FnMut(&str) + Send),
    ) -> Result<()> {
        let mut command = Command::new(&self.program);
        for (variable, value) in &self.env {
            match value {
                Some(value) => command.env(variable, value),
                None => command.env_remove(variable),
            };
        }
        if cfg!(target_os = "linux") {
            // Elsewhere the server may not support the check, and would refuse the
            // connection over the setting.
            command.env("PGOPTIONS", self.options());
        }
        command.args(["-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1"]);
        for (variable, value) in vars {
            command.arg("-v").arg(format!("{variable}={value}"));
        }
        command
            .arg("-d")
            .arg(&self.conninfo)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                Error::PsqlNotFound {
                    program: self.program.clone(),
                }
            } else {
                self.io_error("starting", source)
            }
        })?;
        let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let missing = io::Error::other("a pipe to psql is missing");
            return Err(self.io_error("opening the pipes of", missing));
        };

        let work = async {
            let feed = async move {
                // A write fails only when psql has already stopped (an error
                // early in the script); its exit status and stderr say why.
                let _ = stdin.write_all(script.as_bytes()).await;
                // Dropping stdin here closes it: psql sees the end of the script.
            };
            let read_stdout = async {
                let mut lines = BufReader::new(stdout).split(b'\n');
                while let Some(line) = lines.next_segment().await? {
                    on_line(&String::from_utf8_lossy(&line));
                }
                Ok::<(), io::Error>(())
            };
            let read_stderr = async {
                let mut text = Vec::new();
                stderr.read_to_end(&mut text).await.map(|_| text)
            };
            let ((), stdout_read, stderr_read) = tokio::join!(feed, read_stdout, read_stderr);
            let status = child.wait().await;
            (stdout_read, stderr_read, status)
        };
        let outcome = tokio::time::timeout(timeout, work).await;
        let Ok((stdout_read, stderr_read, status)) = outcome else {
            // Kill psql and reap it, so nothing of it outlives the call.
            let _ = child.kill().await;
            return Err(Error::Timeout {
                what: format!("psql running {name}"),
                waited: timeout,
            });
        };
        stdout_read.map_err(|e| self.io_error("reading the output of", e))?;
        let stderr_text = stderr_read.map_err(|e| self.io_error("reading the errors of", e))?;
        let status = status.map_err(|e| self.io_error("waiting for", e))?;
        if status.success() {
            return Ok(());
        }
        Err(failure(
            name,
            status,
            &String::from_utf8_lossy(&stderr_text),
        ))
    }

    /// psql's `PGOPTIONS`: the one it would get, with the server told to check every
    /// second that psql is still connected (`client_connection_check_interval`,
    /// PostgreSQL 14 and later), so that a psql killed at a timeout ends its
    /// statement on the server too, instead of leaving it to run to its end.
    fn options(&self) -> OsString {
        let given = match self.env.iter().rev().find(|(name, _)| name == "PGOPTIONS") {
            Some((_, value)) => value.clone(),
            None => std::env::var_os("PGOPTIONS"),
        };
        let mut options = given.unwrap_or_default();
        if !options.is_empty() {
            options.push(" ");
        }
        options.push("-c client_connection_check_interval=1000");
        options
    }

    fn io_error(&self, action: &'static str, source: io::Error) -> Error {
        Error::PsqlIo {
            action,
            program: self.program.clone(),
            source,
        }
    }
}

/// The error for a psql that exited with `status`, from what it printed on
/// standard error: its report of the failure and what follows (the statement's
/// `LINE`, `DETAIL`, `CONTEXT`), with the line of the script when it names one.
fn failure(script: &'static str, status: ExitStatus, stderr: &str) -> Error {
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    let report = lines.iter().enumerate().find_map(|(at, text)| {
        let (line, message) = script_line(text)?;
        let notice = ["NOTICE:", "WARNING:", "INFO:", "LOG:", "DEBUG:"]
            .iter()
            .any(|level| message.starts_with(level));
        (!notice).then_some((at, line, message))
    });
    let (line, message) = match report {
        Some((at, line, message)) => {
            let mut message = message.to_owned();
            for rest in &lines[at + 1..] {
                message.push('\n');
                message.push_str(rest);
            }
            (Some(line), message)
        }
        None if lines.is_empty() => (None, format!("psql exited with {status}")),
        None => (None, lines.join("\n")),
    };
    Error::Psql {
        script,
        line,
        message,
    }
}

/// `psql:<stdin>:LINE: message` split into the line and the message.
fn script_line(text: &str) -> Option<(usize, &str)> {
    let rest = text.strip_prefix(STDIN_PREFIX)?;
    let (line, message) = rest.split_once(": ")?;
    Some((line.parse().ok()?, message))
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn a_failure_names_the_line_psql_reports_and_keeps_what_follows() {
        let stderr = "psql:<stdin>:3: NOTICE:  table \"t\" does not exist, skipping\n\
                      psql:<stdin>:7: ERROR:  relation \"x\" does not exist\n\
                      LINE 2:   FROM x;\n               ^\n";
        let err = failure("t.sql", ExitStatus::from_raw(3 << 8), stderr);
        let Error::Psql {
            script,
            line,
            message,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((*script, *line), ("t.sql", Some(7)));
        assert_eq!(
            message,
            "ERROR:  relation \"x\" does not exist\nLINE 2:   FROM x;\n               ^"
        );
        assert!(err.to_string().starts_with("t.sql line 7: ERROR:"), "{err}");
    }

    #[test]
    fn a_failure_without_a_line_keeps_all_of_stderr_or_the_exit_status() {
        let stderr = "psql: error: connection to server on socket \"/x/.s.PGSQL.1\" failed\n";
        let err = failure("t.sql", ExitStatus::from_raw(2 << 8), stderr);
        assert!(
            matches!(&err, Error::Psql { line: None, message, .. } if message.starts_with("psql: error: connection")),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("t.sql: psql: error:"), "{err}");
        let err = failure("t.sql", ExitStatus::from_raw(9), "");
        assert!(
            matches!(&err, Error::Psql { line: None, message, .. } if message.starts_with("psql exited with")),
            "{err:?}"
        );
    }
}
