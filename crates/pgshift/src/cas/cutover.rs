//! The swap, in one transaction under one short, bounded ACCESS EXCLUSIVE window:
//! lock source and shadow, drain the change log, prove the capture (or fence) intact
//! by OID and the source's shape unchanged, then exchange names — tables, partitions,
//! indexes — and carry over what must follow the name: triggers with their enable
//! states, foreign keys pointing at the table, dependent views, sequences, publication
//! membership, replica identity. The catalog is read back before `COMMIT`. A lost
//! connection at `COMMIT` is settled by reading which OID holds the name (INV: ST-3).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_postgres::Client;

use super::applier::Applier;
use super::capture;
use super::error::CasError;
use super::plan::RunPlan;
use super::session;
use super::source;
use super::statements::Statements;
use crate::exec::jitter::Jitter;
use crate::refusal::{Refusal, RefusalCause};
use pgshift_sql::{quote_ident, QualifiedName};

/// What the swap did.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct SwapReport {
    /// Attempts to take the lock.
    pub attempts: u32,
    /// Change-log entries applied under the lock.
    pub drained: i64,
    /// How long ACCESS EXCLUSIVE was held: from the granted `LOCK TABLE` to the end
    /// of `COMMIT`, in microseconds.
    pub lock_held_us: u64,
    /// Foreign keys re-pointed (validated after the swap).
    pub foreign_keys: Vec<String>,
    /// Views recreated on the new table.
    pub views: Vec<String>,
}

/// Why one attempt did not swap.
enum AttemptEnd {
    /// Swapped.
    Swapped(SwapReport),
    /// The lock was not granted in time: try again.
    LockTimeout,
    /// Too many changes were waiting: catch up first.
    Backlog,
}

async fn exec(client: &Client, what: &str, sql: &str) -> Result<(), CasError> {
    client
        .batch_execute(sql)
        .await
        .map_err(|e| CasError::db(what.to_owned(), e))
}

/// Runs `statements` in order in one round trip (the swap's lock is held meanwhile:
/// every round trip saved shortens it). They run inside the swap's transaction, so
/// one failing undoes nothing less than the whole swap.
async fn exec_all(client: &Client, what: &str, statements: &[String]) -> Result<(), CasError> {
    if statements.is_empty() {
        return Ok(());
    }
    exec(client, what, &statements.join(";\n")).await
}

/// Swaps, retrying the lock within the plan's budget. `catch_up` runs between
/// attempts when the backlog was too large.
pub async fn swap<F, Fut>(
    client: &Client,
    plan: &RunPlan,
    mut catch_up: F,
) -> Result<SwapReport, CasError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), CasError>>,
{
    let budgets = plan.options.cutover;
    let mut jitter = Jitter::from_clock();
    for attempt in 1..=budgets.attempts {
        // INV: OC-3 — a safe point: between attempts, never inside one (it holds the lock).
        CasError::check_interrupt()?;
        match attempt_swap(client, plan, attempt).await? {
            AttemptEnd::Swapped(report) => return Ok(report),
            AttemptEnd::LockTimeout => {}
            AttemptEnd::Backlog => catch_up().await?,
        }
        if attempt < budgets.attempts {
            let base = budgets.backoff_ms(attempt);
            tokio::time::sleep(Duration::from_millis(
                (base as f64 * jitter.next_unit()) as u64,
            ))
            .await;
        }
    }
    Err(CasError::CutoverRefused(Refusal::new(
        RefusalCause::LockBudgetExhausted,
        format!(
            "ACCESS EXCLUSIVE on {} was not granted within {} ms on any of {} attempts; the source is untouched",
            plan.source.table.name, budgets.lock_timeout_ms, budgets.attempts
        ),
    )))
}

async fn attempt_swap(
    client: &Client,
    plan: &RunPlan,
    attempt: u32,
) -> Result<AttemptEnd, CasError> {
    // The shadow first, waited for as long as it takes an autovacuum worker on it to be
    // cancelled (past `deadlock_timeout`): nobody but the engine uses the shadow, so
    // that wait holds up no user. Then the source, under the cutover's budget.
    let begin = format!(
        "BEGIN; SET LOCAL statement_timeout = 600000; {}",
        session::lock_shadow(&plan.shadow, plan.options.cutover.lock_timeout_ms)
    );
    if let Err(e) = exec(client, "locking the shadow for the swap", &begin).await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(e);
    }
    // INV: LK-5 — ACCESS EXCLUSIVE is waited for at most `lock_timeout_ms` per attempt.
    let lock = format!(
        "LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
        plan.source.table.name
    );
    if let Err(e) = client.batch_execute(&lock).await {
        let _ = client.batch_execute("ROLLBACK").await;
        if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
            return Ok(AttemptEnd::LockTimeout);
        }
        return Err(CasError::db("locking source and shadow", e));
    }
    let held_since = Instant::now();
    match swap_under_lock(client, plan).await {
        Ok(Some(mut report)) => {
            report.attempts = attempt;
            let commit = client.batch_execute("COMMIT").await;
            report.lock_held_us =
                u64::try_from(held_since.elapsed().as_micros()).unwrap_or(u64::MAX);
            match commit {
                Ok(()) => Ok(AttemptEnd::Swapped(report)),
                Err(e) if e.is_closed() => Err(CasError::Database {
                    what: "committing the swap (the outcome is read from the catalog on resume)"
                        .to_owned(),
                    message: e.to_string(),
                    sqlstate: None,
                }),
                Err(e) => Err(CasError::db("committing the swap", e)),
            }
        }
        Ok(None) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Ok(AttemptEnd::Backlog)
        }
        Err(err) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err)
        }
    }
}

/// Everything under the lock. `Ok(None)`: the backlog is over the bound.
async fn swap_under_lock(client: &Client, plan: &RunPlan) -> Result<Option<SwapReport>, CasError> {
    let names = plan.names();
    let applier = Applier::new(Statements::new(plan));
    if applier.backlog(client).await? > plan.options.cutover.max_drain {
        return Ok(None);
    }
    let drained = applier.drain_in_transaction(client, 5_000).await?;
    // INV: CO-4 — the swap happens only with the capture (or fence) proven intact.
    let breaches = capture::check(client, plan).await?;
    if !breaches.is_empty() {
        let problems: Vec<String> = breaches
            .iter()
            .map(|b| format!("relation {}: {}", b.relation, b.problem))
            .collect();
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::CutoverUnfenced,
            format!(
                "writes could have bypassed the run: {}; the source stays in place",
                problems.join("; ")
            ),
        )));
    }
    let fingerprint = source::fingerprint_of(client, &plan.source_oids()).await?;
    if fingerprint != plan.source.fingerprint {
        return Err(CasError::CutoverRefused(Refusal::new(
            RefusalCause::SchemaChanged,
            format!(
                "the shape of {} changed since the run started (columns, indexes, constraints, triggers or partitions); abort the run and start again",
                plan.source.table.name
            ),
        )));
    }
    let views = dependent_views(client, plan.source.table.oid).await?;
    sequences(client, plan).await?;
    if plan.source.carry.complete {
        rename_all(client, plan).await?;
    } else {
        let partition_indexes = partition_index_names(client, plan).await?;
        rename_tree(client, plan, &partition_indexes).await?;
    }
    let mut report = SwapReport {
        attempts: 0,
        drained,
        lock_held_us: 0,
        foreign_keys: Vec::new(),
        views: Vec::new(),
    };
    triggers(client, plan).await?;
    report.foreign_keys = incoming_foreign_keys(client, plan).await?;
    report.views = recreate_views(client, &views).await?;
    if plan.source.carry.complete {
        // Comments, clustered and replica-identity indexes, publication membership,
        // by the final names.
        exec_all(
            client,
            "carrying settings to the new table",
            &plan.source.carry.after_swap,
        )
        .await?;
    } else {
        publications(client, plan).await?;
        if let Some(index) = plan.indexes.iter().find(|i| i.replica_identity) {
            exec(
                client,
                "carrying the replica identity",
                &format!(
                    "ALTER TABLE {} REPLICA IDENTITY USING INDEX {}",
                    plan.source.table.name,
                    quote_ident(&index.source_name)
                ),
            )
            .await?;
        }
    }
    read_back(client, plan, &names).await?;
    Ok(Some(report))
}

/// `(source partition index name, shadow partition index name)` for every index of
/// every partition attached to a parent index, so that the shadow's partitions' indexes
/// take their counterparts' names.
async fn partition_index_names(
    client: &Client,
    plan: &RunPlan,
) -> Result<Vec<(QualifiedName, QualifiedName)>, CasError> {
    let mut pairs = Vec::new();
    let mut parents: Vec<(String, String)> = plan
        .indexes
        .iter()
        .map(|i| (i.source_name.clone(), i.temp_name.clone()))
        .collect();
    if let Some(key) = &plan.source.key_name {
        let pk_index = plan
            .source
            .indexes
            .iter()
            .find(|i| i.primary)
            .map_or_else(|| key.clone(), |i| i.name.clone());
        parents.push((pk_index, plan.shadow_key_name.clone()));
    }
    let schema = plan.source.table.name.schema.clone().unwrap_or_default();
    let source_tables: Vec<QualifiedName> = plan
        .source
        .partitions
        .iter()
        .map(|p| qualify(&p.relation.name, &schema))
        .collect();
    let shadow_tables: Vec<QualifiedName> = plan
        .shadow_partitions
        .iter()
        .map(|p| qualify(p, &schema))
        .collect();
    let source_parents: Vec<String> = parents.iter().map(|(s, _)| s.clone()).collect();
    let shadow_parents: Vec<String> = parents.iter().map(|(_, t)| t.clone()).collect();
    let source_children =
        attached_children(client, &schema, &source_parents, &source_tables).await?;
    let shadow_children =
        attached_children(client, &schema, &shadow_parents, &shadow_tables).await?;
    for (source_partition, shadow_partition) in
        plan.source.partitions.iter().zip(&plan.shadow_partitions)
    {
        for (source_parent, shadow_parent) in &parents {
            let source_child = source_children.get(&(
                source_parent.clone(),
                qualify(&source_partition.relation.name, &schema),
            ));
            let shadow_child =
                shadow_children.get(&(shadow_parent.clone(), qualify(shadow_partition, &schema)));
            if let (Some(s), Some(t)) = (source_child, shadow_child) {
                pairs.push((s.clone(), t.clone()));
            }
        }
    }
    Ok(pairs)
}

/// Identity sequences continue where the source's stopped; owned (serial) sequences
/// change owner to the new table's column.
async fn sequences(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    for sequence in &plan.source.sequences {
        if !plan.columns.iter().any(|c| c.name == sequence.column) {
            continue;
        }
        if sequence.identity {
            exec(
                client,
                "continuing an identity sequence",
                &format!(
                    "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence({}, {}), s.last_value, s.is_called) FROM {} s",
                    pgshift_sql::quote_literal(&plan.shadow.to_string()),
                    pgshift_sql::quote_literal(&sequence.column),
                    sequence.sequence
                ),
            )
            .await?;
        } else {
            exec(
                client,
                "handing over an owned sequence",
                &format!(
                    "ALTER SEQUENCE {} OWNED BY {}.{}",
                    sequence.sequence,
                    plan.shadow,
                    quote_ident(&sequence.column)
                ),
            )
            .await?;
        }
    }
    Ok(())
}

/// Every row of a query, its columns as text.
async fn texts(
    client: &Client,
    what: &str,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<Vec<String>>, CasError> {
    let rows = client
        .query(sql, params)
        .await
        .map_err(|e| CasError::db(what.to_owned(), e))?;
    Ok(rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<_, String>(i)).collect())
        .collect())
}

/// The indexes attached to the partitioned indexes `parents` (in `schema`), on the
/// tables `tables` (a table without a schema is taken to be in `schema`), keyed by
/// `(parent index name, table)`: one catalog read under the lock instead of one per
/// pair.
async fn attached_children(
    client: &Client,
    schema: &str,
    parents: &[String],
    tables: &[QualifiedName],
) -> Result<HashMap<(String, QualifiedName), QualifiedName>, CasError> {
    let table_schemas: Vec<String> = tables
        .iter()
        .map(|t| t.schema.clone().unwrap_or_else(|| schema.to_owned()))
        .collect();
    let table_names: Vec<String> = tables.iter().map(|t| t.name.clone()).collect();
    let rows = texts(
        client,
        "reading partition indexes",
        "SELECT p.relname::pg_catalog.text, tn.nspname::pg_catalog.text, t.relname::pg_catalog.text, \
                cn.nspname::pg_catalog.text, ic.relname::pg_catalog.text \
           FROM pg_catalog.pg_inherits h \
           JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) h.inhrelid \
           JOIN pg_catalog.pg_namespace cn ON cn.oid OPERATOR(pg_catalog.=) ic.relnamespace \
           JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) h.inhparent \
           JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.relnamespace \
           JOIN pg_catalog.pg_index i ON i.indexrelid OPERATOR(pg_catalog.=) ic.oid \
           JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) i.indrelid \
           JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.relnamespace \
           JOIN ROWS FROM (pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[])) AS w(nspname, relname) \
             ON w.nspname OPERATOR(pg_catalog.=) tn.nspname AND w.relname OPERATOR(pg_catalog.=) t.relname \
          WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text \
            AND p.relname OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])",
        &[&schema, &parents, &table_schemas, &table_names],
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let [parent, table_schema, table, child_schema, child] =
                <[String; 5]>::try_from(r).unwrap_or_else(|_| Default::default());
            (
                (parent, QualifiedName::qualified(table_schema, table)),
                QualifiedName::qualified(child_schema, child),
            )
        })
        .collect())
}

/// The renames of a plan whose shadow was made with every final name known: every
/// index of the source tree (and each source sequence or statistics object whose name
/// a shadow one takes) goes to an `_pgshift_old_…` name; the shadow's key, planned
/// indexes, their partitions' indexes, sequences and statistics take their final
/// names; then the tables exchange names.
async fn rename_all(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let names = plan.names();
    let schema = plan.source.table.name.schema.clone().unwrap_or_default();
    let carry = &plan.source.carry;
    let source_oids = plan.source_oids();
    let mut sql = Vec::new();
    for row in texts(
        client,
        "reading the source's indexes",
        "SELECT n.nspname::pg_catalog.text, ic.relname::pg_catalog.text FROM pg_catalog.pg_index i \
           JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
           JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) ic.relnamespace \
          WHERE i.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) ORDER BY i.indexrelid",
        &[&source_oids],
    )
    .await?
    {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            QualifiedName::qualified(row[0].clone(), row[1].clone()),
            quote_ident(&names.old_index(&row[1]))
        ));
    }
    for rename in &carry.renames {
        let temp_schema = rename.temp.schema.clone().unwrap_or_default();
        let (kind, holder) = if rename.kind == "statistics" {
            (
                "STATISTICS",
                "SELECT s.stxrelid OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.oid[]) FROM pg_catalog.pg_statistic_ext s \
                   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace \
                  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND s.stxname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            )
        } else {
            (
                "SEQUENCE",
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                          AND d.objid OPERATOR(pg_catalog.=) c.oid AND d.refobjid OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.oid[])) \
                   FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            )
        };
        let holder = client
            .query_opt(holder, &[&temp_schema, &rename.final_name, &source_oids])
            .await
            .map_err(|e| CasError::db("reading who holds a name", e))?;
        let final_name = QualifiedName::qualified(temp_schema.clone(), rename.final_name.clone());
        match holder.map(|r| r.get::<_, bool>(0)) {
            Some(true) => sql.push(format!(
                "ALTER {kind} {final_name} RENAME TO {}",
                quote_ident(&names.old_index(&rename.final_name))
            )),
            Some(false) => {
                return Err(CasError::Record(format!(
                "{final_name} is taken by an object that is not the source's; rename it and resume"
            )))
            }
            None => {}
        }
    }
    // The partitions' indexes first, found through their parents' temporary names.
    let mut parents: Vec<(&str, &[String])> = plan
        .indexes
        .iter()
        .filter(|i| i.partition.is_none())
        .map(|i| (i.temp_name.as_str(), i.partition_names.as_slice()))
        .collect();
    parents.push((
        plan.shadow_key_name.as_str(),
        carry.key_partition_names.as_slice(),
    ));
    let parent_names: Vec<String> = parents.iter().map(|(p, _)| (*p).to_owned()).collect();
    let shadow_tables: Vec<QualifiedName> = plan
        .shadow_partitions
        .iter()
        .map(|p| qualify(p, &schema))
        .collect();
    let children = attached_children(client, &schema, &parent_names, &shadow_tables).await?;
    for (parent, finals) in parents {
        for (shadow_partition, final_name) in plan.shadow_partitions.iter().zip(finals) {
            if let Some(child) =
                children.get(&(parent.to_owned(), qualify(shadow_partition, &schema)))
            {
                sql.push(format!(
                    "ALTER INDEX {} RENAME TO {}",
                    child,
                    quote_ident(final_name)
                ));
            }
        }
    }
    if let Some(key) = plan.source.indexes.iter().find(|i| i.primary) {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(&plan.source.table.name.schema, &plan.shadow_key_name),
            quote_ident(&key.name)
        ));
    }
    for index in &plan.indexes {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(&plan.source.table.name.schema, &index.temp_name),
            quote_ident(&index.source_name)
        ));
    }
    for rename in &carry.renames {
        let kind = if rename.kind == "statistics" {
            "STATISTICS"
        } else {
            "SEQUENCE"
        };
        sql.push(format!(
            "ALTER {kind} {} RENAME TO {}",
            rename.temp,
            quote_ident(&rename.final_name)
        ));
    }
    sql.extend(table_renames(plan));
    exec_all(client, "exchanging names", &sql).await
}

/// `name` with its schema spelled out (`schema` when it has none).
fn qualify(name: &QualifiedName, schema: &str) -> QualifiedName {
    QualifiedName::qualified(
        name.schema.clone().unwrap_or_else(|| schema.to_owned()),
        name.name.clone(),
    )
}

/// The tables' exchange of names, after their indexes': the source tree to
/// `_pgshift_old_…` names, then the shadow tree to the source's.
fn table_renames(plan: &RunPlan) -> Vec<String> {
    let names = plan.names();
    let mut sql = vec![format!(
        "ALTER TABLE {} RENAME TO {}",
        plan.source.table.name,
        quote_ident(&names.old(&plan.source.table.name).name)
    )];
    for partition in &plan.source.partitions {
        sql.push(format!(
            "ALTER TABLE {} RENAME TO {}",
            partition.relation.name,
            quote_ident(&names.old(&partition.relation.name).name)
        ));
    }
    sql.push(format!(
        "ALTER TABLE {} RENAME TO {}",
        plan.shadow,
        quote_ident(&plan.source.table.name.name)
    ));
    for (shadow_partition, source_partition) in
        plan.shadow_partitions.iter().zip(&plan.source.partitions)
    {
        sql.push(format!(
            "ALTER TABLE {shadow_partition} RENAME TO {}",
            quote_ident(&source_partition.relation.name.name)
        ));
    }
    sql
}

fn in_schema(schema: &Option<String>, name: &str) -> QualifiedName {
    QualifiedName {
        schema: schema.clone(),
        name: name.to_owned(),
    }
}

/// Source tree to `_pgshift_old_…` names; shadow tree to the source's names.
async fn rename_tree(
    client: &Client,
    plan: &RunPlan,
    partition_indexes: &[(QualifiedName, QualifiedName)],
) -> Result<(), CasError> {
    let names = plan.names();
    let schema = &plan.source.table.name.schema;
    let mut sql = Vec::new();
    // Indexes first, while the tables still have their names.
    for index in &plan.source.indexes {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(schema, &index.name),
            quote_ident(&names.old_index(&index.name))
        ));
    }
    for (source_index, _) in partition_indexes {
        sql.push(format!(
            "ALTER INDEX {source_index} RENAME TO {}",
            quote_ident(&names.old_index(&source_index.name))
        ));
    }
    if let Some(pk) = plan.source.indexes.iter().find(|i| i.primary) {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(schema, &plan.shadow_key_name),
            quote_ident(&pk.name)
        ));
    }
    for index in &plan.indexes {
        sql.push(format!(
            "ALTER INDEX {} RENAME TO {}",
            in_schema(schema, &index.temp_name),
            quote_ident(&index.source_name)
        ));
    }
    for (source_index, shadow_index) in partition_indexes {
        sql.push(format!(
            "ALTER INDEX {shadow_index} RENAME TO {}",
            quote_ident(&source_index.name)
        ));
    }
    sql.extend(table_renames(plan));
    exec_all(client, "exchanging names", &sql).await
}

/// The source's user triggers, recreated on the new table with their names,
/// definitions and enable states (on the parent and on each partition).
async fn triggers(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let mut sql: Vec<String> = plan
        .source
        .triggers
        .iter()
        .filter(|t| !t.clone)
        .map(|t| t.definition.clone())
        .collect();
    for trigger in &plan.source.triggers {
        if let Some(comment) = &trigger.comment {
            sql.push(format!(
                "COMMENT ON TRIGGER {} ON {} IS {}",
                quote_ident(&trigger.name),
                trigger.on,
                pgshift_sql::quote_literal(comment)
            ));
        }
        let action = match trigger.enabled.as_str() {
            "A" => "ENABLE ALWAYS",
            "R" => "ENABLE REPLICA",
            "D" => "DISABLE",
            _ if trigger.clone => "ENABLE",
            _ => continue,
        };
        sql.push(format!(
            "ALTER TABLE {}{} {action} TRIGGER {}",
            if trigger.clone { "ONLY " } else { "" },
            trigger.on,
            quote_ident(&trigger.name)
        ));
    }
    exec_all(
        client,
        "recreating the triggers with their comments and enable states",
        &sql,
    )
    .await
}

/// Foreign keys of other tables are re-pointed at the new table, `NOT VALID`
/// (validated after the swap).
async fn incoming_foreign_keys(client: &Client, plan: &RunPlan) -> Result<Vec<String>, CasError> {
    let mut out = Vec::new();
    for fk in &plan.source.incoming {
        exec(
            client,
            "re-pointing a foreign key",
            &format!(
                "ALTER TABLE {} DROP CONSTRAINT {}; ALTER TABLE {} ADD CONSTRAINT {} {} NOT VALID",
                fk.table,
                quote_ident(&fk.name),
                fk.table,
                quote_ident(&fk.name),
                fk.definition
            ),
        )
        .await?;
        if let Some(comment) = &fk.comment {
            exec(
                client,
                "commenting a foreign key",
                &format!(
                    "COMMENT ON CONSTRAINT {} ON {} IS {}",
                    quote_ident(&fk.name),
                    fk.table,
                    pgshift_sql::quote_literal(comment)
                ),
            )
            .await?;
        }
        out.push(format!("{}.{}", fk.table, quote_ident(&fk.name)));
    }
    Ok(out)
}

/// A view to recreate on the new table.
struct View {
    name: QualifiedName,
    definition: String,
    options: Vec<String>,
    owner: String,
    comment: Option<String>,
    /// `(grantee, privilege, grantable)`.
    grants: Vec<(String, String, bool)>,
}

/// Plain views that depend on the source, with their definitions as of now.
async fn dependent_views(client: &Client, oid: u32) -> Result<Vec<View>, CasError> {
    let rows = client
        .query(
            "SELECT DISTINCT n.nspname::pg_catalog.text, v.relname::pg_catalog.text, pg_catalog.pg_get_viewdef(v.oid), \
                    coalesce(v.reloptions, '{}')::pg_catalog.text[], pg_catalog.pg_get_userbyid(v.relowner)::pg_catalog.text, \
                    pg_catalog.obj_description(v.oid, 'pg_class'), \
                    ARRAY(SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::pg_catalog.text END \
                                 || '|' || a.privilege_type || '|' || a.is_grantable::pg_catalog.text \
                            FROM pg_catalog.aclexplode(v.relacl) a WHERE a.grantee OPERATOR(pg_catalog.<>) v.relowner) \
               FROM pg_catalog.pg_depend d \
               JOIN pg_catalog.pg_rewrite rw ON rw.oid OPERATOR(pg_catalog.=) d.objid \
               JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) rw.ev_class \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) v.relnamespace \
              WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
                AND d.refobjid OPERATOR(pg_catalog.=) $1 AND v.oid OPERATOR(pg_catalog.<>) $1 AND v.relkind OPERATOR(pg_catalog.=) 'v'",
            &[&oid],
        )
        .await
        .map_err(|e| CasError::db("reading dependent views", e))?;
    Ok(rows
        .iter()
        .map(|r| View {
            name: QualifiedName::qualified(r.get::<_, String>(0), r.get::<_, String>(1)),
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
        .collect())
}

/// Points each view at the new table by replacing it with its own definition, which
/// names the table and so now resolves to the new one. When a column type changed,
/// `CREATE OR REPLACE` is not allowed: the view is dropped and created again with its
/// owner, grants and comment.
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

async fn recreate_views(client: &Client, views: &[View]) -> Result<Vec<String>, CasError> {
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
                format!(
                    "ALTER VIEW {} OWNER TO {}",
                    view.name,
                    quote_ident(&view.owner)
                ),
            ];
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

/// Publication membership moves to the new table.
async fn publications(client: &Client, plan: &RunPlan) -> Result<(), CasError> {
    let names = plan.names();
    for publication in &plan.source.publications {
        exec(
            client,
            "moving publication membership",
            &format!(
                "ALTER PUBLICATION {} DROP TABLE {}; ALTER PUBLICATION {} ADD TABLE {}",
                quote_ident(publication),
                names.old(&plan.source.table.name),
                quote_ident(publication),
                plan.source.table.name
            ),
        )
        .await?;
    }
    Ok(())
}

/// Reads the catalog back before `COMMIT`: the name denotes the shadow's OID, and the
/// trigger and index counts are the source's.
async fn read_back(
    client: &Client,
    plan: &RunPlan,
    names: &super::names::RunNames,
) -> Result<(), CasError> {
    let schema = plan.source.table.name.schema.clone().unwrap_or_default();
    let row = client
        .query_one(
            "SELECT c.oid, \
                    (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) c.oid AND NOT t.tgisinternal), \
                    (SELECT pg_catalog.count(*) FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid), \
                    (SELECT o.oid FROM pg_catalog.pg_class o JOIN pg_catalog.pg_namespace onsp ON onsp.oid OPERATOR(pg_catalog.=) o.relnamespace \
                      WHERE onsp.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND o.relname OPERATOR(pg_catalog.=) $3::pg_catalog.text) \
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            &[&schema, &plan.source.table.name.name, &names.old(&plan.source.table.name).name],
        )
        .await
        .map_err(|e| CasError::db("reading the swap back", e))?;
    let old_oid: Option<u32> = row.get(3);
    if old_oid != Some(plan.source.table.oid) {
        return Err(CasError::Record(
            "after the renames the old name does not denote the source".to_owned(),
        ));
    }
    let new_oid: u32 = row.get(0);
    if new_oid == plan.source.table.oid {
        return Err(CasError::Record(
            "after the renames the name still denotes the source".to_owned(),
        ));
    }
    let expected_triggers = plan
        .source
        .triggers
        .iter()
        .filter(|t| !t.clone && t.on == plan.source.table.name)
        .count();
    // INV: CO-8 — before COMMIT, the name denotes the new table, the old name the
    // source, and the new table carries every user trigger and every planned index
    // (those the statement added included), under final names only.
    let triggers: i64 = row.get(1);
    if usize::try_from(triggers).unwrap_or(usize::MAX) != expected_triggers {
        return Err(CasError::Record(format!(
            "the new table has {triggers} user triggers; the source had {expected_triggers}"
        )));
    }
    let indexes: i64 = row.get(2);
    let expected_indexes = plan
        .indexes
        .iter()
        .filter(|i| i.partition.is_none())
        .count()
        + 1;
    if usize::try_from(indexes).unwrap_or(usize::MAX) != expected_indexes {
        return Err(CasError::Record(format!(
            "the new table has {indexes} indexes; the plan built {expected_indexes}"
        )));
    }
    if plan.source.carry.complete {
        // Every name on the new tree is a final one: the source's, or PostgreSQL's for
        // what the statement added.
        let leftover = texts(
            client,
            "reading the swap back",
            "WITH tree AS (SELECT $1::pg_catalog.oid AS oid UNION ALL \
                           SELECT h.inhrelid FROM pg_catalog.pg_inherits h WHERE h.inhparent OPERATOR(pg_catalog.=) $1::pg_catalog.oid) \
             SELECT ic.relname::pg_catalog.text FROM tree JOIN pg_catalog.pg_index i ON i.indrelid OPERATOR(pg_catalog.=) tree.oid \
               JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid WHERE ic.relname::pg_catalog.text ~ '^_pgshift_' \
             UNION ALL SELECT con.conname::pg_catalog.text FROM tree JOIN pg_catalog.pg_constraint con ON con.conrelid OPERATOR(pg_catalog.=) tree.oid \
              WHERE con.conname::pg_catalog.text ~ '^_pgshift_'",
            &[&new_oid],
        )
        .await?;
        if !leftover.is_empty() {
            return Err(CasError::Record(format!(
                "the new table still has temporary names: {}",
                leftover
                    .iter()
                    .map(|r| r[0].clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

/// After a lost connection at `COMMIT`: whether the swap committed, read from which
/// OID holds the name (never guessed).
pub async fn settled(client: &Client, plan: &RunPlan) -> Result<bool, CasError> {
    let schema = plan.source.table.name.schema.clone().unwrap_or_default();
    let row = client
        .query_opt(
            "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            &[&schema, &plan.source.table.name.name],
        )
        .await
        .map_err(|e| CasError::db("reading which table holds the name", e))?;
    // INV: ST-3 — the name's OID says whether the swap committed.
    Ok(row.is_some_and(|r| r.get::<_, u32>(0) != plan.source.table.oid))
}
