//! `pgshift::connect` against real PostgreSQL clusters from `pgshift-embedded`.
//!
//! Connection strings are resolved with an empty injected environment, so `PG*`
//! variables, `~/.pgpass` and `~/.postgresql/` of whoever runs the tests play no
//! part. TLS material is made with the `openssl` CLI at test time.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgshift::connect::{
    connect, ConnectError, ConnectionSpec, Environment, Session, SessionBudgets, TlsFileProblem,
};
use pgshift_embedded::{shared_cluster, Cluster, ClusterOptions};
use tokio_postgres::error::SqlState;

/// An environment with no variables and no home directory.
struct NoEnv;

impl Environment for NoEnv {
    fn var(&self, _name: &str) -> Option<String> {
        None
    }

    fn home_dir(&self) -> Option<PathBuf> {
        None
    }
}

/// An environment with only `PGPASSFILE` set.
struct PassfileEnv(PathBuf);

impl Environment for PassfileEnv {
    fn var(&self, name: &str) -> Option<String> {
        (name == "PGPASSFILE").then(|| self.0.to_string_lossy().into_owned())
    }

    fn home_dir(&self) -> Option<PathBuf> {
        None
    }
}

const BUDGETS: SessionBudgets = SessionBudgets {
    lock_timeout_ms: 1_234,
    statement_timeout_ms: 45_678,
    idle_in_transaction_timeout_ms: 7_000,
};

fn spec(text: &str) -> ConnectionSpec {
    match ConnectionSpec::parse_with_env(text, &NoEnv) {
        Ok(spec) => spec,
        Err(error) => panic!("connection string should parse: {error}"),
    }
}

async fn session(text: &str) -> Session {
    match connect(&spec(text), &BUDGETS).await {
        Ok(session) => session,
        Err(error) => panic!("should connect: {error}: {error:?}"),
    }
}

async fn connect_error(text: &str) -> ConnectError {
    match connect(&spec(text), &BUDGETS).await {
        Ok(session) => panic!("should fail, but connected to {}", session.endpoint()),
        Err(error) => error,
    }
}

async fn show(session: &Session, setting: &str) -> String {
    let row = session
        .client()
        .query_one("SELECT pg_catalog.current_setting($1)", &[&setting])
        .await
        .expect("current_setting");
    row.get(0)
}

async fn uses_tls(session: &Session) -> bool {
    let row = session
        .client()
        .query_one(
            "SELECT ssl FROM pg_catalog.pg_stat_ssl WHERE pid = pg_catalog.pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    row.get(0)
}

fn shared() -> &'static Cluster {
    shared_cluster().expect("shared cluster starts")
}

/// A role name unique to this test process.
fn role_name(label: &str) -> String {
    format!("connect_{label}_{}", std::process::id())
}

/// The whole error as text: `Display`, the source chain and `Debug`.
fn all_text(error: &ConnectError) -> String {
    let mut text = format!("{error} {error:?}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(" {cause} {cause:?}"));
        source = cause.source();
    }
    text
}

#[tokio::test]
async fn connects_by_url_and_by_key_value_string() {
    let cluster = shared();
    let db = cluster.fresh_database("connect_forms").expect("database");
    for text in [cluster.url(&db), cluster.connection_string(&db)] {
        let session = session(&text).await;
        assert_eq!(session.database(), db);
        assert_eq!(session.current_user(), "postgres");
        assert!(session.server_version_num() >= 140_000);
        assert!(session
            .endpoint()
            .ends_with(&format!(".s.PGSQL.{}", cluster.port())));
    }
}

#[tokio::test]
async fn session_runs_under_budgets_as_pgshift_with_catalog_search_path() {
    let cluster = shared();
    let text = format!(
        "{} application_name=someone_else options='-c work_mem=7MB'",
        cluster.connection_string("postgres")
    );
    let session = session(&text).await;
    assert_eq!(show(&session, "application_name").await, "pgshift");
    assert_eq!(show(&session, "lock_timeout").await, "1234ms");
    assert_eq!(show(&session, "statement_timeout").await, "45678ms");
    assert_eq!(
        show(&session, "idle_in_transaction_session_timeout").await,
        "7s"
    );
    assert_eq!(show(&session, "search_path").await, "pg_catalog, pg_temp");
    assert_eq!(show(&session, "work_mem").await, "7MB");
    assert_eq!(session.user_search_path(), ["$user", "public"]);
}

// INV: LK-2 — a session is never handed out without its budgets, and a budget of 0
// (no timeout) or beyond the caps is refused before connecting.
#[tokio::test]
async fn inv_lk_2_sessions_have_bounded_timeouts() {
    let cluster = shared();
    let session = session(&cluster.connection_string("postgres")).await;
    for (setting, expected) in [
        ("lock_timeout", "1234ms"),
        ("statement_timeout", "45678ms"),
        ("idle_in_transaction_session_timeout", "7s"),
    ] {
        assert_eq!(show(&session, setting).await, expected, "{setting}");
    }
    let unbounded = [
        SessionBudgets {
            lock_timeout_ms: 0,
            ..BUDGETS
        },
        SessionBudgets {
            statement_timeout_ms: 0,
            ..BUDGETS
        },
        SessionBudgets {
            idle_in_transaction_timeout_ms: 0,
            ..BUDGETS
        },
        SessionBudgets {
            lock_timeout_ms: SessionBudgets::LOCK_TIMEOUT_MS_MAX + 1,
            ..BUDGETS
        },
    ];
    for budgets in unbounded {
        let result =
            pgshift::connect::connect(&spec(&cluster.connection_string("postgres")), &budgets)
                .await;
        assert!(
            matches!(result, Err(ConnectError::InvalidBudget { .. })),
            "{budgets:?} must be refused"
        );
    }
}

#[tokio::test]
async fn user_search_path_is_read_from_the_role() {
    let cluster = shared();
    let db = cluster
        .fresh_database("connect_search_path")
        .expect("database");
    let role = role_name("sp");
    cluster
        .psql(
            "postgres",
            &format!(
                "CREATE ROLE {role} LOGIN; \
                 ALTER ROLE {role} SET search_path = \"My App\", Audit, public;"
            ),
        )
        .expect("role with a search_path");
    let text = format!(
        "host={} port={} user={role} dbname={db}",
        cluster.socket_dir().display(),
        cluster.port()
    );
    let session = session(&text).await;
    assert_eq!(session.current_user(), role);
    assert_eq!(session.user_search_path(), ["My App", "audit", "public"]);
    assert_eq!(show(&session, "search_path").await, "pg_catalog, pg_temp");
}

#[tokio::test]
async fn setup_queries_cannot_be_shadowed_by_the_users_schemas() {
    let cluster = shared();
    let db = cluster.fresh_database("connect_shadow").expect("database");
    let role = role_name("shadow");
    cluster
        .psql(
            &db,
            &format!(
                "CREATE ROLE {role} LOGIN; \
                 CREATE SCHEMA trap; \
                 CREATE FUNCTION trap.current_setting(text) RETURNS text \
                   LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'shadowed'; END $$; \
                 CREATE FUNCTION trap.current_database() RETURNS name \
                   LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'shadowed'; END $$; \
                 GRANT USAGE ON SCHEMA trap TO {role}; \
                 ALTER ROLE {role} SET search_path = trap, pg_catalog;"
            ),
        )
        .expect("a schema that shadows catalog functions");
    let text = format!(
        "host={} port={} user={role} dbname={db}",
        cluster.socket_dir().display(),
        cluster.port()
    );
    let session = session(&text).await;
    assert_eq!(session.user_search_path(), ["trap", "pg_catalog"]);
    assert_eq!(session.database(), db);
    let row = session
        .client()
        .query_one("SELECT current_setting('search_path')", &[])
        .await
        .expect("unqualified call resolves to pg_catalog now");
    assert_eq!(row.get::<_, String>(0), "pg_catalog, pg_temp");
}

#[tokio::test]
async fn target_session_attrs_pick_or_refuse_the_primary() {
    let cluster = shared();
    let base = cluster.connection_string("postgres");
    for attrs in ["read-write", "primary", "prefer-standby", "any"] {
        session(&format!("{base} target_session_attrs={attrs}")).await;
    }
    for attrs in ["standby", "read-only"] {
        let error = connect_error(&format!("{base} target_session_attrs={attrs}")).await;
        assert!(
            matches!(error, ConnectError::SessionAttrsMismatch { wanted, .. } if wanted == attrs),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn later_hosts_are_tried_when_earlier_ones_fail() {
    let cluster = shared();
    let text = format!(
        "host=/nonexistent-socket-dir,{} port=1,{} user=postgres dbname=postgres",
        cluster.socket_dir().display(),
        cluster.port()
    );
    let session = session(&text).await;
    assert!(session
        .endpoint()
        .starts_with(&cluster.socket_dir().display().to_string()));
}

#[tokio::test]
async fn sslmode_require_over_a_unix_socket_connects_without_tls() {
    let cluster = shared();
    let session = session(&format!(
        "{} sslmode=require",
        cluster.connection_string("postgres")
    ))
    .await;
    assert!(!uses_tls(&session).await);
}

/// A TCP cluster whose `pg_hba.conf` asks for passwords (and client certificates
/// for `certuser`), with TLS on. The files live in `dir`, which outlives `cluster`.
struct TcpServer {
    cluster: Cluster,
    dir: TempDir,
}

impl TcpServer {
    async fn start() -> TcpServer {
        let server_user = fs::metadata(shared().data_dir()).expect("shared data dir");
        let dir = TempDir::new("tls");
        make_certificates(dir.path()).await;
        for name in ["server.key", "server.crt", "ca.crt"] {
            std::os::unix::fs::chown(
                dir.path().join(name),
                Some(server_user.uid()),
                Some(server_user.gid()),
            )
            .expect("chown to the server's user");
        }
        let hba = dir.path().join("pg_hba.conf");
        fs::write(
            &hba,
            "local all all trust\n\
             hostssl all certuser 127.0.0.1/32 cert\n\
             host all postgres 127.0.0.1/32 trust\n\
             host all all 127.0.0.1/32 scram-sha-256\n",
        )
        .expect("write pg_hba.conf");
        set_mode(&hba, 0o644);
        let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        let options = ClusterOptions::new()
            .tcp(true)
            .setting("hba_file", path("pg_hba.conf"))
            .setting("ssl", "on")
            .setting("ssl_cert_file", path("server.crt"))
            .setting("ssl_key_file", path("server.key"))
            .setting("ssl_ca_file", path("ca.crt"));
        let cluster = Cluster::start(&options).expect("tcp cluster with tls starts");
        cluster
            .psql("postgres", "CREATE ROLE certuser LOGIN")
            .expect("certificate role");
        TcpServer { cluster, dir }
    }

    /// A TCP connection string to `127.0.0.1` with extra parameters.
    fn tcp(&self, extra: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres {extra}",
            self.cluster.port()
        )
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
}

#[tokio::test]
async fn wrong_password_is_a_typed_authentication_error_that_hides_the_password() {
    let server = TcpServer::start().await;
    let role = "pw_user";
    let right = "right-Passw0rd-4c1d";
    let wrong = "wr0ng-Passw0rd-9f3e";
    server
        .cluster
        .psql(
            "postgres",
            &format!("CREATE ROLE {role} LOGIN PASSWORD '{right}'"),
        )
        .expect("role with a password");
    let base = format!(
        "host=127.0.0.1 port={} user={role} dbname=postgres",
        server.cluster.port()
    );

    let error = connect_error(&format!("{base} password={wrong}")).await;
    match &error {
        ConnectError::AuthenticationFailed { sqlstate, user, .. } => {
            assert_eq!(*sqlstate, SqlState::INVALID_PASSWORD);
            assert_eq!(user, role);
        }
        other => panic!("expected an authentication failure, got {other:?}"),
    }
    assert!(error.is_authentication_failure());
    let text = all_text(&error);
    assert!(!text.contains(wrong), "{text}");

    let session = session(&format!("{base} password={right} sslmode=disable")).await;
    assert_eq!(session.current_user(), role);
    assert!(!uses_tls(&session).await);

    let passfile = server.dir.path().join("pgpass");
    fs::write(&passfile, format!("127.0.0.1:*:postgres:{role}:{right}\n")).expect("write passfile");
    set_mode(&passfile, 0o600);
    let spec = ConnectionSpec::parse_with_env(&base, &PassfileEnv(passfile)).expect("parses");
    let session = connect(&spec, &BUDGETS)
        .await
        .expect("password from the passfile");
    assert_eq!(session.current_user(), role);
    assert!(!format!("{spec} {spec:?}").contains(right));
}

#[tokio::test]
async fn tls_is_used_by_require_and_prefer_and_not_by_disable() {
    let server = TcpServer::start().await;
    for mode in ["require", "prefer", "allow"] {
        let session = session(&server.tcp(&format!("sslmode={mode}"))).await;
        assert!(uses_tls(&session).await, "sslmode={mode}");
    }
    let session = session(&server.tcp("sslmode=disable")).await;
    assert!(!uses_tls(&session).await);
}

#[tokio::test]
async fn verify_full_checks_the_chain_and_the_host_name() {
    let server = TcpServer::start().await;
    let ca = server.file("ca.crt");
    let other = server.file("other-ca.crt");
    let port = server.cluster.port();
    for host in ["localhost", "127.0.0.1"] {
        let text = format!("host={host} port={port} user=postgres dbname=postgres sslmode=verify-full sslrootcert={ca}");
        assert!(uses_tls(&session(&text).await).await, "{host}");
    }

    let error =
        connect_error(&server.tcp(&format!("sslmode=verify-full sslrootcert={other}"))).await;
    assert!(
        matches!(
            error,
            ConnectError::TlsHandshake {
                source: rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "tls handshake with 127.0.0.1:{port} failed: invalid peer certificate: UnknownIssuer; \
             the server's certificate is not signed by a trusted root; point sslrootcert= at the \
             certificate of the CA that signed it"
        )
    );

    let misnamed = format!("host=db.invalid hostaddr=127.0.0.1 port={port} user=postgres dbname=postgres sslrootcert={ca}");
    let error = connect_error(&format!("{misnamed} sslmode=verify-full")).await;
    assert!(
        matches!(
            error,
            ConnectError::TlsHandshake {
                source: rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. }
                ),
                ..
            }
        ),
        "{error:?}"
    );
    let session = session(&format!("{misnamed} sslmode=verify-ca")).await;
    assert!(
        uses_tls(&session).await,
        "verify-ca does not check the name"
    );
}

#[tokio::test]
async fn a_configured_root_makes_require_verify_the_chain() {
    let server = TcpServer::start().await;
    let other = server.file("other-ca.crt");
    let error = connect_error(&server.tcp(&format!("sslmode=require sslrootcert={other}"))).await;
    assert!(
        matches!(error, ConnectError::TlsHandshake { .. }),
        "{error:?}"
    );
    let missing = server.file("missing.crt");
    let error =
        connect_error(&server.tcp(&format!("sslmode=verify-ca sslrootcert={missing}"))).await;
    assert!(
        matches!(&error, ConnectError::TlsFile { path, problem: TlsFileProblem::NotFound } if path == Path::new(&missing)),
        "{error:?}"
    );
}

#[tokio::test]
async fn client_certificates_authenticate() {
    let server = TcpServer::start().await;
    let ca = server.file("ca.crt");
    let with_cert = format!(
        "host=localhost port={} user=certuser dbname=postgres sslmode=verify-full sslrootcert={ca} sslcert={} sslkey={}",
        server.cluster.port(),
        server.file("client.crt"),
        server.file("client.key"),
    );
    let session = session(&with_cert).await;
    assert_eq!(session.current_user(), "certuser");
    assert!(uses_tls(&session).await);

    let without_cert = format!(
        "host=localhost port={} user=certuser dbname=postgres sslmode=verify-full sslrootcert={ca}",
        server.cluster.port()
    );
    let error = connect_error(&without_cert).await;
    assert!(error.is_authentication_failure(), "{error:?}");
}

/// Makes `ca.crt`, `server.{crt,key}` (for `localhost` and `127.0.0.1`, signed by
/// the CA), `client.{crt,key}` (`CN=certuser`, signed by the CA) and an unrelated
/// `other-ca.crt`, all with P-256 keys.
async fn make_certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for (name, subject) in [
        ("ca", "/CN=pgshift test ca"),
        ("other-ca", "/CN=pgshift other ca"),
    ] {
        let key = format!("{name}.key");
        let crt = format!("{name}.crt");
        let mut args = vec![
            "req", "-x509", "-days", "2", "-subj", subject, "-keyout", &key, "-out", &crt,
        ];
        args.extend(ec);
        args.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(dir, &args).await;
    }
    fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write server.ext");
    fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .expect("write client.ext");
    for (name, subject) in [("server", "/CN=localhost"), ("client", "/CN=certuser")] {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let crt = format!("{name}.crt");
        let ext = format!("{name}.ext");
        let mut args = vec!["req", "-subj", subject, "-keyout", &key, "-out", &csr];
        args.extend(ec);
        openssl(dir, &args).await;
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &ext,
                "-out",
                &crt,
            ],
        )
        .await;
        set_mode(&dir.join(&key), 0o600);
    }
    for name in ["ca.crt", "other-ca.crt", "server.crt", "client.crt"] {
        set_mode(&dir.join(name), 0o644);
    }
}

async fn openssl(dir: &Path, args: &[&str]) {
    let mut command = tokio::process::Command::new("openssl");
    command.args(args).current_dir(dir).kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("openssl finishes within 60 s")
        .expect("openssl runs");
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A directory under the system temp dir, removed on drop.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(label: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "pgshift-connect-{label}-{}-{unique}",
            std::process::id()
        ));
        fs::create_dir_all(&path).expect("create temp dir");
        set_mode(&path, 0o755);
        TempDir { path }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}
