//! The recorders installed in the clone and the queries that read them back.
//!
//! Three event triggers write into tables of the `pgshift_trace` schema:
//! `ddl_command_end` (each command of `pg_event_trigger_ddl_commands()`), `sql_drop`
//! (each object `pg_event_trigger_dropped_objects()` names, or drops through CASCADE)
//! and `table_rewrite` (the table and PostgreSQL's reason bits). Event triggers fire
//! for nested commands too (`EXECUTE` in a `DO` block, a function's DDL), so these see
//! through procedural code. Their functions run with `pg_stat_statements.track =
//! none`, so their own inserts are not counted as the statement's nested work.
//!
//! Everything here is constant SQL with fully qualified names: a traced statement's
//! `SET search_path` cannot redirect it.

use std::collections::BTreeMap;

use pgshift_sql::{quote_ident, QualifiedName};
use tokio_postgres::Client;

use super::error::{probe, TraceError};
use super::types::{NestedStatement, TracedDdl, TracedLock};
use crate::lock::LockMode;

/// Tables and functions, `{track}` replaced by the functions' `SET` clause.
const RECORDERS: &str = r#"
CREATE TABLE pgshift_trace.ddl (
    seq bigserial, command_tag text, object_type text, object_identity text, dropped boolean);
CREATE TABLE pgshift_trace.rewrites (
    seq bigserial, schema_name text, table_name text, reason integer);
CREATE TABLE pgshift_trace.executed (seq bigserial, statement_text text);
CREATE FUNCTION pgshift_trace.log(statement_text text) RETURNS text LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp {track} AS $fn$
BEGIN
    -- What a trigger's function runs is not its caller's own statement.
    IF pg_catalog.pg_trigger_depth() = 0 THEN
        INSERT INTO pgshift_trace.executed (statement_text) VALUES (statement_text);
    END IF;
    RETURN statement_text;
END $fn$;
CREATE FUNCTION pgshift_trace.on_ddl() RETURNS event_trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp {track} AS $fn$
BEGIN
    INSERT INTO pgshift_trace.ddl (command_tag, object_type, object_identity, dropped)
    SELECT command_tag, object_type, COALESCE(object_identity, ''), false
    FROM pg_catalog.pg_event_trigger_ddl_commands();
END $fn$;
CREATE FUNCTION pgshift_trace.on_drop() RETURNS event_trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp {track} AS $fn$
BEGIN
    INSERT INTO pgshift_trace.ddl (command_tag, object_type, object_identity, dropped)
    SELECT TG_TAG, object_type, COALESCE(object_identity, ''), true
    FROM pg_catalog.pg_event_trigger_dropped_objects()
    WHERE original OR normal;
END $fn$;
CREATE FUNCTION pgshift_trace.on_rewrite() RETURNS event_trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp {track} AS $fn$
BEGIN
    INSERT INTO pgshift_trace.rewrites (schema_name, table_name, reason)
    SELECT n.nspname, c.relname, pg_catalog.pg_event_trigger_table_rewrite_reason()
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = pg_catalog.pg_event_trigger_table_rewrite_oid();
END $fn$;
CREATE EVENT TRIGGER pgshift_trace_ddl ON ddl_command_end
    EXECUTE FUNCTION pgshift_trace.on_ddl();
CREATE EVENT TRIGGER pgshift_trace_drop ON sql_drop
    EXECUTE FUNCTION pgshift_trace.on_drop();
CREATE EVENT TRIGGER pgshift_trace_rewrite ON table_rewrite
    EXECUTE FUNCTION pgshift_trace.on_rewrite();
"#;

/// The function an instrumented `DO` block or function calls with each statement it
/// is about to execute (not logged inside a trigger) ([`pgshift_sql::DoBlock::instrument`]).
pub(crate) const LOG_FUNCTION: &str = "pgshift_trace.log";

/// Relations of the recorders (and system catalogs, OIDs below 16384, PostgreSQL's
/// `FirstNormalObjectId`) are not the statement's.
const USER_RELATION: &str = "c.oid >= 16384 AND n.nspname <> 'pgshift_trace'";

/// Installs the recorders; with `nested`, also `pg_stat_statements` (into the
/// recorders' schema unless the restored schema already has it) and returns the
/// schema its view is in.
pub(crate) async fn install(client: &Client, nested: bool) -> Result<Option<String>, TraceError> {
    let track = if nested {
        "SET pg_stat_statements.track = 'none'"
    } else {
        ""
    };
    client
        .batch_execute("CREATE SCHEMA pgshift_trace")
        .await
        .map_err(probe)?;
    // The extension first: the event triggers must not record the tracer's own DDL.
    if nested {
        client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA pgshift_trace")
            .await
            .map_err(probe)?;
    }
    client
        .batch_execute(&RECORDERS.replace("{track}", track))
        .await
        .map_err(probe)?;
    if !nested {
        return Ok(None);
    }
    let row = client
        .query_one(
            "SELECT n.nspname FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'pg_stat_statements'",
            &[],
        )
        .await
        .map_err(probe)?;
    Ok(Some(row.get(0)))
}

/// A user relation's name, kind and file node, by OID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub name: QualifiedName,
    pub relkind: String,
    pub filenode: Option<u32>,
}

/// Every user relation with its file node (`None` for relations without storage).
pub(crate) async fn storage(client: &Client) -> Result<BTreeMap<u32, Stored>, TraceError> {
    let sql = format!(
        "SELECT c.oid, n.nspname, c.relname, c.relkind::text, \
                pg_catalog.pg_relation_filenode(c.oid) \
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE {USER_RELATION}"
    );
    let rows = client.query(&sql, &[]).await.map_err(probe)?;
    Ok(rows
        .iter()
        .map(|row| {
            let oid: u32 = row.get(0);
            let stored = Stored {
                name: QualifiedName::qualified(row.get::<_, String>(1), row.get::<_, String>(2)),
                relkind: row.get(3),
                filenode: row.get(4),
            };
            (oid, stored)
        })
        .collect())
}

/// The relation locks this session holds now, one entry per relation. A relation the
/// statement dropped (or a TOAST table a rewrite replaced) is named as it was before
/// the statement; one created and dropped within it (a rewrite's transient table) is
/// left out.
pub(crate) async fn locks(
    client: &Client,
    before: &BTreeMap<u32, Stored>,
) -> Result<Vec<TracedLock>, TraceError> {
    let sql = "SELECT l.relation, n.nspname, c.relname, c.relkind::text, l.mode, \
                own.nspname, own.relname, par.nspname, par.relname \
         FROM pg_catalog.pg_locks l \
         LEFT JOIN pg_catalog.pg_class c ON c.oid = l.relation \
         LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN LATERAL ( \
             SELECT tn.nspname, t.relname FROM pg_catalog.pg_class t \
             JOIN pg_catalog.pg_namespace tn ON tn.oid = t.relnamespace \
             WHERE t.oid = (SELECT x.indrelid FROM pg_catalog.pg_index x WHERE x.indexrelid = c.oid) \
                OR (c.relkind = 't' AND t.reltoastrelid = c.oid) \
             LIMIT 1) own ON true \
         LEFT JOIN LATERAL ( \
             SELECT pn.nspname, p.relname FROM pg_catalog.pg_inherits h \
             JOIN pg_catalog.pg_class p ON p.oid = h.inhparent \
             JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace \
             WHERE h.inhrelid = c.oid ORDER BY h.inhseqno LIMIT 1) par ON true \
         WHERE l.locktype = 'relation' AND l.granted AND l.pid = pg_catalog.pg_backend_pid() \
           AND l.database = (SELECT oid FROM pg_catalog.pg_database \
                             WHERE datname = pg_catalog.current_database()) \
           AND l.relation >= 16384 \
           AND (c.oid IS NULL OR (n.nspname <> 'pgshift_trace' \
                                  AND own.nspname IS DISTINCT FROM 'pgshift_trace'))";
    let rows = client.query(sql, &[]).await.map_err(probe)?;
    let mut by_oid: BTreeMap<u32, TracedLock> = BTreeMap::new();
    for row in &rows {
        let oid: u32 = row.get(0);
        let Some(mode) = LockMode::from_pg_locks_name(row.get(4)) else {
            continue;
        };
        let pair = |schema: Option<String>, name: Option<String>| {
            schema
                .zip(name)
                .map(|(s, n)| QualifiedName::qualified(s, n))
        };
        let (relation, relkind, gone) = match pair(row.get(1), row.get(2)) {
            Some(name) => (
                name,
                row.get::<_, Option<String>>(3).unwrap_or_default(),
                false,
            ),
            None => match before.get(&oid) {
                Some(stored) => (stored.name.clone(), stored.relkind.clone(), true),
                None => continue,
            },
        };
        let lock = by_oid.entry(oid).or_insert_with(|| TracedLock {
            relation,
            kind: relkind_name(&relkind),
            mode,
            modes: Vec::new(),
            owner: pair(row.get(5), row.get(6)),
            parent: pair(row.get(7), row.get(8)),
            created: !before.contains_key(&oid),
            gone,
        });
        if !lock.modes.contains(&mode) {
            lock.modes.push(mode);
            lock.modes.sort();
        }
        lock.mode = lock.mode.max(mode);
    }
    let mut locks: Vec<TracedLock> = by_oid.into_values().collect();
    locks.sort_by(|a, b| (&a.relation, a.created).cmp(&(&b.relation, b.created)));
    Ok(locks)
}

/// The commands and rewrites recorded since the last call, removed as they are read.
pub(crate) async fn drain(
    client: &Client,
) -> Result<(Vec<TracedDdl>, Vec<(QualifiedName, i32)>), TraceError> {
    let ddl = client
        .query(
            "WITH d AS (DELETE FROM pgshift_trace.ddl RETURNING *) \
             SELECT command_tag, object_type, object_identity, dropped FROM d ORDER BY seq",
            &[],
        )
        .await
        .map_err(probe)?
        .iter()
        .map(|row| TracedDdl {
            command_tag: row.get(0),
            object_type: row.get(1),
            object_identity: row.get(2),
            dropped: row.get(3),
        })
        .collect();
    let rewrites = client
        .query(
            "WITH r AS (DELETE FROM pgshift_trace.rewrites RETURNING *) \
             SELECT schema_name, table_name, reason FROM r ORDER BY seq",
            &[],
        )
        .await
        .map_err(probe)?
        .iter()
        .map(|row| {
            let name = QualifiedName::qualified(row.get::<_, String>(0), row.get::<_, String>(1));
            (name, row.get::<_, i32>(2))
        })
        .collect();
    Ok((ddl, rewrites))
}

/// The statements an instrumented block logged since the last call, in order, removed
/// as they are read.
pub(crate) async fn drain_executed(client: &Client) -> Result<Vec<String>, TraceError> {
    Ok(client
        .query(
            "WITH e AS (DELETE FROM pgshift_trace.executed RETURNING *) \
             SELECT statement_text FROM e ORDER BY seq",
            &[],
        )
        .await
        .map_err(probe)?
        .iter()
        .map(|row| row.get(0))
        .collect())
}

/// Forgets every statement `pg_stat_statements` counted so far.
pub(crate) async fn reset_nested(client: &Client, schema: &str) -> Result<(), TraceError> {
    let sql = format!("SELECT {}.pg_stat_statements_reset()", quote_ident(schema));
    client.batch_execute(&sql).await.map_err(probe)
}

/// The statements run below the top level in this database since the last reset.
pub(crate) async fn nested(
    client: &Client,
    schema: &str,
) -> Result<Vec<NestedStatement>, TraceError> {
    let sql = format!(
        "SELECT query, calls FROM {}.pg_stat_statements \
         WHERE NOT toplevel AND dbid = (SELECT oid FROM pg_catalog.pg_database \
                                        WHERE datname = pg_catalog.current_database()) \
         ORDER BY query",
        quote_ident(schema)
    );
    let rows = client.query(&sql, &[]).await.map_err(probe)?;
    Ok(rows
        .iter()
        .map(|row| NestedStatement {
            text: row.get(0),
            calls: row.get(1),
        })
        .collect())
}

/// `pg_class.relkind` in words.
fn relkind_name(relkind: &str) -> &'static str {
    match relkind {
        "r" => "table",
        "p" => "partitioned-table",
        "i" => "index",
        "I" => "partitioned-index",
        "t" => "toast",
        "S" => "sequence",
        "v" => "view",
        "m" => "materialized-view",
        "f" => "foreign-table",
        _ => "other",
    }
}

/// PostgreSQL's `table_rewrite` reason bits (`AT_REWRITE_*` in `event_trigger.h`).
pub(crate) fn rewrite_reasons(bits: i32) -> Vec<&'static str> {
    let named = [
        (0x01, "persistence"),
        (0x02, "default-value"),
        (0x04, "column-rewrite"),
        (0x08, "access-method"),
    ];
    let mut reasons: Vec<&'static str> = named
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if reasons.is_empty() {
        reasons.push("unspecified");
    }
    reasons
}
