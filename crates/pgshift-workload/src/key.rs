//! The small value types that the load, the ledger and the oracle share: a
//! `uuid` carried as 16 bytes, the primary key of an event row, a content hash,
//! and conversions between `SystemTime` and the microseconds PostgreSQL stores.
//!
//! Timestamps are kept as Unix microseconds (`i64`) everywhere: PostgreSQL
//! stores `timestamptz` with microsecond resolution, so a key written from a
//! whole number of microseconds reads back equal.

use std::error::Error as StdError;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use serde::Serialize;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

/// A PostgreSQL `uuid`, carried as its 16 bytes. `Display` gives the canonical
/// lowercase hyphenated form, the same text as `uuid::text` on the server.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PgUuid(pub [u8; 16]);

impl fmt::Display for PgUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PgUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for PgUuid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl ToSql for PgUuid {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgUuid {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        let bytes: [u8; 16] = raw
            .try_into()
            .map_err(|_| format!("a uuid has 16 bytes, not {}", raw.len()))?;
        Ok(PgUuid(bytes))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }
}

/// The primary key of an `events` row: `(community_id, created_at, id)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct EventKey {
    /// `community_id`.
    pub community_id: PgUuid,
    /// `created_at`, in microseconds since the Unix epoch.
    pub created_at_us: i64,
    /// `id`, the 32-byte event hash.
    #[serde(serialize_with = "serialize_hex")]
    pub id: [u8; 32],
}

impl EventKey {
    /// `created_at` as a `SystemTime` (exact: both sides hold microseconds).
    pub fn created_at(&self) -> SystemTime {
        system_time_from_unix_us(self.created_at_us)
    }
}

impl fmt::Debug for EventKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "({}, {} us, {})",
            self.community_id,
            self.created_at_us,
            hex(&self.id)
        )
    }
}

/// The sha256 of a row's content as the writer set it (see [`crate::content`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ContentHash(#[serde(serialize_with = "serialize_hex")] pub [u8; 32]);

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Eight bytes are plenty to tell two hashes apart in a report.
        write!(f, "{}…", hex(&self.0[..8]))
    }
}

/// Lowercase hex of `bytes`, as PostgreSQL's `encode(…, 'hex')` writes it.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn serialize_hex<S: serde::Serializer>(bytes: &[u8; 32], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&hex(bytes))
}

/// Microseconds since the Unix epoch (negative before it), truncated.
pub fn unix_us(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => {
            let us = before.duration().as_micros();
            // Round towards minus infinity, as a truncation of the signed value.
            let whole = i64::try_from(us).unwrap_or(i64::MAX);
            if Duration::from_micros(us as u64) < before.duration() {
                -whole - 1
            } else {
                -whole
            }
        }
    }
}

/// The `SystemTime` of `us` microseconds since the Unix epoch.
pub fn system_time_from_unix_us(us: i64) -> SystemTime {
    let magnitude = Duration::from_micros(us.unsigned_abs());
    if us >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_displays_like_postgres() {
        let uuid = PgUuid([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ]);
        assert_eq!(uuid.to_string(), "12345678-9abc-def0-0123-456789abcdef");
    }

    #[test]
    fn unix_us_round_trips_whole_microseconds() {
        for us in [0_i64, 1, 1_796_000_000_123_456, -1, -1_000_001] {
            assert_eq!(unix_us(system_time_from_unix_us(us)), us);
        }
    }

    #[test]
    fn unix_us_truncates_sub_microseconds_towards_minus_infinity() {
        let after = UNIX_EPOCH + Duration::from_nanos(1_500);
        assert_eq!(unix_us(after), 1);
        let before = UNIX_EPOCH - Duration::from_nanos(1_500);
        assert_eq!(unix_us(before), -2);
    }
}
