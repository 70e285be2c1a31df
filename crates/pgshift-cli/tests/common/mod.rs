//! Running the real `pgshift` binary from tests.

// Each test binary includes this module and uses part of it.
#![allow(dead_code)]
pub mod cas;
pub mod normalize;
pub mod relay;
pub mod schema;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The workspace root (tests refer to fixtures by paths relative to it, as a user
/// would from a checkout).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate lives two levels below the workspace root")
        .to_path_buf()
}

/// The result of one run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

fn finish(output: Output) -> Run {
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `pgshift` with `args` from the workspace root.
pub fn pgshift(args: &[&str]) -> Run {
    pgshift_with_stdin(args, None)
}

/// Runs `pgshift` with `args`, feeding `stdin`.
pub fn pgshift_with_stdin(args: &[&str], stdin: Option<&[u8]>) -> Run {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgshift"))
        .args(args)
        .current_dir(workspace_root())
        .env_remove("PGSHIFT_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pgshift starts");
    if let Some(bytes) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(bytes)
            .expect("stdin written");
    } else {
        drop(child.stdin.take());
    }
    finish(child.wait_with_output().expect("pgshift finishes"))
}

/// Runs `pgshift` with `args` in an environment without any libpq variable
/// (`PG*`), `DATABASE_URL` or `PGSHIFT_URL` of whoever runs the tests, plus `env`;
/// the password file is a path that does not exist unless `env` names one.
pub fn pgshift_in_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgshift"));
    cmd.args(args)
        .current_dir(workspace_root())
        .stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if (key_text.starts_with("PG") && !key_text.starts_with("PGSHIFT_PG_"))
            || key_text == "DATABASE_URL"
            || key_text == "PGSHIFT_URL"
        {
            cmd.env_remove(&key);
        }
    }
    cmd.env("PGPASSFILE", "/nonexistent/pgshift-test-pgpass");
    for (key, value) in env {
        cmd.env(key, value);
    }
    finish(cmd.output().expect("pgshift runs"))
}
