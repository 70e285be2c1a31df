//! Notices the server sends on pgshift's sessions, handed to whoever listens for
//! their marker.
//!
//! The driver delivers a notice (`RAISE NOTICE`) on the connection's message stream,
//! not with the statement's result; every session's connection task passes each one
//! to [`deliver`], which keeps it only when an open [`NoticeTap`]'s marker starts it
//! (the guard of PC-5 opens one, with a marker made for the run). Other notices are
//! dropped, as the driver drops them. The task reads the stream in order, so the
//! notices a statement raised are delivered before its result reaches the client.

use std::collections::BTreeMap;
use std::sync::Mutex;

static TAPS: Mutex<BTreeMap<String, Vec<String>>> = Mutex::new(BTreeMap::new());

/// Collects the messages of the notices that start with its marker and a space,
/// until dropped.
#[derive(Debug)]
pub struct NoticeTap {
    marker: String,
}

impl NoticeTap {
    /// Starts collecting notices that start with `marker`.
    pub fn open(marker: &str) -> NoticeTap {
        taps().insert(marker.to_owned(), Vec::new());
        NoticeTap {
            marker: marker.to_owned(),
        }
    }

    /// The messages collected since it opened (or since the last call), in order.
    pub fn take(&self) -> Vec<String> {
        taps()
            .get_mut(&self.marker)
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

impl Drop for NoticeTap {
    fn drop(&mut self) {
        taps().remove(&self.marker);
    }
}

fn taps() -> std::sync::MutexGuard<'static, BTreeMap<String, Vec<String>>> {
    TAPS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Gives a notice's message to the tap whose marker starts it, if one is open.
pub(crate) fn deliver(message: &str) {
    let mut taps = taps();
    let found = taps.iter_mut().find(|(marker, _)| {
        message
            .strip_prefix(marker.as_str())
            .is_some_and(|rest| rest.starts_with(' '))
    });
    if let Some((_, messages)) = found {
        messages.push(message.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tap_gets_its_marker_only_and_closes_when_dropped() {
        let tap = NoticeTap::open("tap-test-1");
        deliver("tap-test-1 statement ALTER TABLE t");
        deliver("tap-test-12 statement other");
        deliver("unrelated");
        assert_eq!(tap.take(), ["tap-test-1 statement ALTER TABLE t"]);
        assert!(tap.take().is_empty());
        drop(tap);
        deliver("tap-test-1 statement late");
        assert!(!taps().contains_key("tap-test-1"));
    }
}
