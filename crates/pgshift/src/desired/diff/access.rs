//! Which changes move who can read or write what: row-level security, policies and
//! grants, each with its impact, for the review `apply --desired` requires.

use std::collections::BTreeSet;

use pgshift_sql::NodeEnum;

use super::super::units::{Key, Kind, Unit, Units};
use super::{describe, scope};

/// How a change may move who can read or write what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impact {
    /// Someone may be able to see or change more (a grant, a permissive policy
    /// added; row security turned off; a restrictive policy dropped).
    MayWiden,
    /// Someone may see or change less.
    MayNarrow,
    /// A policy's definition changed: either way.
    Changed,
}

/// One change of access, for review.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AccessChange {
    /// The object, in words (`policy app.a.p_read`, the grant's text).
    pub object: String,
    /// Its impact.
    pub impact: Impact,
    /// The statement as it is on the side that has it (the desired one when both do).
    pub sql: String,
}

/// The changes of row-level security, policies and grants between `live` and
/// `desired`, each with its access impact.
pub fn access_changes(
    live: &Units,
    desired: &Units,
    managed: &BTreeSet<String>,
) -> Vec<AccessChange> {
    let in_scope = scope(desired, managed);
    let keys: BTreeSet<&Key> = live
        .by_key
        .keys()
        .chain(desired.by_key.keys())
        .filter(|k| {
            in_scope(k)
                && matches!(
                    k.kind,
                    Kind::Policy | Kind::RowSecurity | Kind::ForceRowSecurity | Kind::Grant
                )
        })
        .collect();
    let permissive = |unit: &Unit| match &unit.statement.node {
        NodeEnum::CreatePolicyStmt(p) => p.permissive,
        _ => true,
    };
    keys.into_iter()
        .filter_map(|key| {
            let (was, wanted) = (live.by_key.get(key), desired.by_key.get(key));
            let impact = match (key.kind, was, wanted) {
                (_, Some(a), Some(b)) if a.statement.text == b.statement.text => return None,
                (_, Some(_), Some(_)) => Impact::Changed,
                (Kind::Grant, None, Some(_)) => Impact::MayWiden,
                (Kind::Grant, Some(_), None) => Impact::MayNarrow,
                (Kind::RowSecurity | Kind::ForceRowSecurity, None, Some(_)) => Impact::MayNarrow,
                (Kind::RowSecurity | Kind::ForceRowSecurity, Some(_), None) => Impact::MayWiden,
                (_, None, Some(unit)) if permissive(unit) => Impact::MayWiden,
                (_, None, Some(_)) => Impact::MayNarrow,
                (_, Some(unit), None) if permissive(unit) => Impact::MayNarrow,
                (_, Some(_), None) => Impact::MayWiden,
                (_, None, None) => return None,
            };
            let sql = wanted.or(was).map(|u| u.statement.text.clone())?;
            Some(AccessChange {
                object: describe(key),
                impact,
                sql,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::tests::units;
    use super::super::*;

    #[test]
    fn access_changes_carry_their_impact() {
        let managed: BTreeSet<String> = ["app".to_owned()].into();
        let got = access_changes(
            &units(
                "CREATE TABLE app.t (id integer);
                 GRANT SELECT ON TABLE app.t TO old_reader;
                 CREATE POLICY keep ON app.t USING (true);
                 CREATE POLICY gone ON app.t AS RESTRICTIVE USING (id > 0);",
            ),
            &units(
                "CREATE TABLE app.t (id integer);
                 GRANT SELECT ON TABLE app.t TO new_reader;
                 ALTER TABLE app.t ENABLE ROW LEVEL SECURITY;
                 CREATE POLICY keep ON app.t USING (id > 1);",
            ),
            &managed,
        );
        let impacts: Vec<(&str, Impact)> =
            got.iter().map(|c| (c.object.as_str(), c.impact)).collect();
        assert_eq!(
            impacts,
            [
                ("policy app.t.gone", Impact::MayWiden),
                ("policy app.t.keep", Impact::Changed),
                ("row level security of app.t", Impact::MayNarrow),
                (
                    "GRANT SELECT ON TABLE app.t TO new_reader",
                    Impact::MayWiden
                ),
                (
                    "GRANT SELECT ON TABLE app.t TO old_reader",
                    Impact::MayNarrow
                ),
            ]
        );
    }
}
