//! A real PgBouncer (Debian's `/usr/sbin/pgbouncer`) in front of a throwaway test
//! cluster, for the pooler tests (docs/POOLERS.md). It listens on a unix socket in a
//! directory of its own (no TCP port to collide with other tests), forwards every
//! database name to the cluster, trusts the cluster's superuser, and is stopped, and
//! its directory removed, when dropped.
//!
//! Where PgBouncer is not installed the tests fail, saying to install it: CI installs
//! it (`.ci/run`), and a skipped pooler test would hide the behaviour it pins.
#![allow(dead_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pgshift_embedded::Cluster;

/// Where Debian's package installs the binary.
pub const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// The port that names the pooler's socket file (`.s.PGSQL.<port>`); no TCP.
const SOCKET_PORT: u16 = 6432;

/// PgBouncer's `pool_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    /// A server connection per client, for the client's whole life.
    Session,
    /// A server connection per transaction.
    Transaction,
    /// A server connection per statement (transaction blocks refused).
    Statement,
}

impl PoolMode {
    fn name(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
            PoolMode::Statement => "statement",
        }
    }
}

/// A running PgBouncer.
pub struct Pooler {
    child: Child,
    dir: PathBuf,
}

impl Pooler {
    /// Starts PgBouncer in `mode` with `pool_size` server connections per database and
    /// user, in front of `cluster`, and waits until it accepts connections.
    pub fn start(cluster: &Cluster, mode: PoolMode, pool_size: u32) -> Pooler {
        assert!(
            Path::new(PGBOUNCER).exists(),
            "PgBouncer is not installed ({PGBOUNCER} is missing): the pooler tests need a real \
             one; install Debian's package (`apt-get install -y pgbouncer`, as .ci/run does) \
             and stop the system service it starts (`service pgbouncer stop`)"
        );
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pgb-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("pooler directory");
        let owner = std::fs::metadata(cluster.data_dir()).expect("cluster data directory");
        let me = std::fs::metadata("/proc/self").expect("/proc/self");
        // PgBouncer will not run as root; as root, it switches to the cluster's owner.
        let user_line = if me.uid() == 0 && owner.uid() != 0 {
            std::os::unix::fs::chown(&dir, Some(owner.uid()), Some(owner.gid()))
                .expect("pooler directory handed to the cluster's owner");
            format!("user = {}\n", user_name(owner.uid()))
        } else {
            String::new()
        };
        let auth = dir.join("users.txt");
        std::fs::write(&auth, format!("\"{}\" \"\"\n", cluster.superuser())).expect("auth file");
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={socket} port={port}\n\n[pgbouncer]\n{user_line}\
                 listen_port = {SOCKET_PORT}\nunix_socket_dir = {dir}\nauth_type = trust\n\
                 auth_file = {auth}\npool_mode = {mode}\ndefault_pool_size = {pool_size}\n\
                 min_pool_size = 0\nreserve_pool_size = 0\nmax_client_conn = 200\n\
                 ignore_startup_parameters = extra_float_digits\n\
                 logfile = {dir}/pgbouncer.log\n",
                socket = cluster.socket_dir().display(),
                port = cluster.port(),
                dir = dir.display(),
                auth = auth.display(),
                mode = mode.name(),
            ),
        )
        .expect("pgbouncer.ini");
        for file in [&auth, &ini] {
            if me.uid() == 0 && owner.uid() != 0 {
                std::os::unix::fs::chown(file, Some(owner.uid()), Some(owner.gid()))
                    .expect("pooler file handed to the cluster's owner");
            }
        }
        let mut child = Command::new(PGBOUNCER)
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer starts");
        let socket = dir.join(format!(".s.PGSQL.{SOCKET_PORT}"));
        let deadline = Instant::now() + Duration::from_secs(15);
        // Listening, not only bound: the socket file exists a moment before
        // PgBouncer accepts on it.
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "pgbouncer exited ({status}) before listening: {}",
                    std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not listen within 15 s: {}",
                std::fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Pooler { child, dir }
    }

    /// A `key=value` connection string to `dbname` through the pooler.
    pub fn connection_string(&self, cluster: &Cluster, dbname: &str) -> String {
        format!(
            "host={} port={SOCKET_PORT} user={} dbname={dbname}",
            self.dir.display(),
            cluster.superuser()
        )
    }

    /// Runs `sql` with the cluster's `psql` through the pooler (unaligned, tuples
    /// only) and returns its output; panics with psql's words when it fails.
    pub fn psql(&self, cluster: &Cluster, dbname: &str, sql: &str) -> String {
        let output = cluster
            .command("psql")
            .args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .arg(self.connection_string(cluster, dbname))
            .output()
            .expect("psql runs");
        assert!(
            output.status.success(),
            "psql through the pooler failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The pooler's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The login name of `uid`, from `/etc/passwd`.
fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.get(2) == Some(&uid.to_string().as_str())).then(|| fields[0].to_owned())
        })
        .unwrap_or_else(|| panic!("no user with uid {uid} in /etc/passwd"))
}
