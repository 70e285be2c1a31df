//! The content hash of an event row, computed the same way on both sides: by
//! the writer from the fields it set ([`EventContent::hash`]) and by the oracle
//! on the server from the stored row ([`hash_sql`]).
//!
//! The hashed text is, joined by the unit separator U+001F:
//! `v1`, `encode(pubkey, 'hex')`, `kind::text`, `tags::text`, `content`,
//! `channel_id::text` or `-`, `'d:' || d_tag` or `-`, and `deleted_at` as whole
//! Unix microseconds or `-`. The two functions live in this one file so they
//! change together. Columns the writer does not set (`received_at`, the
//! generated `search_tsv`) are not part of it; `kind::text` reads the same
//! after a retype to `bigint`.
//!
//! `tags::text` is jsonb's canonical output, so the client renders tags in
//! exactly that form ([`tags_json`]): `[["t", "relay"], ["client", "x"]]`.

use sha2::{Digest, Sha256};

use crate::key::{hex, ContentHash, PgUuid};

/// Separates the hashed fields (U+001F, the unit separator).
const SEPARATOR: char = '\u{1f}';

/// The fields of an event that its writer sets, apart from the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventContent {
    /// `pubkey`, the 32-byte author key.
    pub pubkey: [u8; 32],
    /// `kind`.
    pub kind: i32,
    /// `tags`: a JSON array of arrays of strings.
    pub tags: Vec<Vec<String>>,
    /// `content`.
    pub content: String,
    /// `channel_id`, if the event belongs to a channel.
    pub channel_id: Option<PgUuid>,
    /// `d_tag`, the replaceable-event key (kind 30078 only).
    pub d_tag: Option<String>,
    /// `deleted_at` in Unix microseconds, once soft-deleted.
    pub deleted_at_us: Option<i64>,
}

impl EventContent {
    /// The content hash, equal to what [`hash_sql`] computes from the stored row.
    pub fn hash(&self) -> ContentHash {
        let text = [
            "v1".to_owned(),
            hex(&self.pubkey),
            self.kind.to_string(),
            tags_json(&self.tags),
            self.content.clone(),
            self.channel_id
                .map_or_else(|| "-".to_owned(), |id| id.to_string()),
            self.d_tag
                .as_ref()
                .map_or_else(|| "-".to_owned(), |d| format!("d:{d}")),
            self.deleted_at_us
                .map_or_else(|| "-".to_owned(), |us| us.to_string()),
        ]
        .join(&SEPARATOR.to_string());
        ContentHash(Sha256::digest(text.as_bytes()).into())
    }

    /// `tags` as jsonb prints it ([`tags_json`]).
    pub fn tags_json(&self) -> String {
        tags_json(&self.tags)
    }
}

/// The SQL expression (type `bytea`) computing the content hash of the row
/// aliased `alias` (an identifier the caller controls, e.g. `e`).
pub fn hash_sql(alias: &str) -> String {
    format!(
        "sha256(convert_to(concat_ws(E'\\x1f', 'v1', encode({a}.pubkey, 'hex'), {a}.kind::text, \
         {a}.tags::text, {a}.content, coalesce({a}.channel_id::text, '-'), \
         coalesce('d:' || {a}.d_tag, '-'), \
         coalesce(((extract(epoch FROM {a}.deleted_at) * 1000000)::bigint)::text, '-')), 'UTF8'))",
        a = alias
    )
}

/// `tags` in jsonb's output form: `", "` between elements, strings escaped as
/// PostgreSQL's `escape_json` does.
pub fn tags_json(tags: &[Vec<String>]) -> String {
    let mut out = String::from("[");
    for (i, tag) in tags.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('[');
        for (j, value) in tag.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            push_json_string(&mut out, value);
        }
        out.push(']');
    }
    out.push(']');
    out
}

fn push_json_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_render_like_jsonb_output() {
        let tags = vec![
            vec!["t".to_owned(), "relay".to_owned()],
            vec!["q".to_owned(), "a\"b\\c\nd\u{1}".to_owned()],
        ];
        assert_eq!(
            tags_json(&tags),
            r#"[["t", "relay"], ["q", "a\"b\\c\nd\u0001"]]"#
        );
        assert_eq!(tags_json(&[]), "[]");
    }

    #[test]
    fn hash_changes_with_soft_delete_state() {
        let mut content = EventContent {
            pubkey: [7; 32],
            kind: 1,
            tags: Vec::new(),
            content: "hello".to_owned(),
            channel_id: None,
            d_tag: None,
            deleted_at_us: None,
        };
        let live = content.hash();
        content.deleted_at_us = Some(1);
        assert_ne!(live, content.hash());
    }
}
