//! Integration tests against the real local PostgreSQL (whatever
//! `PgInstall::discover` finds; set `PGSHIFT_PG_BIN` to test another build).

use std::path::Path;
use std::time::{Duration, Instant};

use pgshift_embedded::{
    cache_root, pid_alive, shared_cluster, sweep_stale_clusters, Cluster, ClusterOptions, Error,
};

/// Polls `check` until it returns true or `timeout` passes.
fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start() -> Cluster {
    Cluster::start(&ClusterOptions::default()).expect("start cluster")
}

#[test]
fn starts_with_test_settings_and_runs_sql() {
    let cluster = start();
    let q = |sql: &str| cluster.psql("postgres", sql).expect(sql).trim().to_owned();
    assert_eq!(q("SHOW wal_level"), "logical");
    assert_eq!(q("SHOW fsync"), "off");
    assert_eq!(q("SHOW full_page_writes"), "off");
    assert_eq!(q("SHOW synchronous_commit"), "on");
    assert_eq!(q("SHOW max_connections"), "200");
    assert_eq!(q("SHOW listen_addresses"), "");
    assert_eq!(q("SHOW port"), cluster.port().to_string());
    assert_eq!(q("SELECT current_user"), "postgres");
    assert_eq!(
        q("SHOW server_version_num")[..2],
        cluster.version().major.to_string()
    );
    assert_eq!(
        q("SHOW unix_socket_directories"),
        cluster.socket_dir().to_string_lossy()
    );
    // Several statements, results of each.
    let out = cluster
        .psql(
            "postgres",
            "CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2); SELECT sum(id) FROM t;",
        )
        .expect("multi-statement sql");
    assert_eq!(out.trim(), "3");

    assert_eq!(cluster.superuser(), "postgres");
    assert!(cluster.bin("pgbench").is_file());
    assert!(cluster.data_dir().join("PG_VERSION").is_file());
    assert!(cluster.log_path().is_file());
    assert!(pid_alive(cluster.pid()));
    let cs = cluster.connection_string("postgres");
    assert_eq!(
        cs,
        format!(
            "host={} port={} user=postgres dbname=postgres",
            cluster.socket_dir().display(),
            cluster.port()
        )
    );
    assert!(cluster
        .url("postgres")
        .starts_with("postgresql://postgres@%2F"));
}

#[test]
fn sql_errors_carry_psql_stderr() {
    let cluster = shared_cluster().expect("shared cluster");
    let err = cluster
        .psql("postgres", "SELECT * FROM no_such_table_here")
        .expect_err("must fail");
    assert!(matches!(err, Error::Sql { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("no_such_table_here"), "{text}");

    let file = std::env::temp_dir().join(format!("pgshift-embedded-{}.sql", std::process::id()));
    std::fs::write(&file, "SELECT 40 + 2;\n").expect("write sql file");
    let out = cluster.psql_file("postgres", &file);
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.expect("psql_file").trim(), "42");
}

#[test]
fn drop_stops_the_server_and_removes_the_directory() {
    let cluster = start();
    let dir = cluster.dir().to_path_buf();
    let pid = cluster.pid();
    assert!(dir.is_dir() && pid_alive(pid));
    drop(cluster);
    assert!(!dir.exists(), "{} still exists", dir.display());
    assert!(!pid_alive(pid), "postmaster {pid} still runs");

    let cluster = start();
    let (dir, pid) = (cluster.dir().to_path_buf(), cluster.pid());
    cluster.stop().expect("explicit stop");
    assert!(!dir.exists() && !pid_alive(pid));
}

#[test]
fn shared_cluster_gives_distinct_fresh_databases() {
    let cluster = shared_cluster().expect("shared cluster");
    assert!(std::ptr::eq(cluster, shared_cluster().expect("again")));
    let a = cluster
        .fresh_database("Fresh-Test")
        .expect("first database");
    let b = cluster
        .fresh_database("Fresh-Test")
        .expect("second database");
    assert_ne!(a, b);
    assert!(a.starts_with("fresh_test_"), "{a}");
    cluster
        .psql(
            &a,
            "CREATE TABLE only_in_a (x int); INSERT INTO only_in_a VALUES (1);",
        )
        .expect("use a");
    assert_eq!(
        cluster
            .psql(&a, "SELECT current_database()")
            .expect("a")
            .trim(),
        a
    );
    assert_eq!(
        cluster
            .psql(&b, "SELECT current_database()")
            .expect("b")
            .trim(),
        b
    );
    let in_b = cluster
        .psql(&b, "SELECT to_regclass('only_in_a') IS NULL")
        .expect("b");
    assert_eq!(in_b.trim(), "t");
}

#[test]
fn fresh_database_from_many_threads() {
    let cluster = shared_cluster().expect("shared cluster");
    let names: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| cluster.fresh_database("concurrent")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread").expect("fresh database"))
            .collect()
    });
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len());
    for name in &names {
        assert_eq!(cluster.psql(name, "SELECT 1").expect("connect").trim(), "1");
    }
}

#[tokio::test]
async fn tokio_postgres_connects_by_conninfo_and_url() {
    let cluster = shared_cluster().expect("shared cluster");
    let db = cluster.fresh_database("tokio").expect("database");
    for target in [cluster.connection_string(&db), cluster.url(&db)] {
        let (client, connection) = tokio_postgres::connect(&target, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to {target}: {e}"));
        let task = tokio::spawn(connection);
        let row = client
            .query_one("SELECT current_database()", &[])
            .await
            .expect("query");
        assert_eq!(row.get::<_, String>(0), db);
        drop(client);
        let _ = task.await;
    }
}

#[tokio::test]
async fn tcp_option_and_custom_settings() {
    let options = ClusterOptions::new()
        .tcp(true)
        .setting("application_name", "it's pgshift")
        .setting("max_connections", "50");
    let cluster = Cluster::start(&options).expect("start");
    assert_eq!(
        cluster
            .psql("postgres", "SHOW listen_addresses")
            .expect("show")
            .trim(),
        "127.0.0.1"
    );
    assert_eq!(
        cluster
            .psql("postgres", "SHOW max_connections")
            .expect("show")
            .trim(),
        "50"
    );
    let tcp = cluster
        .tcp_connection_string("postgres")
        .expect("tcp conninfo");
    let (client, connection) = tokio_postgres::connect(&tcp, tokio_postgres::NoTls)
        .await
        .expect("connect over tcp");
    let task = tokio::spawn(connection);
    let name: String = client
        .query_one("SHOW application_name", &[])
        .await
        .expect("query")
        .get(0);
    // The client sets none, so the server default (our setting) shows.
    assert_eq!(name, "it's pgshift");
    drop(client);
    let _ = task.await;

    let bad = Cluster::start(&ClusterOptions::new().setting("bad name", "1"));
    assert!(matches!(bad, Err(Error::InvalidSetting { .. })), "{bad:?}");
}

#[test]
fn replica_follows_the_primary() {
    let primary = start();
    primary
        .psql(
            "postgres",
            "CREATE TABLE before_backup (id int); INSERT INTO before_backup VALUES (1);",
        )
        .expect("seed");
    let started = Instant::now();
    let replica = primary.add_replica().expect("replica");
    eprintln!("replica ready in {:?}", started.elapsed());
    assert_ne!(replica.port(), primary.port());
    assert_ne!(replica.dir(), primary.dir());
    let rq = |sql: &str| replica.psql("postgres", sql).map(|s| s.trim().to_owned());
    assert_eq!(rq("SELECT pg_is_in_recovery()").expect("recovery"), "t");
    assert_eq!(
        rq("SELECT count(*) FROM before_backup").expect("copied"),
        "1"
    );

    primary
        .psql(
            "postgres",
            "CREATE TABLE after_backup AS SELECT generate_series(1, 100) AS id;",
        )
        .expect("write on primary");
    let seen = eventually(Duration::from_secs(20), || {
        rq("SELECT count(*) FROM after_backup").is_ok_and(|n| n == "100")
    });
    assert!(
        seen,
        "replica never saw the table; log:\n{}",
        replica.log_tail(20)
    );
    let replica_dir = replica.dir().to_path_buf();
    drop(replica);
    assert!(!replica_dir.exists());
    assert_eq!(
        primary
            .psql("postgres", "SELECT count(*) FROM after_backup")
            .expect("primary")
            .trim(),
        "100"
    );
}

#[test]
fn sweep_removes_stale_dirs_of_dead_processes() {
    // A pid that certainly belonged to a process that is gone now.
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let dead = child.id();
    child.wait().expect("wait");
    assert!(!pid_alive(dead));

    let root = cache_root();
    std::fs::create_dir_all(&root).expect("cache root");
    // Each fake entry is filled under a name the sweep ignores and then renamed
    // into place, so a concurrent sweep (other tests create clusters) never
    // sees it half-made.
    let place = |name: String, files: &[(&str, String)]| {
        let staging = root.join(format!("staging-{}-{name}", std::process::id()));
        for (file, content) in files {
            let path = staging.join(file);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, content).expect("write");
        }
        let target = root.join(name);
        std::fs::rename(&staging, &target).expect("rename into place");
        target
    };
    let stale = place(
        format!("c-{dead}-0"),
        &[
            ("data/postmaster.pid", format!("{dead}\n/x\n")),
            ("server.log", "old\n".to_owned()),
        ],
    );
    // Same dead owner, but a live "postmaster" (this process): must stay.
    let busy = place(
        format!("c-{dead}-1"),
        &[(
            "data/postmaster.pid",
            format!("{}\n/x\n", std::process::id()),
        )],
    );
    // Kept deliberately: must stay.
    let kept = place(format!("c-{dead}-2"), &[("KEPT", String::new())]);
    // Not ours: must stay.
    let foreign = place(format!("unrelated-{dead}"), &[("x", String::new())]);

    sweep_stale_clusters().expect("sweep");
    // Another test's cluster creation may sweep concurrently; either way it is gone.
    assert!(!stale.exists(), "stale dir survived");
    for keep in [&busy, &kept, &foreign] {
        assert!(keep.exists(), "{} was removed", keep.display());
        std::fs::remove_dir_all(keep).expect("clean up");
    }
}

#[test]
fn kept_cluster_survives_drop_until_stopped() {
    let cluster = Cluster::start(&ClusterOptions::new().keep_on_exit(true)).expect("start");
    let kept = cluster.keep().expect("keep");
    assert!(kept.outlives_process());
    assert!(pid_alive(kept.pid()));
    assert!(kept.dir().join("KEPT").is_file());
    let cmd = kept.stop_command();
    assert!(
        cmd.contains("pg_ctl") && cmd.contains("stop -m fast"),
        "{cmd}"
    );
    if is_root() {
        assert!(cmd.starts_with("runuser -u postgres -- "), "{cmd}");
    }
    // The sweep leaves it alone.
    sweep_stale_clusters().expect("sweep");
    assert!(kept.dir().is_dir());
    let pid = kept.pid();
    let dir = kept.dir().to_path_buf();
    // The printed command is what a person would run.
    let status = std::process::Command::new("sh")
        .args(["-c", &cmd])
        .status()
        .expect("run the stop command");
    assert!(status.success(), "{cmd}: {status}");
    assert!(eventually(Duration::from_secs(10), || !pid_alive(pid)));
    assert!(dir.is_dir(), "stopping keeps the directory");
    kept.remove().expect("remove");
    assert!(!dir.exists());

    // remove() stops a running kept server itself (with pg_ctl).
    let kept = Cluster::start(&ClusterOptions::default())
        .expect("start")
        .keep()
        .expect("keep");
    assert!(!kept.outlives_process());
    let (pid, dir) = (kept.pid(), kept.dir().to_path_buf());
    kept.remove().expect("stop and remove");
    assert!(!pid_alive(pid) && !dir.exists());
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Prints timings (run with `--nocapture`); asserts nothing about speed, which
/// depends on the machine's load.
#[test]
fn measures_start_times() {
    // Warm: the template exists after the first start.
    drop(start());
    let runs = 5;
    let started = Instant::now();
    for _ in 0..runs {
        let c = start();
        assert_eq!(c.psql("postgres", "SELECT 1").expect("select").trim(), "1");
    }
    let per = started.elapsed() / runs;
    eprintln!("cluster start + SELECT 1 + stop/remove, from template: {per:?} per cluster");
}

#[test]
fn cluster_dirs_live_in_the_cache_root() {
    let cluster = shared_cluster().expect("shared cluster");
    let root = std::fs::canonicalize(cache_root()).expect("root");
    assert_eq!(cluster.dir().parent(), Some(root.as_path()));
    let name = cluster
        .dir()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name");
    assert!(
        name.starts_with(&format!("c-{}-", std::process::id())),
        "{name}"
    );
    assert!(Path::new(cluster.socket_dir()).starts_with(cluster.dir()));
}

#[test]
fn failed_start_reports_the_server_log_and_cleans_up() {
    let err = Cluster::start(&ClusterOptions::new().setting("shared_buffers", "lots"))
        .expect_err("an invalid setting must stop the server");
    let text = err.to_string();
    assert!(
        text.contains("shared_buffers") && text.contains("last lines of"),
        "{text}"
    );
    let Error::ServerExited { log, .. } = err else {
        panic!("unexpected error: {err:?}");
    };
    // The half-made cluster directory is gone again.
    let dir = log.parent().expect("cluster dir");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn replica_replay_pauses_and_resumes() {
    let primary = start();
    let replica = primary.add_replica().expect("replica");
    primary
        .wait_for_replay(&replica, Duration::from_secs(30))
        .expect("caught up");
    replica.pause_replay().expect("pause");
    assert!(replica.replay_paused().expect("state"));
    let paused_at = replica.replay_lsn().expect("lsn");
    primary
        .psql(
            "postgres",
            "CREATE TABLE while_paused AS SELECT generate_series(1, 10000) AS id;",
        )
        .expect("write on primary");
    // The WAL arrives but is not replayed: the primary sees the standby behind by
    // at least what was written, and the standby has not moved.
    let behind = eventually(Duration::from_secs(20), || {
        primary
            .replay_lags()
            .is_ok_and(|lags| lags.len() == 1 && lags[0].bytes > 100_000)
    });
    assert!(behind, "lag: {:?}", primary.replay_lags());
    assert_eq!(replica.replay_lsn().expect("lsn"), paused_at);
    assert!(replica
        .psql("postgres", "SELECT count(*) FROM while_paused")
        .is_err());
    replica.resume_replay().expect("resume");
    primary
        .wait_for_replay(&replica, Duration::from_secs(30))
        .expect("caught up again");
    assert_eq!(
        replica
            .psql("postgres", "SELECT count(*) FROM while_paused")
            .expect("replayed")
            .trim(),
        "10000"
    );
}
