//! [`Cluster`]: one throwaway PostgreSQL cluster (primary or streaming
//! replica), from creation to removal.
//!
//! A cluster lives in `<cache root>/c-<pid>-<n>/` with `data/` (a copy of the
//! version's template), `sock/` (its unix socket) and `server.log`. Dropping
//! the [`Cluster`] stops the server and removes the directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::{append_settings, Listen};
use crate::conninfo::{Endpoint, SUPERUSER};
use crate::error::{Error, Result};
use crate::fsutil::{copy_tree, remove_tree, tail};
use crate::install::{PgInstall, PgVersion};
use crate::kept::KeptCluster;
use crate::process::{run_checked, Backoff};
use crate::psql::{self, Input};
use crate::root::{ensure_cache_root, set_mode};
use crate::server::{Launch, Server, LOG_TAIL_LINES};
use crate::sweep::{sweep, CLUSTER_PREFIX};
use crate::template::{ensure_template, initdb};
use crate::user::RunAs;

/// Unix socket paths must stay shorter than this (the kernel allows 107 bytes;
/// staying under 100 leaves room on every platform).
const SOCKET_PATH_LIMIT: usize = 100;
/// How long `pg_basebackup` may take.
const BASEBACKUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a new replica may take to report `pg_is_in_recovery()`.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Start attempts when a TCP port picked as free was taken meanwhile.
const PORT_ATTEMPTS: usize = 3;
/// PostgreSQL's identifier length limit (NAMEDATALEN - 1).
const MAX_IDENTIFIER: usize = 63;

/// How to start a [`Cluster`]. `ClusterOptions::default()` discovers the
/// installation, listens on the unix socket only and stops the server when
/// this process ends.
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    /// The installation to use; `None` runs [`PgInstall::discover`].
    pub install: Option<PgInstall>,
    /// Also listen on 127.0.0.1 (on a free port), not only on the unix socket.
    pub tcp: bool,
    /// Extra server settings, written after the defaults (so they win) as
    /// quoted literals, e.g. `("max_connections", "400")`.
    pub settings: Vec<(String, String)>,
    /// Let the server outlive this process (no parent-death signal), e.g. for
    /// `pgshift demo --keep`; pair with [`Cluster::keep`].
    pub keep_on_exit: bool,
    /// The whole `pg_hba.conf` to use instead of initdb's (which trusts every
    /// local connection), e.g. to make roles log in with a password.
    pub hba: Option<String>,
    /// Run `initdb` for this cluster instead of copying the version's template, so
    /// that it has a system identifier of its own (every copy of a template shares
    /// the template's, as clones of one server do).
    pub own_system: bool,
}

impl ClusterOptions {
    /// The defaults (same as `ClusterOptions::default()`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses this installation instead of discovering one.
    pub fn install(mut self, install: PgInstall) -> Self {
        self.install = Some(install);
        self
    }

    /// Also listens on 127.0.0.1 when `tcp` is true.
    pub fn tcp(mut self, tcp: bool) -> Self {
        self.tcp = tcp;
        self
    }

    /// Adds a server setting (overriding a default of the same name).
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Uses `lines` as the cluster's `pg_hba.conf`, e.g.
    /// `"local all postgres trust\nhost all all 127.0.0.1/32 scram-sha-256\n"`
    /// (keep a line that lets `postgres` in over the socket: the crate's own
    /// `psql` calls connect that way).
    pub fn hba(mut self, lines: impl Into<String>) -> Self {
        self.hba = Some(lines.into());
        self
    }

    /// Gives the cluster a system identifier of its own when `own` is true (a
    /// fresh `initdb`, slower than a copy of the template).
    pub fn own_system(mut self, own: bool) -> Self {
        self.own_system = own;
        self
    }

    /// Lets the server outlive this process when `keep` is true.
    pub fn keep_on_exit(mut self, keep: bool) -> Self {
        self.keep_on_exit = keep;
        self
    }
}

/// A running throwaway PostgreSQL cluster. Dropping it (or [`Cluster::stop`])
/// shuts the server down (SIGINT, then SIGKILL after 10 s) and removes its
/// directory; [`Cluster::keep`] leaves both in place instead.
#[derive(Debug)]
pub struct Cluster {
    install: PgInstall,
    options: ClusterOptions,
    run_as: RunAs,
    dir: PathBuf,
    data_dir: PathBuf,
    endpoint: Endpoint,
    pid: u32,
    log: PathBuf,
    server: Mutex<Option<Server>>,
    kept: bool,
}

impl Cluster {
    /// Creates and starts a new cluster: sweeps stale clusters of dead
    /// processes, makes the version's template if needed, copies it, writes
    /// the settings and starts `postgres`, waiting (up to 30 s) until it is
    /// ready.
    pub fn start(options: &ClusterOptions) -> Result<Self> {
        let install = match &options.install {
            Some(install) => install.clone(),
            None => PgInstall::discover()?,
        };
        let run_as = RunAs::for_this_process()?;
        let root = ensure_cache_root(&run_as)?;
        // Best effort: a failed sweep must not stop anyone from testing.
        let _ = sweep(&root);
        let template = ensure_template(&install, &root, &run_as)?;
        let dir = ClusterDir::allocate(&root, &run_as)?;
        if options.own_system {
            initdb(&install, &dir.path.join("data"), &run_as)?;
        } else {
            copy_tree(&template, &dir.path.join("data"), &run_as)?;
        }
        if let Some(hba) = &options.hba {
            let path = dir.path.join("data").join("pg_hba.conf");
            std::fs::write(&path, hba)
                .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
            set_mode(&path, 0o600)?;
            run_as.chown(&path)?;
        }
        Self::launch(install, options.clone(), run_as, dir)
    }

    /// Starts the server of a prepared cluster directory (whose `data/` is
    /// filled) and takes ownership of the directory.
    fn launch(
        install: PgInstall,
        options: ClusterOptions,
        run_as: RunAs,
        dir: ClusterDir,
    ) -> Result<Self> {
        let data_dir = dir.path.join("data");
        let socket_dir = dir.path.join("sock");
        check_socket_path(&socket_dir)?;
        match std::fs::create_dir(&socket_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("creating {}", socket_dir.display()), e)),
        }
        set_mode(&socket_dir, 0o755)?;
        run_as.chown(&socket_dir)?;

        let mut attempt = 0;
        let (server, port) = loop {
            attempt += 1;
            let port = free_port()?;
            let listen = Listen {
                port,
                socket_dir: &socket_dir,
                tcp: options.tcp,
            };
            append_settings(&data_dir, &listen, &options.settings)?;
            let launch = Launch {
                install: &install,
                run_as: &run_as,
                data_dir: &data_dir,
                cluster_dir: &dir.path,
                keep_on_exit: options.keep_on_exit,
            };
            match Server::start(&launch) {
                Ok(server) => break (server, port),
                Err(Error::ServerExited { log_tail, .. })
                    if options.tcp
                        && attempt < PORT_ATTEMPTS
                        && log_tail.contains("could not bind") => {}
                Err(e) => return Err(e),
            }
        };
        Ok(Self {
            pid: server.pid(),
            log: server.log().to_path_buf(),
            endpoint: Endpoint {
                socket_dir,
                port,
                tcp: options.tcp,
            },
            install,
            options,
            run_as,
            dir: dir.into_path(),
            data_dir,
            server: Mutex::new(Some(server)),
            kept: false,
        })
    }

    /// The server version.
    pub fn version(&self) -> PgVersion {
        self.install.version()
    }

    /// The installation the server runs from.
    pub fn install(&self) -> &PgInstall {
        &self.install
    }

    /// The bin directory of the installation.
    pub fn bindir(&self) -> &Path {
        self.install.bindir()
    }

    /// The path of a program of the installation, e.g. `bin("pgbench")`.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.install.bin(name)
    }

    /// A [`Command`] for a program of the installation, with the environment it
    /// needs (`LD_LIBRARY_PATH` for relocatable builds).
    pub fn command(&self, name: &str) -> Command {
        self.install.command(name)
    }

    /// The cluster directory (holding `data/`, `sock/` and `server.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new empty directory `name` under the cluster directory, owned by the server's
    /// OS user: a `CREATE TABLESPACE … LOCATION` for this cluster. It goes with the
    /// cluster.
    pub fn server_directory(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        std::fs::create_dir_all(&path)
            .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
        self.run_as.chown(&path)?;
        Ok(path)
    }

    /// The data directory (`PGDATA`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The directory holding the unix socket (use it as `host`).
    pub fn socket_dir(&self) -> &Path {
        self.endpoint.socket_dir()
    }

    /// The port (names the socket file; on 127.0.0.1 too with `tcp`).
    pub fn port(&self) -> u16 {
        self.endpoint.port
    }

    /// The superuser name, `postgres`.
    pub fn superuser(&self) -> &'static str {
        SUPERUSER
    }

    /// The postmaster's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// A libpq `key=value` connection string over the unix socket:
    /// `host=<socket dir> port=<port> user=postgres dbname=<db>`.
    pub fn connection_string(&self, dbname: &str) -> String {
        self.endpoint.connection_string(dbname)
    }

    /// The same over TCP (`host=127.0.0.1`), if started with
    /// [`ClusterOptions::tcp`].
    pub fn tcp_connection_string(&self, dbname: &str) -> Option<String> {
        self.endpoint.tcp_connection_string(dbname)
    }

    /// A `postgresql://` URL with the percent-encoded socket directory as host.
    pub fn url(&self, dbname: &str) -> String {
        self.endpoint.url(dbname)
    }

    /// Runs SQL with `psql -X -q -A -t -v ON_ERROR_STOP=1` and returns its
    /// standard output (unaligned, tuples only: `SELECT 1` gives `"1\n"`). The
    /// SQL may hold several statements. Connecting is bounded (10 s); the
    /// statements themselves are not.
    pub fn psql(&self, dbname: &str, sql: &str) -> Result<String> {
        psql::run(
            &self.install,
            &self.psql_conninfo(dbname),
            dbname,
            Input::Sql(sql),
        )
    }

    /// Runs a SQL file with `psql -f`, like [`Cluster::psql`].
    pub fn psql_file(&self, dbname: &str, path: impl AsRef<Path>) -> Result<String> {
        psql::run(
            &self.install,
            &self.psql_conninfo(dbname),
            dbname,
            Input::File(path.as_ref()),
        )
    }

    fn psql_conninfo(&self, dbname: &str) -> String {
        format!("{} connect_timeout=10", self.connection_string(dbname))
    }

    /// Creates a new, uniquely named database and returns its name:
    /// `<prefix>_<pid>_<n>`, with the prefix lowercased, reduced to
    /// `[a-z0-9_]` and shortened to fit 63 bytes. Safe to call from many
    /// threads at once.
    pub fn fresh_database(&self, prefix: &str) -> Result<String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = database_name(prefix, std::process::id(), n);
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\";"))?;
        Ok(name)
    }

    /// Adds a streaming replica of this cluster (`pg_basebackup -R -X stream`)
    /// with its own directory, socket and port, starts it and waits until it
    /// accepts connections in recovery. The replica is a [`Cluster`] of its
    /// own, started with this cluster's options.
    pub fn add_replica(&self) -> Result<Cluster> {
        let root = ensure_cache_root(&self.run_as)?;
        let dir = ClusterDir::allocate(&root, &self.run_as)?;
        let mut cmd = self.install.command("pg_basebackup");
        cmd.arg("-D")
            .arg(dir.path.join("data"))
            .args(["-R", "-X", "stream", "-c", "fast", "--no-sync", "-h"])
            .arg(self.socket_dir())
            .arg("-p")
            .arg(self.port().to_string())
            .args(["-U", SUPERUSER])
            .current_dir(&dir.path);
        self.run_as.apply(&mut cmd);
        run_checked(cmd, BASEBACKUP_TIMEOUT)?;
        let replica = Self::launch(
            self.install.clone(),
            self.options.clone(),
            self.run_as.clone(),
            dir,
        )?;
        replica.wait_for_recovery(RECOVERY_TIMEOUT)?;
        Ok(replica)
    }

    /// Polls until `pg_is_in_recovery()` is true.
    fn wait_for_recovery(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new();
        loop {
            if let Ok(out) = self.psql("postgres", "SELECT pg_is_in_recovery()") {
                if out.trim() == "t" {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "the replica to report pg_is_in_recovery()".to_owned(),
                    waited: timeout,
                    log_tail: Some(self.log_tail(LOG_TAIL_LINES)),
                });
            }
            backoff.sleep(deadline);
        }
    }

    /// Stops the server (fast shutdown, SIGKILL after 10 s) and removes the
    /// cluster directory, reporting failures that `Drop` would swallow.
    pub fn stop(self) -> Result<()> {
        self.shutdown()
    }

    /// Leaves the cluster running and its directory in place (the sweep will
    /// not touch it), and returns how to reach and stop it. The server
    /// outlives this process only if it was started with
    /// [`ClusterOptions::keep_on_exit`]; otherwise it gets SIGINT when this
    /// process ends and can be started again with `pg_ctl start`.
    pub fn keep(mut self) -> Result<KeptCluster> {
        let kept = KeptCluster::new(
            &self.install,
            &self.run_as,
            &self.dir,
            &self.data_dir,
            self.endpoint.clone(),
            self.pid,
            self.options.keep_on_exit,
        )?;
        self.kept = true;
        // Forget the child handle: the server keeps running.
        drop(
            self.server
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        Ok(kept)
    }

    /// Stops the server and removes the directory; idempotent, so it also
    /// serves the process-exit hook of the shared cluster.
    pub(crate) fn shutdown(&self) -> Result<()> {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner()).take();
        let stopped = server.is_none_or(|mut s| s.stop());
        if self.kept {
            return Ok(());
        }
        if !stopped {
            return Err(Error::Timeout {
                what: format!(
                    "postgres (pid {}) to stop; left {} in place",
                    self.pid,
                    self.dir.display()
                ),
                waited: crate::server::STOP_TIMEOUT,
                log_tail: None,
            });
        }
        remove_tree(&self.dir)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        if let Err(e) = self.shutdown() {
            eprintln!("pgshift-embedded: {e}");
        }
    }
}

/// A freshly allocated `c-<pid>-<n>` directory, removed on drop unless taken
/// over with [`ClusterDir::into_path`].
#[derive(Debug)]
struct ClusterDir {
    path: PathBuf,
    armed: bool,
}

impl ClusterDir {
    /// Creates a new, unused `c-<pid>-<n>` in `root`, owned by `run_as`.
    fn allocate(root: &Path, run_as: &RunAs) -> Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        for _ in 0..1000 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = root.join(format!("{CLUSTER_PREFIX}{pid}-{n}"));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    let dir = Self { path, armed: true };
                    set_mode(&dir.path, 0o755)?;
                    run_as.chown(&dir.path)?;
                    return Ok(dir);
                }
                // Left by an earlier process with the same pid.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(format!("creating {}", path.display()), e)),
            }
        }
        Err(Error::io(
            format!(
                "finding an unused cluster directory name in {}",
                root.display()
            ),
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ))
    }

    fn into_path(mut self) -> PathBuf {
        self.armed = false;
        std::mem::take(&mut self.path)
    }
}

impl Drop for ClusterDir {
    fn drop(&mut self) {
        if self.armed {
            let _ = remove_tree(&self.path);
        }
    }
}

fn check_socket_path(socket_dir: &Path) -> Result<()> {
    let path = socket_dir.join(".s.PGSQL.65535");
    let len = path.as_os_str().len();
    if len >= SOCKET_PATH_LIMIT {
        return Err(Error::SocketPathTooLong {
            path,
            len,
            max: SOCKET_PATH_LIMIT - 1,
        });
    }
    Ok(())
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| Error::io("finding a free TCP port on 127.0.0.1", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("finding a free TCP port on 127.0.0.1", e))?
        .port();
    Ok(port)
}

/// `<prefix>_<pid>_<n>`, prefix sanitized to `[a-z0-9_]` and shortened so the
/// whole name fits PostgreSQL's 63-byte identifiers.
fn database_name(prefix: &str, pid: u32, n: u64) -> String {
    let suffix = format!("_{pid}_{n}");
    let mut clean: String = prefix
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        clean.push_str("db");
    }
    clean.truncate(MAX_IDENTIFIER.saturating_sub(suffix.len()));
    clean + &suffix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_clean_and_short() {
        assert_eq!(database_name("My-Test", 12, 3), "my_test_12_3");
        assert_eq!(database_name("", 1, 0), "db_1_0");
        assert_eq!(database_name("é", 1, 0), "__1_0");
        let long = database_name(&"x".repeat(100), u32::MAX, u64::MAX);
        assert!(long.len() <= MAX_IDENTIFIER, "{long}");
        assert!(long.ends_with(&format!("_{}_{}", u32::MAX, u64::MAX)));
    }

    #[test]
    fn long_socket_paths_are_refused() {
        assert!(check_socket_path(Path::new("/tmp/pgshift-embedded-0/c-1-0/sock")).is_ok());
        let long = PathBuf::from(format!("/tmp/{}/sock", "x".repeat(90)));
        assert!(matches!(
            check_socket_path(&long),
            Err(Error::SocketPathTooLong { .. })
        ));
    }
}
