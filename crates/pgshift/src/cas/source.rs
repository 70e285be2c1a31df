//! Everything copy-and-swap must carry from the source to the shadow, read in one
//! `REPEATABLE READ` snapshot: the table and its partitions, key, columns, indexes,
//! constraints, triggers (with enable states, on the parent and each partition),
//! foreign keys in and out, identity and owned sequences, grants, policies,
//! comments, storage parameters, publications, replica identity.
//!
//! Every catalog object is schema-qualified; names are parameters (INV: SE-1).

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use super::error::CasError;
use super::keys::{KeyColumn, KeySpec};
use pgshift_sql::QualifiedName;

/// A relation of the source tree (the table or one of its partitions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRelation {
    /// `pg_class.oid`.
    pub oid: u32,
    /// Schema-qualified name.
    pub name: QualifiedName,
    /// `relkind` (`r` or `p`).
    pub relkind: String,
    /// `relpersistence`.
    pub persistence: String,
    /// Storage parameters (`reloptions`, `name=value`).
    pub reloptions: Vec<String>,
}

/// A partition and its bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePartition {
    /// The partition.
    pub relation: SourceRelation,
    /// `pg_get_expr(relpartbound)` (`FOR VALUES …` or `DEFAULT`).
    pub bound: String,
    /// Grants on the partition itself (a partition can be granted to directly).
    #[serde(default)]
    pub grants: Vec<SourceGrant>,
    /// The partition's comment.
    #[serde(default)]
    pub comment: Option<String>,
}

/// A column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceColumn {
    /// Name.
    pub name: String,
    /// `format_type`.
    pub type_sql: String,
    /// `attgenerated` (`s`, `v`) or empty.
    pub generated: String,
    /// `attidentity` (`a`, `d`) or empty.
    pub identity: String,
    /// `attstattarget` when set explicitly.
    pub statistics: Option<i32>,
}

/// An index of the parent (a partitioned index on a partitioned table).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceIndex {
    /// `pg_class.oid`.
    pub oid: u32,
    /// Index name.
    pub name: String,
    /// `pg_get_indexdef`.
    pub definition: String,
    /// The constraint it backs, if any: `(name, contype, pg_get_constraintdef)`.
    pub constraint: Option<(String, String, String)>,
    /// Whether it is the primary key's index.
    pub primary: bool,
    /// `indisvalid`.
    pub valid: bool,
    /// Whether replica identity uses it.
    pub replica_identity: bool,
}

/// A constraint that is not backed by an index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceConstraint {
    /// Name.
    pub name: String,
    /// `contype` (`c`, `f`, `n`, `t`).
    pub kind: String,
    /// `pg_get_constraintdef`.
    pub definition: String,
    /// `convalidated`.
    pub validated: bool,
    /// Whether it is a foreign key referencing the table itself.
    #[serde(default)]
    pub references_self: bool,
    /// Its comment.
    #[serde(default)]
    pub comment: Option<String>,
}

/// A foreign key of another table referencing the source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncomingForeignKey {
    /// The referencing table.
    pub table: QualifiedName,
    /// Constraint name.
    pub name: String,
    /// `pg_get_constraintdef`.
    pub definition: String,
    /// Its comment.
    #[serde(default)]
    pub comment: Option<String>,
}

/// A user trigger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceTrigger {
    /// The relation it is defined on (the parent, or a partition for its own
    /// triggers and for clones whose enable state differs).
    pub on: QualifiedName,
    /// Trigger name.
    pub name: String,
    /// `pg_get_triggerdef` (empty for a clone, which is recreated by its parent's).
    pub definition: String,
    /// `tgenabled`.
    pub enabled: String,
    /// Whether it is a clone of a parent trigger.
    pub clone: bool,
    /// Its comment (a clone has its own).
    #[serde(default)]
    pub comment: Option<String>,
}

/// A sequence the source's values come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSequence {
    /// The column.
    pub column: String,
    /// The sequence (qualified).
    pub sequence: QualifiedName,
    /// Whether it is an identity column's sequence (else a `serial`-style owned one).
    pub identity: bool,
}

/// A grant on the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceGrant {
    /// Grantee role (`PUBLIC` for public).
    pub grantee: String,
    /// Privilege (`SELECT`, …).
    pub privilege: String,
    /// Column, for a column privilege.
    pub column: Option<String>,
    /// `WITH GRANT OPTION`.
    pub grantable: bool,
    /// The grantee is the table's owner: its own entry, present once the table has
    /// any grant (what it holds then need not be everything, and its grant options
    /// are listed).
    #[serde(default)]
    pub owner: bool,
}

/// A row-level security policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePolicy {
    /// Name.
    pub name: String,
    /// `polcmd` (`r`, `a`, `w`, `d`, `*`).
    pub command: String,
    /// `polpermissive`.
    pub permissive: bool,
    /// Role names (`public` for PUBLIC).
    pub roles: Vec<String>,
    /// `USING` expression.
    pub using: Option<String>,
    /// `WITH CHECK` expression.
    pub check: Option<String>,
    /// Its comment.
    #[serde(default)]
    pub comment: Option<String>,
}

/// The source as copy-and-swap sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFacts {
    /// The table.
    pub table: SourceRelation,
    /// Its owner.
    pub owner: String,
    /// `pg_get_partkeydef`, for a partitioned table.
    pub partition_key: Option<String>,
    /// Direct partitions.
    pub partitions: Vec<SourcePartition>,
    /// Whether some partition is itself partitioned.
    pub nested_partitions: bool,
    /// Columns in order (dropped columns omitted).
    pub columns: Vec<SourceColumn>,
    /// The primary key, when there is one.
    pub key: Option<KeySpec>,
    /// The primary key constraint's name.
    pub key_name: Option<String>,
    /// Whether the primary key is deferrable (the copy cannot use it to skip rows the
    /// shadow already has).
    #[serde(default)]
    pub key_deferrable: bool,
    /// Indexes of the parent.
    pub indexes: Vec<SourceIndex>,
    /// Constraints without an index.
    pub constraints: Vec<SourceConstraint>,
    /// Foreign keys referencing the source.
    pub incoming: Vec<IncomingForeignKey>,
    /// User triggers.
    pub triggers: Vec<SourceTrigger>,
    /// Identity and owned sequences.
    pub sequences: Vec<SourceSequence>,
    /// Grants.
    pub grants: Vec<SourceGrant>,
    /// Policies.
    pub policies: Vec<SourcePolicy>,
    /// Row-level security enabled / forced.
    pub rls: (bool, bool),
    /// The table's comment.
    pub comment: Option<String>,
    /// `relreplident`.
    pub replica_identity: String,
    /// Publications naming the table explicitly.
    pub publications: Vec<String>,
    /// Materialized views that depend on the table.
    pub dependent_matviews: Vec<QualifiedName>,
    /// Views that depend on views that depend on the table.
    pub nested_views: bool,
    /// What ties the table to others in ways the swap does not carry: it is a
    /// partition or an inheritance child, it has inheritance (non-partition) children,
    /// it has rules, objects (functions, other tables' columns) use its row type. Empty
    /// when nothing.
    #[serde(default)]
    pub uncarried: Vec<String>,
    /// A fingerprint of the shape, compared again at the swap.
    pub fingerprint: String,
    /// What creating the shadow found must be carried through the swap (filled in
    /// when the shadow is created; empty before).
    #[serde(default)]
    pub carry: super::plan::Carry,
}

fn db(what: &str) -> impl FnOnce(tokio_postgres::Error) -> CasError + '_ {
    move |e| CasError::db(what, e)
}

/// Reads the facts of the table with OID `oid` in one snapshot.
pub async fn read(client: &Client, oid: u32) -> Result<SourceFacts, CasError> {
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(db("starting the source read"))?;
    let result = read_in_snapshot(client, oid).await;
    let _ = client.batch_execute("COMMIT").await;
    result
}

async fn relation(client: &Client, oid: u32) -> Result<SourceRelation, CasError> {
    let row = client
        .query_one(
            "SELECT c.oid, n.nspname::pg_catalog.text, c.relname::pg_catalog.text, c.relkind::pg_catalog.text, \
                    c.relpersistence::pg_catalog.text, coalesce(c.reloptions, '{}')::pg_catalog.text[] \
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[&oid],
        )
        .await
        .map_err(db("reading the table"))?;
    Ok(SourceRelation {
        oid: row.get(0),
        name: QualifiedName::qualified(row.get::<_, String>(1), row.get::<_, String>(2)),
        relkind: row.get(3),
        persistence: row.get(4),
        reloptions: row.get(5),
    })
}

async fn read_in_snapshot(client: &Client, oid: u32) -> Result<SourceFacts, CasError> {
    let table = relation(client, oid).await?;
    let row = client
        .query_one(
            "SELECT pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text, \
                    CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'p' THEN pg_catalog.pg_get_partkeydef(c.oid) END, \
                    c.relrowsecurity, c.relforcerowsecurity, \
                    pg_catalog.obj_description(c.oid, 'pg_class'), c.relreplident::pg_catalog.text \
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[&oid],
        )
        .await
        .map_err(db("reading the table"))?;
    let owner: String = row.get(0);
    let partition_key: Option<String> = row.get(1);
    let rls = (row.get::<_, bool>(2), row.get::<_, bool>(3));
    let comment: Option<String> = row.get(4);
    let replica_identity: String = row.get(5);

    let partitions = partitions(client, oid).await?;
    let nested_partitions = partitions.iter().any(|p| p.relation.relkind == "p");
    let columns = columns(client, oid).await?;
    let (key, key_name, key_deferrable) = primary_key(client, oid).await?;
    let indexes = indexes(client, oid).await?;
    let constraints = constraints(client, oid).await?;
    let incoming = incoming(client, oid).await?;
    let mut relations: Vec<u32> = vec![oid];
    relations.extend(partitions.iter().map(|p| p.relation.oid));
    let triggers = triggers(client, &relations).await?;
    let sequences = sequences(client, oid).await?;
    let grants = grants(client, oid).await?;
    let policies = policies(client, oid).await?;
    let publications = publications(client, oid).await?;
    let (dependent_matviews, nested_views) = views(client, oid).await?;
    let fingerprint = fingerprint(client, &relations).await?;
    let uncarried = uncarried(client, oid).await?;
    Ok(SourceFacts {
        table,
        owner,
        partition_key,
        partitions,
        nested_partitions,
        columns,
        key,
        key_name,
        key_deferrable,
        indexes,
        constraints,
        incoming,
        triggers,
        sequences,
        grants,
        policies,
        rls,
        comment,
        replica_identity,
        publications,
        dependent_matviews,
        nested_views,
        uncarried,
        fingerprint,
        carry: super::plan::Carry::default(),
    })
}

/// Ties of the table that the swap would not carry over (see [`SourceFacts::uncarried`]).
async fn uncarried(client: &Client, oid: u32) -> Result<Vec<String>, CasError> {
    let row = client
        .query_one(
            "SELECT c.relispartition, \
                    EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid OPERATOR(pg_catalog.=) c.oid), \
                    c.relkind OPERATOR(pg_catalog.<>) 'p' AND EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid), \
                    (SELECT pg_catalog.string_agg(r.rulename::pg_catalog.text, ', ' ORDER BY r.rulename) FROM pg_catalog.pg_rewrite r \
                      WHERE r.ev_class OPERATOR(pg_catalog.=) c.oid AND r.rulename OPERATOR(pg_catalog.<>) '_RETURN'), \
                    (SELECT pg_catalog.string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), ', ' \
                                                  ORDER BY pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)) \
                       FROM pg_catalog.pg_type t JOIN pg_catalog.pg_depend d \
                         ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass \
                        AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY[t.oid, t.typarray]) \
                        AND d.deptype OPERATOR(pg_catalog.=) 'n' \
                      WHERE t.oid OPERATOR(pg_catalog.=) c.reltype) \
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[&oid],
        )
        .await
        .map_err(db("reading the table's ties"))?;
    let mut out = Vec::new();
    if row.get::<_, bool>(0) {
        out.push("it is a partition (rewrite its partitioned table instead)".to_owned());
    } else if row.get::<_, bool>(1) {
        out.push("it inherits from another table".to_owned());
    }
    if row.get::<_, bool>(2) {
        out.push("other tables inherit from it".to_owned());
    }
    if let Some(rules) = row.get::<_, Option<String>>(3) {
        out.push(format!("it has rules ({rules})"));
    }
    // A row type belongs to its table's OID, not its name: after a swap these would
    // use the old table's row type, and the old table could not be dropped.
    if let Some(dependents) = row.get::<_, Option<String>>(4) {
        out.push(format!("objects use its row type ({dependents})"));
    }
    Ok(out)
}

async fn partitions(client: &Client, oid: u32) -> Result<Vec<SourcePartition>, CasError> {
    let rows = client
        .query(
            "SELECT i.inhrelid, pg_catalog.pg_get_expr(c.relpartbound, c.oid), pg_catalog.obj_description(c.oid, 'pg_class') \
               FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid \
              WHERE i.inhparent OPERATOR(pg_catalog.=) $1 ORDER BY c.relname",
            &[&oid],
        )
        .await
        .map_err(db("reading partitions"))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let child: u32 = row.get(0);
        out.push(SourcePartition {
            relation: relation(client, child).await?,
            bound: row.get::<_, Option<String>>(1).unwrap_or_default(),
            grants: grants(client, child).await?,
            comment: row.get(2),
        });
    }
    Ok(out)
}

async fn columns(client: &Client, oid: u32) -> Result<Vec<SourceColumn>, CasError> {
    let rows = client
        .query(
            "SELECT a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod), \
                    a.attgenerated::pg_catalog.text, a.attidentity::pg_catalog.text, \
                    NULLIF(a.attstattarget::pg_catalog.int4, -1) \
               FROM pg_catalog.pg_attribute a \
              WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped \
              ORDER BY a.attnum",
            &[&oid],
        )
        .await
        .map_err(db("reading columns"))?;
    Ok(rows
        .iter()
        .map(|row| SourceColumn {
            name: row.get(0),
            type_sql: row.get(1),
            generated: row.get(2),
            identity: row.get(3),
            statistics: row.get(4),
        })
        .collect())
}

async fn primary_key(
    client: &Client,
    oid: u32,
) -> Result<(Option<KeySpec>, Option<String>, bool), CasError> {
    let rows = client
        .query(
            "SELECT con.conname::pg_catalog.text, a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod), con.condeferrable \
               FROM pg_catalog.pg_constraint con \
               CROSS JOIN LATERAL pg_catalog.unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord) \
               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) con.conrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum \
              WHERE con.conrelid OPERATOR(pg_catalog.=) $1 AND con.contype OPERATOR(pg_catalog.=) 'p' \
              ORDER BY k.ord",
            &[&oid],
        )
        .await
        .map_err(db("reading the primary key"))?;
    if rows.is_empty() {
        return Ok((None, None, false));
    }
    let name: String = rows[0].get(0);
    let deferrable: bool = rows[0].get(3);
    let columns = rows
        .iter()
        .map(|row| KeyColumn {
            name: row.get(1),
            type_sql: row.get(2),
        })
        .collect();
    let key = KeySpec::new(columns).map_err(|e| CasError::Record(e.to_string()))?;
    Ok((Some(key), Some(name), deferrable))
}

async fn indexes(client: &Client, oid: u32) -> Result<Vec<SourceIndex>, CasError> {
    let rows = client
        .query(
            "SELECT i.indexrelid, c.relname::pg_catalog.text, pg_catalog.pg_get_indexdef(i.indexrelid), \
                    con.conname::pg_catalog.text, con.contype::pg_catalog.text, \
                    CASE WHEN con.oid IS NOT NULL THEN pg_catalog.pg_get_constraintdef(con.oid) END, \
                    i.indisprimary, i.indisvalid, i.indisreplident \
               FROM pg_catalog.pg_index i \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid \
               LEFT JOIN pg_catalog.pg_constraint con ON con.conindid OPERATOR(pg_catalog.=) i.indexrelid \
                    AND con.conrelid OPERATOR(pg_catalog.=) i.indrelid AND con.contype OPERATOR(pg_catalog.=) ANY ('{p,u,x}') \
              WHERE i.indrelid OPERATOR(pg_catalog.=) $1 ORDER BY c.relname",
            &[&oid],
        )
        .await
        .map_err(db("reading indexes"))?;
    Ok(rows
        .iter()
        .map(|row| {
            let constraint = match (
                row.get::<_, Option<String>>(3),
                row.get::<_, Option<String>>(4),
                row.get::<_, Option<String>>(5),
            ) {
                (Some(name), Some(kind), Some(def)) => Some((name, kind, def)),
                _ => None,
            };
            SourceIndex {
                oid: row.get(0),
                name: row.get(1),
                definition: row.get(2),
                constraint,
                primary: row.get(6),
                valid: row.get(7),
                replica_identity: row.get(8),
            }
        })
        .collect())
}

async fn constraints(client: &Client, oid: u32) -> Result<Vec<SourceConstraint>, CasError> {
    let rows = client
        .query(
            "SELECT con.conname::pg_catalog.text, con.contype::pg_catalog.text, pg_catalog.pg_get_constraintdef(con.oid), con.convalidated, \
                    con.contype OPERATOR(pg_catalog.=) 'f' AND con.confrelid OPERATOR(pg_catalog.=) con.conrelid, \
                    pg_catalog.obj_description(con.oid, 'pg_constraint') \
               FROM pg_catalog.pg_constraint con \
              WHERE con.conrelid OPERATOR(pg_catalog.=) $1 AND con.contype OPERATOR(pg_catalog.<>) ALL ('{p,u,x}') \
                AND con.conparentid OPERATOR(pg_catalog.=) 0 \
              ORDER BY con.conname",
            &[&oid],
        )
        .await
        .map_err(db("reading constraints"))?;
    Ok(rows
        .iter()
        .map(|row| SourceConstraint {
            name: row.get(0),
            kind: row.get(1),
            definition: row.get(2),
            validated: row.get(3),
            references_self: row.get(4),
            comment: row.get(5),
        })
        .collect())
}

async fn incoming(client: &Client, oid: u32) -> Result<Vec<IncomingForeignKey>, CasError> {
    let rows = client
        .query(
            "SELECT n.nspname::pg_catalog.text, c.relname::pg_catalog.text, con.conname::pg_catalog.text, pg_catalog.pg_get_constraintdef(con.oid), \
                    pg_catalog.obj_description(con.oid, 'pg_constraint') \
               FROM pg_catalog.pg_constraint con \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) con.conrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE con.confrelid OPERATOR(pg_catalog.=) $1 AND con.contype OPERATOR(pg_catalog.=) 'f' \
                AND con.conparentid OPERATOR(pg_catalog.=) 0 AND con.conrelid OPERATOR(pg_catalog.<>) $1 \
              ORDER BY 1, 2, 3",
            &[&oid],
        )
        .await
        .map_err(db("reading incoming foreign keys"))?;
    Ok(rows
        .iter()
        .map(|row| IncomingForeignKey {
            table: QualifiedName::qualified(row.get::<_, String>(0), row.get::<_, String>(1)),
            name: row.get(2),
            definition: row.get(3),
            comment: row.get(4),
        })
        .collect())
}

async fn triggers(client: &Client, relations: &[u32]) -> Result<Vec<SourceTrigger>, CasError> {
    let rows = client
        .query(
            "SELECT n.nspname::pg_catalog.text, c.relname::pg_catalog.text, t.tgname::pg_catalog.text, \
                    pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled::pg_catalog.text, \
                    t.tgparentid OPERATOR(pg_catalog.<>) 0, \
                    coalesce((SELECT p.tgenabled::pg_catalog.text FROM pg_catalog.pg_trigger p WHERE p.oid OPERATOR(pg_catalog.=) t.tgparentid), ''), \
                    pg_catalog.obj_description(t.oid, 'pg_trigger') \
               FROM pg_catalog.pg_trigger t \
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.tgrelid \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) \
                AND (NOT t.tgisinternal OR t.tgparentid OPERATOR(pg_catalog.<>) 0) \
                AND NOT EXISTS ( \
                    SELECT 1 FROM pg_catalog.pg_constraint con WHERE con.oid OPERATOR(pg_catalog.=) t.tgconstraint AND con.contype OPERATOR(pg_catalog.=) 'f') \
                AND t.tgname::pg_catalog.text !~ '^pgshift_' \
              ORDER BY (t.tgrelid OPERATOR(pg_catalog.=) ($1::pg_catalog.oid[])[1]) DESC, 1, 2, 3",
            &[&relations.to_vec()],
        )
        .await
        .map_err(db("reading triggers"))?;
    let mut out = Vec::new();
    for row in rows {
        let clone: bool = row.get(5);
        let enabled: String = row.get(4);
        let parent_enabled: String = row.get(6);
        let comment: Option<String> = row.get(7);
        if clone && enabled == parent_enabled && comment.is_none() {
            continue;
        }
        out.push(SourceTrigger {
            on: QualifiedName::qualified(row.get::<_, String>(0), row.get::<_, String>(1)),
            name: row.get(2),
            definition: if clone { String::new() } else { row.get(3) },
            enabled,
            clone,
            comment,
        });
    }
    Ok(out)
}

async fn sequences(client: &Client, oid: u32) -> Result<Vec<SourceSequence>, CasError> {
    let rows = client
        .query(
            "SELECT a.attname::pg_catalog.text, sn.nspname::pg_catalog.text, s.relname::pg_catalog.text, d.deptype OPERATOR(pg_catalog.=) 'i' \
               FROM pg_catalog.pg_depend d \
               JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) d.objid AND s.relkind OPERATOR(pg_catalog.=) 'S' \
               JOIN pg_catalog.pg_namespace sn ON sn.oid OPERATOR(pg_catalog.=) s.relnamespace \
               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid \
              WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                AND d.refobjid OPERATOR(pg_catalog.=) $1 AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}') \
              ORDER BY 1",
            &[&oid],
        )
        .await
        .map_err(db("reading sequences"))?;
    Ok(rows
        .iter()
        .map(|row| SourceSequence {
            column: row.get(0),
            sequence: QualifiedName::qualified(row.get::<_, String>(1), row.get::<_, String>(2)),
            identity: row.get(3),
        })
        .collect())
}

async fn grants(client: &Client, oid: u32) -> Result<Vec<SourceGrant>, CasError> {
    // In the ACL's own order (an entry's position is part of what `pg_dump` shows, and
    // the swap's GRANTs append in the order they run), the table's entries first.
    let rows = client
        .query(
            "SELECT grantee, privilege_type, attname, is_grantable, owner FROM ( \
             SELECT CASE WHEN acl.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(acl.grantee)::pg_catalog.text END AS grantee, \
                    acl.privilege_type, NULL::pg_catalog.text AS attname, acl.is_grantable, \
                    acl.grantee OPERATOR(pg_catalog.=) c.relowner AS owner, 0 AS attnum, acl.n \
               FROM pg_catalog.pg_class c \
              CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) WITH ORDINALITY AS acl(grantor, grantee, privilege_type, is_grantable, n) \
              WHERE c.oid OPERATOR(pg_catalog.=) $1 \
             UNION ALL \
             SELECT CASE WHEN acl.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(acl.grantee)::pg_catalog.text END, \
                    acl.privilege_type, a.attname::pg_catalog.text, acl.is_grantable, false, a.attnum, acl.n \
               FROM pg_catalog.pg_attribute a \
              CROSS JOIN LATERAL pg_catalog.aclexplode(a.attacl) WITH ORDINALITY AS acl(grantor, grantee, privilege_type, is_grantable, n) \
              WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped \
             ) g ORDER BY g.attnum, g.n",
            &[&oid],
        )
        .await
        .map_err(db("reading grants"))?;
    Ok(rows
        .iter()
        .map(|row| SourceGrant {
            grantee: row.get(0),
            privilege: row.get(1),
            column: row.get(2),
            grantable: row.get(3),
            owner: row.get(4),
        })
        .collect())
}

/// The row-level security policies of relation `oid`.
pub(crate) async fn policies(client: &Client, oid: u32) -> Result<Vec<SourcePolicy>, CasError> {
    let rows = client
        .query(
            "SELECT p.polname::pg_catalog.text, p.polcmd::pg_catalog.text, p.polpermissive, \
                    ARRAY(SELECT CASE WHEN r OPERATOR(pg_catalog.=) 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(r)::pg_catalog.text END \
                            FROM pg_catalog.unnest(p.polroles) r), \
                    pg_catalog.pg_get_expr(p.polqual, p.polrelid), pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), \
                    pg_catalog.obj_description(p.oid, 'pg_policy') \
               FROM pg_catalog.pg_policy p WHERE p.polrelid OPERATOR(pg_catalog.=) $1 ORDER BY 1",
            &[&oid],
        )
        .await
        .map_err(db("reading policies"))?;
    Ok(rows
        .iter()
        .map(|row| SourcePolicy {
            name: row.get(0),
            command: row.get(1),
            permissive: row.get(2),
            roles: row.get(3),
            using: row.get(4),
            check: row.get(5),
            comment: row.get(6),
        })
        .collect())
}

async fn publications(client: &Client, oid: u32) -> Result<Vec<String>, CasError> {
    let rows = client
        .query(
            "SELECT p.pubname::pg_catalog.text FROM pg_catalog.pg_publication_rel r \
               JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) r.prpubid \
              WHERE r.prrelid OPERATOR(pg_catalog.=) $1 ORDER BY 1",
            &[&oid],
        )
        .await
        .map_err(db("reading publications"))?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Materialized views on the table, and whether any view depends on a view that
/// depends on it (both are refused for now).
async fn views(client: &Client, oid: u32) -> Result<(Vec<QualifiedName>, bool), CasError> {
    let rows = client
        .query(
            "SELECT DISTINCT v.oid, n.nspname::pg_catalog.text, v.relname::pg_catalog.text, v.relkind::pg_catalog.text \
               FROM pg_catalog.pg_depend d \
               JOIN pg_catalog.pg_rewrite rw ON rw.oid OPERATOR(pg_catalog.=) d.objid \
               JOIN pg_catalog.pg_class v ON v.oid OPERATOR(pg_catalog.=) rw.ev_class \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) v.relnamespace \
              WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
                AND d.refobjid OPERATOR(pg_catalog.=) $1 AND v.oid OPERATOR(pg_catalog.<>) $1",
            &[&oid],
        )
        .await
        .map_err(db("reading dependent views"))?;
    let mut matviews = Vec::new();
    let mut nested = false;
    for row in &rows {
        let view: u32 = row.get(0);
        if row.get::<_, String>(3) == "m" {
            matviews.push(QualifiedName::qualified(
                row.get::<_, String>(1),
                row.get::<_, String>(2),
            ));
        }
        let deeper = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d \
                   JOIN pg_catalog.pg_rewrite rw ON rw.oid OPERATOR(pg_catalog.=) d.objid \
                  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass \
                    AND d.refobjid OPERATOR(pg_catalog.=) $1 AND rw.ev_class OPERATOR(pg_catalog.<>) $1)",
                &[&view],
            )
            .await
            .map_err(db("reading dependent views"))?;
        nested |= deeper.get::<_, bool>(0);
    }
    Ok((matviews, nested))
}

/// The fingerprint of the tree made of `relations` (the table first), now.
pub async fn fingerprint_of(client: &Client, relations: &[u32]) -> Result<String, CasError> {
    fingerprint(client, relations).await
}

/// The query behind [`fingerprint_of`], `$1` the relations' OIDs (the table first):
/// one row, one column, the digest.
pub const FINGERPRINT_SQL: &str = "SELECT pg_catalog.md5(pg_catalog.concat_ws('|', \
               (SELECT pg_catalog.string_agg(a.attrelid::pg_catalog.text || ':' || a.attname || ':' || a.atttypid::pg_catalog.text || ':' || a.atttypmod::pg_catalog.text || ':' || a.attnotnull::pg_catalog.text, ',' ORDER BY a.attrelid, a.attnum) \
                  FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped), \
               (SELECT pg_catalog.string_agg(i.indexrelid::pg_catalog.text, ',' ORDER BY i.indexrelid) FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(con.oid::pg_catalog.text || con.convalidated::pg_catalog.text, ',' ORDER BY con.oid) FROM pg_catalog.pg_constraint con WHERE con.conrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(t.oid::pg_catalog.text || t.tgenabled::pg_catalog.text, ',' ORDER BY t.oid) FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND t.tgname::pg_catalog.text !~ '^pgshift_'), \
               (SELECT pg_catalog.string_agg(inh.inhrelid::pg_catalog.text, ',' ORDER BY inh.inhrelid) FROM pg_catalog.pg_inherits inh WHERE inh.inhparent OPERATOR(pg_catalog.=) ($1::pg_catalog.oid[])[1]), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', c.oid, c.relacl, c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.reloptions, c.relowner, \
                       pg_catalog.obj_description(c.oid, 'pg_class')), ',' ORDER BY c.oid) FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', a.attrelid, a.attnum, a.attacl, a.attstattarget), ',' ORDER BY a.attrelid, a.attnum) \
                  FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', pol.oid, pg_catalog.obj_description(pol.oid, 'pg_policy')), ',' ORDER BY pol.oid) \
                  FROM pg_catalog.pg_policy pol WHERE pol.polrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', i.indexrelid, ic.reltablespace, i.indisclustered, i.indisreplident, \
                       pg_catalog.obj_description(i.indexrelid, 'pg_class')), ',' ORDER BY i.indexrelid) \
                  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
                 WHERE i.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', con.oid, pg_catalog.obj_description(con.oid, 'pg_constraint')), ',' ORDER BY con.oid) \
                  FROM pg_catalog.pg_constraint con WHERE con.conrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', t.oid, pg_catalog.obj_description(t.oid, 'pg_trigger')), ',' ORDER BY t.oid) \
                  FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND t.tgname::pg_catalog.text !~ '^pgshift_'), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', c.oid, c.reltablespace, tc.reloptions), ',' ORDER BY c.oid) \
                  FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_class tc ON tc.oid OPERATOR(pg_catalog.=) c.reltoastrelid \
                 WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', a.attrelid, a.attnum, a.attoptions, pg_catalog.col_description(a.attrelid, a.attnum)), ',' ORDER BY a.attrelid, a.attnum) \
                  FROM pg_catalog.pg_attribute a WHERE a.attrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', st.oid, st.stxname, st.stxstattarget, pg_catalog.obj_description(st.oid, 'pg_statistic_ext')), ',' ORDER BY st.oid) \
                  FROM pg_catalog.pg_statistic_ext st WHERE st.stxrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])), \
               (SELECT pg_catalog.string_agg(pg_catalog.concat_ws(':', pr.prrelid, pr.prpubid), ',' ORDER BY pr.prrelid, pr.prpubid) \
                  FROM pg_catalog.pg_publication_rel pr WHERE pr.prrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]))))";

/// A digest of the tree's shape (columns, indexes, constraints, triggers, partitions)
/// and of what the swap carries over (grants, row security, policies, replica
/// identity, storage parameters of the tables and their TOAST tables, tablespaces,
/// owner, comments on everything, statistics targets and column options, clustered
/// indexes, extended statistics, publication membership): anything that changes it
/// between preflight and the swap makes the swap refuse.
async fn fingerprint(client: &Client, relations: &[u32]) -> Result<String, CasError> {
    let row = client
        .query_one(FINGERPRINT_SQL, &[&relations.to_vec()])
        .await
        .map_err(db("fingerprinting the table"))?;
    Ok(row.get(0))
}
