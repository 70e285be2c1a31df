//! Trace against the server: every lock, rewrite and DDL command `pgshift::trace`
//! records for a statement is checked against what PostgreSQL shows when the same
//! statement runs, after the same history, in a database of the test cluster, read
//! another way: locks from a second session's `pg_locks` while the first holds its
//! transaction open, rewrites from file nodes before and after, the top-level DDL
//! from the statement's own command. The statements are a generated set of plain DDL
//! forms (whose locks the classifier states: the trace must find it never understated
//! them) over the relay-style corpus in `data/trace/relay/`, whose procedural file
//! holds the kinds issue 11 lists (a `DO` block rebuilding a stored generated column
//! with `EXECUTE format(…)` from `pg_attrdef`, a data-dependent rewrite, a loop over
//! `pg_class` creating triggers through a function, a `to_regclass` guarded index,
//! `SELECT f('tbl')` whose function runs DDL).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use pgshift::catalog::DeclaredSchema;
use pgshift::script::{analyze, transaction_mode_for, Knowledge, Script, TransactionMode};
use pgshift::trace::{
    compare, trace, NestedAvailability, Outcome, StatementTrace, TraceError, TraceInput, TraceRun,
    TraceTarget,
};
use pgshift_sql::{QualifiedName, Statement};
use tokio_postgres::Client;

use common::{client, cluster, cluster_dirs, database};

const INIT: &str = include_str!("data/trace/relay/0001_init.sql");
const PROCEDURAL: &str = include_str!("data/trace/relay/0002_procedural.sql");

/// Trace tests start clusters of their own: one at a time, so the check that each
/// clone is removed counts only its own directory.
static CLONES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A generated plain DDL statement and the command tag the server reports for it.
struct Form {
    sql: String,
    tag: &'static str,
}

/// Plain DDL forms over every table of the corpus (the partitioned `events`
/// included), in an order that keeps each valid.
fn plain_forms() -> Vec<Form> {
    let mut forms = Vec::new();
    let tables = ["accounts", "events", "subscriptions", "deliveries"];
    for (n, table) in tables.iter().enumerate() {
        let partitioned = *table == "events";
        let mut add = |sql: String, tag: &'static str| forms.push(Form { sql, tag });
        add(
            format!("ALTER TABLE {table} ADD COLUMN note_{n} text"),
            "ALTER TABLE",
        );
        add(
            format!("ALTER TABLE {table} ADD COLUMN flag_{n} boolean NOT NULL DEFAULT false"),
            "ALTER TABLE",
        );
        add(
            format!("ALTER TABLE {table} ADD COLUMN score_{n} double precision DEFAULT random()"),
            "ALTER TABLE",
        );
        add(
            format!("ALTER TABLE {table} ALTER COLUMN note_{n} TYPE varchar(200)"),
            "ALTER TABLE",
        );
        add(
            format!(
                "ALTER TABLE {table} ALTER COLUMN note_{n} TYPE integer USING length(note_{n})"
            ),
            "ALTER TABLE",
        );
        add(
            format!("ALTER TABLE {table} ALTER COLUMN note_{n} SET STATISTICS 200"),
            "ALTER TABLE",
        );
        add(
            format!("ALTER TABLE {table} ADD CONSTRAINT {table}_id_{n} CHECK (id > 0) NOT VALID"),
            "ALTER TABLE",
        );
        add(
            format!("ALTER TABLE {table} VALIDATE CONSTRAINT {table}_id_{n}"),
            "ALTER TABLE",
        );
        add(
            format!("CREATE INDEX {table}_note_{n} ON {table} (note_{n})"),
            "CREATE INDEX",
        );
        if !partitioned {
            add(
                format!("CREATE INDEX CONCURRENTLY {table}_flag_{n} ON {table} (flag_{n})"),
                "CREATE INDEX",
            );
        }
        add(
            format!("ALTER TABLE {table} RENAME COLUMN note_{n} TO memo_{n}"),
            "ALTER TABLE",
        );
        add(
            format!("COMMENT ON TABLE {table} IS 'relay {table}'"),
            "COMMENT",
        );
        add(format!("DROP INDEX {table}_note_{n}"), "DROP INDEX");
        add(
            format!("ALTER TABLE {table} DROP COLUMN score_{n}"),
            "ALTER TABLE",
        );
    }
    forms
}

fn parse(sql: &str) -> Vec<Statement> {
    pgshift_sql::parse(sql).expect("corpus parses")
}

/// The files as `lint` judges them offline (earlier files declaring later ones'
/// tables), for the static side of the comparison.
fn scripts(files: &[(String, Vec<Statement>)]) -> Vec<Script> {
    let mut declared = DeclaredSchema::new();
    files
        .iter()
        .map(|(_, statements)| {
            let snapshot = declared.snapshot();
            let knowledge = Knowledge {
                facts: Some(&snapshot),
                server_version_num: None,
                created_earlier: None,
            };
            let mode = transaction_mode_for(statements, TransactionMode::Statement);
            let script = analyze(statements.clone(), mode, knowledge);
            declared.absorb(statements);
            script
        })
        .collect()
}

/// What the server shows for one statement, read the oracle's way.
struct Seen {
    locks: BTreeMap<QualifiedName, pgshift::lock::LockMode>,
    rewritten: Vec<QualifiedName>,
}

/// TOAST tables are named after their table's OID, which differs between the clone and
/// the oracle's database: they are compared as one entry per kind (table, index).
fn key(name: QualifiedName) -> QualifiedName {
    if name.schema.as_deref() != Some("pg_toast") {
        return name;
    }
    let kind = if name.name.ends_with("_index") {
        "<toast index>"
    } else {
        "<toast>"
    };
    QualifiedName::qualified("pg_toast", kind)
}

/// Every user relation's file node, by name (tables and materialized views).
async fn filenodes(client: &Client) -> BTreeMap<QualifiedName, u32> {
    client
        .query(
            "SELECT n.nspname, c.relname, pg_relation_filenode(c.oid) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.oid >= 16384 AND c.relkind IN ('r', 'm')",
            &[],
        )
        .await
        .expect("file nodes")
        .iter()
        .map(|row| {
            let name = QualifiedName::qualified(row.get::<_, String>(0), row.get::<_, String>(1));
            (name, row.get::<_, u32>(2))
        })
        .collect()
}

/// Runs `sql` in session `a` (in a transaction held open while session `b` reads
/// `a`'s granted relation locks, when `in_transaction`), then commits.
async fn oracle(a: &Client, b: &Client, sql: &str, in_transaction: bool) -> Seen {
    let before = filenodes(a).await;
    let mut locks = BTreeMap::new();
    if in_transaction {
        a.batch_execute("BEGIN").await.expect("begin");
        a.batch_execute(sql)
            .await
            .expect("the statement runs in the oracle");
        let pid: i32 = a
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .expect("pid")
            .get(0);
        // Relations the statement created are invisible to `b` until the commit.
        for row in b
            .query(
                "SELECT n.nspname, c.relname, l.mode FROM pg_locks l \
                 JOIN pg_class c ON c.oid = l.relation \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE l.pid = $1 AND l.locktype = 'relation' AND l.granted AND c.oid >= 16384",
                &[&pid],
            )
            .await
            .expect("pg_locks")
        {
            let name = key(QualifiedName::qualified(
                row.get::<_, String>(0),
                row.get::<_, String>(1),
            ));
            let mode = pgshift::lock::LockMode::from_pg_locks_name(row.get(2)).expect("mode");
            let entry = locks.entry(name).or_insert(mode);
            *entry = (*entry).max(mode);
        }
        let after = filenodes(a).await;
        a.batch_execute("COMMIT").await.expect("commit");
        return Seen {
            locks,
            rewritten: changed(&before, &after),
        };
    }
    a.batch_execute(sql)
        .await
        .expect("the statement runs in the oracle");
    let after = filenodes(a).await;
    Seen {
        locks,
        rewritten: changed(&before, &after),
    }
}

fn changed(
    before: &BTreeMap<QualifiedName, u32>,
    after: &BTreeMap<QualifiedName, u32>,
) -> Vec<QualifiedName> {
    before
        .iter()
        .filter(|(name, node)| after.get(*name).is_some_and(|new| new != *node))
        .map(|(name, _)| name.clone())
        .collect()
}

/// The trace's locks on relations that existed before the statement, strongest mode
/// per relation (those it dropped included, under their old names, as the oracle's
/// second session still sees them).
fn traced_locks(traced: &StatementTrace) -> BTreeMap<QualifiedName, pgshift::lock::LockMode> {
    let mut out = BTreeMap::new();
    for lock in traced.locks.iter().flatten().filter(|lock| !lock.created) {
        let entry = out.entry(key(lock.relation.clone())).or_insert(lock.mode);
        *entry = (*entry).max(lock.mode);
    }
    out
}

/// Traces `files` with `target`, checking the clone is gone afterwards.
async fn traced(
    files: &[(String, Vec<Statement>)],
    target: &TraceTarget,
) -> Result<TraceRun, TraceError> {
    let _one_at_a_time = CLONES.lock().await;
    cluster();
    let before = cluster_dirs();
    let inputs: Vec<TraceInput<'_>> = files
        .iter()
        .map(|(path, statements)| TraceInput {
            path,
            statements,
            instrumented: &[],
        })
        .collect();
    let run = trace(&inputs, target).await;
    assert_eq!(cluster_dirs(), before, "the clone's directory is removed");
    run
}

fn find(run: &TraceRun, file: usize, index: usize) -> &StatementTrace {
    &run.files[file].statements[index]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_matches_the_server_for_plain_and_procedural_statements() {
    let forms = plain_forms();
    let plain_sql: String = forms.iter().map(|f| format!("{};\n", f.sql)).collect();
    let files = vec![
        ("0001_init.sql".to_owned(), parse(INIT)),
        ("0002_plain.sql".to_owned(), parse(&plain_sql)),
        ("0003_procedural.sql".to_owned(), parse(PROCEDURAL)),
    ];
    let run = traced(&files, &TraceTarget::Replay).await.expect("traces");
    assert!(matches!(
        run.nested_statements,
        NestedAvailability::Recorded
    ));

    // The oracle: the same history in a database of the test cluster.
    let db = database("trace_oracle", "");
    let a = client(&db).await;
    let b = client(&db).await;
    let mut checked_locks = 0;
    for (f, (path, statements)) in files.iter().enumerate() {
        for statement in statements {
            let traced = find(&run, f, statement.index);
            assert_eq!(traced.outcome, Outcome::Ran, "{path}: {}", statement.text);
            assert!(
                traced
                    .ddl
                    .iter()
                    .all(|d| !d.object_identity.contains("pgshift_trace")),
                "the tracer's own DDL is not the statement's: {:?}",
                traced.ddl
            );
            let seen = oracle(&a, &b, &statement.text, traced.in_transaction).await;
            if traced.in_transaction {
                assert_eq!(
                    traced_locks(traced),
                    seen.locks,
                    "locks of {}",
                    statement.text
                );
                checked_locks += 1;
            } else {
                assert!(traced.locks.is_none());
            }
            let mut rewritten: Vec<_> = traced.rewrites.iter().map(|r| r.table.clone()).collect();
            rewritten.sort();
            assert_eq!(rewritten, seen.rewritten, "rewrites of {}", statement.text);
        }
    }
    assert!(
        checked_locks > forms.len(),
        "locks compared for most statements"
    );

    // DDL: every plain form reports its own command.
    for form in &forms {
        let statement = files[1]
            .1
            .iter()
            .find(|s| s.text == form.sql)
            .expect("form");
        let traced = find(&run, 1, statement.index);
        assert!(
            traced.ddl.iter().any(|d| d.command_tag == form.tag),
            "{}: {:?}",
            form.sql,
            traced.ddl
        );
    }

    // The static side: a plain form's locks and rewrites are never understated.
    let scripts = scripts(&files);
    for item in &scripts[1].statements {
        let traced = find(&run, 1, item.statement.index);
        let understated: Vec<_> = compare(&item.classification, traced)
            .into_iter()
            .filter(|d| d.understated)
            .collect();
        assert!(
            understated.is_empty(),
            "{}: {understated:?}",
            item.statement.text
        );
    }

    check_procedural(&run, &scripts[2]);
}

/// What the procedural file's statements really did.
fn check_procedural(run: &TraceRun, script: &Script) {
    let events = QualifiedName::qualified("public", "events");
    let part = |n: &str| QualifiedName::qualified("public", format!("events_2026_{n}"));
    let table = |n: &str| QualifiedName::qualified("public", n);
    let access_exclusive = pgshift::lock::LockMode::AccessExclusive;

    // 0: the generated column, dropped and re-added from pg_attrdef's expression.
    let rebuild = find(run, 2, 0);
    let mut rewritten: Vec<_> = rebuild.rewrites.iter().map(|r| r.table.clone()).collect();
    rewritten.sort();
    assert_eq!(rewritten, vec![part("01"), part("02")]);
    assert!(rebuild
        .rewrites
        .iter()
        .all(|r| r.reasons.contains(&"default-value")));
    assert_eq!(rebuild.mode_on(&events), Some(access_exclusive));
    let mut dropped: Vec<_> = rebuild
        .ddl
        .iter()
        .filter(|d| d.dropped)
        .map(|d| d.object_identity.as_str())
        .collect();
    dropped.sort();
    assert_eq!(
        dropped,
        vec![
            "public.events.tag",
            "public.events_2026_01.tag",
            "public.events_2026_02.tag"
        ]
    );
    assert_eq!(
        rebuild
            .ddl
            .iter()
            .filter(|d| !d.dropped && d.command_tag == "ALTER TABLE")
            .count(),
        2,
        "both EXECUTEd ALTERs: {:?}",
        rebuild.ddl
    );
    let nested = rebuild.nested.as_ref().expect("nested statements recorded");
    assert!(
        nested.iter().any(|n| n.text.starts_with(
            "ALTER TABLE events ADD COLUMN tag text GENERATED ALWAYS AS (lower((payload ->> "
        )),
        "the text EXECUTE ran, built from pg_attrdef: {nested:?}"
    );
    let differences = compare(&script.statements[0].classification, rebuild);
    assert!(
        differences
            .iter()
            .any(|d| d.understated && d.relation == Some(part("01"))),
        "lint could not see the rewrite; the trace reports it: {differences:?}"
    );

    // 1: a data check reads events and changes nothing.
    let check = find(run, 2, 1);
    assert!(check.ddl.is_empty() && check.rewrites.is_empty());
    assert_eq!(
        check.mode_on(&part("01")),
        Some(pgshift::lock::LockMode::AccessShare)
    );

    // 2: on an empty table the guarded type change rewrites it.
    let widen = find(run, 2, 2);
    assert_eq!(widen.rewrites.len(), 1);
    assert_eq!(widen.rewrites[0].table, table("subscriptions"));
    assert_eq!(widen.rewrites[0].reasons, vec!["column-rewrite"]);

    // 3: the loop over pg_class creates one trigger per table through a function.
    let triggers = find(run, 2, 3);
    let created: Vec<_> = triggers
        .ddl
        .iter()
        .filter(|d| d.command_tag == "CREATE TRIGGER")
        .map(|d| d.object_identity.as_str())
        .collect();
    assert_eq!(
        created,
        vec![
            "touch_updated_at on public.accounts",
            "touch_updated_at on public.deliveries",
            "touch_updated_at on public.subscriptions",
        ]
    );
    for name in ["accounts", "deliveries", "subscriptions"] {
        assert_eq!(triggers.mode_on(&table(name)), Some(access_exclusive));
    }

    // 4: the index is created only when missing, under SHARE.
    let index = find(run, 2, 4);
    assert!(index.ddl.iter().any(|d| d.command_tag == "CREATE INDEX"
        && d.object_identity == "public.deliveries_subscription_idx"));
    assert_eq!(
        index.mode_on(&table("deliveries")),
        Some(pgshift::lock::LockMode::Share)
    );

    // 5: SELECT f('accounts') adds a column with a volatile default: a rewrite.
    let select = find(run, 2, 5);
    assert_eq!(select.rewrites.len(), 1);
    assert_eq!(select.rewrites[0].table, table("accounts"));
    assert_eq!(select.mode_on(&table("accounts")), Some(access_exclusive));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_target_is_dumped_with_its_own_major_and_traced() {
    let db = database("trace_live", INIT);
    let conninfo = cluster().connection_string(&db);
    let files = vec![("0002_procedural.sql".to_owned(), parse(PROCEDURAL))];
    let run = traced(&files, &TraceTarget::Live { conninfo })
        .await
        .expect("traces");
    let pgshift::trace::SchemaOrigin::Dump { pg_dump, .. } = &run.schema else {
        panic!("a dump: {:?}", run.schema);
    };
    let expected = cluster().bin("pg_dump");
    assert!(Path::new(pg_dump) == expected || cluster().version().major == 15);
    let rebuild = find(&run, 0, 0);
    assert_eq!(rebuild.outcome, Outcome::Ran);
    assert_eq!(rebuild.rewrites.len(), 2, "{:?}", rebuild.rewrites);
    // The live database is untouched.
    let live = client(&db).await;
    let tag_expr: String = live
        .query_one(
            "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef d JOIN pg_attribute a \
             ON a.attrelid = d.adrelid AND a.attnum = d.adnum \
             WHERE d.adrelid = 'events'::regclass AND a.attname = 'tag'",
            &[],
        )
        .await
        .expect("reads")
        .get(0);
    assert!(!tag_expr.contains("lower"), "{tag_expr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_statement_stops_the_trace_and_the_clone_is_removed_on_error() {
    let files = vec![(
        "0001.sql".to_owned(),
        parse(
            "CREATE TABLE t (id int); ALTER TABLE missing ADD COLUMN x int; CREATE INDEX ON t (id)",
        ),
    )];
    let run = traced(&files, &TraceTarget::Replay).await.expect("traces");
    let outcomes: Vec<_> = run.files[0].statements.iter().map(|s| &s.outcome).collect();
    assert_eq!(outcomes[0], &Outcome::Ran);
    assert!(
        matches!(outcomes[1], Outcome::Failed { sqlstate: Some(code), .. } if code == "42P01"),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[2], &Outcome::NotRun);

    // The tracer's own setup fails after the clone started: the clone still goes.
    let db = database("trace_clash", "CREATE SCHEMA pgshift_trace;");
    let conninfo = cluster().connection_string(&db);
    let err = traced(&files, &TraceTarget::Live { conninfo })
        .await
        .expect_err("the recorders' schema exists");
    assert!(matches!(err, TraceError::Probe(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_target_with_tablespaces_roles_and_extensions_is_traced() {
    // What lives outside the database: a tablespace holding a table, a role a policy
    // names, an extension a column's type comes from. A schema dump carries none of
    // the first two, and the clone restored it only once they were made there (it
    // was "tablespace … does not exist" before any statement was judged).
    let suffix = std::process::id();
    let (space, role) = (
        format!("trace_space_{suffix}"),
        format!("trace_reader_{suffix}"),
    );
    let location = cluster()
        .server_directory(&format!("trace-space-{suffix}"))
        .expect("a directory for the tablespace");
    let admin = database("trace_globals_admin", "");
    cluster()
        .psql(
            &admin,
            &format!(
                "CREATE TABLESPACE {space} LOCATION '{}'; CREATE ROLE {role} NOLOGIN;",
                location.display()
            ),
        )
        .expect("the cluster's tablespace and role");
    let db = database(
        "trace_globals",
        &format!(
            "CREATE EXTENSION citext;
             CREATE TABLE accounts (id int PRIMARY KEY, email citext) TABLESPACE {space};
             ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;
             CREATE POLICY readers ON accounts FOR SELECT TO {role} USING (true);"
        ),
    );
    let conninfo = cluster().connection_string(&db);
    let files = vec![(
        "0002_more.sql".to_owned(),
        parse(&format!(
            "DO $$ BEGIN EXECUTE 'ALTER TABLE accounts ADD COLUMN note citext'; END $$;
             CREATE TABLE audit (id int) TABLESPACE {space};
             GRANT SELECT ON accounts TO {role};
             CREATE POLICY writers ON accounts FOR INSERT TO {role} WITH CHECK (true);"
        )),
    )];
    let run = traced(&files, &TraceTarget::Live { conninfo })
        .await
        .expect("the clone restores the schema");
    let outcomes: Vec<_> = run.files[0].statements.iter().map(|s| &s.outcome).collect();
    assert_eq!(outcomes, vec![&Outcome::Ran; 4]);
    assert!(
        find(&run, 0, 0)
            .ddl
            .iter()
            .any(|d| d.command_tag == "ALTER TABLE"),
        "{:?}",
        find(&run, 0, 0).ddl
    );
}
