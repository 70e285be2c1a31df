//! Unit tests of connection string resolution (see `dsn.rs`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::connect::testing::{FakeEnv, TempDir};
use crate::connect::SslMode;

const SECRET: &str = "Tr0ub4dor&3-unique";

fn spec(text: &str, env: &FakeEnv) -> ConnectionSpec {
    match ConnectionSpec::parse_with_env(text, env) {
        Ok(spec) => spec,
        Err(error) => panic!("{text:?} should resolve, got {error}"),
    }
}

fn error(text: &str, env: &FakeEnv) -> ConnectError {
    match ConnectionSpec::parse_with_env(text, env) {
        Ok(spec) => panic!("{text:?} should fail, got {}", spec.redacted()),
        Err(error) => error,
    }
}

fn invalid_key(error: &ConnectError) -> &str {
    match error {
        ConnectError::InvalidParameter { key, .. } => key,
        other => panic!("expected an invalid parameter, got {other:?}"),
    }
}

fn tcp(name: &str) -> Option<Host> {
    Some(Host::Tcp(name.to_owned()))
}

fn unix(dir: &str) -> Option<Host> {
    Some(Host::Unix(PathBuf::from(dir)))
}

fn hosts(spec: &ConnectionSpec) -> Vec<(Option<Host>, u16)> {
    spec.targets()
        .iter()
        .map(|target| (target.host().cloned(), target.port()))
        .collect()
}

#[test]
fn url_with_every_part_resolves() {
    let env = FakeEnv::new("os");
    let spec = spec(
        "postgresql://alice:pw@db.example:6543/app?sslmode=verify-full&sslrootcert=/ca.pem\
         &connect_timeout=7&options=-c%20work_mem%3D64MB&target_session_attrs=read-write",
        &env,
    );
    assert_eq!(hosts(&spec), vec![(tcp("db.example"), 6543)]);
    assert_eq!(spec.user(), "alice");
    assert_eq!(spec.dbname(), "app");
    assert!(spec.has_password());
    assert_eq!(spec.tls().mode(), SslMode::VerifyFull);
    assert_eq!(
        spec.tls().root_cert(),
        Some(&RootCert::File(PathBuf::from("/ca.pem")))
    );
    assert_eq!(spec.connect_timeout(), Some(Duration::from_secs(7)));
    assert_eq!(spec.options(), Some("-c work_mem=64MB"));
    assert_eq!(spec.target_session_attrs(), TargetSessionAttrs::ReadWrite);
}

#[test]
fn key_value_string_with_quotes_resolves() {
    let env = FakeEnv::new("os");
    let spec = spec(
        r"host = db.example port=5433 user='bob smith' dbname='it\'s' password='a b\\c'",
        &env,
    );
    assert_eq!(hosts(&spec), vec![(tcp("db.example"), 5433)]);
    assert_eq!(spec.user(), "bob smith");
    assert_eq!(spec.dbname(), "it's");
    assert_eq!(spec.password_for(&spec.targets()[0]), Some(r"a b\c"));
}

#[test]
fn percent_encoded_socket_directory_is_a_unix_target() {
    let env = FakeEnv::new("os");
    let spec = spec("postgres://%2Fvar%2Flib%2Fpg:5444/app", &env);
    let target = &spec.targets()[0];
    assert_eq!(target.host(), unix("/var/lib/pg").as_ref());
    assert!(target.is_unix_socket());
    assert_eq!(target.to_string(), "/var/lib/pg/.s.PGSQL.5444");
}

#[test]
fn socket_directory_in_uri_query() {
    let env = FakeEnv::new("os");
    let spec = spec("postgres:///app?host=/tmp/sock&port=5499", &env);
    assert_eq!(hosts(&spec), vec![(unix("/tmp/sock"), 5499)]);
    assert_eq!(spec.dbname(), "app");
}

#[test]
fn ipv6_literal_host() {
    let env = FakeEnv::new("os");
    let spec = spec("postgres://[2001:db8::7]:5433/db", &env);
    assert_eq!(hosts(&spec), vec![(tcp("2001:db8::7"), 5433)]);
    assert_eq!(spec.targets()[0].to_string(), "[2001:db8::7]:5433");
}

#[test]
fn multiple_hosts_with_their_own_ports() {
    let env = FakeEnv::new("os");
    let spec = spec("postgres://a:5001,b,[::1]:5003/db", &env);
    assert_eq!(
        hosts(&spec),
        vec![
            (tcp("a"), 5001),
            (tcp("b"), DEFAULT_PORT),
            (tcp("::1"), 5003)
        ]
    );
}

#[test]
fn one_port_applies_to_every_host() {
    let env = FakeEnv::new("os");
    let spec = spec("host=a,b,/tmp port=6000", &env);
    assert_eq!(
        hosts(&spec),
        vec![(tcp("a"), 6000), (tcp("b"), 6000), (unix("/tmp"), 6000)]
    );
}

#[test]
fn empty_host_entry_means_the_default_host() {
    let env = FakeEnv::new("os").dirs(&["/var/run/postgresql", "/tmp"]);
    let spec = spec("host=,b port=1,2", &env);
    assert_eq!(
        hosts(&spec),
        vec![(unix("/var/run/postgresql"), 1), (tcp("b"), 2)]
    );
}

#[test]
fn port_count_must_match_host_count() {
    let env = FakeEnv::new("os");
    let error = error("host=a,b,c port=1,2", &env);
    assert_eq!(invalid_key(&error), "port");
}

#[test]
fn invalid_ports_are_rejected_without_showing_the_value() {
    let env = FakeEnv::new("os");
    for port in ["0", "65536", "abc", "-1"] {
        let error = error(&format!("host=a port={port} password={SECRET}"), &env);
        assert_eq!(invalid_key(&error), "port");
        assert!(!format!("{error} {error:?}").contains(SECRET));
    }
}

#[test]
fn hostaddr_pairs_with_hosts_and_stands_alone() {
    let env = FakeEnv::new("os");
    let paired = spec("host=db.example hostaddr=10.1.2.3", &env);
    let target = &paired.targets()[0];
    assert_eq!(target.hostaddr(), Some(IpAddr::from([10, 1, 2, 3])));
    assert_eq!(target.tls_name().as_deref(), Some("db.example"));
    let alone = spec("hostaddr=::1", &env);
    assert_eq!(alone.targets()[0].host(), None);
    assert!(!alone.targets()[0].is_unix_socket());
    assert!(!error("hostaddr=db.example", &env)
        .to_string()
        .contains("db.example"));
    assert_eq!(
        invalid_key(&error("host=a,b hostaddr=10.0.0.1", &env)),
        "hostaddr"
    );
}

#[test]
fn environment_fills_what_the_string_leaves_unset() {
    let env = FakeEnv::new("os")
        .var("PGHOST", "env-host")
        .var("PGPORT", "7000")
        .var("PGUSER", "env_user")
        .var("PGDATABASE", "env_db")
        .var("PGPASSWORD", SECRET)
        .var("PGSSLMODE", "require")
        .var("PGSSLROOTCERT", "/env/ca.pem")
        .var("PGSSLCERT", "/env/client.crt")
        .var("PGSSLKEY", "/env/client.key")
        .var("PGCONNECT_TIMEOUT", "3")
        .var("PGOPTIONS", "-c geqo=off")
        .var("PGTARGETSESSIONATTRS", "primary");
    let spec = spec("dbname=from_string", &env);
    assert_eq!(hosts(&spec), vec![(tcp("env-host"), 7000)]);
    assert_eq!(spec.user(), "env_user");
    assert_eq!(spec.dbname(), "from_string");
    assert_eq!(spec.password_for(&spec.targets()[0]), Some(SECRET));
    assert_eq!(spec.tls().mode(), SslMode::Require);
    assert_eq!(
        spec.tls().root_cert(),
        Some(&RootCert::File(PathBuf::from("/env/ca.pem")))
    );
    assert_eq!(spec.tls().client_cert(), Some(Path::new("/env/client.crt")));
    assert_eq!(spec.tls().client_key(), Some(Path::new("/env/client.key")));
    assert_eq!(spec.connect_timeout(), Some(Duration::from_secs(3)));
    assert_eq!(spec.options(), Some("-c geqo=off"));
    assert_eq!(spec.target_session_attrs(), TargetSessionAttrs::Primary);
}

#[test]
fn hostaddr_comes_from_pghostaddr() {
    let env = FakeEnv::new("os").var("PGHOSTADDR", "127.0.0.1");
    let spec = spec("", &env);
    assert_eq!(
        spec.targets()[0].hostaddr(),
        Some(IpAddr::from([127, 0, 0, 1]))
    );
    assert_eq!(spec.targets()[0].host(), None);
}

#[test]
fn invalid_environment_values_name_the_variable() {
    let env = FakeEnv::new("os").var("PGPORT", "x");
    assert_eq!(invalid_key(&error("", &env)), "port (from PGPORT)");
    let env = FakeEnv::new("os").var("PGSSLMODE", "on");
    assert_eq!(invalid_key(&error("", &env)), "sslmode (from PGSSLMODE)");
}

#[test]
fn libpq_defaults_apply_last() {
    let env = FakeEnv::new("osuser").dirs(&["/var/run/postgresql", "/tmp"]);
    let spec = spec("", &env);
    assert_eq!(hosts(&spec), vec![(unix("/var/run/postgresql"), 5432)]);
    assert_eq!(spec.user(), "osuser");
    assert_eq!(spec.dbname(), "osuser");
    assert_eq!(spec.tls().mode(), SslMode::Prefer);
    assert_eq!(spec.target_session_attrs(), TargetSessionAttrs::Any);
    assert_eq!(spec.connect_timeout(), None);
    assert!(!spec.has_password());
}

#[test]
fn default_host_falls_back_to_tmp_then_localhost() {
    let spec_tmp = spec("", &FakeEnv::new("u").dirs(&["/tmp"]));
    assert_eq!(hosts(&spec_tmp), vec![(unix("/tmp"), 5432)]);
    let spec_tcp = spec("", &FakeEnv::new("u").dirs(&[]));
    assert_eq!(hosts(&spec_tcp), vec![(tcp("localhost"), 5432)]);
}

#[test]
fn unknown_os_user_without_user_is_an_error() {
    let error = error("host=a", &FakeEnv::new("u").without_os_user());
    assert_eq!(invalid_key(&error), "user");
}

#[test]
fn connect_timeout_follows_libpq() {
    let env = FakeEnv::new("u");
    assert_eq!(spec("connect_timeout=0", &env).connect_timeout(), None);
    assert_eq!(spec("connect_timeout=-5", &env).connect_timeout(), None);
    assert_eq!(
        spec("connect_timeout=1", &env).connect_timeout(),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        spec("connect_timeout=' 30 '", &env).connect_timeout(),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        invalid_key(&error("connect_timeout=2s", &env)),
        "connect_timeout"
    );
}

#[test]
fn application_name_is_accepted_and_ignored() {
    let spec = spec("application_name=myapp host=a", &FakeEnv::new("u"));
    assert!(!spec.redacted().contains("myapp"));
}

#[test]
fn unknown_keys_are_named_but_values_are_not() {
    let error = error(
        &format!("host=a sslcompression={SECRET}"),
        &FakeEnv::new("u"),
    );
    assert!(matches!(&error, ConnectError::UnknownParameter { key } if key == "sslcompression"));
    assert!(!format!("{error} {error:?}").contains(SECRET));
}

#[test]
fn invalid_target_session_attrs_is_rejected() {
    let error = error("target_session_attrs=master", &FakeEnv::new("u"));
    assert_eq!(invalid_key(&error), "target_session_attrs");
}

#[test]
fn password_is_never_shown() {
    let env = FakeEnv::new("u");
    for text in [
        format!("postgres://u:{SECRET}@h/db"),
        format!("host=h password='{SECRET}'"),
    ] {
        let spec = spec(&text, &env);
        let shown = format!("{spec} {spec:?} {} {:?}", spec.redacted(), spec.targets());
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(spec.redacted().contains("password=********"));
    }
}

#[test]
fn errors_after_a_password_never_show_it() {
    let env = FakeEnv::new("u");
    let texts = [
        format!("postgres://u:{SECRET}@h:99999/db"),
        format!("postgres://u:{SECRET}@h/db?bogus=1"),
        format!("postgres://u:{SECRET}@h/db?sslmode"),
        format!("password={SECRET} sslmode=bogus"),
        format!("password={SECRET} hostaddr=nope"),
        format!("password='{SECRET}"),
    ];
    for text in texts {
        let error = error(&text, &env);
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(SECRET), "{shown}");
    }
}

#[test]
fn redacted_string_round_trips() {
    let env = FakeEnv::new("u");
    let original = spec(
        "host='a,/s p' port=1,2 user='x y' dbname=d sslmode=require options='-c a=b' \
         target_session_attrs=standby connect_timeout=9",
        &env,
    );
    let shown = original.redacted();
    assert_eq!(
        shown,
        r"host='a,/s p' port=1,2 user='x y' dbname=d sslmode=require connect_timeout=9 options='-c a=b' target_session_attrs=standby"
    );
    let reparsed = spec(&shown, &env);
    assert_eq!(reparsed.redacted(), shown);
    assert_eq!(hosts(&reparsed), hosts(&original));
}

#[test]
fn passfile_supplies_the_password_per_host() {
    let dir = TempDir::new("passfile-hosts");
    let body = format!(
        "a:5432:app:alice:pw-a\n*:5433:*:alice:pw-star\nlocalhost:5432:app:alice:{SECRET}\n"
    );
    let path = dir.write("pgpass", &body, 0o600);
    let env = FakeEnv::new("u")
        .var("PGPASSFILE", &path.to_string_lossy())
        .dirs(&["/var/run/postgresql"]);
    let spec = spec(
        "host=a,b,/var/run/postgresql,/other port=5432,5433,5432,5432 user=alice dbname=app",
        &env,
    );
    let passwords: Vec<Option<&str>> = spec
        .targets()
        .iter()
        .map(|target| spec.password_for(target))
        .collect();
    assert_eq!(
        passwords,
        vec![Some("pw-a"), Some("pw-star"), Some(SECRET), None]
    );
    assert!(spec.has_password());
    assert!(!format!("{spec:?}").contains(SECRET));
}

#[test]
fn passfile_with_group_access_is_ignored() {
    let dir = TempDir::new("passfile-mode");
    let path = dir.write("pgpass", "*:*:*:*:leaked\n", 0o640);
    let env = FakeEnv::new("u").var("PGPASSFILE", &path.to_string_lossy());
    let spec = spec("host=a", &env);
    assert_eq!(spec.password_for(&spec.targets()[0]), None);
}

#[test]
fn home_pgpass_is_the_default_passfile() {
    let dir = TempDir::new("passfile-home");
    dir.write(".pgpass", "a:*:*:*:from-home\n", 0o600);
    let env = FakeEnv::new("u").var("HOME", &dir.path().to_string_lossy());
    let spec = spec("host=a", &env);
    assert_eq!(spec.password_for(&spec.targets()[0]), Some("from-home"));
}

#[test]
fn explicit_password_wins_over_passfile() {
    let dir = TempDir::new("passfile-explicit");
    let path = dir.write("pgpass", "*:*:*:*:from-file\n", 0o600);
    let env = FakeEnv::new("u")
        .var("PGPASSFILE", &path.to_string_lossy())
        .var("PGPASSWORD", "from-env");
    let from_env = spec("host=a", &env);
    assert_eq!(
        from_env.password_for(&from_env.targets()[0]),
        Some("from-env")
    );
    let from_string = spec("host=a password=from-string", &env);
    assert_eq!(
        from_string.password_for(&from_string.targets()[0]),
        Some("from-string")
    );
}

#[test]
fn hostaddr_only_targets_match_the_passfile_by_address() {
    let dir = TempDir::new("passfile-addr");
    let path = dir.write("pgpass", "10.0.0.9:5432:*:*:by-addr\n", 0o600);
    let env = FakeEnv::new("u").var("PGPASSFILE", &path.to_string_lossy());
    let spec = spec("hostaddr=10.0.0.9", &env);
    assert_eq!(spec.password_for(&spec.targets()[0]), Some("by-addr"));
}

#[test]
fn default_tls_files_come_from_home() {
    let env = FakeEnv::new("u")
        .var("HOME", "/home/u")
        .file("/home/u/.postgresql/root.crt")
        .file("/home/u/.postgresql/postgresql.crt");
    let spec = spec("host=a", &env);
    assert_eq!(
        spec.tls().root_cert(),
        Some(&RootCert::File(PathBuf::from(
            "/home/u/.postgresql/root.crt"
        )))
    );
    assert_eq!(
        spec.tls().client_key(),
        Some(Path::new("/home/u/.postgresql/postgresql.key"))
    );
}

proptest! {
    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        let _ = ConnectionSpec::parse_with_env(&text, &FakeEnv::new("u"));
    }

    #[test]
    fn arbitrary_uris_never_panic(rest in any::<String>()) {
        let _ = ConnectionSpec::parse_with_env(&format!("postgres://{rest}"), &FakeEnv::new("u"));
    }

    #[test]
    fn uri_shaped_strings_never_panic(
        rest in "[a-z0-9%:@/?&=,\\[\\]. '\\\\]{0,40}",
    ) {
        let _ = ConnectionSpec::parse_with_env(&format!("postgresql://{rest}"), &FakeEnv::new("u"));
        let _ = ConnectionSpec::parse_with_env(&rest, &FakeEnv::new("u"));
    }
}
