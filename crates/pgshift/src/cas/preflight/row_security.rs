//! Row security must never filter what the engine reads (INV: SE-3).
//!
//! A run reads the source (copy, apply, verification, the swap's drain) and writes and
//! reads the shadow, always through the parent table. Every engine session runs with
//! `row_security = off` (`crate::cas::session`), so a read that policies would filter
//! raises 42501 instead; this check refuses up front, before anything is recorded, a
//! run for which that would happen: the role is subject to row security on the table
//! (it is enabled, and the role is neither a superuser nor `BYPASSRLS`, and either not
//! the owner or the table is `FORCE`d) — now, or on the shadow once the statement has
//! changed its flags. Partitions' own flags and policies do not apply to reads through
//! the parent, so they are carried, not refused.

use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::cas::source::SourceFacts;
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::ast::AlterTableType;
use pgshift_sql::{quote_ident, NodeEnum, QualifiedName, Statement};

/// The role's standing towards row security on one relation.
#[derive(Debug)]
struct Standing {
    role: String,
    superuser: bool,
    bypass: bool,
    enabled: bool,
    forced: bool,
    owner: String,
    is_owner: bool,
    policies: i64,
}

impl Standing {
    /// Whether PostgreSQL applies the relation's policies to the role with these flags
    /// (`check_enable_rls`).
    fn applies(&self, enabled: bool, forced: bool) -> bool {
        enabled && !self.superuser && !self.bypass && (forced || !self.is_owner)
    }
}

async fn standing(client: &Client, relation: &QualifiedName) -> Result<Standing, CasError> {
    let row = client
        .query_one(
            "SELECT CURRENT_USER::pg_catalog.text, r.rolsuper, r.rolbypassrls, c.relrowsecurity, c.relforcerowsecurity, \
                    pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text, pg_catalog.pg_has_role(c.relowner, 'USAGE'), \
                    (SELECT pg_catalog.count(*) FROM pg_catalog.pg_policy p WHERE p.polrelid OPERATOR(pg_catalog.=) c.oid) \
               FROM pg_catalog.pg_class c \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              CROSS JOIN pg_catalog.pg_roles r \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND r.rolname OPERATOR(pg_catalog.=) CURRENT_USER",
            &[&relation.schema.clone().unwrap_or_default(), &relation.name],
        )
        .await
        .map_err(|e| CasError::db("reading row security", e))?;
    Ok(Standing {
        role: row.get(0),
        superuser: row.get(1),
        bypass: row.get(2),
        enabled: row.get(3),
        forced: row.get(4),
        owner: row.get(5),
        is_owner: row.get(6),
        policies: row.get(7),
    })
}

/// The row security flags `(enabled, forced)` the shadow has once `statement` ran on
/// it, from the source's.
fn flags_after(statement: &Statement, (mut enabled, mut forced): (bool, bool)) -> (bool, bool) {
    let NodeEnum::AlterTableStmt(stmt) = &statement.node else {
        return (enabled, forced);
    };
    for cmd in &stmt.cmds {
        let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node else {
            continue;
        };
        let subtype = cmd.subtype;
        if subtype == AlterTableType::AtEnableRowSecurity as i32 {
            enabled = true;
        } else if subtype == AlterTableType::AtDisableRowSecurity as i32 {
            enabled = false;
        } else if subtype == AlterTableType::AtForceRowSecurity as i32 {
            forced = true;
        } else if subtype == AlterTableType::AtNoForceRowSecurity as i32 {
            forced = false;
        }
    }
    (enabled, forced)
}

fn refused(message: String) -> CasError {
    CasError::Refused(Refusal::new(RefusalCause::RowSecurityApplies, message))
}

/// What lifts the refusal for a role in `standing`.
fn remedy(standing: &Standing, table: &QualifiedName, forced: bool) -> String {
    let role = quote_ident(&standing.role);
    let mut ways = vec![format!(
        "run it as a superuser or as a role with BYPASSRLS that owns the table (a superuser can `ALTER ROLE {role} BYPASSRLS`)"
    )];
    if standing.is_owner && forced {
        ways.push(format!(
            "or turn FORCE off for the run (`ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY`, and FORCE again after it)"
        ));
    } else if !standing.is_owner && !forced {
        ways.push(format!(
            "or connect as its owner {}",
            quote_ident(&standing.owner)
        ));
    }
    ways.join(", ")
}

/// Refuses a run whose reads of the source, or of the shadow once `statement` has set
/// its flags, row security would filter (INV: SE-3).
pub(super) async fn check(
    client: &Client,
    facts: &SourceFacts,
    statement: &Statement,
) -> Result<(), CasError> {
    let table = &facts.table.name;
    let standing = standing(client, table).await?;
    let role = quote_ident(&standing.role);
    // INV: SE-3 — a role subject to the table's policies would copy, apply and verify
    // only the rows they show it, and the swap would drop the rest.
    if standing.applies(standing.enabled, standing.forced) {
        let why = if standing.is_owner {
            "it owns the table, but row security is FORCEd".to_owned()
        } else {
            format!(
                "it does not own the table (its owner is {})",
                quote_ident(&standing.owner)
            )
        };
        return Err(refused(format!(
            "row-level security on {table} ({} polic{}) applies to role {role}: {why}, and {role} is neither a superuser nor BYPASSRLS. \
             Every read the run makes of the table would see only the rows the policies show {role}, and the swap would drop the others; \
             {}",
            standing.policies,
            if standing.policies == 1 { "y" } else { "ies" },
            remedy(&standing, table, standing.forced)
        )));
    }
    let (enabled, forced) = flags_after(statement, (standing.enabled, standing.forced));
    if standing.applies(enabled, forced) {
        return Err(refused(format!(
            "the statement turns on row-level security that would apply to role {role} on the new {table} while the run copies into it and verifies it, \
             so the copy would be checked and read through its policies; make the row security change a statement of its own after this one, \
             or {}",
            remedy(&standing, table, forced).trim_start_matches("or ")
        )));
    }
    Ok(())
}

/// Refuses, when the shadow has been made, a run for which row security applies to the
/// role on the scratch table `scratch` (its flags after the statement) — the same rule
/// as [`check`], read back from the catalog rather than predicted from the statement.
pub(crate) async fn check_shadow(
    client: &Client,
    scratch: &QualifiedName,
    table: &QualifiedName,
) -> Result<(), CasError> {
    let standing = standing(client, scratch).await?;
    // INV: SE-3 — the shadow's own flags, as the statement left them.
    if standing.applies(standing.enabled, standing.forced) {
        return Err(refused(format!(
            "after the statement, row-level security on the new {table} applies to role {}: the copy into it would be checked and read through its policies; {}",
            quote_ident(&standing.role),
            remedy(&standing, table, standing.forced)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(superuser: bool, bypass: bool, is_owner: bool) -> Standing {
        Standing {
            role: "r".to_owned(),
            superuser,
            bypass,
            enabled: true,
            forced: false,
            owner: "o".to_owned(),
            is_owner,
            policies: 1,
        }
    }

    #[test]
    fn row_security_applies_as_postgres_decides() {
        // (enabled, forced) × (superuser, bypass, owner) → applies?
        let cases = [
            ((false, true), (false, false, false), false),
            ((true, false), (false, false, true), false),
            ((true, true), (false, false, true), true),
            ((true, false), (false, false, false), true),
            ((true, true), (false, true, true), false),
            ((true, true), (false, true, false), false),
            ((true, true), (true, false, false), false),
        ];
        for ((enabled, forced), (superuser, bypass, owner), expected) in cases {
            assert_eq!(
                standing(superuser, bypass, owner).applies(enabled, forced),
                expected,
                "{enabled} {forced} {superuser} {bypass} {owner}"
            );
        }
    }

    #[test]
    fn the_statement_sets_the_shadow_flags() {
        let parse = |sql: &str| pgshift_sql::parse(sql).expect("valid").remove(0);
        let s = parse("ALTER TABLE t ALTER COLUMN v TYPE bigint, FORCE ROW LEVEL SECURITY");
        assert_eq!(flags_after(&s, (true, false)), (true, true));
        let s = parse("ALTER TABLE t ALTER COLUMN v TYPE bigint, NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY");
        assert_eq!(flags_after(&s, (true, true)), (false, false));
        let s = parse("VACUUM FULL t");
        assert_eq!(flags_after(&s, (true, true)), (true, true));
    }
}
