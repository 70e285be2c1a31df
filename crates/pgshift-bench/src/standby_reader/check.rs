//! Every pass of a reader compared with the keys it should have read: none skipped,
//! none read twice, none that should not be there, and in strict keyset order.

use std::collections::HashMap;

use serde::Serialize;

use super::{ReaderLog, RowKey};

/// How many example keys a verdict keeps per kind of anomaly.
const SAMPLES: usize = 5;

/// What the reader's passes show.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReaderVerdict {
    /// Complete passes checked.
    pub passes: usize,
    /// Keys that should have been read, per pass.
    pub expected: usize,
    /// Expected keys a pass did not read (summed over passes).
    pub skipped: usize,
    /// Reads of a key a pass had read already (summed over passes).
    pub repeated: usize,
    /// Keys read that are not expected (summed over passes).
    pub unexpected: usize,
    /// Rows out of `(created_at, id)` order within a pass.
    pub out_of_order: usize,
    /// Page queries that failed.
    pub errors: usize,
    /// Of them, cancelled by a recovery conflict.
    pub cancelled: usize,
    /// A few of the anomalous keys, with what was wrong.
    pub samples: Vec<String>,
}

impl ReaderVerdict {
    /// At least one pass, every pass exactly the expected keys in order, and no
    /// failed query.
    pub fn is_clean(&self) -> bool {
        self.passes > 0
            && self.skipped == 0
            && self.repeated == 0
            && self.unexpected == 0
            && self.out_of_order == 0
            && self.errors == 0
    }
}

/// Checks every complete pass of `log` against `expected` (the fenced keys on the
/// primary, read after the run).
pub fn check(expected: &[RowKey], log: &ReaderLog) -> ReaderVerdict {
    let mut verdict = ReaderVerdict {
        passes: log.passes.len(),
        expected: expected.len(),
        errors: log.errors.len(),
        cancelled: log.cancelled(),
        ..ReaderVerdict::default()
    };
    for (number, pass) in log.passes.iter().enumerate() {
        let mut reads: HashMap<&RowKey, usize> = expected.iter().map(|k| (k, 0)).collect();
        for key in &pass.keys {
            match reads.get_mut(key) {
                Some(count) => {
                    *count += 1;
                    if *count == 2 {
                        verdict.repeated += 1;
                        sample(&mut verdict.samples, number, "read twice", key);
                    }
                }
                None => {
                    verdict.unexpected += 1;
                    sample(&mut verdict.samples, number, "not expected", key);
                }
            }
        }
        for key in expected {
            if reads.get(key) == Some(&0) {
                verdict.skipped += 1;
                sample(&mut verdict.samples, number, "skipped", key);
            }
        }
        for pair in pass.keys.windows(2) {
            if pair[0] >= pair[1] {
                verdict.out_of_order += 1;
                sample(&mut verdict.samples, number, "out of order", &pair[1]);
            }
        }
    }
    verdict
}

fn sample(samples: &mut Vec<String>, pass: usize, what: &str, key: &RowKey) {
    if samples.len() < SAMPLES * 4 {
        samples.push(format!(
            "pass {pass}: {what}: created_at {} us, id {}",
            key.created_at_us,
            pgshift_workload::key::hex(&key.id)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standby_reader::{PageError, Pass};

    fn key(at: i64, id: u8) -> RowKey {
        RowKey {
            created_at_us: at,
            id: vec![id],
        }
    }

    fn log(passes: Vec<Vec<RowKey>>) -> ReaderLog {
        ReaderLog {
            passes: passes
                .into_iter()
                .map(|keys| Pass {
                    keys,
                    relations: vec![1],
                    pages: 1,
                })
                .collect(),
            ..ReaderLog::default()
        }
    }

    #[test]
    fn an_exact_pass_is_clean() {
        let expected = vec![key(1, 1), key(1, 2), key(2, 0)];
        let verdict = check(&expected, &log(vec![expected.clone(), expected.clone()]));
        assert!(verdict.is_clean(), "{verdict:?}");
        assert_eq!(verdict.passes, 2);
    }

    #[test]
    fn skips_repeats_strays_and_disorder_are_counted() {
        let expected = vec![key(1, 1), key(1, 2), key(2, 0)];
        let verdict = check(
            &expected,
            &log(vec![vec![key(1, 1), key(1, 1), key(2, 0), key(3, 9)]]),
        );
        assert_eq!(verdict.skipped, 1, "{verdict:?}");
        assert_eq!(verdict.repeated, 1, "{verdict:?}");
        assert_eq!(verdict.unexpected, 1, "{verdict:?}");
        assert_eq!(verdict.out_of_order, 1, "{verdict:?}");
        assert!(!verdict.is_clean());
    }

    #[test]
    fn no_pass_or_a_failed_query_is_not_clean() {
        let expected = vec![key(1, 1)];
        assert!(!check(&expected, &log(vec![])).is_clean());
        let mut cancelled = log(vec![expected.clone()]);
        cancelled.errors.push(PageError {
            at_ms: 0,
            sqlstate: Some("40001".to_owned()),
            message: "canceling statement due to conflict with recovery".to_owned(),
            recovery_conflict: true,
        });
        let verdict = check(&expected, &cancelled);
        assert_eq!(verdict.cancelled, 1);
        assert!(!verdict.is_clean());
    }
}
