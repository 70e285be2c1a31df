//! The SQL of a run's data movement, built from the plan: every identifier quoted,
//! every value a parameter, key types from the catalog (checked to be single types).

use super::digest::Digest;
use super::keys::KeySpec;
use super::plan::{RunPlan, VerifyMethod};
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
    compare: Compare,
    digest: Digest,
    verify: VerifyMethod,
    replica: bool,
    /// See [`shadow_key`].
    shadow_key: Option<String>,
}

/// What [`Statements::compare`] puts side by side: per column, the source's value (cast
/// to the shadow's type, through the copy's expression) and the shadow's.
#[derive(Clone, Debug)]
struct Compare {
    /// The key as the source gives it to the shadow (`CAST(expr AS type) AS k0, …`).
    source_key: String,
    /// The shadow's key (`t."id" AS k0, …`).
    shadow_key: String,
    /// `s.k0 = t.k0 AND …`.
    join: String,
    /// The compared values of the source (`… AS v0, …`).
    source_values: String,
    /// The compared values of the shadow.
    shadow_values: String,
    /// `ROW(s.v0, …) IS DISTINCT FROM ROW(t.v0, …)`.
    differs: String,
}

/// How a value of a shadow column of type `type_sql` is compared: `Some(collate)` when
/// the type's `=` holds exactly when the two values' text forms are equal (so comparing
/// with `=` is as strict as comparing text, and much cheaper than printing both), with
/// `collate` set for a collatable type, compared under `"C"` (byte equality); `None`
/// when it must be compared by its text form (`numeric`: `1.0 = 1.00`; floats: `-0 = 0`;
/// `interval`: `'1 day' = '24 hours'`; `character`: trailing blanks; `jsonb`, arrays,
/// domains, any other type).
fn compared_by_equality(type_sql: &str) -> Option<bool> {
    let base = equality_base(type_sql)?;
    Some(matches!(base.as_str(), "text" | "character varying"))
}

/// The built-in type of `type_sql` without a numeric type modifier, when that type's
/// `=` holds only for identical values (see [`compared_by_equality`]); `None` when the
/// type is compared by its text form.
pub(super) fn equality_base(type_sql: &str) -> Option<String> {
    // `format_type` in a session whose `search_path` is `pg_catalog, pg_temp`: these
    // unqualified names are the built-in types.
    let base = match (type_sql.find('('), type_sql.find(')')) {
        (Some(open), Some(close)) if open < close => {
            let typmod = &type_sql[open + 1..close];
            if typmod.is_empty() || !typmod.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            format!("{}{}", &type_sql[..open], &type_sql[close + 1..])
        }
        (None, None) => type_sql.to_owned(),
        _ => return None,
    };
    matches!(
        base.as_str(),
        "smallint"
            | "integer"
            | "bigint"
            | "oid"
            | "boolean"
            | "uuid"
            | "date"
            | "bytea"
            | "time without time zone"
            | "timestamp without time zone"
            | "timestamp with time zone"
            | "text"
            | "character varying"
    )
    .then_some(base)
}

impl Compare {
    fn new(plan: &RunPlan) -> Self {
        let mut source_key = Vec::new();
        let mut shadow_key = Vec::new();
        let mut join = Vec::new();
        for (i, key) in plan.key.columns().iter().enumerate() {
            // The key as the shadow holds it: through the copy's expression and cast
            // (a no-op for a key the statement does not change, so the source's key
            // index still orders it).
            let source = plan
                .columns
                .iter()
                .find(|c| c.name == key.name)
                .map(|c| format!("CAST({} AS {})", c.expression, c.type_sql))
                .unwrap_or_else(|| format!("s.{}", quote_ident(&key.name)));
            source_key.push(format!("{source} AS k{i}"));
            shadow_key.push(format!("t.{} AS k{i}", quote_ident(&key.name)));
            join.push(format!("s.k{i} OPERATOR(pg_catalog.=) t.k{i}"));
        }
        let mut source_values = Vec::new();
        let mut shadow_values = Vec::new();
        let mut as_text_source = Vec::new();
        let mut as_text_shadow = Vec::new();
        for column in &plan.columns {
            let source = format!("CAST({} AS {})", column.expression, column.type_sql);
            let shadow = format!("t.{}", quote_ident(&column.name));
            match compared_by_equality(&column.type_sql) {
                Some(collatable) => {
                    let collate = if collatable {
                        " COLLATE pg_catalog.\"C\""
                    } else {
                        ""
                    };
                    let n = source_values.len();
                    source_values.push(format!("{source}{collate} AS v{n}"));
                    shadow_values.push(format!("{shadow}{collate} AS v{n}"));
                }
                None => {
                    as_text_source.push(source);
                    as_text_shadow.push(shadow);
                }
            }
        }
        if !as_text_source.is_empty() {
            // The rest by the text form of the row of them, as the output functions
            // write it, compared byte for byte.
            let n = source_values.len();
            source_values.push(format!(
                "ROW({})::pg_catalog.text COLLATE pg_catalog.\"C\" AS v{n}",
                as_text_source.join(", ")
            ));
            shadow_values.push(format!(
                "ROW({})::pg_catalog.text COLLATE pg_catalog.\"C\" AS v{n}",
                as_text_shadow.join(", ")
            ));
        }
        let items = |side: &str| {
            (0..source_values.len())
                .map(|i| format!("{side}.v{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let differs = format!("ROW({}) IS DISTINCT FROM ROW({})", items("s"), items("t"));
        Compare {
            source_key: source_key.join(", "),
            shadow_key: shadow_key.join(", "),
            join: join.join(" AND "),
            source_values: source_values.join(", "),
            shadow_values: shadow_values.join(", "),
            differs,
        }
    }
}

/// The shadow's key computed from the source's (`CAST(expression AS type)` per key
/// column, over `s`), when the statement changes the key's type or values; `None`
/// when the shadow holds the source's key values as they are.
fn shadow_key(plan: &RunPlan) -> Option<String> {
    let mut changed = false;
    let expressions: Vec<String> = plan
        .key
        .columns()
        .iter()
        .map(|key| {
            let quoted = quote_ident(&key.name);
            match plan.columns.iter().find(|c| c.name == key.name) {
                Some(c) => {
                    if c.expression != format!("s.{quoted}") || c.type_sql != key.type_sql {
                        changed = true;
                    }
                    format!("CAST({} AS {})", c.expression, c.type_sql)
                }
                None => format!("s.{quoted}"),
            }
        })
        .collect();
    changed.then(|| expressions.join(", "))
}

impl Statements {
    /// The statements of `plan`.
    pub fn new(plan: &RunPlan) -> Self {
        let columns: Vec<String> = plan.columns.iter().map(|c| quote_ident(&c.name)).collect();
        let expressions: Vec<String> = plan.columns.iter().map(|c| c.expression.clone()).collect();
        Statements {
            key: plan.key.clone(),
            source: plan.source.table.name.to_string(),
            shadow: plan.shadow.to_string(),
            log: plan.names().log_table().to_string(),
            columns: columns.join(", "),
            expressions: expressions.join(", "),
            compare: Compare::new(plan),
            digest: Digest::new(&plan.columns),
            verify: plan.options.verify,
            replica: plan.source.carry.replica_apply,
            shadow_key: shadow_key(plan),
        }
    }

    /// Whether changes are applied to the shadow with `session_replication_role =
    /// replica` (so that a foreign key of the table to itself does not act on the rows
    /// the applier deletes and inserts again).
    pub fn replica(&self) -> bool {
        self.replica
    }

    /// How verification compares chunks.
    pub fn verify_method(&self) -> VerifyMethod {
        self.verify
    }

    /// The key.
    pub fn key(&self) -> &KeySpec {
        &self.key
    }

    /// The key value `rows` rows past `lo` in key order (`$1…` = `lo` when given),
    /// as text: the exclusive upper bound of a chunk of `rows` rows.
    pub fn next_bound(&self, lo: bool) -> String {
        self.next_bound_within(lo, false)
    }

    /// The key value `rows` rows past `lo` and below `hi` in key order (`$1…` = the
    /// bounds present), as text: the end of a smaller chunk inside `[lo, hi)`. The
    /// text is made of the one row found only: a target list under the `OFFSET` would
    /// be computed for every row it skips (10 M-row `bigint` key, 330,000 rows
    /// skipped: 31–47 ms against 25–27 ms).
    pub fn next_bound_within(&self, lo: bool, hi: bool) -> String {
        let (condition, used) = self.key.range(Some("s"), lo, hi, 1);
        let columns = self.key.order_by(Some("s"));
        format!(
            "SELECT {} FROM (SELECT {columns} FROM {} s WHERE {condition} ORDER BY {columns} OFFSET ${} LIMIT 1) b",
            self.key.as_text(Some("b")),
            self.source,
            used + 1
        )
    }

    /// Copies the source rows of a chunk into the shadow, never overwriting a row the
    /// shadow has (INV: CO-5): `$1…` are the bounds present. A plain `INSERT` into a
    /// heap with no index (the key is built when the indexing phase starts): nothing
    /// else writes the shadow during the copy (the applier waits for the key), chunks
    /// are disjoint and each copied once (a failed chunk halts the copy), and a resumed
    /// copy first deletes every row above the landed prefix, so the shadow holds none
    /// of its keys — and if it ever did, building the key fails with a unique
    /// violation and verification counts the pairs against the source's rows: the run
    /// stops, nothing swapped. (`ON CONFLICT DO NOTHING` would pay for a speculative
    /// insertion on every row: twice the cost, and needs the key.)
    pub fn copy(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(Some("s"), lo, hi, 1);
        format!(
            "INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE SELECT {} FROM {} s WHERE {condition}",
            self.shadow, self.columns, self.expressions, self.source
        )
    }

    /// Copies the source rows of a range into the shadow again after
    /// [`Self::delete_range`] (repair), keeping a row the applier wrote meanwhile
    /// (INV: CO-5).
    pub fn recopy(&self, lo: bool, hi: bool) -> String {
        format!("{} ON CONFLICT DO NOTHING", self.copy(lo, hi))
    }

    /// `(SELECT * FROM ROWS FROM (pg_catalog.unnest($first::text[]::t1[]), …))`: a set of
    /// keys passed as one text array per key column, zipped (the multi-argument `unnest`
    /// shorthand exists only unqualified).
    fn key_set(&self, first: usize) -> String {
        format!("(SELECT * FROM {})", self.key_rows(first))
    }

    /// `ROWS FROM (pg_catalog.unnest($first::text[]::t1[]), …)`.
    fn key_rows(&self, first: usize) -> String {
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
        format!("ROWS FROM ({})", arrays.join(", "))
    }

    /// Deletes a set of keys from the shadow (`$1…`: one text array per key column,
    /// the source's key values). When the statement changes the key's type or values,
    /// each source key is mapped to the shadow's through the copy's expression.
    pub fn delete_keys(&self) -> String {
        let set = match &self.shadow_key {
            None => self.key_set(1),
            Some(expressions) => format!(
                "(SELECT {expressions} FROM {} AS s({}))",
                self.key_rows(1),
                self.key
                    .columns()
                    .iter()
                    .map(|c| quote_ident(&c.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!(
            "DELETE FROM {} t WHERE {} IN {set}",
            self.shadow,
            self.key.tuple(Some("t")),
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

    /// Compares a range of the source, its values cast to the shadow's types, with the
    /// shadow's, row by row and exactly, over the keys with no entry in the change log
    /// (those are the applier's to bring over; see [`Self::pending_in_range`]): one
    /// row of `source rows, joined rows, missing, extra, different`. The two sides are
    /// joined on the key (the source's is unique, so each shadow row appears once);
    /// the source is counted on its own so that two shadow rows for one key show.
    pub fn compare(&self, lo: bool, hi: bool) -> String {
        let (source_range, _) = self.key.range(Some("s"), lo, hi, 1);
        let (shadow_range, _) = self.key.range(Some("t"), lo, hi, 1);
        let c = &self.compare;
        format!(
            "SELECT (SELECT pg_catalog.count(*) FROM {source} s WHERE {source_range} AND NOT {source_logged}), \
                    pg_catalog.count(*), \
                    pg_catalog.count(*) FILTER (WHERE d.in_shadow IS NULL), \
                    pg_catalog.count(*) FILTER (WHERE d.in_source IS NULL), \
                    pg_catalog.count(*) FILTER (WHERE d.in_source AND d.in_shadow AND d.differs) \
               FROM (SELECT s.present AS in_source, t.present AS in_shadow, {differs} AS differs \
                       FROM (SELECT true AS present, {source_key}, {source_values} FROM {source} s \
                              WHERE {source_range} AND NOT {source_logged}) s \
                       FULL JOIN (SELECT true AS present, {shadow_key}, {shadow_values} FROM {shadow} t \
                              WHERE {shadow_range} AND NOT {shadow_logged}) t \
                         ON {join}) d",
            source = self.source,
            shadow = self.shadow,
            source_logged = self.logged("s"),
            shadow_logged = self.logged("t"),
            differs = c.differs,
            source_key = c.source_key,
            shadow_key = c.shadow_key,
            source_values = c.source_values,
            shadow_values = c.shadow_values,
            join = c.join,
        )
    }

    /// The digests of a range on both sides, in one statement (so in one snapshot):
    /// `count, sum, bit_xor` of the row hashes of the source, then of the shadow (see
    /// `cas::digest`), over the same rows [`Self::compare`] compares. `$1…` are the
    /// bounds present, then the seed (`int8`). With `unlogged`, keys with a change-log
    /// entry are left out, as the exact comparison leaves them out; without, the
    /// caller has seen that the range has none.
    pub fn digest(&self, lo: bool, hi: bool, unlogged: bool) -> String {
        let (source_range, used) = self.key.range(Some("s"), lo, hi, 1);
        let (shadow_range, _) = self.key.range(Some("t"), lo, hi, 1);
        let seed = format!("CAST(${} AS pg_catalog.int8)", used + 1);
        let (source_range, shadow_range) = if unlogged {
            (
                format!("{source_range} AND NOT {}", self.logged("s")),
                format!("{shadow_range} AND NOT {}", self.logged("t")),
            )
        } else {
            (source_range, shadow_range)
        };
        format!(
            "SELECT a.n, a.hashed, a.sum, a.xor, b.n, b.hashed, b.sum, b.xor FROM ({}) a, ({}) b",
            self.digest.side(true, &self.source, &source_range, &seed),
            self.digest.side(false, &self.shadow, &shadow_range, &seed),
        )
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
            self.key.order_by(None),
            self.log
        )
    }

    /// Deletes a range of the shadow (repair, and resuming above the landed prefix).
    pub fn delete_range(&self, lo: bool, hi: bool) -> String {
        let (condition, _) = self.key.range(Some("t"), lo, hi, 1);
        format!("DELETE FROM {} t WHERE {condition}", self.shadow)
    }
}

#[cfg(test)]
mod tests {
    use super::compared_by_equality;

    #[test]
    fn only_types_whose_equality_is_identity_are_compared_with_it() {
        assert_eq!(compared_by_equality("bigint"), Some(false));
        assert_eq!(
            compared_by_equality("timestamp(3) with time zone"),
            Some(false)
        );
        assert_eq!(compared_by_equality("character varying(32)"), Some(true));
        assert_eq!(compared_by_equality("text"), Some(true));
        for by_text in [
            "numeric",
            "numeric(10,2)",
            "double precision",
            "real",
            "interval",
            "character(4)",
            "jsonb",
            "integer[]",
            "public.uuid",
            "\"bigint\"",
        ] {
            assert_eq!(compared_by_equality(by_text), None, "{by_text}");
        }
    }
}
