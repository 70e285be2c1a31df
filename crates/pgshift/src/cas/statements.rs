//! The SQL of a run's data movement, built from the plan: every identifier quoted,
//! every value a parameter, key types from the catalog (checked to be single types).

use super::keys::KeySpec;
use super::plan::RunPlan;
use pgshift_sql::quote_ident;

/// The statements of one run.
#[derive(Clone, Debug)]
pub struct Statements {
    key: KeySpec,
    source: String,
    shadow: String,
    log: String,
    columns: String,
    expressions: String,
    source_digest: String,
    shadow_digest: String,
    replica: bool,
}

impl Statements {
    /// The statements of `plan`.
    pub fn new(plan: &RunPlan) -> Self {
        let columns: Vec<String> = plan.columns.iter().map(|c| quote_ident(&c.name)).collect();
        let expressions: Vec<String> = plan.columns.iter().map(|c| c.expression.clone()).collect();
        let source_digest: Vec<String> = plan
            .columns
            .iter()
            .map(|c| format!("CAST({} AS {})", c.expression, c.type_sql))
            .collect();
        let shadow_digest: Vec<String> = plan
            .columns
            .iter()
            .map(|c| format!("t.{}", quote_ident(&c.name)))
            .collect();
        Statements {
            key: plan.key.clone(),
            source: plan.source.table.name.to_string(),
            shadow: plan.shadow.to_string(),
            log: plan.names().log_table().to_string(),
            columns: columns.join(", "),
            expressions: expressions.join(", "),
            source_digest: source_digest.join(", "),
            shadow_digest: shadow_digest.join(", "),
            replica: plan.source.carry.replica_apply,
        }
    }

    /// Whether changes are applied to the shadow with `session_replication_role =
    /// replica` (so that a foreign key of the table to itself does not act on the rows
    /// the applier deletes and inserts again).
    pub fn replica(&self) -> bool {
        self.replica
    }

    /// The key.
    pub fn key(&self) -> &KeySpec {
        &self.key
    }

    /// The key value `rows` rows past `lo` in key order (`$1…` = `lo` when given),
    /// as text: the exclusive upper bound of a chunk of `rows` rows.
    pub fn next_bound(&self, lo: bool) -> String {
        let (condition, used) = self.key.range(Some("s"), lo, false, 1);
        format!(
            "SELECT {} FROM {} s WHERE {condition} ORDER BY {} OFFSET ${} LIMIT 1",
            self.key.as_text(Some("s")),
            self.source,
            self.key.order_by(Some("s")),
            used + 1
        )
    }

    /// Copies the source rows of a range into the shadow, never overwriting a row the
    /// shadow has (INV: CO-5): `$1…` are the bounds present.
    pub fn copy(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(Some("s"), lo, hi, 1);
        format!(
            "INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE SELECT {} FROM {} s WHERE {condition} ON CONFLICT DO NOTHING",
            self.shadow, self.columns, self.expressions, self.source
        )
    }

    /// `(SELECT * FROM ROWS FROM (pg_catalog.unnest($first::text[]::t1[]), …))`: a set of
    /// keys passed as one text array per key column, zipped (the multi-argument `unnest`
    /// shorthand exists only unqualified).
    fn key_set(&self, first: usize) -> String {
        let arrays: Vec<String> = self
            .key
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "pg_catalog.unnest(${}::pg_catalog.text[]::{}[])",
                    first + i,
                    c.type_sql
                )
            })
            .collect();
        format!("(SELECT * FROM ROWS FROM ({}))", arrays.join(", "))
    }

    /// Deletes a set of keys from the shadow (`$1…`: one text array per key column).
    pub fn delete_keys(&self) -> String {
        format!(
            "DELETE FROM {} t WHERE {} IN {}",
            self.shadow,
            self.key.tuple(Some("t")),
            self.key_set(1)
        )
    }

    /// Inserts the source's current rows for a set of keys into the shadow (the
    /// applier overwrites: it runs after [`Statements::delete_keys`]).
    pub fn insert_keys(&self) -> String {
        format!(
            "INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE SELECT {} FROM {} s WHERE {} IN {}",
            self.shadow,
            self.columns,
            self.expressions,
            self.source,
            self.key.tuple(Some("s")),
            self.key_set(1)
        )
    }

    /// Deletes consumed log entries (`$1`: their ids).
    pub fn consume(&self) -> String {
        format!(
            "DELETE FROM {} WHERE log_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])",
            self.log
        )
    }

    /// How many entries the change log holds.
    pub fn backlog(&self) -> String {
        format!("SELECT pg_catalog.count(*) FROM {}", self.log)
    }

    /// The next log entries after `$1` (at most `$2`), with their keys as text and the
    /// standing expression given.
    pub fn read_log(&self, standing: &str) -> String {
        format!(
            "SELECT log_id, {}, {standing} FROM {} WHERE log_id OPERATOR(pg_catalog.>) $1 ORDER BY log_id LIMIT $2",
            self.key.as_text(None),
            self.log
        )
    }

    /// The digest of a range of the source, its values cast to the shadow's types:
    /// `count`, `sum` and `bit_xor` of per-row hashes — over the keys with no entry in
    /// the change log (those are the applier's to bring over; see [`Self::pending_in_range`]).
    pub fn source_digest(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(Some("s"), lo, hi, 1);
        digest(&format!(
            "SELECT pg_catalog.hashtextextended(ROW({})::pg_catalog.text, 0) AS h FROM {} s WHERE {condition} AND NOT {}",
            self.source_digest,
            self.source,
            self.logged("s")
        ))
    }

    /// The digest of a range of the shadow, over the same keys.
    pub fn shadow_digest(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(Some("t"), lo, hi, 1);
        digest(&format!(
            "SELECT pg_catalog.hashtextextended(ROW({})::pg_catalog.text, 0) AS h FROM {} t WHERE {condition} AND NOT {}",
            self.shadow_digest,
            self.shadow,
            self.logged("t")
        ))
    }

    /// `EXISTS (…)`: the key of the row aliased `alias` has an entry in the change log.
    fn logged(&self, alias: &str) -> String {
        format!(
            "EXISTS (SELECT 1 FROM {} l WHERE {} OPERATOR(pg_catalog.=) {})",
            self.log,
            self.key.tuple(Some("l")),
            self.key.tuple(Some(alias))
        )
    }

    /// How many distinct keys of a range have entries in the change log (changes not
    /// yet applied to the shadow).
    pub fn pending_in_range(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(None, lo, hi, 1);
        format!(
            "SELECT pg_catalog.count(*) FROM (SELECT DISTINCT {} FROM {} WHERE {condition}) k",
            self.key
                .tuple(None)
                .trim_start_matches('(')
                .trim_end_matches(')'),
            self.log
        )
    }

    /// Deletes a range of the shadow (repair, and resuming above the landed prefix).
    pub fn delete_range(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(Some("t"), lo, hi, 1);
        format!("DELETE FROM {} t WHERE {condition}", self.shadow)
    }
}

fn digest(rows: &str) -> String {
    format!(
        "SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(d.h::pg_catalog.numeric), 0)::pg_catalog.text, \
                coalesce(pg_catalog.bit_xor(d.h), 0) FROM ({rows}) d"
    )
}
