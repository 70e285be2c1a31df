//! What the statement left, checked: the key, the triggers, the replica role.

use pgshift_sql::{quote_ident, QualifiedName};
use tokio_postgres::Client;

use super::relations::Relation;
use super::statement::retarget_trigger;
use super::{db, refuse, run};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;
use crate::refusal::{Refusal, RefusalCause};

/// The statement must leave the primary key on the same columns, not deferrable: the
/// copy, the applier and verification go by it.
pub(super) async fn check_key(
    client: &Client,
    plan: &RunPlan,
    scratch: &QualifiedName,
) -> Result<(), CasError> {
    let row = client
        .query_opt(
            "SELECT ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(con.conkey) WITH ORDINALITY k(attnum, ord) \
                            JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) con.conrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum \
                           ORDER BY k.ord), con.condeferrable \
               FROM pg_catalog.pg_constraint con \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.conrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
                AND con.contype OPERATOR(pg_catalog.=) 'p'",
            &[&scratch.schema.clone().unwrap_or_default(), &scratch.name],
        )
        .await
        .map_err(db("reading the shadow's key"))?;
    let expected: Vec<String> = plan.key.columns().iter().map(|c| c.name.clone()).collect();
    match row {
        Some(row) if row.get::<_, Vec<String>>(0) == expected && !row.get::<_, bool>(1) => Ok(()),
        _ => Err(CasError::Refused(Refusal::new(
            RefusalCause::NoUsableKey,
            format!(
                "the statement removes or changes the primary key of {} ({}); copy-and-swap copies, applies and verifies by it",
                plan.source.table.name,
                expected.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ")
            ),
        ))),
    }
}

/// Every user trigger of the source must be valid on the changed table (a `WHEN`, a
/// column list or the function may use what the statement changed): each is created on
/// the scratch tree and dropped again, in a savepoint.
pub(super) async fn check_triggers(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
) -> Result<(), CasError> {
    for trigger in plan.source.triggers.iter().filter(|t| !t.clone) {
        let Some(relation) = tree.iter().find(|r| r.name == trigger.on) else {
            continue;
        };
        let sql = retarget_trigger(&trigger.definition, &relation.scratch)?;
        run(client, "checking a trigger", "SAVEPOINT pgshift_trigger").await?;
        let outcome = client.batch_execute(&sql).await;
        run(
            client,
            "checking a trigger",
            "ROLLBACK TO SAVEPOINT pgshift_trigger",
        )
        .await?;
        if let Err(e) = outcome {
            let message = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned());
            return Err(refuse(format!(
                "trigger {} on {} would not survive the statement ({message}); PostgreSQL would refuse the statement too",
                quote_ident(&trigger.name),
                trigger.on
            )));
        }
    }
    Ok(())
}

/// A self-referencing foreign key acts on the rows the applier deletes and inserts
/// again; the applier writes the shadow as a replica (no referential actions), which
/// the role must be allowed to.
pub(super) async fn check_replica_role(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    run(
        client,
        "checking the replication role",
        "SAVEPOINT pgshift_role",
    )
    .await?;
    let outcome = client
        .batch_execute("SET LOCAL session_replication_role = replica")
        .await;
    run(
        client,
        "checking the replication role",
        "ROLLBACK TO SAVEPOINT pgshift_role",
    )
    .await?;
    outcome.map_err(|_| {
        refuse(format!(
            "{} has a foreign key to itself; copy-and-swap applies changes to the shadow with session_replication_role = replica, which this role may not set",
            plan.source.table.name
        ))
    })
}
