//! The swap's reads, prepared before its lock and made under it all at once.
//!
//! Every round trip under ACCESS EXCLUSIVE lengthens the hold, and under load each
//! costs more than the work it carries (the server's cores are busy with the writers
//! the lock holds up). So the statements are prepared before `BEGIN`, in one round
//! trip outside the lock, and every read under the lock (the backlog, the capture
//! check, the fingerprint, the dependent views, what the renames need, the first
//! batch of the change log) is sent together, behind the `LOCK TABLE` itself: one
//! round trip, which the server answers as soon as it grants the lock. A prepared statement
//! is parsed again if the catalog changed since, so names are still resolved under
//! the lock.

use futures_util::future::try_join_all;
use tokio_postgres::{Client, Row, Statement};

use super::renames::{self, Children, ChildrenOf};
use super::views::{self, View};
use super::{CasError, RunPlan};
use crate::cas::applier::{Applier, DrainStatements, Drained};
use crate::cas::capture::{self, Breach};
use crate::cas::source;
use pgshift_sql::QualifiedName;

/// Statements bound after this in a transaction use their cached generic plan
/// (made at their first execution) rather than a plan for their parameters: every
/// statement the swap runs under its lock is planned before it
/// ([`SwapQueries::plan`]).
pub(super) const GENERIC_PLANS: &str = "SET LOCAL plan_cache_mode = force_generic_plan";

/// Entries read from the change log per statement under the lock.
pub(super) const DRAIN_LIMIT: i64 = 5_000;

/// The indexes of the source tree (`$1`: the relations' OIDs).
const SOURCE_INDEXES_SQL: &str =
    "SELECT n.nspname::pg_catalog.text, ic.relname::pg_catalog.text FROM pg_catalog.pg_index i \
   JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) ic.relnamespace \
  WHERE i.indrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) ORDER BY i.indexrelid";

/// The indexes of the shadow tree (`$1`: the shadow table, quoted) that are not valid,
/// ready and live.
const SHADOW_INVALID_INDEXES_SQL: &str =
    "SELECT n.nspname::pg_catalog.text, ic.relname::pg_catalog.text FROM pg_catalog.pg_index i \
   JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid \
   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) ic.relnamespace \
  WHERE i.indrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT $1::pg_catalog.text::pg_catalog.regclass \
          UNION SELECT t.relid FROM pg_catalog.pg_partition_tree($1::pg_catalog.text::pg_catalog.regclass) t)) \
    AND NOT (i.indisvalid AND i.indisready AND i.indislive) ORDER BY i.indexrelid";

/// Whether the statistics object `$1.$2` is one of the source tree's (`$3`); no row
/// when the name is free.
const STATISTICS_HOLDER_SQL: &str = "SELECT s.stxrelid OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.oid[]) FROM pg_catalog.pg_statistic_ext s \
   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.stxnamespace \
  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND s.stxname OPERATOR(pg_catalog.=) $2::pg_catalog.text";

/// Whether the relation `$1.$2` depends on the source tree (`$3`), as its sequences
/// do; no row when the name is free.
const SEQUENCE_HOLDER_SQL: &str = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
          AND d.objid OPERATOR(pg_catalog.=) c.oid AND d.refobjid OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.oid[])) \
   FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
  WHERE n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND c.relname OPERATOR(pg_catalog.=) $2::pg_catalog.text";

/// The indexes attached to the partitioned indexes `$2` (in schema `$1`) on the
/// tables `$3.$4` (parallel arrays): parent, table's schema and name, index's schema
/// and name.
const CHILDREN_SQL: &str = "SELECT p.relname::pg_catalog.text, tn.nspname::pg_catalog.text, t.relname::pg_catalog.text, \
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
    AND p.relname OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])";

/// The statements of one swap, prepared on its session before the lock.
pub(super) struct SwapQueries {
    backlog: Statement,
    capture: Statement,
    fingerprint: Statement,
    views: Statement,
    source_indexes: Statement,
    statistics_holder: Statement,
    sequence_holder: Statement,
    children: Statement,
    shadow_invalid_indexes: Statement,
    /// The catalog read back before `COMMIT` ([`super::read_back`]).
    pub read_back: Statement,
    /// The drain of the change log.
    pub drain: DrainStatements,
}

/// What the renames need read under the lock.
pub(super) enum NameReads {
    /// A plan with every final name known ([`renames::complete`]).
    Complete {
        source_indexes: Vec<QualifiedName>,
        holders: Vec<Option<bool>>,
        children: Children,
    },
    /// A plan recorded before ([`renames::tree`]).
    Tree { source: Children, shadow: Children },
}

/// Everything read under the lock, in one round trip.
pub(super) struct LockedReads {
    /// Entries in the change log.
    pub backlog: i64,
    /// What is wrong with the capture or fence (INV: CO-4).
    pub breaches: Vec<Breach>,
    /// The source's shape now.
    pub fingerprint: String,
    /// Views on the source.
    pub views: Vec<View>,
    /// What the renames need.
    pub names: NameReads,
    /// The change log's first entries.
    pub drained: Drained,
    /// Indexes of the shadow tree that are not valid, ready and live.
    pub invalid_shadow_indexes: Vec<QualifiedName>,
}

fn failed(what: &'static str) -> impl Fn(tokio_postgres::Error) -> CasError {
    move |e| CasError::db(what.to_owned(), e)
}

impl SwapQueries {
    /// Prepares every statement of the swap, in one round trip. Call it outside a
    /// transaction, before the lock.
    pub async fn prepare(client: &Client, applier: &Applier) -> Result<Self, CasError> {
        let backlog = applier.backlog_sql();
        let views_sql = views::dependent_views_sql();
        let statements = async {
            tokio::try_join!(
                client.prepare(&backlog),
                client.prepare(capture::CHECK_SQL),
                client.prepare(source::FINGERPRINT_SQL),
                client.prepare(&views_sql),
                client.prepare(SOURCE_INDEXES_SQL),
                client.prepare(STATISTICS_HOLDER_SQL),
                client.prepare(SEQUENCE_HOLDER_SQL),
                client.prepare(CHILDREN_SQL),
                client.prepare(SHADOW_INVALID_INDEXES_SQL),
                client.prepare(super::read_back::READ_BACK_SQL),
            )
            .map_err(failed("preparing the swap's statements"))
        };
        // Both sets go out together: one round trip.
        let (prepared, drain) = tokio::try_join!(statements, applier.prepare_drain(client))?;
        let (
            backlog,
            capture,
            fingerprint,
            views,
            source_indexes,
            statistics_holder,
            sequence_holder,
            children,
            shadow_invalid_indexes,
            read_back,
        ) = prepared;
        Ok(SwapQueries {
            backlog,
            capture,
            fingerprint,
            views,
            source_indexes,
            statistics_holder,
            sequence_holder,
            children,
            shadow_invalid_indexes,
            read_back,
            drain,
        })
    }

    /// Plans every statement the swap runs under its lock, before the lock: runs each
    /// once outside it under [`GENERIC_PLANS`], the reads on the catalog as it is and
    /// the drain's writes with no keys, in a transaction that is rolled back. Each
    /// statement keeps a generic plan that its executions under the lock reuse
    /// instead of planning there, and the session has read the relations' catalog
    /// entries already (a plan is made again only if a relation it reads changed
    /// meanwhile: the results are those of the catalog under the lock either way).
    /// Nothing is kept of what is read or written here.
    pub async fn plan(&self, client: &Client, plan: &RunPlan) -> Result<(), CasError> {
        client
            .batch_execute(&format!("BEGIN; {GENERIC_PLANS}"))
            .await
            .map_err(failed("planning the swap's statements"))?;
        let [schema, name, old] = super::read_back::params(plan);
        // The change log's first batch is planned from a read of none of it: a generic
        // plan does not depend on the limit.
        let planned = tokio::try_join!(
            self.read(client, plan, 0),
            async {
                client
                    .query(&self.read_back, &[&schema, &name, &old])
                    .await
                    .map_err(failed("planning the swap's read-back"))
            },
            self.drain.plan(client),
        );
        let end = client.batch_execute("ROLLBACK").await;
        planned?;
        end.map_err(failed("planning the swap's statements"))
    }

    /// Every read the swap makes under its lock, sent together (one round trip), with
    /// at most `drain_limit` entries of the change log.
    pub async fn read(
        &self,
        client: &Client,
        plan: &RunPlan,
        drain_limit: i64,
    ) -> Result<LockedReads, CasError> {
        let (oids, trigger_names) = capture::check_params(plan);
        let table = plan.source.table.oid;
        let shadow = plan.shadow.to_string();
        let (backlog, capture_rows, fingerprint, view_rows, names, drained, invalid) = tokio::try_join!(
            async {
                let row = client.query_one(&self.backlog, &[]).await;
                row.map(|r| r.get::<_, i64>(0))
                    .map_err(failed("reading the change-log backlog"))
            },
            async {
                let rows = client.query(&self.capture, &[&oids, &trigger_names]).await;
                rows.map_err(failed("checking the capture triggers"))
            },
            async {
                let row = client.query_one(&self.fingerprint, &[&oids]).await;
                row.map(|r| r.get::<_, String>(0))
                    .map_err(failed("fingerprinting the table"))
            },
            async {
                let rows = client.query(&self.views, &[&table]).await;
                rows.map_err(failed("reading dependent views"))
            },
            self.names(client, plan, &oids),
            self.drain.read(client, 0, drain_limit),
            async {
                let rows = client.query(&self.shadow_invalid_indexes, &[&shadow]).await;
                rows.map_err(failed("checking the shadow's indexes"))
            },
        )?;
        Ok(LockedReads {
            backlog,
            breaches: capture::breaches(plan, &capture_rows),
            fingerprint,
            views: views::from_rows(&view_rows)?,
            names,
            drained,
            invalid_shadow_indexes: invalid
                .iter()
                .map(|row| {
                    QualifiedName::qualified(row.get::<_, String>(0), row.get::<_, String>(1))
                })
                .collect(),
        })
    }

    async fn names(
        &self,
        client: &Client,
        plan: &RunPlan,
        source_oids: &[u32],
    ) -> Result<NameReads, CasError> {
        if !plan.source.carry.complete {
            let (source, shadow) = renames::tree_children(plan);
            let (source, shadow) = tokio::try_join!(
                self.children_of(client, plan, &source),
                self.children_of(client, plan, &shadow),
            )?;
            return Ok(NameReads::Tree { source, shadow });
        }
        let oids = source_oids.to_vec();
        let holders = try_join_all(plan.source.carry.renames.iter().map(|rename| {
            let statement = if rename.kind == "statistics" {
                &self.statistics_holder
            } else {
                &self.sequence_holder
            };
            let schema = rename.temp.schema.clone().unwrap_or_default();
            let oids = &oids;
            async move {
                let row = client
                    .query_opt(statement, &[&schema, &rename.final_name, oids])
                    .await
                    .map_err(failed("reading who holds a name"))?;
                Ok::<_, CasError>(row.map(|r| r.get::<_, bool>(0)))
            }
        }));
        let complete_children = renames::complete_children(plan);
        let (source_indexes, holders, children) = tokio::try_join!(
            async {
                let rows = client.query(&self.source_indexes, &[&oids]).await;
                rows.map_err(failed("reading the source's indexes"))
                    .map(|rows| {
                        rows.iter()
                            .map(|r| {
                                QualifiedName::qualified(
                                    r.get::<_, String>(0),
                                    r.get::<_, String>(1),
                                )
                            })
                            .collect::<Vec<_>>()
                    })
            },
            holders,
            self.children_of(client, plan, &complete_children),
        )?;
        Ok(NameReads::Complete {
            source_indexes,
            holders,
            children,
        })
    }

    /// The indexes attached to `of.parents` on `of.tables` (a table without a schema
    /// is taken to be in the table's).
    async fn children_of(
        &self,
        client: &Client,
        plan: &RunPlan,
        of: &ChildrenOf,
    ) -> Result<Children, CasError> {
        let schema = renames::schema(plan);
        let table_schemas: Vec<String> = of
            .tables
            .iter()
            .map(|t| t.schema.clone().unwrap_or_else(|| schema.clone()))
            .collect();
        let table_names: Vec<String> = of.tables.iter().map(|t| t.name.clone()).collect();
        let rows: Vec<Row> = client
            .query(
                &self.children,
                &[&schema, &of.parents, &table_schemas, &table_names],
            )
            .await
            .map_err(failed("reading partition indexes"))?;
        Ok(rows
            .iter()
            .map(|r| {
                let text = |i: usize| r.get::<_, String>(i);
                (
                    (text(0), QualifiedName::qualified(text(1), text(2))),
                    QualifiedName::qualified(text(3), text(4)),
                )
            })
            .collect())
    }
}
