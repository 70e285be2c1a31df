//! What `pgshift` says when it cannot connect: the server's own words (FATAL text
//! and SQLSTATE) or the operating system's, and the next step, with exit code 1 and
//! never the password; and which connection string wins (`--url`, then
//! `DATABASE_URL`, then the `PG*` variables).
//!
//! One TCP cluster whose `pg_hba.conf` asks `pw_user` for a password, lets a few
//! roles in without one and has no line for `stranger`; a second cluster is shut
//! down (smart mode) under a held session to get SQLSTATE 57P03.

mod common;

use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{pgshift_in_env, Run};
use pgshift_embedded::{Cluster, ClusterOptions};

const PASSWORD: &str = "Corr3ct-h0rse-7b1e";
const WRONG: &str = "wr0ng-b4ttery-2c9d";

const HBA: &str = "\
local all all trust
host all postgres 127.0.0.1/32 trust
host all pw_user 127.0.0.1/32 scram-sha-256
host all lim_user 127.0.0.1/32 trust
host all plain_user 127.0.0.1/32 trust
host all nologin_user 127.0.0.1/32 trust
";

fn server() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let cluster = Cluster::start(&ClusterOptions::new().tcp(true).hba(HBA))
            .expect("a TCP cluster with password authentication starts");
        cluster
            .psql(
                "postgres",
                &format!(
                    "CREATE ROLE pw_user LOGIN PASSWORD '{PASSWORD}';
                     CREATE ROLE lim_user LOGIN CONNECTION LIMIT 0;
                     CREATE ROLE plain_user LOGIN;
                     CREATE ROLE nologin_user NOLOGIN;
                     CREATE DATABASE private_db;
                     REVOKE CONNECT ON DATABASE private_db FROM PUBLIC;"
                ),
            )
            .expect("roles and databases");
        cluster
    })
}

fn port() -> u16 {
    server().port()
}

fn socket() -> String {
    server().socket_dir().to_string_lossy().into_owned()
}

/// `pgshift plan --url URL --sql 'SELECT 1'` in a clean environment plus `env`.
fn plan(url: &str, env: &[(&str, &str)]) -> Run {
    pgshift_in_env(&["plan", "--url", url, "--sql", "SELECT 1"], env)
}

/// Asserts a failed connection: exit code 1, nothing on stdout, exactly `line` on
/// stderr, and no password anywhere.
fn assert_refused(run: &Run, line: &str) {
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr, format!("{line}\n"));
    for secret in [PASSWORD, WRONG] {
        assert!(!run.stderr.contains(secret), "{}", run.stderr);
    }
}

#[test]
fn a_missing_database_says_createdb() {
    let url = format!(
        "host={} port={} user=postgres dbname=nodb",
        socket(),
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host={sock} port={port} user=postgres dbname=nodb sslmode=prefer: \
             server at {sock}/.s.PGSQL.{port} refused the connection: FATAL: database \"nodb\" \
             does not exist (SQLSTATE 3D000); create it (`createdb -h {sock} -p {port} -U \
             postgres nodb`) or connect to an existing database (dbname= or the URL's path, or \
             PGDATABASE)",
            sock = socket(),
            port = port()
        ),
    );
}

#[test]
fn a_missing_password_says_where_to_give_one() {
    let url = format!("postgresql://pw_user@127.0.0.1:{}/postgres", port());
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=pw_user \
             dbname=postgres sslmode=prefer: server at 127.0.0.1:{port} asks for a password for user \
             \"pw_user\", and none was given; set PGPASSWORD, add the line \
             `127.0.0.1:{port}:postgres:pw_user:<password>` to ~/.pgpass (mode 0600; PGPASSFILE \
             names another file), or put it in the URL (postgresql://pw_user:<password>@…)",
            port = port()
        ),
    );
}

#[test]
fn a_wrong_password_is_the_servers_fatal_and_never_shown() {
    let url = format!("postgresql://pw_user:{WRONG}@127.0.0.1:{}/postgres", port());
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=pw_user \
             password=******** dbname=postgres sslmode=prefer: server at 127.0.0.1:{port} did not accept user \
             \"pw_user\": FATAL: password authentication failed for user \"pw_user\" (SQLSTATE \
             28P01); check the password given in the connection string or PGPASSWORD",
            port = port()
        ),
    );
    // The same from PGPASSWORD.
    let url = format!("postgresql://pw_user@127.0.0.1:{}/postgres", port());
    let run = plan(&url, &[("PGPASSWORD", WRONG)]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("(SQLSTATE 28P01)"), "{}", run.stderr);
    assert!(!run.stderr.contains(WRONG), "{}", run.stderr);
}

#[test]
fn a_wrong_password_from_the_password_file_points_at_its_line() {
    let dir = std::env::temp_dir().join(format!("pgshift-connect-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let passfile = dir.join("pgpass");
    std::fs::write(
        &passfile,
        format!("127.0.0.1:{}:postgres:pw_user:{WRONG}\n", port()),
    )
    .expect("passfile");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let passfile_text = passfile.to_string_lossy().into_owned();
    let url = format!("postgresql://pw_user@127.0.0.1:{}/postgres", port());
    let run = plan(&url, &[("PGPASSFILE", &passfile_text)]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_refused(
        &run,
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=pw_user \
             password=******** dbname=postgres sslmode=prefer: server at 127.0.0.1:{port} did \
             not accept user \"pw_user\": FATAL: password authentication failed for user \"pw_user\" (SQLSTATE 28P01); check the \
             password for 127.0.0.1:{port}:postgres:pw_user in the password file (PGPASSFILE, \
             else ~/.pgpass)",
            port = port()
        ),
    );
}

#[test]
fn a_missing_role_says_create_role() {
    let url = format!(
        "host={} port={} user=nobody dbname=postgres",
        socket(),
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host={sock} port={port} user=nobody \
             dbname=postgres sslmode=prefer: server at {sock}/.s.PGSQL.{port} did not accept user \"nobody\": \
             FATAL: role \"nobody\" does not exist (SQLSTATE 28000); create the role (CREATE \
             ROLE nobody LOGIN, or `createuser -h {sock} -p {port} nobody`) or connect as an \
             existing one (user= in the connection string, or PGUSER)",
            sock = socket(),
            port = port()
        ),
    );
}

#[test]
fn a_role_without_login_says_alter_role() {
    let url = format!(
        "host=127.0.0.1 port={} user=nologin_user dbname=postgres",
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=nologin_user \
             dbname=postgres sslmode=prefer: server at 127.0.0.1:{port} did not accept user \"nologin_user\": \
             FATAL: role \"nologin_user\" is not permitted to log in (SQLSTATE 28000); let it \
             log in (ALTER ROLE nologin_user LOGIN) or connect as a role that can",
            port = port()
        ),
    );
}

#[test]
fn no_pg_hba_line_says_so() {
    let url = format!(
        "host=127.0.0.1 port={} user=stranger dbname=postgres",
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=stranger \
             dbname=postgres sslmode=prefer: server at 127.0.0.1:{port} did not accept user \"stranger\": \
             FATAL: no pg_hba.conf entry for host \"127.0.0.1\", user \"stranger\", database \
             \"postgres\", no encryption (SQLSTATE 28000); the server's pg_hba.conf has no line \
             that lets this host, user and database in (with or without TLS); add one and \
             reload the server, or connect the way a line allows (sslmode=require for hostssl \
             lines)",
            port = port()
        ),
    );
}

#[test]
fn no_free_connection_slot_says_so() {
    let url = format!(
        "host=127.0.0.1 port={} user=lim_user dbname=postgres",
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=lim_user \
             dbname=postgres sslmode=prefer: server at 127.0.0.1:{port} refused the connection: FATAL: too many \
             connections for role \"lim_user\" (SQLSTATE 53300); every connection slot is taken \
             (max_connections, or the role's or database's CONNECTION LIMIT); close idle \
             sessions or try again later",
            port = port()
        ),
    );
}

#[test]
fn no_connect_privilege_says_grant() {
    let url = format!(
        "host=127.0.0.1 port={} user=plain_user dbname=private_db",
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=plain_user \
             dbname=private_db sslmode=prefer: server at 127.0.0.1:{port} refused the connection: FATAL: \
             permission denied for database \"private_db\" (SQLSTATE 42501; detail: User does \
             not have CONNECT privilege.); grant it (GRANT CONNECT ON DATABASE private_db TO \
             plain_user) or connect as a role that has it",
            port = port()
        ),
    );
}

#[test]
fn a_refused_port_asks_whether_the_server_runs() {
    // A port nothing listens on: bound, then released.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgresql://postgres@127.0.0.1:{free}/postgres");
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={free} user=postgres \
             dbname=postgres sslmode=prefer: could not connect to 127.0.0.1:{free}: Connection refused (os \
             error 111); is the server running on that host and accepting TCP connections on \
             port {free}?"
        ),
    );
}

#[test]
fn a_missing_socket_asks_whether_the_server_runs_locally() {
    let dir = "/tmp/pgshift-no-such-socket-dir";
    let url = format!("host={dir} port=5999 user=postgres dbname=postgres");
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host={dir} port=5999 user=postgres dbname=postgres sslmode=prefer: \
             could not connect to {dir}/.s.PGSQL.5999: No such file or directory (os error 2); \
             is the server running locally, with its socket in {dir}? (host= names the socket \
             directory, port= the number in .s.PGSQL.5999)"
        ),
    );
}

#[test]
fn sslmode_require_against_a_server_without_tls_says_which_sslmode() {
    let url = format!(
        "postgresql://postgres@127.0.0.1:{}/postgres?sslmode=require",
        port()
    );
    assert_refused(
        &plan(&url, &[]),
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={port} user=postgres \
             dbname=postgres sslmode=require: could not connect to 127.0.0.1:{port}: error \
             performing TLS handshake: server does not support TLS; the server does not offer \
             TLS (ssl = off); connect with sslmode=prefer or sslmode=disable, or turn ssl on in \
             the server",
            port = port()
        ),
    );
}

#[test]
fn a_silent_server_times_out_with_the_next_step() {
    // Accepts TCP connections (the backlog does) and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent = listener.local_addr().expect("addr").port();
    let url =
        format!("host=127.0.0.1 port={silent} user=postgres dbname=postgres connect_timeout=1");
    let run = plan(&url, &[]);
    drop(listener);
    assert_refused(
        &run,
        &format!(
            "pgshift plan: cannot connect to host=127.0.0.1 port={silent} user=postgres \
             dbname=postgres sslmode=prefer connect_timeout=2: connect timed out after 2000 ms at \
             127.0.0.1:{silent}; is the server running there, and reachable (address, port, \
             firewall)? connect_timeout=SECONDS waits longer"
        ),
    );
}

#[test]
fn a_server_shutting_down_says_wait() {
    let cluster = Cluster::start(&ClusterOptions::new()).expect("cluster");
    let held = hold_a_session(&cluster);
    // Smart shutdown: existing sessions go on, new connections are refused.
    let status = std::process::Command::new("kill")
        .args(["-TERM", &cluster.pid().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    wait_for_status(&cluster, "stopping");
    let sock = cluster.socket_dir().to_string_lossy().into_owned();
    let port = cluster.port();
    let url = format!("host={sock} port={port} user=postgres dbname=postgres");
    let run = plan(&url, &[]);
    drop(held);
    assert_refused(
        &run,
        &format!(
            "pgshift plan: cannot connect to host={sock} port={port} user=postgres \
             dbname=postgres sslmode=prefer: server at {sock}/.s.PGSQL.{port} refused the connection: FATAL: \
             the database system is shutting down (SQLSTATE 57P03); the server is starting up, \
             shutting down or in recovery without hot standby; wait and try again"
        ),
    );
}

/// A `psql` session kept open (killed on drop).
struct HeldSession(Child);

impl Drop for HeldSession {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hold_a_session(cluster: &Cluster) -> HeldSession {
    let child = cluster
        .command("psql")
        .args(["-X", "-q", "-d", &cluster.connection_string("postgres")])
        .args(["-c", "SELECT pg_sleep(120) /* held */"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql starts");
    let held = HeldSession(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = cluster
            .psql(
                "postgres",
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%/* held */' AND pid <> pg_backend_pid()",
            )
            .expect("pg_stat_activity");
        if seen.trim() == "1" {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "the held session never showed up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until line 8 of `postmaster.pid` says `status`.
fn wait_for_status(cluster: &Cluster, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text =
            std::fs::read_to_string(cluster.data_dir().join("postmaster.pid")).unwrap_or_default();
        if text.lines().nth(7).map(str::trim) == Some(status) {
            return;
        }
        assert!(Instant::now() < deadline, "postmaster.pid: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_url_wins_over_database_url_which_wins_over_pg_variables() {
    let good = format!(
        "postgresql://pw_user:{PASSWORD}@127.0.0.1:{}/postgres",
        port()
    );
    let missing_db = format!(
        "host={} port={} user=postgres dbname=from_url",
        socket(),
        port()
    );
    let env_db = format!(
        "host={} port={} user=postgres dbname=from_database_url",
        socket(),
        port()
    );
    let pg_vars = [
        ("PGHOST", socket()),
        ("PGPORT", port().to_string()),
        ("PGUSER", "postgres".to_owned()),
        ("PGDATABASE", "from_pgdatabase".to_owned()),
    ];
    let pg_vars: Vec<(&str, &str)> = pg_vars.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // DATABASE_URL alone connects.
    let run = pgshift_in_env(
        &["plan", "--sql", "SELECT 1"],
        &[("DATABASE_URL", good.as_str())],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("Plan against PostgreSQL"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD));

    // --url beats DATABASE_URL and PG*.
    let mut env = pg_vars.clone();
    env.push(("DATABASE_URL", env_db.as_str()));
    let run = pgshift_in_env(&["plan", "--url", &missing_db, "--sql", "SELECT 1"], &env);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("database \"from_url\" does not exist"),
        "{}",
        run.stderr
    );

    // DATABASE_URL beats PG*.
    let run = pgshift_in_env(&["plan", "--sql", "SELECT 1"], &env);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("database \"from_database_url\" does not exist"),
        "{}",
        run.stderr
    );

    // PG* alone.
    let run = pgshift_in_env(&["plan", "--sql", "SELECT 1"], &pg_vars);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("database \"from_pgdatabase\" does not exist"),
        "{}",
        run.stderr
    );

    // PGSHIFT_URL is --url's own variable, so it beats DATABASE_URL too.
    let mut env = env.clone();
    env.push(("PGSHIFT_URL", missing_db.as_str()));
    let run = pgshift_in_env(&["plan", "--sql", "SELECT 1"], &env);
    assert!(
        run.stderr.contains("database \"from_url\" does not exist"),
        "{}",
        run.stderr
    );

    // And PG* fill in what DATABASE_URL leaves out.
    let partial = format!("postgresql://pw_user@127.0.0.1:{}/postgres", port());
    let run = pgshift_in_env(
        &["plan", "--sql", "SELECT 1"],
        &[("DATABASE_URL", partial.as_str()), ("PGPASSWORD", PASSWORD)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn help_states_the_precedence() {
    let run = pgshift_in_env(&["plan", "--help"], &[]);
    assert_eq!(run.code, 0);
    let text = run.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains(
            "libpq connection URL or key=value string. Without it (or PGSHIFT_URL), \
             DATABASE_URL; without that, the PG* variables."
        ),
        "{}",
        run.stdout
    );
}
