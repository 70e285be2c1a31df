//! Everything the swap alters, the role must be allowed to alter: found before the run
//! is recorded rather than as a 42501 at the swap, after the whole copy (issue 9,
//! item 5). The swap renames the table's partitions, indexes, sequences and extended
//! statistics, hands owned sequences to the new table, re-points the foreign keys of
//! other tables, recreates dependent views and the user triggers, and moves
//! publication membership; the shadow's relations are given the source's owners and
//! made in the source's tablespaces, with the table's own foreign keys made again.
//! Policies and grants are made on the shadow by the table's owner's rights alone.

use tokio_postgres::Client;

use crate::cas::error::CasError;
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::quote_ident;

/// Objects the swap alters, `(kind, name, owner oid, why, owner change needed)`, with
/// `$1` the table's OID.
const OBJECTS: &str = "
WITH tree AS (
    SELECT $1::pg_catalog.oid AS oid
    UNION ALL SELECT i.inhrelid FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) $1),
objects (kind, name, owner, why, owner_change) AS (
    SELECT CASE WHEN c.oid OPERATOR(pg_catalog.=) $1 THEN 'table' ELSE 'partition' END,
           c.oid::pg_catalog.regclass::pg_catalog.text, c.relowner,
           'the swap renames it, and its copy is given to its owner (ALTER TABLE … OWNER TO)', true
      FROM tree JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) tree.oid
    UNION ALL
    SELECT 'publication', pg_catalog.quote_ident(p.pubname), p.pubowner,
           'the swap moves the table''s membership to the new table (ALTER PUBLICATION … DROP TABLE, ADD TABLE)', false
      FROM pg_catalog.pg_publication_rel r JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid
     WHERE r.prrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree))
    UNION ALL
    SELECT 'sequence', s.oid::pg_catalog.regclass::pg_catalog.text, s.relowner,
           'the swap renames it or hands it to the new table (ALTER SEQUENCE)', false
      FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) d.objid AND s.relkind OPERATOR(pg_catalog.=) 'S'
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) $1 AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}')
    UNION ALL
    SELECT DISTINCT 'view', v.oid::pg_catalog.regclass::pg_catalog.text, v.relowner,
           'the swap recreates it on the new table (CREATE OR REPLACE VIEW, or DROP VIEW and CREATE VIEW … OWNER TO)', true
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_rewrite rw ON rw.oid OPERATOR(pg_catalog.=) d.objid
      JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) rw.ev_class
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) $1 AND v.oid OPERATOR(pg_catalog.<>) $1 AND v.relkind OPERATOR(pg_catalog.=) 'v'
    UNION ALL
    SELECT 'table', con.conrelid::pg_catalog.regclass::pg_catalog.text, c.relowner,
           pg_catalog.format('the swap re-points its foreign key %I at the new table (ALTER TABLE … DROP CONSTRAINT, ADD CONSTRAINT)', con.conname), false
      FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.conrelid
     WHERE con.contype OPERATOR(pg_catalog.=) 'f' AND con.confrelid OPERATOR(pg_catalog.=) $1
       AND con.conparentid OPERATOR(pg_catalog.=) 0
       AND NOT con.conrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree))
    UNION ALL
    SELECT 'statistics object', pg_catalog.format('%I.%I', n.nspname, s.stxname), s.stxowner,
           'the swap renames it (ALTER STATISTICS)', false
      FROM pg_catalog.pg_statistic_ext s JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace
     WHERE s.stxrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree)))
SELECT o.kind, o.name, pg_catalog.pg_get_userbyid(o.owner)::pg_catalog.text, o.why,
       pg_catalog.pg_has_role(o.owner, 'USAGE')
  FROM objects o
 WHERE NOT pg_catalog.pg_has_role(o.owner, 'USAGE') {owner_change}
 ORDER BY o.kind, o.name LIMIT 1";

/// What else the shadow and the swap need beyond ownership, with `$1` the table's OID
/// and `$2` the tablespace a `SET TABLESPACE` names (or NULL): `EXECUTE` on the
/// functions of the triggers it recreates, `CREATE` in the schemas of the extended
/// statistics it creates again, `REFERENCES` on the columns the table's own foreign
/// keys reference (made again on the shadow), `CREATE` on the tablespaces the shadow's
/// relations are made in (other than the database's default one, which needs none).
/// `(what, name, owner, why, grant)`.
const RIGHTS: &str = "
WITH tree AS (
    SELECT $1::pg_catalog.oid AS oid
    UNION ALL SELECT i.inhrelid FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) $1)
SELECT 'EXECUTE on function', t.tgfoid::pg_catalog.regprocedure::pg_catalog.text, pg_catalog.pg_get_userbyid(p.proowner)::pg_catalog.text,
       pg_catalog.format('the swap creates trigger %I on the new table with it', t.tgname),
       pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', t.tgfoid::pg_catalog.regprocedure, CURRENT_USER)
  FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
 WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree)) AND NOT t.tgisinternal
   AND NOT pg_catalog.has_function_privilege(t.tgfoid, 'EXECUTE')
UNION ALL
SELECT 'CREATE on schema', pg_catalog.quote_ident(n.nspname), pg_catalog.pg_get_userbyid(n.nspowner)::pg_catalog.text,
       pg_catalog.format('the shadow gets a copy of statistics object %I there', s.stxname),
       pg_catalog.format('GRANT CREATE ON SCHEMA %I TO %I', n.nspname, CURRENT_USER)
  FROM pg_catalog.pg_statistic_ext s JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace
 WHERE s.stxrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree))
   AND NOT pg_catalog.has_schema_privilege(n.oid, 'CREATE')
UNION ALL
SELECT 'REFERENCES on table', con.confrelid::pg_catalog.regclass::pg_catalog.text, pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text,
       pg_catalog.format('the shadow gets a copy of foreign key %I, which references it', con.conname),
       pg_catalog.format('GRANT REFERENCES ON TABLE %s TO %I', con.confrelid::pg_catalog.regclass, CURRENT_USER)
  FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.confrelid
 WHERE con.contype OPERATOR(pg_catalog.=) 'f' AND con.conrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree))
   AND NOT con.confrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT oid FROM tree))
   AND EXISTS (SELECT FROM pg_catalog.unnest(con.confkey) k(attnum)
                WHERE NOT pg_catalog.has_column_privilege(con.confrelid, k.attnum, 'REFERENCES'))
UNION ALL
SELECT 'CREATE on tablespace', pg_catalog.quote_ident(t.spcname), pg_catalog.pg_get_userbyid(t.spcowner)::pg_catalog.text,
       'the shadow''s copies are made there',
       pg_catalog.format('GRANT CREATE ON TABLESPACE %I TO %I', t.spcname, CURRENT_USER)
  FROM pg_catalog.pg_tablespace t
 WHERE (t.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
            SELECT c.reltablespace FROM tree JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) tree.oid
            UNION ALL
            SELECT ic.reltablespace FROM tree JOIN pg_catalog.pg_index i ON i.indrelid OPERATOR(pg_catalog.=) tree.oid
              JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid))
        OR t.spcname OPERATOR(pg_catalog.=) $2::pg_catalog.text)
   AND t.oid OPERATOR(pg_catalog.<>) (SELECT d.dattablespace FROM pg_catalog.pg_database d
                                       WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
   AND NOT pg_catalog.has_tablespace_privilege(t.oid, 'CREATE')
 LIMIT 1";

fn refused(message: String) -> CasError {
    CasError::Refused(Refusal::new(RefusalCause::MissingPrivilege, message))
}

/// Refuses a run whose swap would alter an object the role may not alter.
/// `target` is the tablespace a `SET TABLESPACE` of the statement names.
pub(super) async fn check(
    client: &Client,
    table_oid: u32,
    target: Option<&str>,
) -> Result<(), CasError> {
    let row = client
        .query_one(
            "SELECT CURRENT_USER::pg_catalog.text, pg_catalog.current_setting('server_version_num')::pg_catalog.int4, \
                    pg_catalog.format('%I.%I', n.nspname, c.relname) \
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[&table_oid],
        )
        .await
        .map_err(|e| CasError::db("reading the role", e))?;
    let (role, version, table): (String, i32, String) = (row.get(0), row.get(1), row.get(2));
    let role_q = quote_ident(&role);
    // From PostgreSQL 16, giving an object to a role needs the SET option of the
    // membership, not only its privileges.
    let owner_change = if version >= 160000 {
        "OR (o.owner_change AND NOT pg_catalog.pg_has_role(o.owner, 'SET'))"
    } else {
        ""
    };
    let sql = OBJECTS.replace("{owner_change}", owner_change);
    if let Some(row) = client
        .query_opt(&sql, &[&table_oid])
        .await
        .map_err(|e| CasError::db("reading what the swap alters", e))?
    {
        let (kind, name, owner, why, privileges): (String, String, String, String, bool) =
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        let owner_q = quote_ident(&owner);
        // INV: CO-9 — found before anything is recorded, not at the swap.
        return Err(refused(if privileges {
            format!(
                "role {role_q} may not give objects to {owner_q} (no SET option on its membership), which owns {kind} {name}: {why}; \
                 copy-and-swap of {table} needs it: `GRANT {owner_q} TO {role_q} WITH SET TRUE`"
            )
        } else {
            format!(
                "role {role_q} does not own {kind} {name} (its owner is {owner_q}), and {why}; \
                 copy-and-swap of {table} needs it: connect as {owner_q}, or `GRANT {owner_q} TO {role_q}`, \
                 or give {name} to a role {role_q} is a member of"
            )
        }));
    }
    if let Some(row) = client
        .query_opt(RIGHTS, &[&table_oid, &target])
        .await
        .map_err(|e| CasError::db("reading what the swap needs", e))?
    {
        let (what, name, owner, why, grant): (String, String, String, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        // INV: CO-9 — found before anything is recorded, not at the swap.
        return Err(refused(format!(
            "role {role_q} lacks {what} {name} (owned by {}), and {why}; copy-and-swap of {table} needs it: `{grant}`",
            quote_ident(&owner)
        )));
    }
    Ok(())
}
