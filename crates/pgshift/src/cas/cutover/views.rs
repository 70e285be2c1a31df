//! Dependent views at the swap: read under the lock, then each pointed at the new
//! table by its own definition, or dropped and made again (with its owner, grants and
//! comment, and what [`view_ties`] lists) when its columns' types changed.

use tokio_postgres::Client;

use super::view_ties::{self, Ties};
use super::{exec, exec_all, CasError};
use pgshift_sql::{quote_ident, QualifiedName};

/// A view to recreate on the new table.
pub(super) struct View {
    name: QualifiedName,
    definition: String,
    options: Vec<String>,
    owner: String,
    comment: Option<String>,
    /// `(grantee, privilege, grantable)`.
    grants: Vec<(String, String, bool)>,
    /// Triggers, rules and column settings.
    ties: Ties,
}

/// Plain views that depend on the table `$1` (an OID), with their definitions and ties
/// as of now: read under the swap's lock, so that none is created meanwhile.
pub(super) fn dependent_views_sql() -> String {
    format!("SELECT DISTINCT n.nspname::pg_catalog.text, v.relname::pg_catalog.text, pg_catalog.pg_get_viewdef(v.oid), \
                    coalesce(v.reloptions, '{{}}')::pg_catalog.text[], pg_catalog.pg_get_userbyid(v.relowner)::pg_catalog.text, \
                    pg_catalog.obj_description(v.oid, 'pg_class'), \
                    ARRAY(SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text END \
                                 || '|' || a.privilege_type || '|' || a.is_grantable::pg_catalog.text \
                            FROM pg_catalog.aclexplode(v.relacl) a WHERE a.grantee OPERATOR(pg_catalog.<>) v.relowner), \
                    {ties} \
               FROM pg_catalog.pg_depend d \
               JOIN pg_catalog.pg_rewrite rw ON rw.oid OPERATOR(pg_catalog.=) d.objid \
               JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) rw.ev_class \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) v.relnamespace \
              WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
                AND d.refobjid OPERATOR(pg_catalog.=) $1 AND v.oid OPERATOR(pg_catalog.<>) $1 AND v.relkind OPERATOR(pg_catalog.=) 'v'", ties = view_ties::TIES_SQL)
}

/// The views [`dependent_views_sql`]'s rows describe.
pub(super) fn from_rows(rows: &[tokio_postgres::Row]) -> Result<Vec<View>, CasError> {
    rows.iter()
        .map(|r| {
            let name = QualifiedName::qualified(r.get::<_, String>(0), r.get::<_, String>(1));
            let ties = Ties::parse(&name, &r.get::<_, String>(7))?;
            Ok(View {
                name,
                ties,
                definition: r.get(2),
                options: r.get(3),
                owner: r.get(4),
                comment: r.get(5),
                grants: r
                    .get::<_, Vec<String>>(6)
                    .iter()
                    .filter_map(|g| {
                        let mut parts = g.split('|');
                        Some((
                            parts.next()?.to_owned(),
                            parts.next()?.to_owned(),
                            parts.next()? == "true",
                        ))
                    })
                    .collect(),
            })
        })
        .collect()
}

/// Whether the view's columns, as `CREATE OR REPLACE VIEW` left them, differ in type
/// or collation from what its definition gives on the new table (PostgreSQL 14 keeps a
/// column's old collation silently; later versions refuse the replacement): then the
/// view is dropped and made again instead. Any error counts as a change.
async fn columns_changed(client: &Client, view: &View, definition: &str) -> bool {
    let probe = format!(
        "CREATE TEMPORARY VIEW pgshift_view_probe AS {definition}; \
         DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_attribute b \
              ON b.attnum OPERATOR(pg_catalog.=) a.attnum \
           WHERE a.attrelid OPERATOR(pg_catalog.=) {oid}::pg_catalog.regclass \
             AND b.attrelid OPERATOR(pg_catalog.=) 'pg_temp.pgshift_view_probe'::pg_catalog.regclass AND a.attnum OPERATOR(pg_catalog.>) 0 \
             AND (a.atttypid OPERATOR(pg_catalog.<>) b.atttypid OR a.atttypmod OPERATOR(pg_catalog.<>) b.atttypmod \
                  OR a.attcollation OPERATOR(pg_catalog.<>) b.attcollation)) \
         THEN RAISE EXCEPTION 'columns changed'; END IF; END $$; \
         DROP VIEW pg_temp.pgshift_view_probe",
        oid = pgshift_sql::quote_literal(&view.name.to_string()),
    );
    client.batch_execute(&probe).await.is_err()
}

/// Points each view at the new table by replacing it with its own definition, which
/// names the table and so now resolves to the new one. When a column type changed,
/// `CREATE OR REPLACE` is not allowed: the view is dropped and created again with its
/// owner, grants and comment.
pub(super) async fn recreate(client: &Client, views: &[View]) -> Result<Vec<String>, CasError> {
    let mut out = Vec::new();
    for view in views {
        let options = if view.options.is_empty() {
            String::new()
        } else {
            let options: Vec<String> = view
                .options
                .iter()
                .filter_map(|o| o.split_once('='))
                .map(|(k, v)| format!("{} = {}", quote_ident(k), pgshift_sql::quote_literal(v)))
                .collect();
            format!(" WITH ({})", options.join(", "))
        };
        let definition = view.definition.trim().trim_end_matches(';');
        let sql = format!(
            "CREATE OR REPLACE VIEW {}{options} AS {definition}",
            view.name
        );
        match pgshift_sql::parse(&sql) {
            Ok(statements) if statements.len() == 1 => {}
            _ => {
                return Err(CasError::Record(format!(
                    "the definition of view {} does not parse back",
                    view.name
                )))
            }
        }
        exec(
            client,
            "recreating a dependent view",
            "SAVEPOINT pgshift_view",
        )
        .await?;
        if client.batch_execute(&sql).await.is_ok()
            && !columns_changed(client, view, definition).await
        {
            exec(
                client,
                "recreating a dependent view",
                "RELEASE SAVEPOINT pgshift_view",
            )
            .await?;
            // INV: CO-15 — a replaced view's rules are made again on the new table.
            exec_all(
                client,
                "carrying a dependent view's rules",
                &view.ties.rebind_rules(&view.name)?,
            )
            .await?;
        } else {
            exec(
                client,
                "recreating a dependent view",
                "ROLLBACK TO SAVEPOINT pgshift_view",
            )
            .await?;
            let mut again = vec![
                format!("DROP VIEW {}", view.name),
                sql.replacen("CREATE OR REPLACE VIEW", "CREATE VIEW", 1),
            ];
            // INV: CO-15 — a view made again gets its triggers, rules and column
            // settings back, in the swap's transaction.
            again.extend(view.ties.before_owner(&view.name)?);
            again.push(format!(
                "ALTER VIEW {} OWNER TO {}",
                view.name,
                quote_ident(&view.owner)
            ));
            again.extend(view.ties.after_owner(&view.name));
            for (grantee, privilege, grantable) in &view.grants {
                let grantee = if grantee == "PUBLIC" {
                    grantee.clone()
                } else {
                    quote_ident(grantee)
                };
                again.push(format!(
                    "GRANT {privilege} ON {} TO {grantee}{}",
                    view.name,
                    if *grantable { " WITH GRANT OPTION" } else { "" }
                ));
            }
            if let Some(comment) = &view.comment {
                again.push(format!(
                    "COMMENT ON VIEW {} IS {}",
                    view.name,
                    pgshift_sql::quote_literal(comment)
                ));
            }
            for statement in again {
                exec(client, "recreating a dependent view", &statement).await?;
            }
        }
        out.push(view.name.to_string());
    }
    Ok(out)
}
