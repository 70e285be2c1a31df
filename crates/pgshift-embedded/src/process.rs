//! Process helpers: running a helper program with a deadline, telling whether
//! a pid is alive, and sending signals.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Shortest and longest pause between polls.
const POLL_MIN: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(25);

/// A poll interval that starts short and backs off, for bounded wait loops.
#[derive(Debug)]
pub(crate) struct Backoff(Duration);

impl Backoff {
    pub(crate) fn new() -> Self {
        Self(POLL_MIN)
    }

    /// Sleeps for the current interval (never past `deadline`), then lengthens it.
    pub(crate) fn sleep(&mut self, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        thread::sleep(self.0.min(left));
        self.0 = (self.0 * 2).min(POLL_MAX);
    }
}

/// The program and arguments of `cmd`, for messages.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut text = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs `cmd` to completion with piped output, killing it after `timeout`.
pub(crate) fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<Output> {
    let what = describe(&cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("starting `{what}`"), e))?;
    let stdout = child.stdout.take().map(reader_thread);
    let stderr = child.stderr.take().map(reader_thread);
    let deadline = Instant::now() + timeout;
    let Some(status) = wait_until(&mut child, deadline)? else {
        let _ = child.kill();
        let _ = wait_until(&mut child, Instant::now() + Duration::from_secs(5));
        // The reader threads end when the pipes close; they are not joined, as
        // a grandchild may still hold a pipe open.
        return Err(Error::Timeout {
            what: format!("`{what}` to finish"),
            waited: timeout,
            log_tail: None,
        });
    };
    let join =
        |h: Option<thread::JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(Output {
        status,
        stdout: join(stdout),
        stderr: join(stderr),
    })
}

/// Like [`run_bounded`], but a non-zero exit is an [`Error::CommandFailed`];
/// returns standard output.
pub(crate) fn run_checked(cmd: Command, timeout: Duration) -> Result<String> {
    let what = describe(&cmd);
    let output = run_bounded(cmd, timeout)?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        if text.is_empty() {
            text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        }
        return Err(Error::CommandFailed {
            command: what,
            status: output.status.to_string(),
            output: text,
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn reader_thread<R: Read + Send + 'static>(mut pipe: R) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// Polls `child` until it exits (`Some(status)`) or `deadline` passes (`None`).
pub(crate) fn wait_until(child: &mut Child, deadline: Instant) -> Result<Option<ExitStatus>> {
    let mut backoff = Backoff::new();
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Error::io(format!("waiting for pid {}", child.id()), e))?
        {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        backoff.sleep(deadline);
    }
}

/// Whether a process with this pid exists and is not a zombie. Pids that do
/// not fit a positive `pid_t` are reported dead (and never signalled).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(raw, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    // It exists (or belongs to someone else: EPERM). A zombie is dead all the same.
    !is_zombie(pid)
}

fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may
    // itself contain ") ".
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_some_and(|state| state == "Z" || state == "X")
}

/// Sends `signal` to `pid` if it is a positive pid; errors are ignored (the
/// process may be gone already).
pub(crate) fn send_signal(pid: u32, signal: libc::c_int) {
    if let Ok(raw) = libc::pid_t::try_from(pid) {
        if raw > 0 {
            // SAFETY: plain kill(2) on a positive pid.
            unsafe {
                libc::kill(raw, signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_pid_alive_and_reaped_child_dead() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
        let mut child = Command::new("true").spawn().expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(!pid_alive(pid));
    }

    #[test]
    fn bounded_run_times_out() {
        let mut cmd = Command::new("sleep");
        cmd.arg("5");
        let started = Instant::now();
        let err = run_bounded(cmd, Duration::from_millis(200)).expect_err("must time out");
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn checked_run_reports_failure() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo oops >&2; exit 3"]);
        let err = run_checked(cmd, Duration::from_secs(5)).expect_err("must fail");
        let text = err.to_string();
        assert!(text.contains("oops") && text.contains('3'), "{text}");
    }
}
