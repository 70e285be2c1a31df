//! A standby as the run record keeps it: where it is, never who connects or how.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cas::error::CasError;
use crate::connect::ConnectionSpec;
use crate::refusal::{Refusal, RefusalCause};

/// A standby named with `--standby-url`, redacted: its servers (host and port, or the
/// socket) and database. No role, no password (INV: SE-2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StandbyEndpoint {
    /// The servers the URL names, in order (`host:port` or the socket path).
    pub servers: Vec<String>,
    /// The database connected to.
    pub dbname: String,
}

impl StandbyEndpoint {
    /// The redacted endpoint of `spec`.
    pub fn of(spec: &ConnectionSpec) -> Self {
        StandbyEndpoint {
            servers: spec.targets().iter().map(ToString::to_string).collect(),
            dbname: spec.dbname().to_owned(),
        }
    }
}

impl fmt::Display for StandbyEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.servers.join(","), self.dbname)
    }
}

/// Refuses (before any work) a continuation that does not name again every standby
/// the run was recorded with: without them the cutover could not read their queries.
// INV: LK-9 — a run started with standby URLs never swaps without reading them.
pub fn require_recorded(
    recorded: &[StandbyEndpoint],
    given: &[ConnectionSpec],
) -> Result<(), CasError> {
    let given: Vec<StandbyEndpoint> = given.iter().map(StandbyEndpoint::of).collect();
    let missing: Vec<String> = recorded
        .iter()
        .filter(|e| !given.contains(e))
        .map(ToString::to_string)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(CasError::Refused(Refusal::new(
        RefusalCause::StandbyUrlMissing,
        format!(
            "the run was started with --standby-url for {}, and is continued without {}: their queries could not be read before the swap; nothing was done",
            recorded.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            missing.join(", ")
        ),
    )))
}

/// The recorded standbys with those of `given` not yet among them added.
pub(crate) fn union(
    recorded: &[StandbyEndpoint],
    given: &[ConnectionSpec],
) -> Vec<StandbyEndpoint> {
    let mut out = recorded.to_vec();
    for endpoint in given.iter().map(StandbyEndpoint::of) {
        if !out.contains(&endpoint) {
            out.push(endpoint);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::Environment;

    struct NoEnv;
    impl Environment for NoEnv {
        fn var(&self, _name: &str) -> Option<String> {
            None
        }
    }

    fn spec(text: &str) -> ConnectionSpec {
        ConnectionSpec::parse_with_env(text, &NoEnv).expect("spec")
    }

    #[test]
    fn the_endpoint_keeps_no_role_or_password() {
        let endpoint =
            StandbyEndpoint::of(&spec("postgres://alice:s3cret@replica.example:5433/app"));
        assert_eq!(endpoint.to_string(), "replica.example:5433/app");
        let json = serde_json::to_string(&endpoint).expect("json");
        assert!(
            !json.contains("s3cret") && !json.contains("alice"),
            "{json}"
        );
    }

    #[test]
    fn a_continuation_must_name_every_recorded_standby() {
        let a = spec("postgres://u:p@a.example:5432/app");
        let b = spec("postgres://u:p@b.example:5432/app");
        let recorded = vec![StandbyEndpoint::of(&a), StandbyEndpoint::of(&b)];
        // Another role or password to the same standby is the same standby.
        let a_again = spec("postgres://other:secret2@a.example:5432/app");
        assert!(require_recorded(&recorded, &[b.clone(), a_again]).is_ok());
        let Err(CasError::Refused(refusal)) = require_recorded(&recorded, std::slice::from_ref(&a))
        else {
            panic!("not refused");
        };
        assert_eq!(refusal.cause, RefusalCause::StandbyUrlMissing);
        assert!(
            refusal.message.contains("without b.example:5432/app"),
            "{}",
            refusal.message
        );
        assert!(!refusal.message.contains("p@"), "{}", refusal.message);
        assert!(require_recorded(&recorded, &[]).is_err());
        assert!(require_recorded(&[], &[]).is_ok());
        assert_eq!(union(&recorded[..1], &[a, b]).len(), 2);
    }
}
