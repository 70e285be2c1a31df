//! A copy-and-swap run and the disk it writes to (OC-7): where free space cannot be
//! measured, a run needs the room the operator gives (`--disk-room`) and never writes
//! past it; where it can, the run keeps a reserve free on every volume it writes to.
//! A run that runs short removes itself at once — shadow, change log and capture
//! triggers dropped, the record kept as aborted with why — and the table is as it was.

mod common;

use std::process::Command;

use common::cas::*;
use common::*;
use pgshift::cas::{CasError, Mode, RunOptions, Silent};
use pgshift::refusal::RefusalCause;
use pgshift_sql::QualifiedName;

/// 20,000 narrow rows (about 1.3 MiB with the key) that the change widens to about
/// 9 MiB.
const SCHEMA: &str = "CREATE TABLE t (id bigint PRIMARY KEY, c int NOT NULL);
INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g;
ANALYZE t;";
const WIDEN: &str = "ALTER TABLE t ALTER COLUMN c TYPE text USING repeat('x', 400)";

fn cause(result: &Result<pgshift::cas::RunReport, CasError>) -> Option<RefusalCause> {
    match result {
        Err(CasError::Refused(r)) => Some(r.cause),
        _ => None,
    }
}

fn with_room(room: Option<u64>) -> RunOptions {
    RunOptions {
        disk_room: room,
        ..options(Mode::Live)
    }
}

/// The column's type: `integer` while nothing was swapped.
fn column_type(db: &str) -> String {
    value(
        db,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'c'",
    )
}

/// A database whose table `t` belongs to `disk_owner`, a role that may run
/// copy-and-swap but not read `data_directory`: free disk cannot be measured.
fn owned_database(prefix: &str) -> String {
    ensure_roles("postgres", &["disk_owner"]);
    cluster()
        .psql(
            "postgres",
            "ALTER ROLE disk_owner LOGIN; REVOKE pg_read_all_settings FROM disk_owner",
        )
        .expect("login");
    let db = database(prefix, SCHEMA);
    give_table(&db, "t", "disk_owner");
    db
}

async fn run_owned(db: &str, room: Option<u64>) -> Result<pgshift::cas::RunReport, CasError> {
    run_as(
        db,
        "disk_owner",
        &QualifiedName::bare("t"),
        WIDEN,
        with_room(room),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_oc_7_free_disk_that_cannot_be_measured_needs_the_operators_room() {
    let db = owned_database("cas_disk_unmeasured");
    // No room given: refused before anything is recorded (it ran, unchecked).
    let refused = run_owned(&db, None).await;
    assert_eq!(
        cause(&refused),
        Some(RefusalCause::DiskSpaceNotMeasured),
        "{refused:?}"
    );
    let message = refused.expect_err("refused").to_string();
    assert!(message.contains("data_directory"), "{message}");
    assert!(message.contains("--disk-room"), "{message}");
    assert_eq!(runs_recorded(&db), 0);
    assert_eq!(artifacts(&db), "");

    // Less room than the run needs: refused the same way as a volume that is short.
    let short = run_owned(&db, Some(1 << 20)).await;
    assert_eq!(
        cause(&short),
        Some(RefusalCause::InsufficientDiskSpace),
        "{short:?}"
    );
    assert_eq!(runs_recorded(&db), 0);

    // Room enough: the run goes through and says how it was checked.
    let report = run_owned(&db, Some(1 << 30)).await.expect("it has room");
    assert_eq!(report.phase, "done");
    assert!(
        report
            .disk
            .starts_with("free disk not measured (role disk_owner may not read data_directory"),
        "{}",
        report.disk
    );
    assert_eq!(column_type(&db), "text");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_oc_7_a_run_that_writes_past_its_room_removes_itself() {
    let db = owned_database("cas_disk_room");
    // The estimate (the table as it is, with margin and WAL) fits in 4 MiB; the
    // widened shadow does not.
    let result = run_owned(&db, Some(4 << 20)).await;
    assert_eq!(
        cause(&result),
        Some(RefusalCause::DiskSpaceRunningOut),
        "{result:?}"
    );
    assert!(
        result
            .expect_err("stopped")
            .to_string()
            .contains("--disk-room"),
        "the message says which limit"
    );
    assert_eq!(
        artifacts(&db),
        "",
        "shadow, change log and triggers are gone"
    );
    assert_eq!(
        value(
            &db,
            "SELECT phase || ':' || (error LIKE '%disk-room%')::text FROM pgshift.runs"
        ),
        "aborted:true"
    );
    assert_eq!(column_type(&db), "integer");
    assert_eq!(value(&db, "SELECT count(*) FROM t"), "20000");
}

/// A tmpfs of `mib` MiB mounted at `dir` (removed on drop), owned by the server's OS
/// user so that a tablespace can live there.
struct SmallVolume(std::path::PathBuf);

impl SmallVolume {
    fn mount(name: &str, mib: u32) -> Self {
        let dir = cluster()
            .server_directory(name)
            .expect("a directory for the volume");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0700")])
            .arg("tmpfs")
            .arg(&dir)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a {mib} MiB tmpfs at {} failed: this test needs root (CI runs as root)",
            dir.display()
        );
        // The mount point is owned by whoever mounts; the server must own it.
        let owner = std::fs::metadata(cluster().data_dir()).expect("data directory");
        use std::os::unix::fs::MetadataExt;
        std::os::unix::fs::chown(&dir, Some(owner.uid()), Some(owner.gid())).expect("chown");
        SmallVolume(dir)
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_oc_7_a_run_stops_before_a_small_tablespace_fills() {
    let suffix = std::process::id();
    let volume = SmallVolume::mount(&format!("small-volume-{suffix}"), 24);
    let space = format!("small_space_{suffix}");
    let db = database("cas_disk_small", "");
    cluster()
        .psql(
            &db,
            &format!(
                "CREATE TABLESPACE {space} LOCATION '{}'; \
                 CREATE TABLE t (id bigint PRIMARY KEY USING INDEX TABLESPACE {space}, c int NOT NULL) TABLESPACE {space}; \
                 INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g; ANALYZE t;",
                volume.0.display()
            ),
        )
        .expect("a table on the small volume");
    // About 1.3 MiB to copy by the estimate, with 22 MiB free; the run keeps 16 MiB
    // free there, and the widened shadow (about 9 MiB) would leave less.
    let result = run(&db, "t", WIDEN, options(Mode::Live), &mut Silent).await;
    assert_eq!(
        cause(&result),
        Some(RefusalCause::DiskSpaceRunningOut),
        "{result:?}"
    );
    let message = result.expect_err("stopped").to_string();
    assert!(
        message.contains(&volume.0.display().to_string()),
        "{message}"
    );
    assert_eq!(
        artifacts(&db),
        "",
        "shadow, change log and triggers are gone"
    );
    assert_eq!(column_type(&db), "integer");
    // What the shadow wrote is given back.
    let free_mib: u64 = {
        let out = Command::new("df")
            .args(["-Pk"])
            .arg(&volume.0)
            .output()
            .expect("df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|line| line.split_whitespace().nth(3))
            .and_then(|kb| kb.parse::<u64>().ok())
            .expect("df's free column")
            / 1024
    };
    assert!(free_mib >= 20, "{free_mib} MiB free after the run");
    cluster()
        .psql(&db, &format!("DROP TABLE t; DROP TABLESPACE {space};"))
        .expect("clean up");
}
