//! Invalid indexes around `CREATE INDEX CONCURRENTLY`.
//!
//! A concurrent build that fails or is interrupted leaves an index marked invalid
//! under the name it was building. pgshift identifies indexes by OID: before each
//! attempt it records which index (if any) holds the name; after a failed attempt, an
//! invalid index under that name whose OID is new was left by that attempt, and is
//! dropped (`DROP INDEX CONCURRENTLY`, after checking the name still denotes that
//! OID) before the build is tried again. An invalid index that was there before pgshift
//! started is someone else's: it is reported, never dropped.

use tokio_postgres::Client;

use crate::exec::errors::Failure;
use pgshift_sql::ast::IndexStmt;
use pgshift_sql::{quote_ident, NodeEnum};

/// The index a concurrent build creates, found by name in its table's schema.
#[derive(Clone, Debug)]
pub struct IndexGuard {
    /// The schema the index lives in (its table's).
    schema: String,
    /// The index name.
    name: String,
}

/// An index found under the guarded name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoundIndex {
    /// Its OID.
    pub oid: u32,
    /// `pg_index.indisvalid`.
    pub valid: bool,
}

impl IndexGuard {
    /// The guard for a step, when the step is a `CREATE INDEX CONCURRENTLY` with a
    /// name; the table's schema is resolved with the user's `search_path`.
    pub async fn for_step(
        client: &Client,
        sql: &str,
        search_path: &[String],
    ) -> Result<Option<IndexGuard>, Failure> {
        let Ok(statements) = pgshift_sql::parse(sql) else {
            return Ok(None);
        };
        let Some(NodeEnum::IndexStmt(index)) = statements.first().map(|s| &s.node) else {
            return Ok(None);
        };
        if !index.concurrent || index.idxname.is_empty() {
            return Ok(None);
        }
        let schema = table_schema(client, index, search_path).await?;
        Ok(schema.map(|schema| IndexGuard {
            schema,
            name: index.idxname.clone(),
        }))
    }

    /// The qualified name, quoted.
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name))
    }

    /// Why a build is not run when an invalid index `oid` already holds the name.
    pub fn in_the_way(&self, oid: u32) -> String {
        format!(
            "an invalid index {} (OID {oid}) already exists, left by an earlier failed or interrupted build; check it, drop it with DROP INDEX CONCURRENTLY {}, and run again",
            self.qualified(),
            self.qualified()
        )
    }

    /// The index currently holding the name, if any.
    pub async fn find(&self, client: &Client) -> Result<Option<FoundIndex>, Failure> {
        let row = client
            .query_opt(
                "SELECT c.oid, i.indisvalid \
                   FROM pg_catalog.pg_class c \
                   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                   JOIN pg_catalog.pg_index i ON i.indexrelid OPERATOR(pg_catalog.=) c.oid \
                  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text \
                    AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
                &[&self.schema, &self.name],
            )
            .await
            .map_err(|e| Failure::of(&e))?;
        Ok(row.map(|row| FoundIndex {
            oid: row.get::<_, u32>(0),
            valid: row.get::<_, bool>(1),
        }))
    }

    /// Drops the invalid index `left` by a failed attempt, after checking that the
    /// name still denotes that OID and that it is still invalid.
    pub async fn drop_leftover(&self, client: &Client, left: FoundIndex) -> Result<(), Failure> {
        match self.find(client).await? {
            Some(now) if now == left && !now.valid => {}
            _ => return Ok(()),
        }
        client
            .batch_execute(&format!(
                "DROP INDEX CONCURRENTLY IF EXISTS {}",
                self.qualified()
            ))
            .await
            .map_err(|e| Failure::of(&e))?;
        Ok(())
    }
}

/// The schema of the table an index is built on.
async fn table_schema(
    client: &Client,
    index: &IndexStmt,
    search_path: &[String],
) -> Result<Option<String>, Failure> {
    let Some(relation) = &index.relation else {
        return Ok(None);
    };
    if !relation.schemaname.is_empty() {
        return Ok(Some(relation.schemaname.clone()));
    }
    let oid = regclass_under(client, &quote_ident(&relation.relname), search_path)
        .await
        .map_err(|error| Failure::of(&error))?;
    let Some(oid) = oid else { return Ok(None) };
    let row = client
        .query_opt(
            "SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_class c \
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
            &[&oid],
        )
        .await
        .map_err(|error| Failure::of(&error))?;
    Ok(row.map(|r| r.get::<_, String>(0)))
}

/// The OID a relation name (SQL text, quoted as needed) denotes with `search_path`
/// (empty: the session's own), found with `to_regclass`, which takes no lock.
pub(crate) async fn regclass_under(
    client: &Client,
    name: &str,
    search_path: &[String],
) -> Result<Option<u32>, tokio_postgres::Error> {
    let path = search_path
        .iter()
        .map(|s| quote_ident(s))
        .collect::<Vec<_>>()
        .join(", ");
    let lookup = async {
        client.batch_execute("BEGIN READ ONLY").await?;
        if !path.is_empty() {
            client
                .batch_execute(&format!("SET LOCAL search_path = {path}"))
                .await?;
        }
        let row = client
            .query_one(
                "SELECT pg_catalog.to_regclass($1::pg_catalog.text)::pg_catalog.oid",
                &[&name],
            )
            .await?;
        client.batch_execute("COMMIT").await?;
        Ok::<_, tokio_postgres::Error>(row.get::<_, Option<u32>>(0))
    };
    let result = lookup.await;
    if result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result
}
