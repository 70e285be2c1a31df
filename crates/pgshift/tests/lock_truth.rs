//! Lock truth: every relation lock PostgreSQL takes for a statement is stated by the
//! classifier, on every relation the statement touches — not only its target.
//!
//! The corpus (`lock_truth/corpus.rs`) is generated from templates over
//! `data/lock_truth/schema.sql`, a schema with partitioned tables (a default
//! partition, a sub-partitioned partition, tables ready to attach), inheritance, foreign
//! keys both ways, views on views, rules, policies reading other tables, types and
//! domains used by tables, publications, statistics and sequences. Each statement runs
//! in session A as `BEGIN; <statement>`, held open while session B reads A's granted
//! relation locks from `pg_locks`, then rolled back, so every statement sees the same
//! database.
//!
//! Each observed lock (strongest mode per relation; system catalogs left out) must be
//! covered by what the classifier states, twice:
//!
//! * **live**: with the facts `pgshift::plan::plan` reads from the same database (the
//!   path of `pgshift plan`): by a lock on the relation by name, on a table whose
//!   partitions it recurses to, or on the table that owns it (a table's lock covers its
//!   indexes, TOAST table and column sequences, in `index_mode` when set). With live
//!   facts every related relation must be named: a role left unnamed is a failure,
//!   except an open-ended one (`unknown-dependents`).
//! * **offline**: with no facts and no server version (`pgshift lint`): as above, or by
//!   a lock stated by role whose members (read here with the test's own catalog
//!   queries, `lock_truth/oracle.rs`) include the relation.
//!
//! A stated mode weaker than the observed one, or no statement at all, fails the test,
//! which prints every such lock with its statement. Stronger statements are counted,
//! not failed. Statements the server refuses (wrong kind of table, dependencies,
//! not allowed in a transaction block) are counted and skipped: `lock_modes.rs` covers
//! the statements that must run outside a transaction block.
//!
//! A second test checks the classifier's lists of built-in function and type names
//! against the server's `pg_catalog`.
//!
//! `PGSHIFT_WRITE_LOCK_TRUTH=1` writes the per-family figures to
//! `tests/data/lock_truth/observed-pg<major>.md`. Run it on another major with
//! `PGSHIFT_PG_BIN=/var/cache/pgshift/pg/18/bin`.

#[path = "lock_truth/corpus.rs"]
mod corpus;
#[path = "lock_truth/judge.rs"]
mod judge;
#[path = "lock_truth/oracle.rs"]
mod oracle;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use pgshift::classify::{classify, Classification, Context};
use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::lock::{LockMode, Role};
use pgshift::plan::{plan, PlanInput};
use pgshift::script::TransactionMode;
use pgshift_embedded::{Cluster, ClusterOptions};
use tokio_postgres::{Client, NoTls};

use corpus::Case;
use judge::{err, judge, locks_of, stated, Cover};
use oracle::Oracle;

const SCHEMA: &str = include_str!("data/lock_truth/schema.sql");
const DATABASE: &str = "lock_truth";
const WRITE_ENV: &str = "PGSHIFT_WRITE_LOCK_TRUTH";
/// Runs only the statements containing this text (for investigating one family).
const FILTER_ENV: &str = "PGSHIFT_LOCK_TRUTH_FILTER";
/// Prints every lock stated stronger than the server took it (with `--nocapture`).
const STRONGER_ENV: &str = "PGSHIFT_LOCK_TRUTH_STRONGER";

async fn client(conninfo: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    client
        .batch_execute("SET statement_timeout = '60s'")
        .await
        .expect("statement_timeout");
    client
}

/// One uncovered lock, for the failure message.
struct Miss {
    path: &'static str,
    family: &'static str,
    sql: String,
    relation: String,
    observed: LockMode,
    stated: Option<LockMode>,
}

/// Counts per family.
#[derive(Default, Clone)]
struct Tally {
    statements: usize,
    refused_by_server: usize,
    observed: usize,
    live_named: usize,
    live_weaker: usize,
    offline_named: usize,
    offline_by_role: usize,
    offline_weaker: usize,
    live_stronger: usize,
}

/// Runs `case` in A inside a transaction block; the locks it holds, or the server's
/// error.
async fn observe(
    a: &Client,
    a_pid: i32,
    b: &Client,
    case: &Case,
) -> Result<Result<BTreeMap<u32, LockMode>, String>, String> {
    a.batch_execute("BEGIN; SET LOCAL lock_timeout = '5s'")
        .await
        .map_err(err)?;
    if case.as_reader {
        a.batch_execute("SET LOCAL ROLE lt_reader")
            .await
            .map_err(err)?;
    }
    let outcome = match a.batch_execute(&case.sql).await {
        Ok(()) => Ok(locks_of(b, a_pid).await?),
        Err(e) => Err(err(e)),
    };
    a.batch_execute("ROLLBACK").await.map_err(err)?;
    Ok(outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_1_every_related_relation_lock_is_stated() {
    let started = Instant::now();
    let cluster = Cluster::start(&ClusterOptions::new().setting("autovacuum", "off"))
        .expect("a PostgreSQL cluster");
    let version = cluster.version();
    let major = version.major;
    let admin = client(&cluster.connection_string("postgres")).await;
    for sql in [
        "CREATE ROLE lt_owner".to_owned(),
        "CREATE ROLE lt_reader".to_owned(),
        format!("CREATE DATABASE {DATABASE}"),
        format!("ALTER DATABASE {DATABASE} SET search_path = shop, public"),
    ] {
        admin.batch_execute(&sql).await.expect("roles and database");
    }
    cluster.psql(DATABASE, SCHEMA).expect("schema loads");
    let conninfo = cluster.connection_string(DATABASE);
    let a = client(&conninfo).await;
    let b = client(&conninfo).await;
    let a_pid: i32 = a
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    let spec = ConnectionSpec::parse(&conninfo).expect("spec");
    let budgets = SessionBudgets {
        lock_timeout_ms: 5_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 60_000,
    };
    let planner = connect(&spec, &budgets).await.expect("pgshift session");
    let mut oracle = Oracle::load(&b).await.expect("catalog");

    let filter = std::env::var(FILTER_ENV).unwrap_or_default();
    let show_stronger = std::env::var(STRONGER_ENV).is_ok_and(|v| v == "1");
    let cases: Vec<Case> = corpus::cases()
        .into_iter()
        .filter(|c| c.sql.contains(&filter))
        .collect();
    let mut timings = [std::time::Duration::ZERO; 3];
    // One plan of every statement, each as a file of its own: one catalog snapshot, as
    // `pgshift plan` reads it for a directory. The database is the same for every
    // statement (each is rolled back), so these are the facts each one's plan reads.
    let t0 = Instant::now();
    let parsed: Vec<_> = cases
        .iter()
        .map(|case| {
            let statements =
                pgshift_sql::parse(&case.sql).unwrap_or_else(|e| panic!("{}: {e}", case.sql));
            assert_eq!(statements.len(), 1, "one statement per case: {}", case.sql);
            statements
        })
        .collect();
    let inputs = parsed
        .iter()
        .enumerate()
        .map(|(index, statements)| PlanInput {
            path: format!("case-{index}"),
            statements: statements.clone(),
        })
        .collect();
    // The plan reads the facts of every case in one snapshot; each case is then judged
    // on its own with them (each runs alone and is rolled back, while a plan of several
    // files judges each in the state the files before it leave, CO-12).
    let snapshot = plan(&planner, inputs, TransactionMode::File)
        .await
        .expect("plan")
        .snapshot;
    let planned: Vec<Classification> = parsed
        .iter()
        .map(|statements| {
            let knowledge = pgshift::script::Knowledge {
                facts: Some(&snapshot),
                server_version_num: Some(snapshot.server.version_num),
                created_earlier: None,
            };
            pgshift::script::analyze(statements.clone(), TransactionMode::File, knowledge)
                .statements[0]
                .classification
                .clone()
        })
        .collect();
    let plan_time = t0.elapsed();
    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut misses: Vec<Miss> = Vec::new();
    let mut unnamed_live: Vec<String> = Vec::new();
    let mut roles_used: BTreeMap<Role, usize> = BTreeMap::new();
    let mut server_errors: HashMap<String, usize> = HashMap::new();
    for (index, case) in cases.iter().enumerate() {
        let tally = tallies.entry(case.family).or_default();
        tally.statements += 1;
        let statements = &parsed[index];
        let t0 = Instant::now();
        let offline = classify(
            &statements[0],
            &Context {
                in_transaction: true,
                ..Context::default()
            },
        );
        let live = &planned[index];
        timings[0] += t0.elapsed();
        let t0 = Instant::now();
        for lock in &live.related_locks {
            if lock.related_to.role != Role::UnknownDependents {
                unnamed_live.push(format!("{}: {}", case.sql, lock.description));
            }
        }
        let observed = observe(&a, a_pid, &b, case).await.expect("session A");
        timings[1] += t0.elapsed();
        let t0 = Instant::now();
        let observed = match observed {
            Ok(observed) => observed,
            Err(error) => {
                tally.refused_by_server += 1;
                let code = error.rsplit('(').next().unwrap_or("").trim_end_matches(')');
                *server_errors.entry(code.to_owned()).or_default() += 1;
                continue;
            }
        };
        for s in stated(live, &oracle) {
            let seen = observed.get(&s.oid).copied();
            if seen.is_none_or(|seen| seen < s.mode) {
                tally.live_stronger += 1;
                if show_stronger {
                    let name = oracle
                        .rels
                        .get(&s.oid)
                        .map_or_else(String::new, |r| r.label());
                    println!(
                        "[stronger] {} | {} | {name}: stated {}, observed {}",
                        case.family,
                        case.sql,
                        s.mode.sql_name(),
                        seen.map_or("nothing", |m| m.sql_name())
                    );
                }
            }
        }
        for (oid, mode) in observed {
            let Some(rel) = oracle.rels.get(&oid).cloned() else {
                continue; // created by the statement itself
            };
            if rel.is_system(oid) {
                continue;
            }
            tally.observed += 1;
            for (path, classification) in [("live", live), ("offline", &offline)] {
                let cover = judge(&b, &mut oracle, classification, oid, mode)
                    .await
                    .expect("role members");
                match (path, cover) {
                    ("live", Cover::Named) => tally.live_named += 1,
                    ("live", Cover::Role(role)) => {
                        tally.live_named += 1;
                        *roles_used.entry(role).or_default() += 1;
                    }
                    (_, Cover::Named) => tally.offline_named += 1,
                    (_, Cover::Role(role)) => {
                        tally.offline_by_role += 1;
                        *roles_used.entry(role).or_default() += 1;
                    }
                    (_, Cover::Weaker(stated)) => {
                        if path == "live" {
                            tally.live_weaker += 1;
                        } else {
                            tally.offline_weaker += 1;
                        }
                        misses.push(Miss {
                            path,
                            family: case.family,
                            sql: case.sql.clone(),
                            relation: rel.label(),
                            observed: mode,
                            stated,
                        });
                    }
                }
            }
        }
        timings[2] += t0.elapsed();
        let observed_now = locks_of(&b, a_pid).await.expect("no locks left");
        assert!(
            observed_now.is_empty(),
            "A still holds locks after ROLLBACK"
        );
    }
    eprintln!("plan {plan_time:.1?}; offline classification, observation, judging: {timings:.1?}");
    let report = render(
        major,
        &version.to_string(),
        &tallies,
        &roles_used,
        &server_errors,
    );
    eprintln!("{report}");
    if std::env::var(WRITE_ENV).is_ok_and(|v| v == "1") {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/lock_truth/observed-pg{major}.md"));
        std::fs::write(&path, &report).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    eprintln!(
        "lock_truth: {} statements on PostgreSQL {} in {:.1?}",
        cases.len(),
        version,
        started.elapsed()
    );
    let mut failure = String::new();
    for m in &misses {
        let _ = writeln!(
            failure,
            "[{}] {} | {} | {}: observed {}, stated {}",
            m.path,
            m.family,
            m.sql,
            m.relation,
            m.observed,
            m.stated
                .map_or_else(|| "nothing".to_owned(), |s| s.to_string())
        );
    }
    for u in &unnamed_live {
        let _ = writeln!(failure, "[live] left unnamed: {u}");
    }
    assert!(
        failure.is_empty(),
        "{} lock(s) stated weaker than PostgreSQL {major} takes them, {} related lock(s) left unnamed with live facts:\n{failure}",
        misses.len(),
        unnamed_live.len()
    );
}

/// The classifier takes an unqualified call (or cast) of a name on its built-in lists
/// for PostgreSQL's own, whose locks are its statement's: each list must hold every
/// function (and type) name in this server's `pg_catalog`, or a call of a new built-in
/// would be stated as a user function's. `PGSHIFT_UPDATE_BUILTINS=1` adds what the server
/// has to the lists instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_1_builtin_names_cover_the_servers_catalog() {
    use pgshift::classify::builtins;
    let cluster = Cluster::start(&ClusterOptions::new()).expect("a PostgreSQL cluster");
    let admin = client(&cluster.connection_string("postgres")).await;
    let update = std::env::var("PGSHIFT_UPDATE_BUILTINS").is_ok_and(|v| v == "1");
    // (file, list, membership, the server's names)
    type List = (&'static str, &'static str, fn(&str) -> bool, &'static str);
    let lists: [List; 2] = [
        (
            "functions.txt",
            builtins::FUNCTIONS,
            builtins::is_function,
            "SELECT DISTINCT proname::text FROM pg_proc WHERE pronamespace = 'pg_catalog'::regnamespace",
        ),
        (
            "types.txt",
            builtins::TYPES,
            builtins::is_type,
            "SELECT DISTINCT typname::text FROM pg_type WHERE typnamespace = 'pg_catalog'::regnamespace",
        ),
    ];
    let mut report = String::new();
    for (file, list, known, sql) in lists {
        let names: Vec<String> = admin
            .query(sql, &[])
            .await
            .expect("catalog names")
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(
            names.len() > 400,
            "{file}: the server lists {} names",
            names.len()
        );
        let missing: Vec<&String> = names.iter().filter(|n| !known(n)).collect();
        if update && !missing.is_empty() {
            let mut all: Vec<&str> = list
                .lines()
                .chain(missing.iter().map(|n| n.as_str()))
                .collect();
            all.sort_unstable();
            all.dedup();
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/classify/builtins")
                .join(file);
            std::fs::write(&path, all.join("\n") + "\n").expect("writes the list");
        } else if !missing.is_empty() {
            let _ = writeln!(
                report,
                "{file} lacks {} of the server's names: {missing:?}",
                missing.len()
            );
        }
    }
    assert!(
        report.is_empty(),
        "built-in names of PostgreSQL {} missing (run with PGSHIFT_UPDATE_BUILTINS=1):\n{report}",
        cluster.version().major
    );
}

fn render(
    major: u32,
    version: &str,
    tallies: &BTreeMap<&'static str, Tally>,
    roles: &BTreeMap<Role, usize>,
    errors: &HashMap<String, usize>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Lock truth on PostgreSQL {version}\n");
    let _ = writeln!(
        out,
        "Generated by `crates/pgshift/tests/lock_truth.rs` with `{WRITE_ENV}=1` (PostgreSQL {major}). \
         Each statement ran in a transaction block held open while another session read `pg_locks`; \
         every relation lock observed (strongest mode per relation, system catalogs left out) was \
         compared with the classifier's statement, with live facts (`plan`) and offline (`lint`).\n"
    );
    let _ = writeln!(
        out,
        "| family | statements | refused by the server | relation locks observed | live: stated | live: weaker | live: stated stronger | offline: by name | offline: by role | offline: weaker |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    let mut total = Tally::default();
    for (family, t) in tallies {
        let _ = writeln!(
            out,
            "| {family} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.statements,
            t.refused_by_server,
            t.observed,
            t.live_named,
            t.live_weaker,
            t.live_stronger,
            t.offline_named,
            t.offline_by_role,
            t.offline_weaker
        );
        total.statements += t.statements;
        total.refused_by_server += t.refused_by_server;
        total.observed += t.observed;
        total.live_named += t.live_named;
        total.live_weaker += t.live_weaker;
        total.live_stronger += t.live_stronger;
        total.offline_named += t.offline_named;
        total.offline_by_role += t.offline_by_role;
        total.offline_weaker += t.offline_weaker;
    }
    let _ = writeln!(
        out,
        "| **all** | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        total.statements,
        total.refused_by_server,
        total.observed,
        total.live_named,
        total.live_weaker,
        total.live_stronger,
        total.offline_named,
        total.offline_by_role,
        total.offline_weaker
    );
    let _ = writeln!(out, "Locks covered by a statement by role:\n");
    for (role, count) in roles {
        let _ = writeln!(out, "- `{role}`: {count}");
    }
    let mut codes: Vec<_> = errors.iter().collect();
    codes.sort();
    let _ = writeln!(
        out,
        "\nServer refusals by SQLSTATE: {}",
        codes
            .iter()
            .map(|(c, n)| format!("{c} × {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}
