//! SIGINT and SIGTERM while something runs (`apply`, `migrate`, `resume`).
//!
//! The first signal asks the running work to stop at its next safe point
//! ([`pgshift::exec::interrupt`]): the current step finishes, a copy-and-swap run is
//! checkpointed as stopped — its capture stays installed, so no write is missed while
//! it waits — and the verdict says how to resume or abort it (exit 1: stopped after
//! starting). A second signal ends the process at once (exit 130 or 143), which leaves
//! a run exactly as a killed process does: resumable from its record.

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::exit;
use pgshift::exec::interrupt;

/// Takes over SIGINT and SIGTERM for the rest of the process. Call it inside the
/// runtime, right before the work starts; the handlers are in place when it returns.
pub fn install() {
    let (Ok(interrupt_signal), Ok(terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without handlers the default stays: the signal kills the process, which
        // leaves every run resumable all the same.
        return;
    };
    tokio::spawn(watch(interrupt_signal, terminate));
}

async fn watch(mut interrupt_signal: Signal, mut terminate: Signal) {
    let first = next(&mut interrupt_signal, &mut terminate).await;
    interrupt::request(first);
    eprintln!(
        "\npgshift: {} received: stopping at the next safe point and recording where (send it again to exit at once; a copy-and-swap run stays resumable either way)",
        interrupt::signal_name(first)
    );
    let second = next(&mut interrupt_signal, &mut terminate).await;
    eprintln!(
        "pgshift: {} received again: exiting now; `pgshift status` shows the run, `pgshift resume TABLE` continues it, `pgshift abort TABLE` removes it",
        interrupt::signal_name(second)
    );
    std::process::exit(exit::killed_by(second));
}

/// The number of the next of the two signals.
async fn next(interrupt_signal: &mut Signal, terminate: &mut Signal) -> i32 {
    tokio::select! {
        _ = interrupt_signal.recv() => libc::SIGINT,
        _ = terminate.recv() => libc::SIGTERM,
    }
}

/// Lets a closed stdout end the process quietly, as it ends `grep` or `psql`
/// (`pgshift lint … | head`): Rust ignores SIGPIPE, so printing to a closed pipe
/// would otherwise panic. Only for commands that change nothing; `apply`, `migrate` and
/// the run commands keep running when their output goes away.
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default is async-signal-safe and
    // done before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
