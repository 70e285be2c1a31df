//! The per-chunk digest of verification: on each side (source and shadow), over the
//! same rows the exact comparison compares (the range, minus keys with a change-log
//! entry), `count(*)`, `sum` and `bit_xor` of a 64-bit hash of each row's compared
//! values — the same columns, through the same expressions and casts, as the exact
//! comparison puts side by side (INV: CO-10).
//!
//! A row's hash is a chain: each compared value is hashed with PostgreSQL's extended
//! (64-bit, seeded) hash functions, seeded with the hash so far, so that a value's
//! position and the values before it change its contribution (a sum of per-column
//! hashes would not see two rows swapping a value). The chain starts from a random
//! seed per chunk. Every value is hashed in the form its exact comparison compares:
//! the bytes of a type whose `=` is identity (`text`/`varchar` under `COLLATE "C"`),
//! never a hash by the type's equality where that equality is looser, and the text
//! form (`ROW(…)::text`, as the exact comparison prints them) of every other type.
//! A NULL is hashed as the type's stand-in value with a different seed (the seed
//! XOR a constant per position), so NULL and `''` (or `0`) differ.
//!
//! Where PostgreSQL's own hash of a type folds 64 bits to 32 before hashing
//! (`hashint8extended`, and through it `timestamp`): `bigint` is hashed with the value
//! itself XOR-ed into the seed (distinct values give distinct seeds); `timestamp` and
//! `timestamptz` by the folded hash chained with the seconds from an epoch as
//! `float8` (which pins the value to within a few milliseconds, where two values with
//! one fold are at least 2^32 µs apart: together they determine it); `time` by its
//! binary form. Functions present in every supported release (14–18) only.

use pgshift_sql::quote_ident;

use super::plan::CopyColumn;

/// How one compared value enters the row hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Int2,
    Int4,
    Int8,
    Oid,
    Bool,
    Uuid,
    Date,
    Bytea,
    Time,
    Timestamp,
    Timestamptz,
    /// `text`, `character varying`: its bytes, under `COLLATE "C"`.
    Text,
}

/// The hash form of a shadow type whose exact comparison is by `=`; `None`: compared
/// by the text form. `base` is the type without a numeric type modifier, as
/// [`super::statements::equality_base`] gives it.
fn form(base: &str) -> Option<Form> {
    Some(match base {
        "smallint" => Form::Int2,
        "integer" => Form::Int4,
        "bigint" => Form::Int8,
        "oid" => Form::Oid,
        "boolean" => Form::Bool,
        "uuid" => Form::Uuid,
        "date" => Form::Date,
        "bytea" => Form::Bytea,
        "time without time zone" => Form::Time,
        "timestamp without time zone" => Form::Timestamp,
        "timestamp with time zone" => Form::Timestamptz,
        "text" | "character varying" => Form::Text,
        _ => return None,
    })
}

const XOR: &str = "OPERATOR(pg_catalog.#)";
const TS_EPOCH: &str = "CAST('2000-01-01 00:00:00' AS pg_catalog.timestamp)";
const TSTZ_EPOCH: &str = "CAST('2000-01-01 00:00:00+00' AS pg_catalog.timestamptz)";

/// `h` hashed on with the value `v` of form `form`; `position` makes the NULL flag
/// of each column its own (a nonzero constant below 2^32: its fold is itself). With
/// `not_null` (the shadow declares the column NOT NULL) the NULL test is left out:
/// every function of the chain is strict, so a NULL there makes the row's hash NULL,
/// which the digest counts apart (see [`Digest::side`]).
fn step(form: Form, v: &str, h: &str, position: usize, not_null: bool) -> String {
    // `date` is hashed as a one-field record, whose hash of a NULL field is not NULL.
    let strict = not_null && form != Form::Date;
    let seed = if strict {
        h.to_owned()
    } else {
        format!(
            "({h}) {XOR} CASE WHEN ({v}) IS NULL THEN CAST({} AS pg_catalog.int8) ELSE CAST(0 AS pg_catalog.int8) END",
            position + 1
        )
    };
    // `expr`, or where it may be NULL, `expr` with the type's stand-in for NULL.
    let guard = |expr: String, stand_in: &str| {
        if strict {
            expr
        } else {
            format!("COALESCE({expr}, {stand_in})")
        }
    };
    let or = |stand_in: &str| guard(v.to_owned(), stand_in);
    let hex = |bytes: String| {
        format!("pg_catalog.hashtextextended(pg_catalog.encode({bytes}, 'hex'), {seed})")
    };
    match form {
        Form::Int2 => format!(
            "pg_catalog.hashint2extended({}, {seed})",
            or("CAST(0 AS pg_catalog.int2)")
        ),
        Form::Int4 => format!(
            "pg_catalog.hashint4extended({}, {seed})",
            or("CAST(0 AS pg_catalog.int4)")
        ),
        Form::Int8 => {
            let value = or("CAST(0 AS pg_catalog.int8)");
            format!("pg_catalog.hashint8extended({value}, ({seed}) {XOR} {value})")
        }
        Form::Oid => format!(
            "pg_catalog.hashoidextended({}, {seed})",
            or("CAST(0 AS pg_catalog.oid)")
        ),
        Form::Bool => format!(
            "pg_catalog.hashint4extended(CAST({} AS pg_catalog.int4), {seed})",
            or("false")
        ),
        Form::Uuid => format!(
            "pg_catalog.uuid_hash_extended({}, {seed})",
            or("CAST('00000000-0000-0000-0000-000000000000' AS pg_catalog.uuid)")
        ),
        // The type's own hash (of its 32-bit value): 14 has no `hashdateextended`.
        Form::Date => format!(
            "pg_catalog.hash_record_extended(ROW({}), {seed})",
            or("CAST('2000-01-01' AS pg_catalog.date)")
        ),
        Form::Bytea => hex(or("CAST('' AS pg_catalog.bytea)")),
        Form::Time => hex(format!(
            "pg_catalog.time_send({})",
            or("CAST('00:00' AS pg_catalog.time)")
        )),
        Form::Timestamp => {
            let seconds = format!("pg_catalog.tsrange_subdiff({v}, {TS_EPOCH})");
            format!(
                "pg_catalog.hashfloat8extended({}, pg_catalog.timestamp_hash_extended({}, {seed}))",
                guard(seconds, "0"),
                or(TS_EPOCH)
            )
        }
        // `timezone(interval '0', v)`: the same instant as a `timestamp`, unconverted.
        Form::Timestamptz => {
            let seconds = format!("pg_catalog.tstzrange_subdiff({v}, {TSTZ_EPOCH})");
            let instant = format!("pg_catalog.timezone(CAST('0' AS pg_catalog.interval), {v})");
            format!(
                "pg_catalog.hashfloat8extended({}, pg_catalog.timestamp_hash_extended({}, {seed}))",
                guard(seconds, "0"),
                guard(instant, TS_EPOCH)
            )
        }
        Form::Text => {
            let bytes = format!("{v} COLLATE pg_catalog.\"C\"");
            format!(
                "pg_catalog.hashtextextended({}, {seed})",
                guard(bytes, "''")
            )
        }
    }
}

/// The digest of one side of a chunk: the row hash over the compared values of each
/// side, and the query that aggregates it.
#[derive(Clone, Debug)]
pub struct Digest {
    /// Per compared column: its form (`None`: by text), the source's value, the
    /// shadow's, and whether the shadow declares it NOT NULL.
    columns: Vec<(Option<Form>, String, String, bool)>,
    /// Whether the source's values are computed (a `USING` expression): they are then
    /// computed once per row in a subquery, not once per use.
    computed: bool,
}

impl Digest {
    /// The digest of a run's compared columns (its plan's `columns`).
    pub fn new(compared: &[CopyColumn]) -> Self {
        let columns = compared
            .iter()
            .map(|c| {
                let form = super::statements::equality_base(&c.type_sql)
                    .as_deref()
                    .and_then(form);
                (
                    form,
                    format!("CAST({} AS {})", c.expression, c.type_sql),
                    format!("t.{}", quote_ident(&c.name)),
                    c.not_null,
                )
            })
            .collect();
        let computed = compared.iter().any(|c| !c.copied_as_is());
        Digest { columns, computed }
    }

    /// The row hash over `values` (one expression per compared column), from the seed
    /// `seed`.
    fn row_hash(&self, values: &[String], seed: &str) -> String {
        let mut h = seed.to_owned();
        let mut as_text = Vec::new();
        for (i, ((form, _, _, not_null), v)) in self.columns.iter().zip(values).enumerate() {
            match form {
                Some(form) => h = step(*form, v, &h, i, *not_null),
                None => as_text.push(v.as_str()),
            }
        }
        if !as_text.is_empty() {
            // As the exact comparison prints them: the text of the row of them.
            h = format!(
                "pg_catalog.hashtextextended(CAST(ROW({}) AS pg_catalog.text) COLLATE pg_catalog.\"C\", {h})",
                as_text.join(", ")
            );
        }
        h
    }

    /// `SELECT count, sum, bit_xor` of the row hashes of `relation` (aliased `alias`,
    /// `s` for the source, `t` for the shadow) where `condition` holds, from the seed
    /// `seed`.
    pub fn side(&self, source: bool, relation: &str, condition: &str, seed: &str) -> String {
        let alias = if source { "s" } else { "t" };
        let values: Vec<String> = self
            .columns
            .iter()
            .map(|(_, s, t, _)| if source { s.clone() } else { t.clone() })
            .collect();
        let rows = if source && self.computed {
            // Each computed value once per row, then hashed.
            let names: Vec<String> = (0..values.len()).map(|i| format!("d.v{i}")).collect();
            let projected: Vec<String> = values
                .iter()
                .enumerate()
                .map(|(i, v)| format!("{v} AS v{i}"))
                .collect();
            format!(
                "SELECT {} AS h FROM (SELECT {} FROM {relation} {alias} WHERE {condition} OFFSET 0) d",
                self.row_hash(&names, seed),
                projected.join(", ")
            )
        } else {
            format!(
                "SELECT {} AS h FROM {relation} {alias} WHERE {condition}",
                self.row_hash(&values, seed)
            )
        };
        // `OFFSET 0`: the hash is computed once per row, not once per aggregate.
        // `hashed`: the rows whose hash is not NULL (a NULL in a column hashed without
        // its NULL test), the only ones the sum and XOR cover.
        format!(
            "SELECT pg_catalog.count(*) AS n, pg_catalog.count(r.h) AS hashed, \
                    CAST(pg_catalog.sum(r.h) AS pg_catalog.text) AS sum, \
                    pg_catalog.bit_xor(r.h) AS xor FROM ({rows} OFFSET 0) r"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_compared_by_equality_has_a_hash_form() {
        for base in [
            "smallint",
            "integer",
            "bigint",
            "oid",
            "boolean",
            "uuid",
            "date",
            "bytea",
            "time without time zone",
            "timestamp without time zone",
            "timestamp with time zone",
            "text",
            "character varying",
        ] {
            assert!(
                super::super::statements::equality_base(base).is_some(),
                "{base}"
            );
            assert!(form(base).is_some(), "{base}");
        }
        assert_eq!(form("numeric"), None);
        assert_eq!(form("jsonb"), None);
    }

    #[test]
    fn a_column_declared_not_null_is_hashed_without_its_null_test() {
        for form in [
            Form::Int2,
            Form::Int4,
            Form::Int8,
            Form::Oid,
            Form::Bool,
            Form::Uuid,
            Form::Bytea,
            Form::Time,
            Form::Timestamp,
            Form::Timestamptz,
            Form::Text,
        ] {
            let strict = step(form, "v", "h", 0, true);
            assert!(
                !strict.contains("IS NULL") && !strict.contains("COALESCE"),
                "{form:?}: {strict}"
            );
            let nullable = step(form, "v", "h", 0, false);
            assert!(
                nullable.contains("IS NULL") && nullable.contains("COALESCE"),
                "{form:?}: {nullable}"
            );
        }
        // A record's hash of a NULL field is not NULL: `date` keeps its test.
        assert!(step(Form::Date, "v", "h", 0, true).contains("IS NULL"));
    }

    #[test]
    fn null_flags_differ_per_position_and_fold_to_themselves() {
        let a = step(Form::Int4, "v", "h", 0, false);
        let b = step(Form::Int4, "v", "h", 1, false);
        assert!(a.contains("CAST(1 AS pg_catalog.int8)"), "{a}");
        assert!(b.contains("CAST(2 AS pg_catalog.int8)"), "{b}");
    }
}
