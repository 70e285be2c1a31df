//! Running one `postgres` server process: spawning it, waiting until it accepts
//! connections, and stopping it.
//!
//! A server that must not outlive this process gets `PR_SET_PDEATHSIG(SIGINT)`.
//! The kernel sends that signal when the *thread* that forked the child exits,
//! so such servers are all spawned by one helper thread that lives as long as
//! the process (it waits for requests on a channel and never returns).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fsutil::tail;
use crate::install::PgInstall;
use crate::process::{pid_alive, send_signal, wait_until, Backoff};
use crate::user::RunAs;

/// How long a server may take to accept connections.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown may take before SIGKILL.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for the process to vanish after SIGKILL.
const KILL_TIMEOUT: Duration = Duration::from_secs(5);
/// Log lines quoted in errors.
pub(crate) const LOG_TAIL_LINES: usize = 20;

/// A running (or recently running) `postgres` child process.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    data_dir: PathBuf,
    log: PathBuf,
}

/// How to launch a server.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) install: &'a PgInstall,
    pub(crate) run_as: &'a RunAs,
    pub(crate) data_dir: &'a Path,
    /// Working directory and home of `server.log`.
    pub(crate) cluster_dir: &'a Path,
    /// When true, no parent-death signal: the server outlives this process.
    pub(crate) keep_on_exit: bool,
}

impl Server {
    /// Spawns `postgres -D <data_dir>` with output appended to
    /// `<cluster_dir>/server.log`, and waits until it is ready.
    pub(crate) fn start(launch: &Launch<'_>) -> Result<Self> {
        let log = launch.cluster_dir.join("server.log");
        let out = open_log(&log)?;
        launch.run_as.chown(&log)?;
        let err = out
            .try_clone()
            .map_err(|e| Error::io(format!("duplicating {}", log.display()), e))?;
        let mut cmd = launch.install.command("postgres");
        cmd.arg("-D")
            .arg(launch.data_dir)
            .current_dir(launch.cluster_dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Own process group: a Ctrl-C in the terminal goes to the test or the
            // demo, which then stops the server in order.
            .process_group(0);
        launch.run_as.apply(&mut cmd);
        let child = if launch.keep_on_exit {
            cmd.spawn()
        } else {
            spawn_tied_to_process(cmd)
        }
        .map_err(|e| {
            Error::io(
                format!("starting {}", launch.install.bin("postgres").display()),
                e,
            )
        })?;
        let mut server = Self {
            child,
            data_dir: launch.data_dir.to_path_buf(),
            log,
        };
        if let Err(e) = server.wait_ready(START_TIMEOUT) {
            server.stop();
            return Err(e);
        }
        Ok(server)
    }

    /// The postmaster's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server log file.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// Waits until `postmaster.pid` names this process and says "ready".
    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let pid_file = self.data_dir.join("postmaster.pid");
        let mut backoff = Backoff::new();
        loop {
            if let Some(status) = self
                .child
                .try_wait()
                .map_err(|e| Error::io("waiting for postgres", e))?
            {
                return Err(Error::ServerExited {
                    status: status.to_string(),
                    log: self.log.clone(),
                    log_tail: tail(&self.log, LOG_TAIL_LINES),
                });
            }
            if let Ok(text) = std::fs::read_to_string(&pid_file) {
                if pid_file_says_ready(&text, self.pid()) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("postgres (pid {}) to accept connections", self.pid()),
                    waited: timeout,
                    log_tail: Some(tail(&self.log, LOG_TAIL_LINES)),
                });
            }
            backoff.sleep(deadline);
        }
    }

    /// Fast shutdown (SIGINT), up to [`STOP_TIMEOUT`], then SIGKILL. Returns
    /// whether the process is gone.
    pub(crate) fn stop(&mut self) -> bool {
        let pid = self.pid();
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return true;
        }
        send_signal(pid, libc::SIGINT);
        if matches!(
            wait_until(&mut self.child, Instant::now() + STOP_TIMEOUT),
            Ok(Some(_))
        ) {
            return true;
        }
        send_signal(pid, libc::SIGKILL);
        matches!(
            wait_until(&mut self.child, Instant::now() + KILL_TIMEOUT),
            Ok(Some(_))
        ) || !pid_alive(pid)
    }
}

/// Whether `postmaster.pid` text names `pid` with status "ready" (line 8).
pub(crate) fn pid_file_says_ready(text: &str, pid: u32) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines.first().and_then(|l| l.trim().parse::<u32>().ok()) == Some(pid)
        && lines.get(7).map(|l| l.trim()) == Some("ready")
}

/// The postmaster pid recorded in `<data_dir>/postmaster.pid`, if any.
pub(crate) fn recorded_postmaster_pid(data_dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

fn open_log(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))
}

/// A request to the spawner thread.
struct SpawnRequest {
    cmd: Command,
    reply: mpsc::Sender<io::Result<Child>>,
}

/// Spawns `cmd` from the long-lived spawner thread with
/// `PR_SET_PDEATHSIG(SIGINT)`, so the child gets SIGINT when this process ends
/// (however it ends).
fn spawn_tied_to_process(mut cmd: Command) -> io::Result<Child> {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only calls
    // async-signal-safe functions (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            // Runs after the uid/gid switch, which would otherwise clear it.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGINT as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // If the parent died before prctl, no signal will ever come.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::other("parent exited during spawn"));
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    spawner()?
        .send(SpawnRequest { cmd, reply })
        .map_err(|_| io::Error::other("the server spawner thread is gone"))?;
    answer
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| io::Error::other("the server spawner thread did not answer"))?
}

/// The channel to the spawner thread, starting the thread on first use.
fn spawner() -> io::Result<&'static mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    static START: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if let Some(tx) = SPAWNER.get() {
        return Ok(tx);
    }
    let _guard = START.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = SPAWNER.get() {
        return Ok(tx);
    }
    let (tx, rx) = mpsc::channel::<SpawnRequest>();
    std::thread::Builder::new()
        .name("pgshift-embedded-spawner".to_owned())
        .spawn(move || {
            // The sender lives in a static and is never dropped, so this loop
            // ends only with the process: exactly what PDEATHSIG needs.
            while let Ok(SpawnRequest { mut cmd, reply }) = rx.recv() {
                let _ = reply.send(cmd.spawn());
            }
        })?;
    Ok(SPAWNER.get_or_init(|| tx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ready_status() {
        let ready = "4242\n/d\n1700000000\n5432\n/s\n\n  1234  5678\nready   \n";
        assert!(pid_file_says_ready(ready, 4242));
        assert!(!pid_file_says_ready(ready, 4243));
        let starting = ready.replace("ready   ", "starting");
        assert!(!pid_file_says_ready(&starting, 4242));
        assert!(!pid_file_says_ready("4242\n", 4242));
    }
}
