//! The sequence behind an identity or serial column after a type change through
//! copy-and-swap is exactly what PostgreSQL's own `ALTER COLUMN … TYPE` leaves: the
//! server is the oracle. Each generated case (smallint, integer, bigint to each other;
//! identity ALWAYS and BY DEFAULT; default and custom bounds; ascending and descending;
//! serial columns; a partitioned table) is a table of one database; a server-made copy
//! (`CREATE DATABASE … TEMPLATE`) runs the statements natively, the original through
//! pgshift, and `pg_sequence`, `pg_sequences` and the sequence's own state are compared,
//! then the next value each side gives.

mod common;

use common::cas::{clone_database, options, run, value};
use common::*;
use futures_util::StreamExt;
use pgshift::cas::{Mode, Silent};

const TYPES: [&str; 3] = ["smallint", "integer", "bigint"];

/// One generated case: the table's DDL and rows, and the statement.
struct Case {
    table: String,
    setup: String,
    statement: String,
}

/// How a sequence is declared.
#[derive(Clone, Copy)]
enum Shape {
    /// Default bounds, ascending.
    Ascending,
    /// Default bounds, descending (`INCREMENT -1`).
    Descending,
    /// Custom bounds, ascending, with start, cache and cycle.
    CustomAscending,
    /// Custom bounds, descending.
    CustomDescending,
}

impl Shape {
    const ALL: [Shape; 4] = [
        Shape::Ascending,
        Shape::Descending,
        Shape::CustomAscending,
        Shape::CustomDescending,
    ];

    fn options(self) -> &'static str {
        match self {
            Shape::Ascending => "",
            Shape::Descending => " (INCREMENT BY -1)",
            Shape::CustomAscending => {
                " (START WITH 20 INCREMENT BY 3 MINVALUE 10 MAXVALUE 30000 CACHE 5 CYCLE)"
            }
            Shape::CustomDescending => {
                " (START WITH -20 INCREMENT BY -3 MINVALUE -30000 MAXVALUE -10)"
            }
        }
    }
}

/// Every identity case: each type to each other, each shape, ALWAYS and BY DEFAULT in
/// turn, with or without rows (a sequence never called keeps `is_called` false); the
/// serial kinds; an identity column of a partitioned table.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut n = 0;
    for from in TYPES {
        for to in TYPES.into_iter().filter(|t| *t != from) {
            for shape in Shape::ALL {
                n += 1;
                let table = format!("t{n}");
                let kind = if n % 2 == 0 { "ALWAYS" } else { "BY DEFAULT" };
                let rows = if n % 5 == 0 { 0 } else { 7 };
                out.push(Case {
                    setup: format!(
                        "CREATE TABLE {table} (id {from} GENERATED {kind} AS IDENTITY{} PRIMARY KEY, v int); \
                         INSERT INTO {table} (v) SELECT g FROM generate_series(1, {rows}) g;",
                        shape.options()
                    ),
                    statement: format!("ALTER TABLE {table} ALTER COLUMN id TYPE {to}"),
                    table,
                });
            }
        }
    }
    for (serial, to) in [
        ("serial", "bigint"),
        ("bigserial", "integer"),
        ("smallserial", "bigint"),
    ] {
        n += 1;
        let table = format!("t{n}");
        out.push(Case {
            setup: format!(
                "CREATE TABLE {table} (id {serial} PRIMARY KEY, v int); \
                 INSERT INTO {table} (v) SELECT g FROM generate_series(1, 7) g;"
            ),
            statement: format!("ALTER TABLE {table} ALTER COLUMN id TYPE {to}"),
            table,
        });
    }
    for (column, to) in [
        ("id integer GENERATED ALWAYS AS IDENTITY", "bigint"),
        ("id serial", "bigint"),
    ] {
        n += 1;
        let table = format!("t{n}");
        out.push(Case {
            setup: format!(
                "CREATE TABLE {table} ({column}, p int NOT NULL, PRIMARY KEY (id, p)) PARTITION BY LIST (p); \
                 CREATE TABLE {table}_a PARTITION OF {table} FOR VALUES IN (1); \
                 CREATE TABLE {table}_b PARTITION OF {table} FOR VALUES IN (2); \
                 INSERT INTO {table} (p) SELECT 1 + g % 2 FROM generate_series(1, 7) g;"
            ),
            statement: format!("ALTER TABLE {table} ALTER COLUMN id TYPE {to}"),
            table,
        });
    }
    out
}

/// What a user can see of the sequence behind `table.id`: its name, `pg_sequence`,
/// `pg_sequences`, the column's type and identity, and its own `last_value` and
/// `is_called`.
fn sequence_state(db: &str, table: &str) -> String {
    let sequence = value(
        db,
        &format!("SELECT pg_get_serial_sequence('{table}', 'id')"),
    );
    value(
        db,
        &format!(
            "SELECT format('%s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s | %s %s %s %s %s %s %s | column=%s identity=%s | last=%s called=%s', \
                    '{sequence}', format_type(q.seqtypid, NULL), q.seqstart, q.seqincrement, q.seqmin, q.seqmax, q.seqcache, q.seqcycle, \
                    ps.data_type, ps.start_value, ps.min_value, ps.max_value, ps.increment_by, ps.cycle, ps.last_value, \
                    format_type(a.atttypid, a.atttypmod), a.attidentity, s.last_value, s.is_called) \
               FROM pg_sequence q \
               JOIN pg_sequences ps ON format('%I.%I', ps.schemaname, ps.sequencename)::regclass = q.seqrelid \
               JOIN pg_attribute a ON a.attrelid = '{table}'::regclass AND a.attname = 'id' \
              CROSS JOIN {sequence} s \
              WHERE q.seqrelid = '{sequence}'::regclass"
        ),
    )
}

/// The next value each side gives (inserting one row).
fn next_value(db: &str, table: &str) -> String {
    let columns = value(
        db,
        &format!("SELECT string_agg(attname, ',') FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attname = 'p'"),
    );
    let insert = if columns.is_empty() {
        format!("INSERT INTO {table} (v) VALUES (0) RETURNING id")
    } else {
        format!("INSERT INTO {table} (p) VALUES (1) RETURNING id")
    };
    value(db, &insert)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_and_serial_sequences_end_as_native_alter_type_leaves_them() {
    let cases = cases();
    let setup: String = cases
        .iter()
        .map(|c| c.setup.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let db = database("cas_seq", &setup);
    let native = clone_database(&db, "native");
    let statements: String = cases
        .iter()
        .map(|c| format!("{};", c.statement))
        .collect::<Vec<_>>()
        .join("\n");
    cluster()
        .psql(&native, &statements)
        .expect("PostgreSQL runs every statement natively");

    // Three runs at a time (each on its own table).
    let reports: Vec<_> = futures_util::stream::iter(cases.iter().map(|case| {
        let db = db.clone();
        async move {
            let result = run(
                &db,
                &case.table,
                &case.statement,
                options(Mode::Live),
                &mut Silent,
            )
            .await;
            (case, result)
        }
    }))
    .buffer_unordered(3)
    .collect()
    .await;
    let mut differences = Vec::new();
    let mut done = Vec::new();
    for (case, report) in reports {
        match report {
            Ok(report) if report.phase == "done" => done.push(case),
            other => differences.push(format!(
                "{}: the run did not finish: {other:?}",
                case.statement
            )),
        }
    }
    for case in done {
        let (expected, actual) = (
            sequence_state(&native, &case.table),
            sequence_state(&db, &case.table),
        );
        if expected != actual {
            differences.push(format!(
                "{}\n  native:  {expected}\n  pgshift: {actual}",
                case.setup
            ));
            continue;
        }
        let (expected, actual) = (
            next_value(&native, &case.table),
            next_value(&db, &case.table),
        );
        if expected != actual {
            differences.push(format!(
                "{}: next value native {expected}, pgshift {actual}",
                case.statement
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} cases differ from PostgreSQL:\n{}",
        differences.len(),
        cases.len(),
        differences.join("\n")
    );
}
