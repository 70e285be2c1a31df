//! The target's schema: `pg_dump --schema-only` of the live database, made with the
//! `pg_dump` of the target's own major version (so the dump restores into a server of
//! that version without translation).

use std::process::{Command, Stdio};

use pgshift_embedded::PgInstall;

use super::error::TraceError;

/// How long `pg_dump` may wait for each table's ACCESS SHARE lock (it never queues
/// behind a migration for long).
const LOCK_WAIT_TIMEOUT_MS: u32 = 10_000;
/// `PGCONNECT_TIMEOUT` when the environment sets none, in seconds.
const CONNECT_TIMEOUT_S: &str = "10";

/// The schema of the database `conninfo` names, as SQL, without owners and grants
/// (the clone has no need for them), subscriptions (a clone must not connect to a
/// publisher) and security labels (the clone has no label provider). Tablespaces and
/// the roles that policies name are there when it restores ([`super::globals`]).
pub(crate) fn dump(install: &PgInstall, conninfo: &str) -> Result<String, TraceError> {
    dump_with(
        install,
        conninfo,
        &[
            "--no-owner",
            "--no-privileges",
            "--no-subscriptions",
            "--no-security-labels",
        ],
    )
}

/// `pg_dump --schema-only` of the database `conninfo` names with `options` added.
pub(crate) fn dump_with(
    install: &PgInstall,
    conninfo: &str,
    options: &[&str],
) -> Result<String, TraceError> {
    let mut command = Command::new(install.bin("pg_dump"));
    if let Some(lib) = install.lib_dir() {
        command.env("LD_LIBRARY_PATH", lib);
    }
    if std::env::var_os("PGCONNECT_TIMEOUT").is_none() {
        command.env("PGCONNECT_TIMEOUT", CONNECT_TIMEOUT_S);
    }
    let output = command
        .arg("--schema-only")
        .args(options)
        .arg(format!("--lock-wait-timeout={LOCK_WAIT_TIMEOUT_MS}"))
        .arg("--dbname")
        .arg(conninfo)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            TraceError::Dump(format!(
                "cannot run {}: {e}",
                install.bin("pg_dump").display()
            ))
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(TraceError::Dump(stderr.trim().to_owned()));
    }
    String::from_utf8(output.stdout)
        .map_err(|_| TraceError::Dump("the dump is not valid UTF-8".to_owned()))
}
