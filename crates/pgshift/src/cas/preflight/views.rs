//! What the swap could not make again as it is, around the views that read the table
//! (INV: CO-15), refused before anything is recorded:
//!
//! - a dependent view something else uses (a function's `BEGIN ATOMIC` body, a
//!   policy, another relation's rule, a column of its row type, an extension it
//!   belongs to): dropped and made again at the swap, it could not be, or would leave
//!   that object behind;
//! - grants on a dependent view the swap could not make again as they are (made by a
//!   role other than its owner, or its owner's own privileges narrowed);
//! - a rule of another table whose actions read or write the table: it names the table
//!   by OID and would go on using the old one.
//!
//! Views on such views and materialized views are refused from the source's facts
//! (`nested-dependent-views`, `dependent-materialized-view`).

use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::refusal::{Refusal, RefusalCause};

/// Rows `(kind, what)`, `$1` the table's OID: `in-use`, `grants` or `rule`, and a
/// description in the server's words (every name qualified: `search_path` is pinned).
const VIEW_TIES_SQL: &str = "WITH dep AS ( \
      SELECT DISTINCT v.oid, v.relkind, v.relowner, v.relacl, v.reltype \
        FROM pg_catalog.pg_depend d \
        JOIN pg_catalog.pg_rewrite rw ON rw.oid OPERATOR(pg_catalog.=) d.objid \
        JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) rw.ev_class \
       WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
         AND d.refobjid OPERATOR(pg_catalog.=) $1 AND v.oid OPERATOR(pg_catalog.<>) $1) \
    SELECT 'in-use', pg_catalog.format('view %s is used by %s', v.oid::pg_catalog.regclass, \
                                       pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)) \
      FROM dep v JOIN pg_catalog.pg_depend d \
        ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
       AND d.refobjid OPERATOR(pg_catalog.=) v.oid AND d.deptype OPERATOR(pg_catalog.=) 'n' \
     WHERE v.relkind OPERATOR(pg_catalog.=) 'v' \
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite r WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
                          AND r.oid OPERATOR(pg_catalog.=) d.objid AND r.ev_class OPERATOR(pg_catalog.=) v.oid) \
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass \
                          AND t.oid OPERATOR(pg_catalog.=) d.objid AND t.tgrelid OPERATOR(pg_catalog.=) v.oid) \
    UNION ALL \
    SELECT 'in-use', pg_catalog.format('the row type of view %s is used by %s', v.oid::pg_catalog.regclass, \
                                       pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)) \
      FROM dep v JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) v.reltype \
      JOIN pg_catalog.pg_depend d ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass \
       AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY[ty.oid, ty.typarray]) AND d.deptype OPERATOR(pg_catalog.=) 'n' \
     WHERE v.relkind OPERATOR(pg_catalog.=) 'v' \
    UNION ALL \
    SELECT 'in-use', pg_catalog.format('view %s belongs to %s', v.oid::pg_catalog.regclass, \
                                       pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0)) \
      FROM dep v JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
       AND d.objid OPERATOR(pg_catalog.=) v.oid AND d.deptype OPERATOR(pg_catalog.=) 'e' \
     WHERE v.relkind OPERATOR(pg_catalog.=) 'v' \
    UNION ALL \
    SELECT 'grants', pg_catalog.format('%s on view %s was granted to %s by %s, not by its owner', \
                                       a.privilege_type, v.oid::pg_catalog.regclass, \
                                       CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text END, \
                                       pg_catalog.pg_get_userbyid(a.grantor)) \
      FROM dep v CROSS JOIN LATERAL pg_catalog.aclexplode(v.relacl) a \
     WHERE v.relkind OPERATOR(pg_catalog.=) 'v' AND a.grantor OPERATOR(pg_catalog.<>) v.relowner \
    UNION ALL \
    SELECT 'grants', pg_catalog.format('%s (%s) on view %s was granted to %s by %s, not by its owner', \
                                       x.privilege_type, pg_catalog.quote_ident(at.attname), v.oid::pg_catalog.regclass, \
                                       CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(x.grantee)::pg_catalog.text END, \
                                       pg_catalog.pg_get_userbyid(x.grantor)) \
      FROM dep v JOIN pg_catalog.pg_attribute at ON at.attrelid OPERATOR(pg_catalog.=) v.oid AND at.attnum OPERATOR(pg_catalog.>) 0 \
     CROSS JOIN LATERAL pg_catalog.aclexplode(at.attacl) x \
     WHERE v.relkind OPERATOR(pg_catalog.=) 'v' AND x.grantor OPERATOR(pg_catalog.<>) v.relowner \
    UNION ALL \
    SELECT 'grants', pg_catalog.format('the owner of view %s has narrowed its own privileges on it', v.oid::pg_catalog.regclass) \
      FROM dep v WHERE v.relkind OPERATOR(pg_catalog.=) 'v' AND v.relacl IS NOT NULL \
       AND ARRAY(SELECT a.privilege_type || a.is_grantable::pg_catalog.text FROM pg_catalog.aclexplode(v.relacl) a \
                  WHERE a.grantee OPERATOR(pg_catalog.=) v.relowner AND a.grantor OPERATOR(pg_catalog.=) v.relowner ORDER BY 1) \
           OPERATOR(pg_catalog.<>) \
           ARRAY(SELECT a.privilege_type || a.is_grantable::pg_catalog.text FROM pg_catalog.aclexplode(pg_catalog.acldefault('r', v.relowner)) a ORDER BY 1) \
    UNION ALL \
    SELECT 'rule', pg_catalog.format('rule %s of %s', pg_catalog.quote_ident(rw.rulename), v.oid::pg_catalog.regclass) \
      FROM dep v JOIN pg_catalog.pg_rewrite rw ON rw.ev_class OPERATOR(pg_catalog.=) v.oid \
      JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
       AND d.objid OPERATOR(pg_catalog.=) rw.oid AND d.refobjid OPERATOR(pg_catalog.=) $1 \
     WHERE v.relkind OPERATOR(pg_catalog.<>) ALL (ARRAY['v', 'm']::pg_catalog.\"char\"[]) \
     ORDER BY 1, 2";

/// Refuses what the swap could not make again around the views reading the table
/// with OID `oid` (named `table` in messages).
pub(super) async fn check(client: &Client, oid: u32, table: &str) -> Result<(), CasError> {
    let rows = client
        .query(VIEW_TIES_SQL, &[&oid])
        .await
        .map_err(|e| CasError::db("reading what uses the dependent views", e))?;
    type Message = fn(&str, &str) -> String;
    let checks: [(&str, RefusalCause, Message); 3] = [
        ("rule", RefusalCause::RuleUsesTable, |table, found| {
            format!(
                "{found} names {table} by its identity and would go on using the old table after the swap"
            )
        }),
        (
            "in-use",
            RefusalCause::DependentViewInUse,
            |table, found| {
                format!("a view that reads {table} is made again at the swap, and {found}")
            },
        ),
        (
            "grants",
            RefusalCause::DependentViewGrants,
            |table, found| {
                format!(
                "a view that reads {table} may be made again at the swap, and its grants could not be made as they are: {found}"
            )
            },
        ),
    ];
    // INV: CO-15 — what cannot be made again as it was is refused before any work.
    for (kind, cause, message) in checks {
        let found: Vec<String> = rows
            .iter()
            .filter(|r| r.get::<_, String>(0) == kind)
            .map(|r| r.get::<_, String>(1))
            .collect();
        if !found.is_empty() {
            return Err(CasError::Refused(Refusal::new(
                cause,
                message(table, &found.join("; ")),
            )));
        }
    }
    Ok(())
}
