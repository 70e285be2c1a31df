//! Generates the events a relay writer inserts, valid for every trigger of the
//! relay schema:
//!
//! * unique 32-byte ids (sha256 of a per-run namespace, the writer and a
//!   sequence number) and 32-byte pubkeys from a pool of 64 authors;
//! * an existing community, and an existing live channel for the kinds that
//!   belong to one (chat 9 and reactions 7 always, notes 1 half of the time);
//! * `created_at` just before now, so the floor guard passes (stale inserts,
//!   made on purpose, are older than the floor);
//! * every kind of the schema: 1 and 30023 (search text), 9, 7, 4 and 1059
//!   (through the outbox trigger), 5 (purged when soft-deleted), and 30078
//!   (replaceable) with a `d_tag` of its own, so the replay skipper accepts it
//!   and records a watermark; an exact replay is only made when asked for.
//!
//! Every event carries the tag `["client", "pgshift-bench"]`.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::content::EventContent;
use crate::key::{hex, EventKey, PgUuid};
use crate::rng::Rng;

/// The tag every generated event carries.
pub const CLIENT_TAG: [&str; 2] = ["client", "pgshift-bench"];

/// Kinds and their weights among inserts.
const KINDS: &[(i32, u32)] = &[
    (1, 45),
    (9, 20),
    (7, 6),
    (4, 5),
    (1059, 5),
    (5, 5),
    (30023, 5),
    (30078, 9),
];

/// The replaceable kind the replay skipper watches.
pub(crate) const REPLACEABLE_KIND: i32 = 30078;

/// Words for text content (ASCII only, so that jsonb prints them verbatim).
const WORDS: &[&str] = &[
    "relay",
    "quokka",
    "sunrise",
    "kernel",
    "postgres",
    "channel",
    "ephemeral",
    "signal",
    "lantern",
    "harbor",
    "orbit",
    "meadow",
    "cipher",
    "beacon",
    "granite",
    "willow",
];

/// Authors in the pubkey pool.
const AUTHORS: u64 = 64;

/// A live channel to write to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channel {
    /// Its community.
    pub community_id: PgUuid,
    /// Its id.
    pub id: PgUuid,
}

/// Where events go: the communities and live channels of the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Targets {
    /// Communities (at least one).
    pub communities: Vec<PgUuid>,
    /// Live channels (at least one).
    pub channels: Vec<Channel>,
}

/// A row a writer inserted (or will insert): its key and content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    /// The primary key.
    pub key: EventKey,
    /// The fields the writer set.
    pub content: EventContent,
}

/// One writer's event source.
#[derive(Debug)]
pub(crate) struct Generator {
    rng: Rng,
    namespace: u64,
    writer: u32,
    seq: u64,
    targets: Arc<Targets>,
}

impl Generator {
    /// A generator for `writer`, with ids in `namespace` (unique per run) and
    /// choices drawn from `seed`.
    pub fn new(seed: u64, namespace: u64, writer: u32, targets: Arc<Targets>) -> Self {
        Generator {
            rng: Rng::new(seed, u64::from(writer) + 1),
            namespace,
            writer,
            seq: 0,
            targets,
        }
    }

    /// The generator's random source (for the writer's own choices).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// A new event created just before `now_us` (Unix microseconds).
    pub fn event(&mut self, now_us: i64) -> EventRow {
        let weights: Vec<u32> = KINDS.iter().map(|(_, w)| *w).collect();
        let kind = self.rng.weighted(&weights).map_or(1, |i| KINDS[i].0);
        let jitter_us = self.rng.below(250_000) as i64;
        self.build(kind, now_us - jitter_us, None)
    }

    /// A chat event in a channel, `age_secs` older than `now_us`: refused by
    /// the floor guard when `age_secs` exceeds the writer's floor.
    pub fn stale_event(&mut self, now_us: i64, age_secs: u64) -> EventRow {
        let age_us = i64::try_from(age_secs.saturating_mul(1_000_000)).unwrap_or(i64::MAX);
        let channel = self.channel();
        self.build(9, now_us.saturating_sub(age_us), Some(channel))
    }

    fn channel(&mut self) -> Channel {
        let i = self.rng.index(self.targets.channels.len());
        self.targets.channels[i]
    }

    fn build(&mut self, kind: i32, created_at_us: i64, channel: Option<Channel>) -> EventRow {
        self.seq += 1;
        let seq = self.seq;
        let channel = channel.or_else(|| match kind {
            9 | 7 => Some(self.channel()),
            1 if self.rng.below(2) == 0 => Some(self.channel()),
            _ => None,
        });
        let community_id = match channel {
            Some(channel) => channel.community_id,
            None => {
                let i = self.rng.index(self.targets.communities.len());
                self.targets.communities[i]
            }
        };
        let id = sha256(&format!(
            "pgshift-bench:event:{:016x}:{}:{seq}",
            self.namespace, self.writer
        ));
        let pubkey = sha256(&format!("pgshift-bench:pubkey:{}", self.rng.below(AUTHORS)));
        let d_tag = (kind == REPLACEABLE_KIND)
            .then(|| format!("bench:{:016x}:{}:{seq}", self.namespace, self.writer));
        let word = WORDS[self.rng.index(WORDS.len())];
        let mut tags = match kind {
            REPLACEABLE_KIND => vec![vec!["d".to_owned(), d_tag.clone().unwrap_or_default()]],
            5 => vec![vec!["e".to_owned(), hex(&self.rng.bytes32())]],
            4 => vec![vec!["p".to_owned(), hex(&self.rng.bytes32())]],
            _ => vec![vec!["t".to_owned(), word.to_owned()]],
        };
        tags.push(CLIENT_TAG.iter().map(|s| (*s).to_owned()).collect());
        let content = self.content(kind, seq);
        EventRow {
            key: EventKey {
                community_id,
                created_at_us,
                id,
            },
            content: EventContent {
                pubkey,
                kind,
                tags,
                content,
                channel_id: channel.map(|c| c.id),
                d_tag,
                deleted_at_us: None,
            },
        }
    }

    fn content(&mut self, kind: i32, seq: u64) -> String {
        match kind {
            REPLACEABLE_KIND => format!(
                "{{\"theme\":\"{}\",\"n\":{seq}}}",
                WORDS[self.rng.index(WORDS.len())]
            ),
            4 | 1059 => format!("ciphertext:{}", hex(&self.rng.bytes32()[..16])),
            7 => "+".to_owned(),
            5 => String::new(),
            30023 => {
                let sentence = self.sentence(seq);
                [sentence.as_str(); 4].join(". ")
            }
            // One note in ten is empty: the purge trigger removes it when it is
            // soft-deleted, like a deletion event.
            1 if seq % 10 == 0 => String::new(),
            _ => self.sentence(seq),
        }
    }

    fn sentence(&mut self, seq: u64) -> String {
        let words: Vec<&str> = (0..6).map(|_| WORDS[self.rng.index(WORDS.len())]).collect();
        format!("{} number {seq}", words.join(" "))
    }
}

/// Whether the relay's purge trigger deletes this row when it is soft-deleted
/// (kind 5, or empty content).
pub(crate) fn purged_on_soft_delete(content: &EventContent) -> bool {
    content.kind == 5 || content.content.is_empty()
}

fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> Arc<Targets> {
        let community = PgUuid([1; 16]);
        Arc::new(Targets {
            communities: vec![community, PgUuid([2; 16])],
            channels: vec![Channel {
                community_id: community,
                id: PgUuid([3; 16]),
            }],
        })
    }

    #[test]
    fn ids_are_unique_and_channel_events_use_the_channels_community() {
        let mut generator = Generator::new(1, 99, 0, targets());
        let rows: Vec<EventRow> = (0..500).map(|_| generator.event(1_000_000_000)).collect();
        let ids: std::collections::HashSet<[u8; 32]> = rows.iter().map(|r| r.key.id).collect();
        assert_eq!(ids.len(), rows.len());
        for row in &rows {
            if row.content.channel_id.is_some() {
                assert_eq!(row.key.community_id, PgUuid([1; 16]));
            }
            assert_eq!(
                row.content.d_tag.is_some(),
                row.content.kind == REPLACEABLE_KIND
            );
            assert!(row.key.created_at_us <= 1_000_000_000);
            assert!(row.key.created_at_us > 1_000_000_000 - 250_000);
        }
        let kinds: std::collections::BTreeSet<i32> = rows.iter().map(|r| r.content.kind).collect();
        assert_eq!(kinds.len(), KINDS.len(), "{kinds:?}");
    }

    #[test]
    fn namespaces_keep_runs_apart() {
        let mut a = Generator::new(1, 1, 0, targets());
        let mut b = Generator::new(1, 2, 0, targets());
        assert_ne!(a.event(0).key.id, b.event(0).key.id);
    }

    #[test]
    fn stale_events_are_older_than_asked_and_in_a_channel() {
        let mut generator = Generator::new(1, 1, 0, targets());
        let row = generator.stale_event(10_000_000_000, 4000);
        assert_eq!(row.key.created_at_us, 10_000_000_000 - 4_000_000_000);
        assert!(row.content.channel_id.is_some());
    }
}
