//! The copy ledger: which key ranges are *uncut* (not yet copied), *in flight* (a chunk
//! transaction copying them) and *landed* (copied and committed).
//!
//! The ledger is shared by the copy workers and the change-log applier behind one lock
//! (INV: CO-5): a chunk is marked in flight, under the lock, before its transaction
//! takes its snapshot, and the applier classifies log entries while holding the same
//! lock. So an entry classified *uncut* (and discarded) belongs to a key whose chunk
//! will take its snapshot later and see the change; an entry in a chunk *in flight* is
//! deferred; an entry in a *landed* range is applied.
//!
//! Ranges are half-open `[lo, hi)` over the key's btree order; `lo = None` is the
//! start, `hi = None` the end. Keys are compared by the server (the ledger only holds
//! bounds), so the ledger itself is plain bookkeeping and unit-tested here.

use super::keys::KeyValue;

/// A chunk of the key range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Its number.
    pub id: u64,
    /// Inclusive lower bound (`None`: the start).
    pub lo: Option<KeyValue>,
    /// Exclusive upper bound (`None`: the end).
    pub hi: Option<KeyValue>,
}

/// How a log entry's key stands, for the applier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Not copied yet: discard (the copy will read the current row).
    Uncut,
    /// Being copied: defer until its chunk lands.
    InFlight,
    /// Copied: apply.
    Landed,
}

/// The ledger.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    /// Every key below this has landed (`None` with `started = false`: nothing yet).
    prefix: Option<KeyValue>,
    /// Whether the prefix has started (a first chunk landed, or resumed from a prefix).
    started: bool,
    /// The start of the uncut region (`None`: the start, when nothing is cut yet).
    cursor: Option<KeyValue>,
    /// Whether the cursor has reached the end: nothing is left to cut.
    exhausted: bool,
    /// Chunks in flight.
    in_flight: Vec<Chunk>,
    /// Landed chunks above the prefix (landed out of order).
    landed_above: Vec<Chunk>,
    next_id: u64,
    /// Whether every key has landed.
    finished: bool,
    /// Whether a chunk failed: nothing more is cut (see [`Ledger::unland`]).
    halted: bool,
}

impl Ledger {
    /// A ledger for a fresh copy, or one resuming above `prefix` (everything below
    /// it landed; `finished` when the copy had completed).
    pub fn resume(prefix: Option<KeyValue>, finished: bool) -> Self {
        Ledger {
            started: prefix.is_some() || finished,
            cursor: prefix.clone(),
            prefix,
            exhausted: finished,
            finished,
            ..Ledger::default()
        }
    }

    /// The start of the uncut region.
    pub fn cursor(&self) -> Option<&KeyValue> {
        self.cursor.as_ref()
    }

    /// Whether nothing is left to cut.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Whether every key has landed.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The landed prefix (every key below it landed).
    pub fn prefix(&self) -> Option<&KeyValue> {
        self.prefix.as_ref()
    }

    /// Cuts `[cursor, hi)` and marks it in flight (`hi = None`: to the end).
    pub fn cut(&mut self, hi: Option<KeyValue>) -> Chunk {
        self.next_id += 1;
        let chunk = Chunk {
            id: self.next_id,
            lo: self.cursor.clone(),
            hi: hi.clone(),
        };
        self.in_flight.push(chunk.clone());
        match hi {
            Some(hi) => self.cursor = Some(hi),
            None => self.exhausted = true,
        }
        chunk
    }

    /// Marks chunk `id` landed and advances the prefix over every contiguous landed
    /// chunk. Returns whether the prefix moved.
    pub fn land(&mut self, id: u64) -> bool {
        let Some(position) = self.in_flight.iter().position(|c| c.id == id) else {
            return false;
        };
        let chunk = self.in_flight.remove(position);
        self.landed_above.push(chunk);
        let mut moved = false;
        loop {
            let next = self.landed_above.iter().position(|c| {
                if self.started {
                    c.lo == self.prefix
                } else {
                    c.lo.is_none()
                }
            });
            let Some(next) = next else { break };
            let chunk = self.landed_above.remove(next);
            self.started = true;
            moved = true;
            match chunk.hi {
                Some(hi) => self.prefix = Some(hi),
                None => {
                    self.finished = true;
                    self.prefix = None;
                }
            }
        }
        moved
    }

    /// Puts a chunk whose copy failed back into the uncut region, by moving the cursor
    /// back to its lower bound and forgetting every chunk cut after it, and halts the
    /// copy: nothing more is cut in this process ([`Ledger::halted`]). The shadow has
    /// no key during the copy, so a chunk cut again over a range that had landed would
    /// insert its rows a second time; a resumed copy instead deletes every row above
    /// the recorded prefix first.
    pub fn unland(&mut self, id: u64) {
        let Some(chunk) = self.in_flight.iter().find(|c| c.id == id).cloned() else {
            return;
        };
        self.in_flight.retain(|c| c.id < id);
        self.landed_above.retain(|c| c.id < id);
        self.cursor = chunk.lo;
        self.exhausted = false;
        self.halted = true;
    }

    /// Whether a chunk failed ([`Ledger::unland`]): no chunk may be cut any more.
    pub fn halted(&self) -> bool {
        self.halted
    }

    /// The ranges landed above the prefix.
    pub fn landed_ranges(&self) -> &[Chunk] {
        &self.landed_above
    }

    /// The ranges in flight.
    pub fn in_flight(&self) -> &[Chunk] {
        &self.in_flight
    }

    /// Whether the prefix covers the start (some chunk starting at the beginning has
    /// landed, or the run resumed from a prefix).
    pub fn started(&self) -> bool {
        self.started
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> Option<KeyValue> {
        Some(vec![n.to_string()])
    }

    #[test]
    fn the_prefix_advances_only_over_contiguous_landings() {
        let mut ledger = Ledger::resume(None, false);
        let a = ledger.cut(key(10));
        let b = ledger.cut(key(20));
        let c = ledger.cut(None);
        assert!(ledger.exhausted());
        assert!(!ledger.land(b.id), "b landed above an in-flight a");
        assert_eq!(ledger.prefix(), None);
        assert!(!ledger.started());
        assert!(ledger.land(a.id));
        assert_eq!(ledger.prefix(), key(20).as_ref(), "a and b are contiguous");
        assert!(!ledger.finished());
        assert!(ledger.land(c.id));
        assert!(ledger.finished());
    }

    #[test]
    fn resuming_starts_at_the_prefix() {
        let mut ledger = Ledger::resume(key(100), false);
        let chunk = ledger.cut(key(200));
        assert_eq!(chunk.lo, key(100));
        assert!(ledger.land(chunk.id));
        assert_eq!(ledger.prefix(), key(200).as_ref());
    }

    #[test]
    fn a_failed_chunk_goes_back_to_uncut() {
        let mut ledger = Ledger::resume(None, false);
        let a = ledger.cut(key(10));
        let _b = ledger.cut(key(20));
        ledger.unland(a.id);
        assert_eq!(ledger.cursor(), None);
        assert!(ledger.in_flight().is_empty());
        assert!(ledger.halted(), "nothing is cut after a failed chunk");
    }
}
