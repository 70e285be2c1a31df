//! A stop asked of the whole process — by the CLI's SIGINT/SIGTERM handler — that
//! running work honours at its next safe point: `apply` and `migrate` before their
//! next unit or file, a copy-and-swap run between phases, between chunks of its copy
//! and verification, and between attempts of its swap (never inside the swap's
//! transaction, nor in the clean-up after it). The run is then checkpointed as stopped
//! and stays resumable; nothing of it is undone.
//!
//! A signal is a fact about the process, not about one call, so the request is
//! process-wide. Nothing in the library sets it; a library caller that never calls
//! [`request`] never sees a stop.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

/// The signal asked for, or 0.
static REQUESTED: AtomicI32 = AtomicI32::new(0);

/// How often [`wait`] looks again.
const POLL: Duration = Duration::from_millis(50);

/// Asks running work to stop at its next safe point, because of `signal` (its number).
/// The first request is kept.
pub fn request(signal: i32) {
    let _ = REQUESTED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
}

/// The signal a stop was asked for with, if one was.
pub fn requested() -> Option<i32> {
    match REQUESTED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The conventional name of a signal number (`SIGINT`, `SIGTERM`).
pub fn signal_name(signal: i32) -> String {
    match signal {
        2 => "SIGINT".to_owned(),
        15 => "SIGTERM".to_owned(),
        1 => "SIGHUP".to_owned(),
        other => format!("signal {other}"),
    }
}

/// The name of the signal a stop was asked for with, if one was.
pub fn requested_name() -> Option<String> {
    requested().map(signal_name)
}

/// Resolves once a stop is asked for.
pub async fn wait() {
    while requested().is_none() {
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::signal_name;

    #[test]
    fn signals_have_their_conventional_names() {
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(9), "signal 9");
    }
}
