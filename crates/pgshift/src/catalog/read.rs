//! Reading a [`CatalogSnapshot`] from a live server.
//!
//! [`read_snapshot`] resolves the names a migration uses the way PostgreSQL resolves
//! them for the user, and reads everything pgshift needs about each relation found,
//! all inside one `REPEATABLE READ READ ONLY` transaction, so every fact comes from
//! the same snapshot.
//!
//! # Queries
//! Before `BEGIN`, two simple-protocol probes of the session's virtual transaction ID
//! (`pg_locks`) make sure the client is not already inside a transaction block. Then
//! one query per fact family, each over every relation at once
//! (`… = ANY($1::pg_catalog.oid[])`): server and session, schema names, relation
//! names, `pg_class` basics, sizes, partitions, columns, constraints (primary key and
//! outgoing foreign keys included), indexes, triggers, incoming foreign keys,
//! dependent views and publications; and for the functions the input calls, the
//! definitions of those written in SQL (`functions`). Names are only ever passed as
//! parameters.
//!
//! # Hostile schemas
//! Every catalog table, function, type and operator is schema-qualified
//! (`pg_catalog.pg_class`, `pg_catalog.format_type(…)`, `::pg_catalog.oid[]`,
//! `OPERATOR(pg_catalog.=)`), so nothing a user creates in a schema on the session's
//! `search_path` can stand in for what pgshift reads, even if that schema comes before
//! `pg_catalog`. Definitions (`pg_get_indexdef` and friends) are rendered by the
//! server for the session's `search_path`: pgshift's sessions use
//! `pg_catalog, pg_temp`, so every name outside `pg_catalog` comes out qualified.
//!
//! # Consistency
//! Catalog rows come from the transaction snapshot. The `pg_get_*def` functions and
//! `format_type` read the current catalog instead; an object dropped by another
//! session during the read makes them return NULL, which is reported as
//! [`CatalogError::ChangedDuringRead`] (read again).
//!
//! # Locks
//! The read never waits for a relation lock held elsewhere. Catalog rows,
//! `format_type`, `pg_get_userbyid`, `pg_partition_ancestors`, `to_regclass` and
//! `pg_locks` take none; `pg_partition_tree`, the size functions and the deparsing
//! functions (`pg_get_indexdef`, `pg_get_constraintdef`, `pg_get_expr`,
//! `pg_get_partkeydef`, `pg_get_triggerdef`, `pg_get_viewdef`) take ACCESS SHARE
//! (each checked against a holder of ACCESS EXCLUSIVE on PostgreSQL 14, 15 and 18).
//! So partition trees are walked through `pg_inherits`; the size functions are called
//! only for relations no other session holds or awaits ACCESS EXCLUSIVE on (the others
//! get estimated sizes, and say so); and a definition whose relation is so locked reads
//! [`crate::catalog::NOT_READ_WHILE_LOCKED`]. A lock taken in the instant between a
//! query's look at `pg_locks` and its deparsing times out that query; the read is then
//! tried again (at most three times). The locks other sessions hold on each relation
//! are part of its facts.

/// The start of a query whose definitions are not rendered for relations that another
/// session holds or awaits ACCESS EXCLUSIVE on: the `pg_get_*def` functions and
/// `pg_get_expr` take ACCESS SHARE on the relation whose expressions they render (checked
/// against a holder on PostgreSQL 14, 15 and 18), so for those the definition is
/// [`crate::catalog::NOT_READ_WHILE_LOCKED`] instead.
macro_rules! locked_cte {
    () => {
        "WITH locked AS MATERIALIZED (
        SELECT l.relation FROM pg_catalog.pg_locks l
         WHERE l.locktype OPERATOR(pg_catalog.=) 'relation'
           AND l.mode OPERATOR(pg_catalog.=) 'AccessExclusiveLock'
           AND l.pid IS DISTINCT FROM pg_catalog.pg_backend_pid()
           AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                 WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))
"
    };
}

/// The SQL literal of [`crate::catalog::NOT_READ_WHILE_LOCKED`].
macro_rules! not_read {
    () => {
        "'(not read: locked by another session)'"
    };
}

mod columns;
mod constraints;
mod error;
mod foreign_keys;
mod functions;
mod indexes;
mod locks;
mod publications;
mod related;
mod relation;
mod resolve;
pub(crate) mod rows;
pub(crate) mod server;
mod sizes;
pub(crate) mod transaction;
pub(crate) mod triggers;
mod views;

use std::collections::HashMap;

use pgshift_sql::QualifiedName;
use tokio_postgres::Client;

pub use error::CatalogError;
pub use locks::access_exclusive_elsewhere;

use crate::catalog::facts::{CatalogSnapshot, Persistence, RelationFacts, RelationKind};
use crate::lock::{ObjectClass, ObjectRef};

/// Reads the server facts and the facts of every relation `names` denote, in one
/// snapshot.
///
/// Each name resolves as PostgreSQL would resolve it for the user: a qualified name in
/// its schema (`pg_temp` being the session's temporary schema); an unqualified one
/// through `user_search_path` (schema names as parsed from the user's `search_path`;
/// `$user` stands for `current_user`), with the session's temporary schema and
/// `pg_catalog` searched first unless listed, and schemas without `USAGE` skipped.
/// Every distinct name as written gets an entry in
/// [`CatalogSnapshot::resolutions`]; relations are deduplicated by OID.
///
/// The read opens and commits its own transaction
/// (`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`) and rolls it back on error. A
/// client already inside a transaction block gets
/// [`CatalogError::AlreadyInTransaction`], its transaction left alone. No other task
/// may use the client while the read runs (its statements would join the read's
/// transaction), and if the returned future is dropped before it completes, the
/// connection is left inside the read's transaction: roll it back or discard the
/// connection.
// INV: SE-1 — every catalog object in these reads is schema-qualified and every user name is a parameter.
pub async fn read_snapshot(
    client: &Client,
    names: &[QualifiedName],
    user_search_path: &[String],
) -> Result<CatalogSnapshot, CatalogError> {
    read_snapshot_with(client, names, &[], user_search_path).await
}

/// [`read_snapshot`], also reading the facts of `objects` that are not relations
/// (types, schemas, publications, statistics objects) in the same snapshot: the
/// relations a statement on them locks without naming them.
pub async fn read_snapshot_with(
    client: &Client,
    names: &[QualifiedName],
    objects: &[ObjectRef],
    user_search_path: &[String],
) -> Result<CatalogSnapshot, CatalogError> {
    // A lock taken between a query's look at `pg_locks` and its deparsing makes that
    // query wait and give up (55P03); the next read sees the lock and does not wait.
    for _ in 1..READ_ATTEMPTS {
        match read_once(client, names, objects, user_search_path).await {
            Err(CatalogError::LockTimeout { .. }) => continue,
            other => return other,
        }
    }
    read_once(client, names, objects, user_search_path).await
}

/// The relation `name` denotes for a user whose `search_path` is `user_search_path`
/// (resolved as [`read_snapshot`] resolves it), with its `pg_class` basics (name,
/// kind) and none of the other facts: `Ok(None)` when no relation has that name. One
/// `REPEATABLE READ READ ONLY` transaction of four catalog queries, where a snapshot
/// takes fifteen; for a command that needs only the OID.
pub async fn resolve_relation(
    client: &Client,
    name: &QualifiedName,
    user_search_path: &[String],
) -> Result<Option<RelationFacts>, CatalogError> {
    let read = async {
        let session = server::read(client).await?;
        let resolved = resolve::resolve(
            client,
            &session,
            std::slice::from_ref(name),
            user_search_path,
        )
        .await?;
        if resolved.oids.is_empty() {
            return Ok(None);
        }
        Ok(relation::read(client, &resolved.oids)
            .await?
            .into_iter()
            .next())
    };
    transaction::within(client, read).await
}

/// How many times a read that met a lock taken meanwhile is tried.
const READ_ATTEMPTS: usize = 3;

async fn read_once(
    client: &Client,
    names: &[QualifiedName],
    objects: &[ObjectRef],
    user_search_path: &[String],
) -> Result<CatalogSnapshot, CatalogError> {
    transaction::within(
        client,
        read_in_transaction(client, names, objects, user_search_path),
    )
    .await
}

async fn read_in_transaction(
    client: &Client,
    names: &[QualifiedName],
    objects: &[ObjectRef],
    user_search_path: &[String],
) -> Result<CatalogSnapshot, CatalogError> {
    let session = server::read(client).await?;
    let resolved = resolve::resolve(client, &session, names, user_search_path).await?;
    let oids = resolved.oids.as_slice();
    let mut relations = if oids.is_empty() {
        Vec::new()
    } else {
        relation::read(client, oids).await?
    };
    let mut held = locks::read(client, oids).await?;
    let locked = held
        .iter()
        .filter(|(_, locks)| locks::blocks_size_functions(locks))
        .map(|(oid, _)| *oid)
        .collect();
    let mut volumes = sizes::read(client, oids, &locked).await?;
    let partitioned = oids_where(&relations, |r| r.kind == RelationKind::PartitionedTable);
    let mut partitions = group(relation::partitions(client, &partitioned).await?);
    let columns = columns::read(client, oids).await?;
    let mut constraints = constraints::read(client, oids, &columns).await?;
    let mut schema_names = constraints::read_schema_names(client, oids).await?;
    let mut indexes = group(indexes::read(client, oids).await?);
    let mut triggers = group(triggers::read(client, oids).await?);
    let mut foreign_keys_in = group(foreign_keys::read_incoming(client, oids).await?);
    let mut views = group(views::read(client, oids).await?);
    let publishable = oids_where(&relations, |r| {
        r.kind.is_table() && r.persistence == Persistence::Permanent
    });
    let mut publications =
        group(publications::read(client, &publishable, session.server.version_num).await?);
    let mut related = related::read_for_relations(client, oids).await?;
    let requested = objects;
    let objects = related::read_objects(
        client,
        requested,
        user_search_path,
        &session.current_user,
        session.server.version_num,
    )
    .await?;
    let function_names: Vec<QualifiedName> = requested
        .iter()
        .filter(|o| o.class == ObjectClass::Function)
        .map(|o| o.name.clone())
        .collect();
    let functions = functions::read(
        client,
        &function_names,
        &related::search_path_names(user_search_path, &session.current_user),
    )
    .await?;
    let mut columns = group(
        columns
            .into_iter()
            .map(|column| (column.relid, column.facts))
            .collect(),
    );

    for relation in &mut relations {
        let oid = relation.oid;
        if let Some(volume) = volumes.remove(&oid) {
            relation.sizes = volume.sizes;
            relation.row_estimate = volume.row_estimate;
            relation.sizes_estimated = volume.estimated;
        }
        relation.locks_elsewhere = held.remove(&oid).unwrap_or_default();
        relation.partitions = partitions.remove(&oid).unwrap_or_default();
        relation.columns = columns.remove(&oid).unwrap_or_default();
        if let Some(set) = constraints.remove(&oid) {
            relation.constraints = set.constraints;
            relation.primary_key = set.primary_key;
            relation.foreign_keys_out = set.foreign_keys_out;
        }
        relation.schema_constraint_names = schema_names.remove(&oid).unwrap_or_default();
        relation.indexes = indexes.remove(&oid).unwrap_or_default();
        relation.triggers = triggers.remove(&oid).unwrap_or_default();
        relation.foreign_keys_in = foreign_keys_in.remove(&oid).unwrap_or_default();
        relation.dependent_views = views.remove(&oid).unwrap_or_default();
        relation.publications = publications.remove(&oid).unwrap_or_default();
        relation.related = related.remove(&oid).unwrap_or_default();
    }
    Ok(CatalogSnapshot {
        server: session.server,
        relations,
        resolutions: resolved.resolutions,
        objects,
        functions,
    })
}

/// The OIDs of the relations that satisfy `wanted`.
fn oids_where(relations: &[RelationFacts], wanted: impl Fn(&RelationFacts) -> bool) -> Vec<u32> {
    relations
        .iter()
        .filter(|relation| wanted(relation))
        .map(|relation| relation.oid)
        .collect()
}

/// Groups (OID, item) pairs by OID, keeping their order.
fn group<T>(items: Vec<(u32, T)>) -> HashMap<u32, Vec<T>> {
    let mut groups: HashMap<u32, Vec<T>> = HashMap::new();
    for (oid, item) in items {
        groups.entry(oid).or_default().push(item);
    }
    groups
}
