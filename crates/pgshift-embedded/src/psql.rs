//! Running SQL through the install's own `psql` binary.
//!
//! The crate is synchronous and is called from async tests, so it cannot use
//! a Rust client that owns a runtime; the few SQL actions it needs go through
//! `psql -X -q -A -t -v ON_ERROR_STOP=1`.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use crate::error::{Error, Result};
use crate::install::PgInstall;

/// What psql should run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Input<'a> {
    /// SQL text, fed on standard input (so it may hold several statements,
    /// including ones that cannot run inside a transaction block).
    Sql(&'a str),
    /// A file, passed with `-f`.
    File(&'a Path),
}

/// Runs `input` against the database that `conninfo` names; returns standard
/// output (unaligned, tuples only). A failure carries psql's standard error.
pub(crate) fn run(
    install: &PgInstall,
    conninfo: &str,
    dbname: &str,
    input: Input<'_>,
) -> Result<String> {
    let mut cmd = install.command("psql");
    cmd.args([
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        conninfo,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    match input {
        Input::Sql(_) => {
            cmd.args(["-f", "-"]).stdin(Stdio::piped());
        }
        Input::File(path) => {
            cmd.arg("-f").arg(path).stdin(Stdio::null());
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("starting {}", install.bin("psql").display()), e))?;
    let writer = match (input, child.stdin.take()) {
        (Input::Sql(sql), Some(mut stdin)) => {
            let sql = sql.to_owned();
            // A separate thread, so a large script cannot deadlock against a
            // large result.
            Some(std::thread::spawn(move || stdin.write_all(sql.as_bytes())))
        }
        _ => None,
    };
    let output = child
        .wait_with_output()
        .map_err(|e| Error::io("waiting for psql", e))?;
    if let Some(writer) = writer {
        // A write error (broken pipe) only matters if psql failed too, and then
        // its stderr says more.
        let _ = writer.join();
    }
    if !output.status.success() {
        let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if stderr.is_empty() {
            stderr = format!("psql exited with {}", output.status);
        }
        return Err(Error::Sql {
            dbname: dbname.to_owned(),
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
