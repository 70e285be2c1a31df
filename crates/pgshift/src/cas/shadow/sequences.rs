//! The scratch tree's sequences and what the swap does with them.

use pgshift_sql::{quote_ident, quote_literal, QualifiedName};
use tokio_postgres::Client;

use super::{db, run};
use crate::cas::error::CasError;
use crate::cas::plan::{Carry, PlannedRename, RunPlan};

/// Gives each identity sequence of the scratch table the source's sequence type.
///
/// `LIKE … INCLUDING IDENTITY` copies an identity sequence's bounds but not its type:
/// PostgreSQL makes it `bigint` with the old `MAXVALUE` (2147483647 for an `integer`
/// column). The statement then changes the type from there, and PostgreSQL raises
/// bounds to the new type's only when they were the old type's own (`init_params`): a
/// type change from `integer` to `bigint` kept `MAXVALUE 2147483647`, and one to
/// `smallint` failed. With the source's type restored first, the statement's
/// `ALTER COLUMN … TYPE` changes the sequence exactly as it changes the real one.
pub(super) async fn restore_identity_types(
    client: &Client,
    plan: &RunPlan,
    scratch: &QualifiedName,
) -> Result<(), CasError> {
    for sequence in plan.source.sequences.iter().filter(|s| s.identity) {
        let row = client
            .query_one(
                "SELECT pg_catalog.format_type(q.seqtypid, NULL), \
                        pg_catalog.pg_get_serial_sequence($2, $3) \
                   FROM pg_catalog.pg_sequence q WHERE q.seqrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)",
                &[
                    &sequence.sequence.to_string(),
                    &scratch.to_string(),
                    &sequence.column,
                ],
            )
            .await
            .map_err(db("reading an identity sequence's type"))?;
        let (type_sql, copy): (String, Option<String>) = (row.get(0), row.get(1));
        let Some(copy) = copy else {
            return Err(CasError::Record(format!(
                "the shadow's identity column {} has no sequence",
                quote_ident(&sequence.column)
            )));
        };
        if !["smallint", "integer", "bigint"].contains(&type_sql.as_str()) {
            return Err(CasError::Record(format!(
                "identity sequence {} has type {type_sql}",
                sequence.sequence
            )));
        }
        // `pg_get_serial_sequence` quotes the name as needed.
        run(
            client,
            "giving an identity sequence its type",
            &format!("ALTER SEQUENCE {copy} AS {type_sql}"),
        )
        .await?;
    }
    Ok(())
}

/// The scratch tree's sequences (identity columns, and those the statement added):
/// temporary names now, at the swap the source's sequence's name (a copied identity
/// column) or the name PostgreSQL chose (a new one). A copied identity sequence gets
/// the source's grants and comment.
pub(super) async fn sequences(
    client: &Client,
    plan: &RunPlan,
    scratch_schema: &str,
    carry: &mut Carry,
) -> Result<(), CasError> {
    let names = plan.names();
    let rows = client
        .query(
            "SELECT s.relname::pg_catalog.text, a.attname::pg_catalog.text \
               FROM pg_catalog.pg_class s \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.relnamespace \
               LEFT JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                    AND d.objid OPERATOR(pg_catalog.=) s.oid AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                    AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}') \
               LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND s.relkind OPERATOR(pg_catalog.=) 'S' ORDER BY s.oid",
            &[&scratch_schema],
        )
        .await
        .map_err(db("reading the shadow's sequences"))?;
    let schema = plan.source.table.name.schema.clone();
    for (n, row) in rows.iter().enumerate() {
        let (name, column): (String, Option<String>) = (row.get(0), row.get(1));
        let scratch = QualifiedName::qualified(scratch_schema, name.clone());
        let source = column.as_ref().and_then(|column| {
            plan.source
                .sequences
                .iter()
                .find(|s| s.identity && &s.column == column)
        });
        let final_name = match source {
            Some(source) => {
                let acl = client
                    .query_one(
                        "SELECT ARRAY(SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text END \
                                      || '|' || a.privilege_type || '|' || a.is_grantable::pg_catalog.text \
                                 FROM pg_catalog.aclexplode(c.relacl) a WHERE a.grantee OPERATOR(pg_catalog.<>) c.relowner), \
                                pg_catalog.obj_description(c.oid, 'pg_class') \
                           FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)",
                        &[&source.sequence.to_string()],
                    )
                    .await
                    .map_err(db("reading a sequence's grants"))?;
                for grant in acl.get::<_, Vec<String>>(0) {
                    let mut parts = grant.split('|');
                    let (Some(grantee), Some(privilege), Some(grantable)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        continue;
                    };
                    let grantee = if grantee == "PUBLIC" {
                        grantee.to_owned()
                    } else {
                        quote_ident(grantee)
                    };
                    run(
                        client,
                        "granting on a sequence",
                        &format!(
                            "GRANT {privilege} ON SEQUENCE {scratch} TO {grantee}{}",
                            if grantable == "true" {
                                " WITH GRANT OPTION"
                            } else {
                                ""
                            }
                        ),
                    )
                    .await?;
                }
                if let Some(comment) = acl.get::<_, Option<String>>(1) {
                    run(
                        client,
                        "commenting a sequence",
                        &format!(
                            "COMMENT ON SEQUENCE {scratch} IS {}",
                            quote_literal(&comment)
                        ),
                    )
                    .await?;
                }
                source.sequence.name.clone()
            }
            None => name.clone(),
        };
        let temp = names.shadow_object('q', n + 1);
        run(
            client,
            "naming a shadow sequence",
            &format!("ALTER SEQUENCE {scratch} RENAME TO {}", quote_ident(&temp)),
        )
        .await?;
        carry.renames.push(PlannedRename {
            kind: "sequence".to_owned(),
            temp: QualifiedName {
                schema: schema.clone(),
                name: temp,
            },
            final_name,
        });
    }
    Ok(())
}
