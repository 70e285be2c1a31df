//! What the live database says about procedural code's traced effects: whether the
//! tables it locks strongly or rewrites hold rows, and a fingerprint of the schema, read
//! before the clone is dumped and again once the trace is judged (an expansion made on
//! a clone of a schema that has changed since is not used).

use tokio_postgres::Client;

use pgshift_sql::QualifiedName;

/// A hash of every user relation's columns (types, defaults, generation expressions,
/// nullability), constraints, indexes and triggers. No relation lock is taken:
/// everything is read from the catalogs with the `pg_get_*` functions that read
/// them without opening the relation.
const FINGERPRINT: &str = "
SELECT pg_catalog.md5(COALESCE(pg_catalog.string_agg(line, E'\\n' ORDER BY line), ''))
FROM (
    SELECT pg_catalog.format('col %s.%s %s %s %s %s %s', n.nspname, c.relname, a.attnum, a.attname,
               pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull::text || a.attgenerated::text,
               pg_catalog.pg_get_expr(d.adbin, d.adrelid)) AS line
    FROM pg_catalog.pg_attribute a
    JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift') AND n.nspname NOT LIKE 'pg_toast%'
    UNION ALL
    SELECT pg_catalog.format('con %s.%s %s %s', n.nspname, c.relname, o.conname, pg_catalog.pg_get_constraintdef(o.oid))
    FROM pg_catalog.pg_constraint o
    JOIN pg_catalog.pg_class c ON c.oid = o.conrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift')
    UNION ALL
    SELECT pg_catalog.format('idx %s.%s %s', n.nspname, c.relname, pg_catalog.pg_get_indexdef(i.indexrelid))
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift') AND n.nspname NOT LIKE 'pg_toast%'
    UNION ALL
    SELECT pg_catalog.format('trg %s.%s %s %s', n.nspname, c.relname, t.tgname, t.tgenabled)
    FROM pg_catalog.pg_trigger t
    JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT t.tgisinternal AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift')
) lines";

/// The schema's fingerprint.
pub async fn fingerprint(client: &Client) -> Result<String, tokio_postgres::Error> {
    let row = client.query_one(FINGERPRINT, &[]).await?;
    row.try_get(0)
}

/// The tables of `tables` that hold rows: a table (or, for a partitioned table, any
/// of its partitions) with any page on disk. A table whose rows were all deleted
/// counts until `VACUUM` or `TRUNCATE` gives its pages back; a table that is gone
/// here (created earlier in the same input) holds none. `pg_relation_size` takes
/// ACCESS SHARE, under the session's `lock_timeout`.
pub async fn populated(
    client: &Client,
    tables: &[QualifiedName],
) -> Result<Vec<QualifiedName>, tokio_postgres::Error> {
    let mut out = Vec::new();
    for table in tables {
        let row = client
            .query_one(
                // `pg_partition_tree` lists nothing for a table that is not partitioned
                // and not a partition: the table itself is added.
                "SELECT COALESCE(pg_catalog.sum(pg_catalog.pg_relation_size(t.r)), 0)::bigint \
                 FROM (SELECT pg_catalog.to_regclass($1) AS r \
                       UNION SELECT relid FROM pg_catalog.pg_partition_tree(pg_catalog.to_regclass($1))) t \
                 WHERE t.r IS NOT NULL",
                &[&table.to_string()],
            )
            .await?;
        let bytes: i64 = row.try_get(0)?;
        if bytes > 0 {
            out.push(table.clone());
        }
    }
    Ok(out)
}
