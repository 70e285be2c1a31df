//! Verification by digest (INV: CO-10) catches every tampering the exact comparison
//! catches: on generated table shapes (integers, `numeric`, text under several
//! collations, arrays, `jsonb`, `bytea`, `timestamptz`, generated columns, composite
//! keys, NULLs), each tampering of the shadow — one changed value per column, a pair of
//! values swapped between two rows of one chunk per column, NULL against `''`, values
//! equal by `=` but not identical, values whose PostgreSQL hashes fold to the same 32
//! bits, a duplicated row with a deleted one — fails verification, and the exact
//! comparison of the chunk agrees (the digest never reports a difference the rows do
//! not have). The untampered shadow passes and swaps.

mod common;

use common::cas::*;
use common::*;
use pgshift::cas::{CasError, Mode, Phase, VerifyMethod};

/// A column of a generated shape: name, type, and its value for row `g`.
struct Column {
    name: &'static str,
    type_sql: &'static str,
    value: &'static str,
    /// NULL in every seventh row (a different seventh per column).
    nullable: bool,
    /// A stored generated column (computed by the shadow, not compared).
    generated: bool,
}

const fn col(name: &'static str, type_sql: &'static str, value: &'static str) -> Column {
    Column {
        name,
        type_sql,
        value,
        nullable: true,
        generated: false,
    }
}

const fn not_null(name: &'static str, type_sql: &'static str, value: &'static str) -> Column {
    Column {
        name,
        type_sql,
        value,
        nullable: false,
        generated: false,
    }
}

const fn generated(name: &'static str, type_sql: &'static str, value: &'static str) -> Column {
    Column {
        name,
        type_sql,
        value,
        nullable: false,
        generated: true,
    }
}

/// A table shape: its columns, its key, the statement run on it, and tamperings of
/// its own beyond those generated per column.
struct Shape {
    table: &'static str,
    columns: Vec<Column>,
    key: &'static str,
    statement: &'static str,
    /// `(label, SQL)`, `{shadow}` standing for the shadow table.
    special: Vec<(&'static str, &'static str)>,
}

const ROWS: i64 = 3000;

impl Shape {
    fn schema(&self) -> String {
        let mut defs = Vec::new();
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (i, c) in self.columns.iter().enumerate() {
            if c.generated {
                defs.push(format!(
                    "{} {} GENERATED ALWAYS AS ({}) STORED",
                    c.name, c.type_sql, c.value
                ));
                continue;
            }
            defs.push(format!(
                "{} {}{}",
                c.name,
                c.type_sql,
                if c.nullable { "" } else { " NOT NULL" }
            ));
            names.push(c.name);
            values.push(if c.nullable {
                format!("CASE WHEN (g + {i}) % 7 = 0 THEN NULL ELSE {} END", c.value)
            } else {
                c.value.to_owned()
            });
        }
        format!(
            "CREATE TABLE {t} ({}, PRIMARY KEY ({}));
             INSERT INTO {t} ({}) SELECT {} FROM generate_series(1, {ROWS}) g;
             ANALYZE {t};",
            defs.join(", "),
            self.key,
            names.join(", "),
            values.join(", "),
            t = self.table,
        )
    }

    /// The compared (copied) columns that are not part of the key.
    fn tamperable(&self) -> impl Iterator<Item = &Column> {
        let key: Vec<&str> = self.key.split(',').map(str::trim).collect();
        self.columns
            .iter()
            .filter(move |c| !c.generated && !key.contains(&c.name))
    }

    /// Every tampering: per compared column a changed value and a swapped pair, then
    /// the shape's own.
    fn tamperings(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for c in self.tamperable() {
            let n = c.name;
            out.push((
                format!("{n}: one value changed"),
                format!(
                    "UPDATE {{shadow}} SET {n} = (SELECT {n} FROM {{shadow}} WHERE id = 101) WHERE id = 100"
                ),
            ));
            out.push((
                format!("{n}: two rows' values swapped"),
                format!(
                    "UPDATE {{shadow}} x SET {n} = y.{n} FROM {{shadow}} y \
                      WHERE (x.id, y.id) IN ((200, 201), (201, 200))"
                ),
            ));
        }
        for (label, sql) in &self.special {
            out.push(((*label).to_owned(), (*sql).to_owned()));
        }
        out
    }

    fn copied(&self) -> String {
        self.columns
            .iter()
            .filter(|c| !c.generated)
            .map(|c| c.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The columns of the `scalars` shapes: every type hashed in a form of its own, NULL in
/// every seventh row, or all declared NOT NULL (each hashed without its NULL test).
fn scalar_columns(nullable: bool) -> Vec<Column> {
    let c = if nullable { col } else { not_null };
    vec![
        not_null("id", "bigint", "g"),
        c("i2", "smallint", "(g % 30000)::smallint"),
        c("i4", "int", "g * 3"),
        c(
            "i8",
            "bigint",
            "CASE WHEN g = 500 THEN 5 ELSE g * 4294967311 END",
        ),
        c("b", "boolean", "g % 2 = 0"),
        c("u", "uuid", "md5(g::text)::uuid"),
        c("d", "date", "date '2000-01-01' + g::int"),
        c(
            "tm",
            "time",
            "time '00:00' + g * interval '1.000001 second'",
        ),
        c(
            "ts",
            "timestamp",
            "timestamp '2020-01-01' + g * interval '1 minute 0.000001 second'",
        ),
        c(
            "tz",
            "timestamptz",
            "CASE WHEN g = 500 THEN timestamptz '2000-01-01 00:00:00.000005+00' \
             ELSE timestamptz '2026-01-01 00:00:00+00' + g * interval '1.000001 second' END",
        ),
        c("by", "bytea", "decode(md5(g::text), 'hex')"),
        c(
            "t",
            "text",
            "CASE WHEN g % 11 = 0 THEN '' ELSE 'row ' || g END",
        ),
        c("v", "varchar(20)", "'v' || g"),
    ]
}

/// Tamperings of the `scalars` shapes by values whose PostgreSQL hashes fold alike,
/// and by the smallest change of a `timestamptz`.
const FOLDS: [(&str, &str); 3] = [
    (
        // 5 and 2^32 + 4 fold to the same 32 bits in hashint8extended.
        "bigint: a value with the same 32-bit fold",
        "UPDATE {shadow} SET i8 = 4294967300 WHERE id = 500",
    ),
    (
        "timestamptz: an instant with the same 32-bit fold",
        "UPDATE {shadow} SET tz = tz + interval '4294.967295 seconds' WHERE id = 500",
    ),
    (
        "timestamptz: one microsecond later",
        "UPDATE {shadow} SET tz = tz + interval '1 microsecond' WHERE id = 100",
    ),
];

fn shapes(icu: bool) -> Vec<Shape> {
    let mut structured = vec![
        not_null("id", "int", "g"),
        col("n", "numeric", "round(g / 8.0, 3)"),
        col("n2", "numeric(10,2)", "g * 1.25"),
        col("f", "float8", "CASE WHEN g = 300 THEN 0 ELSE g / 3.0 END"),
        col("r", "real", "g / 7.0"),
        col("iv", "interval", "g * interval '1 hour'"),
        col(
            "j",
            "jsonb",
            "jsonb_build_object('a', g, 'x', 1.0, 'tags', jsonb_build_array('t' || g))",
        ),
        col("arr", "int[]", "ARRAY[g, g + 1]"),
        col("tarr", "text[]", "ARRAY['a' || g, NULL, '']"),
        col("ch", "char(6)", "'c' || (g % 1000)"),
        col("tc", "text COLLATE \"C\"", "'Name ' || g"),
        col("tp", "text COLLATE \"POSIX\"", "'Posix ' || g"),
        generated("gen", "text", "upper(tc)"),
    ];
    let mut structured_special = vec![
        (
            "numeric: equal by =, another scale",
            "UPDATE {shadow} SET n = n + 0.0000 WHERE id = 100",
        ),
        (
            "float8: -0 for 0",
            "UPDATE {shadow} SET f = '-0' WHERE id = 300",
        ),
        (
            "interval: '1 day' for '24 hours'",
            "UPDATE {shadow} SET iv = interval '1 day' WHERE id = 24",
        ),
        (
            "jsonb: 1.00 for 1.0",
            "UPDATE {shadow} SET j = jsonb_set(j, '{x}', '1.00') WHERE id = 100",
        ),
    ];
    if icu {
        structured.push(col("ci", "text COLLATE ci", "'Mixed Case ' || g"));
        structured_special.push((
            "text under a nondeterministic collation: case changed",
            "UPDATE {shadow} SET ci = lower(ci) WHERE id = 100",
        ));
    }
    vec![
        Shape {
            table: "scalars",
            columns: scalar_columns(true),
            key: "id",
            statement: "ALTER TABLE scalars ALTER COLUMN i4 TYPE bigint",
            special: [
                (
                    "text: NULL for ''",
                    "UPDATE {shadow} SET t = NULL WHERE id = (SELECT min(id) FROM {shadow} WHERE t = '')",
                ),
                (
                    "text: '' for NULL",
                    "UPDATE {shadow} SET t = '' WHERE id = (SELECT min(id) FROM {shadow} WHERE t IS NULL)",
                ),
            ]
            .into_iter()
            .chain(FOLDS)
            .collect(),
        },
        Shape {
            table: "scalars_not_null",
            columns: scalar_columns(false),
            key: "id",
            statement: "ALTER TABLE scalars_not_null ALTER COLUMN i4 TYPE bigint",
            special: FOLDS.to_vec(),
        },
        Shape {
            table: "structured",
            columns: structured,
            key: "id",
            statement: "ALTER TABLE structured ALTER COLUMN n2 TYPE numeric(12,3)",
            special: structured_special,
        },
        Shape {
            table: "composite",
            columns: vec![
                not_null("k", "text COLLATE \"C\"", "'k' || (g % 10)"),
                not_null(
                    "at",
                    "timestamptz",
                    "timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'",
                ),
                not_null("id", "int", "g"),
                col("p", "jsonb", "jsonb_build_object('g', g)"),
                col("score", "numeric", "g * 0.5"),
                generated("twice", "int", "id * 2"),
            ],
            key: "k, at",
            statement: "VACUUM FULL composite",
            special: vec![],
        },
    ]
}

fn shadow_of(db: &str, table: &str) -> String {
    format!("_pgshift_{}_{table}", run_id(db))
}

/// Puts the rows tamperings touch back as the copy made them.
fn restore(db: &str, shape: &Shape, shadow: &str) {
    let cols = shape.copied();
    cluster()
        .psql(
            db,
            &format!(
                "DELETE FROM {shadow} WHERE id < 1000; \
                 INSERT INTO {shadow} ({cols}) SELECT {cols} FROM pristine WHERE id < 1000"
            ),
        )
        .expect("restoring the shadow");
}

fn expect_divergence(result: Result<pgshift::cas::RunReport, CasError>, label: &str) {
    match result {
        Err(CasError::Divergence(detail)) => assert!(
            !detail.contains("compare equal"),
            "{label}: the exact comparison agrees with the digest: {detail}"
        ),
        other => panic!("{label}: verification must fail, got {other:?}"),
    }
}

/// The nondeterministic collation of the `structured` shape.
const CI: &str =
    "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);";

/// Whether the server can make [`CI`] (it needs a build with ICU).
fn icu_available(db: &str) -> bool {
    cluster().psql(db, CI).is_ok()
}

/// Every tampering of every shape, each verified on its own (the run is resumed,
/// verifying again from scratch, after each), then the untampered shadow.
async fn every_tampering_fails_verification(method: VerifyMethod) {
    let probe = database("cas_digest_probe", "");
    let icu = icu_available(&probe);
    for shape in shapes(icu) {
        let collation = if icu { CI } else { "" };
        let db = database(
            &format!("cas_digest_{}", shape.table),
            &format!("{collation}{}", shape.schema()),
        );
        let source = oid(&db, shape.table);
        let tamperings = shape.tamperings();
        // First, while the run verifies for the first time (the shadow's key was just
        // built; a resumed run builds it again, which a duplicate key would fail): a
        // duplicated row with a deleted one — as many rows, one key twice.
        let (hook_db, table, cols) = (db.clone(), shape.table, shape.copied());
        let mut hook = Hook::new(Phase::Verifying, move || {
            let shadow = shadow_of(&hook_db, table);
            let key = value(
                &hook_db,
                &format!(
                    "SELECT conname FROM pg_constraint WHERE conrelid = '{shadow}'::regclass AND contype = 'p'"
                ),
            );
            cluster()
                .psql(
                    &hook_db,
                    &format!(
                        "CREATE TABLE pristine AS SELECT * FROM {shadow}; \
                         ALTER TABLE {shadow} DROP CONSTRAINT {key}; \
                         DELETE FROM {shadow} WHERE id = 300; \
                         INSERT INTO {shadow} ({cols}) SELECT {cols} FROM pristine WHERE id = 301"
                    ),
                )
                .expect("duplicating a row");
            assert_eq!(
                value(&hook_db, &format!("SELECT count(*) FROM {shadow}")),
                ROWS.to_string()
            );
        });
        let mut tampered = options(Mode::Live);
        tampered.verify = method;
        let result = run(&db, shape.table, shape.statement, tampered, &mut hook).await;
        expect_divergence(result, &format!("{}: duplicated and deleted", shape.table));
        let shadow = shadow_of(&db, shape.table);
        for (label, sql) in &tamperings {
            restore(&db, &shape, &shadow);
            cluster()
                .psql(&db, &sql.replace("{shadow}", &shadow))
                .unwrap_or_else(|e| panic!("{}: {label}: {e}", shape.table));
            let result = resume(&db, shape.table).await;
            expect_divergence(result, &format!("{}: {label}", shape.table));
            assert_eq!(oid(&db, shape.table), source, "{label}: no swap");
        }
        abort(&db, shape.table).await.expect("abort");
        cluster()
            .psql(&db, "DROP TABLE pristine")
            .expect("dropping the copy");
        assert_eq!(artifacts(&db), "", "{}", shape.table);

        // The same shape, untampered: verification passes and the run swaps.
        let mut clean = options(Mode::Live);
        clean.verify = method;
        let report = run(
            &db,
            shape.table,
            shape.statement,
            clean,
            &mut pgshift::cas::Silent,
        )
        .await
        .unwrap_or_else(|e| panic!("{}: the untampered run: {e}", shape.table));
        assert_eq!(report.rows_verified, ROWS, "{}", shape.table);
        assert_ne!(oid(&db, shape.table), source, "{}: swapped", shape.table);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_10_a_digest_difference_is_never_missed_and_always_confirmed_row_by_row() {
    every_tampering_fails_verification(VerifyMethod::Digest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exact_method_catches_the_same_tamperings() {
    every_tampering_fails_verification(VerifyMethod::Exact).await;
}

/// The swapped pair is the case a naive digest misses: with a row hash that adds (or
/// XORs) per-column hashes, sums and XORs over the chunk do not change when two rows
/// swap a value. The server says so for both naive forms; the digest's chained hash
/// changes (and the run above fails on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_pair_escapes_naive_digests_but_not_the_chained_one() {
    let db = database(
        "cas_digest_naive",
        "CREATE TABLE a (id int PRIMARY KEY, v text);
         INSERT INTO a SELECT g, 'value ' || g FROM generate_series(1, 1000) g;
         CREATE TABLE b AS SELECT * FROM a;
         UPDATE b x SET v = y.v FROM a y WHERE (x.id, y.id) IN ((200, 201), (201, 200));",
    );
    let naive = |table: &str| {
        value(
            &db,
            &format!(
                "SELECT sum(hash_record_extended(ROW(id, v), 0)) || ' ' \
                        || bit_xor(hashint4extended(id, 0) # hashtextextended(v, 0)) FROM {table}"
            ),
        )
    };
    assert_eq!(naive("a"), naive("b"), "the naive digests miss the swap");
    assert_ne!(
        value(
            &db,
            "SELECT count(*) FROM a JOIN b USING (id) WHERE a.v <> b.v"
        ),
        "0"
    );
    // The chained form (as `cas::digest` builds it for an int and a text column).
    let chained = |table: &str| {
        value(
            &db,
            &format!(
                "SELECT sum(h) || ' ' || bit_xor(h) FROM (SELECT \
                   hashtextextended(COALESCE(v COLLATE \"C\", ''), \
                     hashint4extended(COALESCE(id, 0), 7) # CASE WHEN v IS NULL THEN 2::int8 ELSE 0::int8 END) AS h \
                   FROM {table} OFFSET 0) r"
            ),
        )
    };
    assert_ne!(
        chained("a"),
        chained("b"),
        "the chained digest sees the swap"
    );
}

/// A column declared NOT NULL is hashed without its NULL test, which rests on every
/// function of its chain being strict. The server says so for each form: a NULL in
/// any one such column leaves the row without a hash (`hashed` 0), so the digest
/// cannot pass the row and the chunk is compared row by row (INV: CO-10); a `date`,
/// hashed as a record, keeps its NULL test and is hashed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_co_10_a_null_where_the_shadow_declares_not_null_leaves_the_row_unhashed() {
    let columns = scalar_columns(true);
    let compared: Vec<&Column> = columns.iter().filter(|c| c.name != "id").collect();
    let mut defs = vec!["id int PRIMARY KEY".to_owned()];
    let mut values = vec!["g".to_owned()];
    for (i, c) in compared.iter().enumerate() {
        defs.push(format!("{} {}", c.name, c.type_sql));
        // Row i + 2 has a NULL in this column only; row 1 has none.
        values.push(format!(
            "CASE WHEN g = {} THEN NULL ELSE {} END",
            i + 2,
            c.value
        ));
    }
    let db = database(
        "cas_digest_strict",
        &format!(
            "CREATE TABLE forms ({});
             INSERT INTO forms SELECT {} FROM generate_series(1, {}) g;",
            defs.join(", "),
            values.join(", "),
            compared.len() + 1
        ),
    );
    let copy: Vec<pgshift::cas::plan::CopyColumn> = compared
        .iter()
        .map(|c| pgshift::cas::plan::CopyColumn {
            name: c.name.to_owned(),
            type_sql: value(
                &db,
                &format!(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
                      WHERE attrelid = 'forms'::regclass AND attname = '{}'",
                    c.name
                ),
            ),
            expression: format!("s.{}", c.name),
            not_null: true,
        })
        .collect();
    let digest = pgshift::cas::digest::Digest::new(&copy);
    let hashed = |row: usize| {
        let side = digest.side(
            false,
            "forms",
            &format!("t.id = {row}"),
            "CAST(7 AS pg_catalog.int8)",
        );
        value(&db, &format!("SELECT n || ' ' || hashed FROM ({side}) d"))
    };
    assert_eq!(hashed(1), "1 1", "no NULL: hashed");
    for (i, c) in compared.iter().enumerate() {
        let expected = if c.type_sql == "date" { "1 1" } else { "1 0" };
        assert_eq!(hashed(i + 2), expected, "a NULL in {}", c.name);
    }
}
