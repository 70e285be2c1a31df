//! The errors a load run saw: exact counts per SQLSTATE and kind of
//! operation, and the first few in full (a bounded sample: a run that fails
//! every write for an hour keeps its memory flat).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::ledger::WriteError;
use crate::timeline::OpKind;

/// One error, as sampled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorSample {
    /// The operation that failed (connection attempts are not operations and
    /// are counted apart, see [`ErrorLog::connect_failures`]).
    pub op: Option<OpKind>,
    /// The error.
    pub error: WriteError,
    /// When it happened, since the start of the run.
    pub at: Duration,
}

/// Errors of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorLog {
    /// The first errors, in order, at most the configured number.
    pub samples: Vec<ErrorSample>,
    /// Errors per SQLSTATE (`none` for errors without one).
    pub by_sqlstate: BTreeMap<String, u64>,
    /// Errors per kind of operation.
    pub by_op: BTreeMap<OpKind, u64>,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// All errors counted, connection failures included.
    pub total: u64,
    /// The sample bound.
    #[serde(skip)]
    limit: usize,
}

impl ErrorLog {
    /// An empty log keeping at most `limit` samples.
    pub(crate) fn new(limit: usize) -> Self {
        ErrorLog {
            limit,
            ..ErrorLog::default()
        }
    }

    /// Counts an error of `op` (`None` for a connection attempt) and keeps it
    /// if the sample has room.
    pub(crate) fn record(&mut self, op: Option<OpKind>, error: &WriteError, at: Duration) {
        self.total += 1;
        *self.by_sqlstate.entry(error.code().to_owned()).or_default() += 1;
        match op {
            Some(op) => *self.by_op.entry(op).or_default() += 1,
            None => self.connect_failures += 1,
        }
        if self.samples.len() < self.limit {
            self.samples.push(ErrorSample {
                op,
                error: error.clone(),
                at,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exact_and_samples_bounded() {
        let mut log = ErrorLog::new(2);
        let error = WriteError {
            sqlstate: Some("23514".to_owned()),
            message: "floor".to_owned(),
        };
        for _ in 0..5 {
            log.record(Some(OpKind::StaleInsert), &error, Duration::ZERO);
        }
        log.record(
            None,
            &WriteError {
                sqlstate: None,
                message: "refused".to_owned(),
            },
            Duration::ZERO,
        );
        assert_eq!(log.samples.len(), 2);
        assert_eq!(log.by_sqlstate["23514"], 5);
        assert_eq!(log.by_sqlstate["none"], 1);
        assert_eq!(log.connect_failures, 1);
        assert_eq!(log.total, 6);
    }
}
