//! [`KeptCluster`]: a cluster deliberately left running and in place (e.g. by
//! `pgshift demo --keep`), with what a person needs to connect and to stop it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::conninfo::Endpoint;
use crate::error::{Error, Result};
use crate::install::PgInstall;
use crate::process::run_checked;
use crate::sweep::KEPT_MARKER;
use crate::user::{shell_quote, RunAs};

/// How long `pg_ctl stop` may take.
const PG_CTL_TIMEOUT: Duration = Duration::from_secs(60);

/// A cluster left in place by [`Cluster::keep`](crate::Cluster::keep). The
/// sweep of stale clusters never removes it; stopping and deleting it is up to
/// the user (see [`KeptCluster::stop_command`]).
#[derive(Debug, Clone)]
pub struct KeptCluster {
    install: PgInstall,
    run_as: RunAs,
    dir: PathBuf,
    data_dir: PathBuf,
    endpoint: Endpoint,
    pid: u32,
    outlives_process: bool,
}

impl KeptCluster {
    /// Marks `dir` as kept (a `KEPT` file the sweep respects) and describes it.
    pub(crate) fn new(
        install: &PgInstall,
        run_as: &RunAs,
        dir: &Path,
        data_dir: &Path,
        endpoint: Endpoint,
        pid: u32,
        outlives_process: bool,
    ) -> Result<Self> {
        let kept = Self {
            install: install.clone(),
            run_as: run_as.clone(),
            dir: dir.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            endpoint,
            pid,
            outlives_process,
        };
        let marker = dir.join(KEPT_MARKER);
        let note = format!(
            "kept by pgshift-embedded; connect with: psql \"{}\"\nstop with: {}\nthen remove {}\n",
            kept.connection_string("postgres"),
            kept.stop_command(),
            dir.display()
        );
        std::fs::write(&marker, note)
            .map_err(|e| Error::io(format!("writing {}", marker.display()), e))?;
        Ok(kept)
    }

    /// The cluster directory (holding `data/`, `sock/`, `server.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The unix socket directory.
    pub fn socket_dir(&self) -> &Path {
        self.endpoint.socket_dir()
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.endpoint.port
    }

    /// The postmaster pid when it was kept.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the server keeps running after this process exits (it was
    /// started with `keep_on_exit`).
    pub fn outlives_process(&self) -> bool {
        self.outlives_process
    }

    /// A libpq `key=value` connection string over the unix socket.
    pub fn connection_string(&self, dbname: &str) -> String {
        self.endpoint.connection_string(dbname)
    }

    /// A `postgresql://` URL over the unix socket.
    pub fn url(&self, dbname: &str) -> String {
        self.endpoint.url(dbname)
    }

    /// A shell command that stops the server, run as the right OS user, e.g.
    /// `runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D … stop -m fast`.
    pub fn stop_command(&self) -> String {
        let mut words = Vec::new();
        if self.run_as.switches() {
            words.extend([
                "runuser".to_owned(),
                "-u".to_owned(),
                self.run_as.name().to_owned(),
                "--".to_owned(),
            ]);
        }
        if let Some(lib) = self.install.lib_dir() {
            words.push("env".to_owned());
            words.push(format!("LD_LIBRARY_PATH={}", shell_quote(lib)));
        }
        words.push(shell_quote(&self.install.bin("pg_ctl")));
        words.push("-D".to_owned());
        words.push(shell_quote(&self.data_dir));
        words.extend(["stop".to_owned(), "-m".to_owned(), "fast".to_owned()]);
        words.join(" ")
    }

    /// Stops the server now with `pg_ctl stop -m fast` (as the right user). The
    /// directory stays; remove it with [`KeptCluster::remove`].
    pub fn stop(&self) -> Result<()> {
        let mut cmd: Command = self.install.command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.data_dir)
            .args(["stop", "-m", "fast", "-w", "-t", "30"])
            .current_dir(&self.dir);
        self.run_as.apply(&mut cmd);
        run_checked(cmd, PG_CTL_TIMEOUT).map(|_| ())
    }

    /// Stops the server if it still runs, then deletes the cluster directory.
    pub fn remove(self) -> Result<()> {
        if crate::server::recorded_postmaster_pid(&self.data_dir).is_some_and(crate::pid_alive) {
            self.stop()?;
        }
        crate::fsutil::remove_tree(&self.dir)
    }
}
