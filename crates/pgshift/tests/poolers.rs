//! Connections through a real PgBouncer (docs/POOLERS.md): without a server session
//! of its own (transaction mode) pgshift refuses before it sets or takes anything;
//! in session mode it works.

mod common;

use common::pooler::{PoolMode, Pooler};
use pgshift::cas::{self, CasError, Silent};
use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::refusal::RefusalCause;
use pgshift_sql::QualifiedName;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

const SCHEMA: &str = "CREATE TABLE items (id bigint PRIMARY KEY, qty int);
INSERT INTO items SELECT g, g FROM generate_series(1, 100) g;";

/// A plain client through the pooler (nothing set on it).
async fn plain(conninfo: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .expect("connects through the pooler");
    tokio::spawn(connection);
    client
}

/// The first value of each row `sql` returns, through the simple query protocol.
async fn values(client: &Client, sql: &str) -> Vec<String> {
    client
        .simple_query(sql)
        .await
        .expect("query")
        .into_iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// What each server backend of the pool shows a client: `pool_size` clients each
/// hold a transaction, so each runs on a backend of its own and together they cover
/// every server connection the pool may have. Per backend: `search_path`,
/// `statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`, and
/// how many prepared statements it holds.
async fn every_backend(conninfo: &str, pool_size: usize) -> Vec<Vec<String>> {
    let mut clients = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..pool_size {
        let client = plain(conninfo).await;
        let row = values(
            &client,
            "BEGIN; SELECT pg_catalog.concat_ws('|', pg_catalog.pg_backend_pid(), \
             pg_catalog.current_setting('search_path'), \
             pg_catalog.current_setting('statement_timeout'), \
             pg_catalog.current_setting('lock_timeout'), \
             pg_catalog.current_setting('idle_in_transaction_session_timeout'), \
             (SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_statements))",
        )
        .await;
        seen.push(row[0].split('|').map(str::to_owned).collect::<Vec<_>>());
        clients.push(client);
    }
    for client in &clients {
        values(client, "ROLLBACK").await;
    }
    seen
}

/// The defaults a fresh direct session of `db` shows, in the order of
/// [`every_backend`] (without the pid; no prepared statement).
async fn defaults(db: &str) -> Vec<String> {
    let client = common::client(db).await;
    let row = values(
        &client,
        "SELECT pg_catalog.concat_ws('|', pg_catalog.current_setting('search_path'), \
         pg_catalog.current_setting('statement_timeout'), \
         pg_catalog.current_setting('lock_timeout'), \
         pg_catalog.current_setting('idle_in_transaction_session_timeout'), 0)",
    )
    .await;
    row[0].split('|').map(str::to_owned).collect()
}

/// Asserts that no server backend behind the pooler carries anything of pgshift's,
/// and that the cluster holds no advisory lock and no `pgshift` schema.
async fn nothing_left(conninfo: &str, db: &str, pool_size: usize) {
    let expected = defaults(db).await;
    let backends = every_backend(conninfo, pool_size).await;
    let pids: std::collections::BTreeSet<&String> = backends.iter().map(|b| &b[0]).collect();
    assert_eq!(
        pids.len(),
        pool_size,
        "one backend per held transaction: {backends:?}"
    );
    for backend in &backends {
        assert_eq!(
            backend[1..],
            expected[..],
            "a pooled server backend: {backends:?}"
        );
    }
    let direct = common::client(db).await;
    let left = values(
        &direct,
        "SELECT pg_catalog.concat_ws('|', \
         (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_database d \
          ON d.oid OPERATOR(pg_catalog.=) l.database \
          WHERE l.locktype = 'advisory' AND d.datname = pg_catalog.current_database()), \
         (SELECT pg_catalog.count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'pgshift'))",
    )
    .await;
    assert_eq!(
        left,
        vec!["0|0".to_owned()],
        "advisory locks | pgshift schemas"
    );
}

fn budgets() -> SessionBudgets {
    SessionBudgets {
        lock_timeout_ms: 1_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 60_000,
    }
}

fn refused_cause(error: &pgshift::connect::ConnectError) -> RefusalCause {
    error
        .refusal()
        .unwrap_or_else(|| panic!("expected a refusal, got {error}"))
        .cause
}

/// A fresh database with [`SCHEMA`] behind a new pooler: the database, the pooler
/// (stopped when dropped), its connection string and spec.
fn pooled(prefix: &str, mode: PoolMode, size: u32) -> (String, Pooler, String, ConnectionSpec) {
    let cluster = common::cluster();
    let db = common::database(prefix, SCHEMA);
    let pooler = Pooler::start(cluster, mode, size);
    let conninfo = pooler.connection_string(cluster, &db);
    let spec = ConnectionSpec::parse(&conninfo).expect("spec");
    (db, pooler, conninfo, spec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_se_4_a_transaction_pooler_is_refused_before_anything_is_set() {
    let (db, _pooler, conninfo, spec) = pooled("pooled_txn", PoolMode::Transaction, 2);
    // Warm the pool: both server connections exist and are idle, the case where a
    // pooler may hand one client different backends or the same one twice.
    every_backend(&conninfo, 2).await;
    for _ in 0..3 {
        let error = connect(&spec, &budgets()).await.expect_err("refused");
        assert_eq!(refused_cause(&error), RefusalCause::PooledWithoutSession);
        let text = error.to_string();
        assert!(
            text.contains("pooled-without-session") && text.contains("has no server session"),
            "{text}"
        );
    }
    nothing_left(&conninfo, &db, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_session_attrs_behind_a_transaction_pooler_get_the_poolers_refusal() {
    // `target_session_attrs` is read before the pooler check (through the simple
    // query protocol, so no named statement is made before the answer): the result
    // is still the pooler's refusal, and nothing is left on a backend. (The driver's
    // extended protocol it replaced closed its statement again and, with an idle
    // pool, got the same backend back, so this does not tell the two apart; it pins
    // the outcome.)
    let (db, _pooler, conninfo, _spec) = pooled("pooled_attrs", PoolMode::Transaction, 2);
    every_backend(&conninfo, 2).await;
    for attrs in ["read-write", "primary"] {
        let spec = ConnectionSpec::parse(&format!("{conninfo} target_session_attrs={attrs}"))
            .expect("spec");
        for _ in 0..3 {
            let error = connect(&spec, &budgets()).await.expect_err("refused");
            assert_eq!(refused_cause(&error), RefusalCause::PooledWithoutSession);
        }
    }
    nothing_left(&conninfo, &db, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_se_4_a_transaction_pool_of_one_server_is_refused_too() {
    // One server connection: the pooler hands a client the same backend every time,
    // so only a second client's open transaction shows that it is not the client's.
    let (db, _pooler, conninfo, spec) = pooled("pooled_one", PoolMode::Transaction, 1);
    let error = connect(&spec, &budgets()).await.expect_err("refused");
    assert_eq!(refused_cause(&error), RefusalCause::PooledWithoutSession);
    nothing_left(&conninfo, &db, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_se_4_a_statement_pooler_is_refused_too() {
    let (db, _pooler, conninfo, spec) = pooled("pooled_stmt", PoolMode::Statement, 2);
    let error = connect(&spec, &budgets()).await.expect_err("refused");
    assert_eq!(refused_cause(&error), RefusalCause::PooledWithoutSession);
    assert!(
        error.to_string().contains("could not open a transaction"),
        "{error}"
    );
    // PgBouncer ends the server connection whose transaction it refused; the backend
    // notices the closed socket a moment later, so the open transaction may show
    // briefly, but it must go.
    let direct = common::client(&db).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let open = values(
            &direct,
            "SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity \
             WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database() \
             AND state OPERATOR(pg_catalog.=) 'idle in transaction'",
        )
        .await;
        if open == ["0"] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a transaction stayed open: {open:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(conninfo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_session_pool_fails_the_check_without_guessing() {
    // One server connection in session mode: the connection holds it, so the check's
    // second connection gets none. That is neither proof of a session nor of its
    // absence: the connection fails with a timeout that says why.
    let (_db, _pooler, conninfo, _spec) = pooled("pooled_full", PoolMode::Session, 1);
    let spec = ConnectionSpec::parse(&format!("{conninfo} connect_timeout=2")).expect("spec");
    let error = connect(&spec, &budgets())
        .await
        .expect_err("no room for the check");
    assert!(error.refusal().is_none(), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("session check timed out") && text.contains("room for one more client"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_se_4_runs_are_refused_before_their_advisory_lock() {
    let (db, _pooler, conninfo, spec) = pooled("pooled_runs", PoolMode::Transaction, 2);
    let table = QualifiedName::bare("items");
    let cause = |result: CasError| match result {
        CasError::Refused(refusal) => refusal.cause,
        other => panic!("expected a refusal, got {other}"),
    };
    let Err(resumed) = cas::resume(&spec, &table, &mut Silent).await else {
        panic!("resume ran behind a transaction pooler");
    };
    assert_eq!(cause(resumed), RefusalCause::PooledWithoutSession);
    let aborted = cas::abort(&spec, &table).await.expect_err("abort refused");
    assert_eq!(cause(aborted), RefusalCause::PooledWithoutSession);
    let status = cas::status(&spec).await.expect_err("status refused");
    assert_eq!(cause(status), RefusalCause::PooledWithoutSession);
    nothing_left(&conninfo, &db, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_pooler_gives_a_session_of_its_own() {
    let (_db, _pooler, _conninfo, spec) = pooled("pooled_session", PoolMode::Session, 4);
    let session = connect(&spec, &budgets())
        .await
        .expect("a session of its own");
    // The session's settings hold across transactions, on one backend.
    let first = values(session.client(), "SELECT pg_catalog.pg_backend_pid()").await;
    let path = values(session.client(), "SHOW search_path").await;
    let again = values(session.client(), "SELECT pg_catalog.pg_backend_pid()").await;
    assert_eq!(first, again);
    assert_eq!(path, vec!["pg_catalog, pg_temp".to_owned()]);
    assert!(cas::status(&spec).await.is_ok(), "status runs through it");
    drop(session);
}
