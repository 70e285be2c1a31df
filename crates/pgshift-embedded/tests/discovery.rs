//! Discovery errors. This binary is the only one that changes
//! `PGSHIFT_PG_BIN`, and holds a single test that reads it, so no other test
//! races with the change.

use pgshift_embedded::{Error, PgInstall, PG_BIN_ENV};

#[test]
fn unusable_bin_dirs_give_typed_errors() {
    let empty = std::env::temp_dir().join(format!("pgshift-no-binaries-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("empty dir");

    // No other thread of this binary reads the environment.
    let original = std::env::var_os(PG_BIN_ENV);
    std::env::set_var(PG_BIN_ENV, &empty);
    let err = PgInstall::discover().expect_err("an empty dir is no bindir");
    match &original {
        Some(value) => std::env::set_var(PG_BIN_ENV, value),
        None => std::env::remove_var(PG_BIN_ENV),
    }
    match &err {
        Error::BadPgBinEnv { path, reason } => {
            assert_eq!(path, &empty);
            assert!(reason.contains("postgres"), "{reason}");
        }
        other => panic!("unexpected error: {other:?}"),
    }
    let text = err.to_string();
    assert!(text.starts_with("PGSHIFT_PG_BIN="), "{text}");

    let err = PgInstall::from_bindir(&empty).expect_err("from_bindir too");
    assert!(matches!(err, Error::NoServerBinaries { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("no PostgreSQL 14+ server binaries found (looked in: ")
            && text.contains("apt-get install postgresql")
            && text.contains("PGSHIFT_PG_BIN"),
        "{text}"
    );

    // A fake `postgres`/`initdb` pair reporting an old version is refused.
    let old = empty.join("old");
    std::fs::create_dir_all(&old).expect("old dir");
    for name in ["postgres", "initdb"] {
        let path = old.join(name);
        std::fs::write(&path, "#!/bin/sh\necho 'postgres (PostgreSQL) 13.9'\n").expect("script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let err = PgInstall::from_bindir(&old).expect_err("13 is too old");
    assert!(
        matches!(&err, Error::UnsupportedVersion { version, .. } if version.major == 13),
        "{err:?}"
    );

    // With the variable as it was, an installation is found.
    let found = PgInstall::discover().expect("discover");
    assert!(found.version().major >= 14);
    assert!(found.bin("postgres").is_file() && found.bin("initdb").is_file());

    let _ = std::fs::remove_dir_all(&empty);
}
