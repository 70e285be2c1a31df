//! Migration versions as each runner orders them.
//!
//! - Integers of any width (sqlx, pop, golang-migrate, dbmate, goose, pgshift's own
//!   numbers) compare as numbers, not as times or as text: `00_init` comes before
//!   `20240101120000_x`, and an 18-digit or 40-digit version is still a number. They
//!   are compared by their digits with leading zeros stripped (shorter is smaller, then
//!   digit by digit), so no width overflows.
//! - Flyway's dotted versions (`1.10`, `2_1`) compare part by part, each part a
//!   number, a missing part counting as 0 (`1` = `1.0`).
//! - diesel's versions (`2023-01-01-000000`, `00000000000000`) are strings: diesel
//!   drops the dashes and orders the rest as text (diesel_migrations'
//!   `version_from_string`).
//!
//! Each version has one canonical text, [`Version::key`], under which
//! `pgshift.migrations` records it: equal versions have equal keys.

use std::cmp::Ordering;
use std::fmt;

use serde::{Serialize, Serializer};

/// A version as a file or folder name writes it.
#[derive(Clone, Debug)]
pub struct Version {
    /// As written (`0007`, `1.10`, `2023-01-01-000000`).
    pub text: String,
    order: Order,
}

#[derive(Clone, Debug)]
enum Order {
    /// Numeric parts, each its digits without leading zeros (`0` is the empty string).
    Numbers(Vec<String>),
    /// Text, compared as text.
    Text(String),
}

impl Version {
    /// An integer version from its digits (`0007`); `None` unless all are ASCII digits.
    pub fn integer(digits: &str) -> Option<Version> {
        Self::numbers(digits, &[])
    }

    /// A Flyway version (`1`, `1.1`, `1_1`: Flyway reads `_` as `.`).
    pub fn dotted(text: &str) -> Option<Version> {
        Self::numbers(text, &['.', '_'])
    }

    /// A diesel version: the text before the folder name's first `_`, compared without
    /// its dashes (diesel's own reading: any text); `None` when nothing is left.
    pub fn diesel(text: &str) -> Option<Version> {
        let key: String = text.chars().filter(|c| *c != '-').collect();
        (!key.is_empty()).then(|| Version {
            text: text.to_owned(),
            order: Order::Text(key),
        })
    }

    fn numbers(text: &str, separators: &[char]) -> Option<Version> {
        let parts: Option<Vec<String>> = text
            .split(separators)
            .map(|part| {
                (!part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
                    .then(|| part.trim_start_matches('0').to_owned())
            })
            .collect();
        Some(Version {
            text: text.to_owned(),
            order: Order::Numbers(parts?),
        })
    }

    /// The canonical text under which the history records the version: integers
    /// without leading zeros (`0007` → `7`), Flyway versions without trailing zero
    /// parts (`1.0` → `1`), diesel versions without dashes (as diesel records them).
    pub fn key(&self) -> String {
        match &self.order {
            Order::Numbers(parts) => {
                let used = parts
                    .iter()
                    .rposition(|p| !p.is_empty())
                    .map_or(1, |i| i + 1);
                parts[..used.min(parts.len())]
                    .iter()
                    .map(|p| if p.is_empty() { "0" } else { p.as_str() })
                    .collect::<Vec<_>>()
                    .join(".")
            }
            Order::Text(text) => text.clone(),
        }
    }

    /// The version as one integer, when it is one that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_u128().and_then(|v| i64::try_from(v).ok())
    }

    /// Whether `next` is this integer version plus one (a sequence without a gap).
    pub fn is_followed_by(&self, next: &Version) -> bool {
        match (self.as_u128(), next.as_u128()) {
            (Some(a), Some(b)) => a.checked_add(1) == Some(b),
            _ => false,
        }
    }

    /// The version as one integer, when it is one below 2^128.
    pub fn as_u128(&self) -> Option<u128> {
        match &self.order {
            Order::Numbers(parts) if parts.len() == 1 => {
                if parts[0].is_empty() {
                    Some(0)
                } else {
                    parts[0].parse().ok()
                }
            }
            _ => None,
        }
    }

    /// Whether it has more than one part (Flyway's `1.1`).
    pub fn is_dotted(&self) -> bool {
        matches!(&self.order, Order::Numbers(parts) if parts.len() > 1)
    }
}

/// Digit strings without leading zeros, compared as numbers.
fn compare_digits(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.order, &other.order) {
            (Order::Numbers(a), Order::Numbers(b)) => {
                let len = a.len().max(b.len());
                (0..len)
                    .map(|i| {
                        let x = a.get(i).map_or("", String::as_str);
                        let y = b.get(i).map_or("", String::as_str);
                        compare_digits(x, y)
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            }
            (Order::Text(a), Order::Text(b)) => a.cmp(b),
            (Order::Numbers(_), Order::Text(_)) => Ordering::Less,
            (Order::Text(_), Order::Numbers(_)) => Ordering::Greater,
        }
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(text: &str) -> Version {
        Version::integer(text).expect("an integer")
    }

    #[test]
    fn integers_of_any_width_compare_as_numbers() {
        assert!(int("00") < int("20240101120000"));
        assert!(int("9") < int("10"));
        assert!(int("0009") < int("10"));
        assert_eq!(int("0007"), int("7"));
        assert_eq!(int("0007").key(), "7");
        assert_eq!(int("000").key(), "0");
        let wide = int("123456789012345678901234567890");
        assert!(int("99999999999999999999999999999") < wide);
        assert_eq!(wide.as_i64(), None);
        assert_eq!(
            int("202401011200000000").as_i64(),
            Some(202_401_011_200_000_000)
        );
        assert!(int("1").is_followed_by(&int("0002")));
        assert!(!int("1").is_followed_by(&int("3")));
        assert!(Version::integer("1a").is_none());
    }

    #[test]
    fn flyway_versions_compare_part_by_part() {
        let v = |t: &str| Version::dotted(t).expect("dotted");
        assert!(v("1.2") < v("1.10"));
        assert_eq!(v("1"), v("1.0"));
        assert_eq!(v("1.0").key(), "1");
        assert_eq!(v("2_1").key(), "2.1");
        assert_eq!(v("1.01").key(), "1.1");
        assert!(v("1.1").is_dotted() && !v("1").is_dotted());
        assert!(Version::dotted("1..2").is_none());
    }

    #[test]
    fn diesel_versions_compare_as_text_without_dashes() {
        let v = |t: &str| Version::diesel(t).expect("diesel");
        assert!(v("00000000000000") < v("2023-01-01-000000"));
        assert!(v("2023-01-01-000000") < v("2023-01-02-000000"));
        assert_eq!(v("2023-01-01-000000").key(), "20230101000000");
        // Text order, as diesel's: a shorter version is not smaller.
        assert!(v("9") > v("10"));
        assert!(Version::diesel("---").is_none());
    }
}
