use super::*;
use crate::script::TransactionMode;

fn sql(name: &str, form: FileForm) -> Entry {
    Entry::Sql {
        name: name.to_owned(),
        path: PathBuf::from(name),
        form,
    }
}

fn layout(names: &[&str]) -> Result<Layout, LayoutError> {
    from_entries(
        "dir",
        names.iter().map(|n| sql(n, FileForm::Plain)).collect(),
    )
}

fn order(layout: &Layout) -> Vec<String> {
    layout
        .forward_paths()
        .iter()
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn sequential_numbers_order_numerically() {
    let l = layout(&["10_c.sql", "2_b.sql", "1_a.sql", "z.sql"]).expect("reads");
    assert_eq!(l.kind, LayoutKind::Numbered);
    assert_eq!(order(&l), vec!["1_a.sql", "2_b.sql", "10_c.sql", "z.sql"]);
    assert!(l.expects_sequence());
    assert_eq!(
        l.describe(),
        "numbered (NNNN_name.sql, 1 unversioned file last)"
    );
    assert_eq!(l.files[0].transaction, TransactionRule::Marker);
}

#[test]
fn timestamps_are_versions_and_down_files_are_never_forward() {
    let l = layout(&[
        "20240101120000_init.up.sql",
        "20240101120000_init.down.sql",
        "20240305093000_add_index.down.sql",
        "20240305093000_add_index.up.sql",
    ])
    .expect("reads");
    assert_eq!(l.kind, LayoutKind::Timestamp);
    assert!(l.reversible && !l.expects_sequence());
    assert_eq!(
        order(&l),
        vec![
            "20240101120000_init.up.sql",
            "20240305093000_add_index.up.sql"
        ]
    );
    assert_eq!(l.files[1].name, "add_index");
    assert_eq!(l.skipped.len(), 2);
    assert!(l.skipped.iter().all(|s| s.reason == SkipReason::Down));
    assert_eq!(
        l.describe(),
        "sqlx (timestamp versions, reversible pairs, 2 down files not read)"
    );
}

#[test]
fn integer_versions_of_any_width_are_one_layout_ordered_as_numbers() {
    // sqlx and pop compare integers: a counter next to timestamps is not "mixed".
    let l = layout(&[
        "20240101120000_x.sql",
        "00_init.sql",
        "202401011200000000_wide.sql",
        "99999999999999_not_a_time.sql",
        "123456789012345678901234567890_wider_than_u64.sql",
    ])
    .expect("reads");
    assert_eq!(l.kind, LayoutKind::Timestamp);
    assert!(!l.expects_sequence());
    assert_eq!(
        order(&l),
        vec![
            "00_init.sql",
            "20240101120000_x.sql",
            "99999999999999_not_a_time.sql",
            "202401011200000000_wide.sql",
            "123456789012345678901234567890_wider_than_u64.sql",
        ]
    );
    assert_eq!(l.describe(), "sqlx (integer versions)");
    assert_eq!(l.files[0].version.key(), "0");
}

#[test]
fn flyway_versions_compare_part_by_part_and_undo_files_are_skipped() {
    let l = layout(&[
        "V1.10__later.sql",
        "V1.2__second.sql",
        "V1__first.sql",
        "U1.2__second.sql",
        "V2_1__third.sql",
    ])
    .expect("reads");
    assert_eq!(l.kind, LayoutKind::Flyway);
    assert_eq!(
        order(&l),
        vec![
            "V1__first.sql",
            "V1.2__second.sql",
            "V1.10__later.sql",
            "V2_1__third.sql"
        ]
    );
    assert_eq!(l.files[3].version.to_string(), "2.1");
    assert_eq!(l.files[0].version.as_i64(), Some(1));
    assert_eq!(l.files[1].version.as_i64(), None);
    assert_eq!(l.skipped[0].reason, SkipReason::Undo);
    assert!(l
        .files
        .iter()
        .all(|f| f.transaction == TransactionRule::Detected));
}

#[test]
fn flyway_repeatables_run_after_the_versioned_files_by_name() {
    let l = layout(&["R__views.sql", "V2__b.sql", "R__functions.sql", "V1__a.sql"]).expect("reads");
    assert_eq!(l.kind, LayoutKind::Flyway);
    assert_eq!(
        order(&l),
        vec!["V1__a.sql", "V2__b.sql", "R__functions.sql", "R__views.sql"]
    );
    assert_eq!(l.repeatables[1].name, "views");
    assert_eq!(
        l.describe(),
        "flyway (V<version>__name.sql, 2 repeatables (R__) after them)"
    );
    // A repeatable among numbered files is a mixed directory.
    let err = layout(&["0001_a.sql", "R__views.sql"]).expect_err("mixed");
    assert!(matches!(err, LayoutError::Mixed { .. }), "{err}");
}

#[test]
fn orphan_and_ambiguous_files_are_typed_errors_naming_the_file() {
    assert_eq!(
        layout(&["0001_a.up.sql", "0002_b.down.sql"]),
        Err(LayoutError::OrphanDown {
            file: "0002_b.down.sql".to_owned()
        })
    );
    assert_eq!(
        layout(&["V1__a.sql", "U2__b.sql"]),
        Err(LayoutError::AmbiguousUndo {
            file: "U2__b.sql".to_owned()
        })
    );
}

#[test]
fn mixed_layouts_say_what_was_found() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["0001_a.sql", "V2__b.sql"], "Flyway", "integer"),
        (
            &["0001_a.up.sql", "0001_a.down.sql", "0002_b.sql"],
            "reversible pairs",
            "plain files",
        ),
    ];
    for (names, one, other) in cases {
        let err = layout(names).expect_err("mixed");
        let text = err.to_string();
        assert!(
            text.contains(one) && text.contains(other),
            "{names:?}: {text}"
        );
        assert!(matches!(err, LayoutError::Mixed { .. }));
    }
}

#[test]
fn small_counters_are_a_sequence_even_when_zero_padded() {
    let l = layout(&["00000000000001_a.sql", "00000000000002_b.sql"]).expect("reads");
    assert_eq!(l.kind, LayoutKind::Numbered);
    assert!(is_timestamp("20240101120000"));
    assert!(!is_timestamp("00000000000001"));
    assert!(!is_timestamp("20241301120000"));
}

#[test]
fn unversioned_directories_keep_name_order() {
    let l = layout(&["b.sql", "a.sql"]).expect("reads");
    assert_eq!(l.kind, LayoutKind::Unversioned);
    assert_eq!(l.describe(), "unversioned");
}

#[test]
fn pop_reads_the_postgres_dialect_and_skips_the_others() {
    let l = layout(&[
        "20240101120000_users.postgres.up.sql",
        "20240101120000_users.postgres.down.sql",
        "20240101120000_users.mysql.up.sql",
        "20240101120000_users.mysql.down.sql",
        "20240102120000_index.up.sql",
        "20240102120000_index.down.sql",
        "20240103120000_both.up.sql",
        "20240103120000_both.down.sql",
        "20240103120000_both.postgres.up.sql",
        "20240103120000_both.postgres.down.sql",
    ])
    .expect("reads");
    assert_eq!(
        order(&l),
        vec![
            "20240101120000_users.postgres.up.sql",
            "20240102120000_index.up.sql",
            "20240103120000_both.postgres.up.sql",
        ]
    );
    assert_eq!(l.files[0].name, "users");
    assert_eq!(l.count_skipped(SkipReason::OtherDialect), 4);
    assert_eq!(l.count_skipped(SkipReason::Down), 3);
    assert!(l
        .describe()
        .starts_with("pop (timestamp versions, dialect suffixes"));
}

#[test]
fn plain_files_with_a_dialect_suffix_read_the_postgres_one_only() {
    // As hammerwork ships them: one file per database for each version.
    let l = layout(&[
        "0001_create_jobs.postgres.sql",
        "0001_create_jobs.mysql.sql",
        "0002_add_index.postgres.sql",
        "0002_add_index.mysql.sql",
        "0003_generic.sql",
        "0004_mysql_only.mysql.sql",
    ])
    .expect("reads");
    assert_eq!(
        order(&l),
        vec![
            "0001_create_jobs.postgres.sql",
            "0002_add_index.postgres.sql",
            "0003_generic.sql"
        ]
    );
    assert_eq!(l.files[0].name, "create_jobs");
    assert_eq!(l.count_skipped(SkipReason::OtherDialect), 3);
    let both = layout(&["0001_a.sql", "0001_a.postgres.sql"]).expect("reads");
    assert_eq!(order(&both), vec!["0001_a.postgres.sql"]);
}

#[test]
fn pop_fizz_files_are_an_error_naming_them() {
    let entries = vec![
        sql("20240101120000_a.up.sql", FileForm::Plain),
        sql("20240101120000_a.down.sql", FileForm::Plain),
        Entry::Fizz(PathBuf::from("20240102120000_b.up.fizz")),
    ];
    let err = from_entries("dir", entries).expect_err("fizz");
    assert!(matches!(err, LayoutError::Fizz { .. }));
    assert!(
        err.to_string().contains("20240102120000_b.up.fizz"),
        "{err}"
    );
}

#[test]
fn golang_migrate_names_read_as_reversible_pairs() {
    let l = layout(&[
        "000001_create_users_table.up.sql",
        "000001_create_users_table.down.sql",
        "000002_add_email.up.sql",
        "000002_add_email.down.sql",
    ])
    .expect("reads");
    assert_eq!(l.kind, LayoutKind::Numbered);
    assert_eq!(l.files[1].name, "add_email");
    assert_eq!(l.files.len(), 2);
}

fn diesel(name: &str, mode: TransactionMode) -> Entry {
    let (version, migration) = name.split_once('_').expect("a diesel name");
    Entry::Diesel(diesel::Folder {
        name: name.to_owned(),
        version: Version::diesel(version).expect("a version"),
        migration: migration.to_owned(),
        up: PathBuf::from(name).join("up.sql"),
        down: Some(PathBuf::from(name).join("down.sql")),
        mode,
    })
}

#[test]
fn diesel_folders_order_as_diesel_does_and_keep_their_transaction_rule() {
    let entries = vec![
        diesel("2023-01-02-000000_add_index", TransactionMode::Statement),
        diesel("00000000000000_diesel_initial_setup", TransactionMode::File),
        diesel("2023-01-01-000000_create_users", TransactionMode::File),
        Entry::Other("README.md".to_owned()),
    ];
    let l = from_entries("dir", entries).expect("reads");
    assert_eq!(l.kind, LayoutKind::Diesel);
    assert_eq!(
        order(&l),
        vec![
            "00000000000000_diesel_initial_setup/up.sql",
            "2023-01-01-000000_create_users/up.sql",
            "2023-01-02-000000_add_index/up.sql",
        ]
    );
    assert_eq!(l.files[1].name, "create_users");
    assert_eq!(l.files[1].version.key(), "20230101000000");
    assert_eq!(
        l.files[2].transaction,
        TransactionRule::Fixed(TransactionMode::Statement)
    );
    assert_eq!(l.count_skipped(SkipReason::Down), 3);
    assert_eq!(l.ignored, vec!["README.md"]);
    assert_eq!(
        l.describe(),
        "diesel (<version>_<name>/up.sql folders, 3 down files not read)"
    );
    let mixed = from_entries(
        "dir",
        vec![
            diesel("2023-01-01-000000_a", TransactionMode::File),
            sql("0002_b.sql", FileForm::Plain),
        ],
    );
    assert!(matches!(mixed, Err(LayoutError::Mixed { .. })), "{mixed:?}");
}

#[test]
fn dbmate_and_goose_files_are_sectioned_layouts_and_do_not_mix() {
    let l = from_entries(
        "dir",
        vec![
            sql("20151129054053_test_migration.sql", FileForm::Dbmate),
            sql("20151129054054_second.sql", FileForm::Dbmate),
        ],
    )
    .expect("reads");
    assert_eq!(l.form, FileForm::Dbmate);
    assert_eq!(l.files[0].transaction, TransactionRule::Sections);
    assert!(l.describe().starts_with("dbmate ("), "{}", l.describe());
    let l =
        from_entries("dir", vec![sql("00001_create_users.sql", FileForm::Goose)]).expect("reads");
    assert_eq!(l.form, FileForm::Goose);
    let mixed = from_entries(
        "dir",
        vec![
            sql("00001_a.sql", FileForm::Goose),
            sql("00002_b.sql", FileForm::Plain),
        ],
    );
    let err = mixed.expect_err("mixed");
    assert!(err.to_string().contains("goose sections"), "{err}");
}

#[test]
fn a_directory_reads_diesel_folders_and_their_metadata_from_disk() {
    let dir = std::env::temp_dir().join(format!("pgshift-layout-diesel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let make = |folder: &str, files: &[(&str, &str)]| {
        let path = dir.join(folder);
        std::fs::create_dir_all(&path).expect("dir");
        for (name, text) in files {
            std::fs::write(path.join(name), text).expect("write");
        }
    };
    make(
        "2023-01-01-000000_create_users",
        &[
            ("up.sql", "CREATE TABLE users (id int);"),
            ("down.sql", "DROP TABLE users;"),
        ],
    );
    make(
        "2023-01-02-000000_index",
        &[
            ("up.sql", "CREATE INDEX CONCURRENTLY i ON users (id);"),
            ("down.sql", "DROP INDEX i;"),
            ("metadata.toml", "run_in_transaction = false\n"),
        ],
    );
    make("notes", &[("a.txt", "x")]);
    let l = detect(&dir).expect("io").expect("reads");
    assert_eq!(l.kind, LayoutKind::Diesel);
    assert_eq!(l.files.len(), 2);
    assert_eq!(
        l.files[1].transaction,
        TransactionRule::Fixed(TransactionMode::Statement)
    );
    assert_eq!(l.ignored, vec!["notes/"]);
    make("2023-01-03-000000_broken", &[("down.sql", "SELECT 1;")]);
    assert!(matches!(
        detect(&dir).expect("io"),
        Err(LayoutError::DieselWithoutUp { .. })
    ));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn dotted_releases_with_steps_order_by_release_then_step() {
    // procrastinate's names: a release version, then the step within it.
    let l = layout(&[
        "03.00.00_50_post_cancel_notification.sql",
        "00.10.00_02_add_defer_job_function.sql",
        "03.00.00_01_pre_cancel_notification.sql",
        "00.05.00_01_drop_started_at_column.sql",
        "00.00.00_01_initial.sql",
        "00.10.00_01_close_fetch_job_race_condition.sql",
        "02.14.01_01_add_indexes_for_fetch_job.sql",
    ])
    .expect("reads");
    assert_eq!(l.kind, LayoutKind::Dotted);
    assert!(!l.expects_sequence());
    assert_eq!(
        order(&l),
        vec![
            "00.00.00_01_initial.sql",
            "00.05.00_01_drop_started_at_column.sql",
            "00.10.00_01_close_fetch_job_race_condition.sql",
            "00.10.00_02_add_defer_job_function.sql",
            "02.14.01_01_add_indexes_for_fetch_job.sql",
            "03.00.00_01_pre_cancel_notification.sql",
            "03.00.00_50_post_cancel_notification.sql",
        ]
    );
    assert_eq!(l.files[0].name, "initial");
    assert_eq!(l.files[0].version.key(), "0.0.0.1");
    assert_eq!(l.files[6].name, "post_cancel_notification");
    assert_eq!(l.files[6].transaction, TransactionRule::Marker);
    assert_eq!(l.describe(), "dotted (NN.NN.NN_NN_name.sql)");
    // A number after the steps that the name begins with stays in the name.
    let l = layout(&["1.2_3d_thing.sql"]).expect("reads");
    assert_eq!(l.files[0].version.key(), "1.2");
    assert_eq!(l.files[0].name, "3d_thing");
    // An integer version whose name begins with digits is still an integer version.
    let l = layout(&["0001_2fa.sql"]).expect("reads");
    assert_eq!(l.kind, LayoutKind::Numbered);
    assert_eq!(l.files[0].name, "2fa");
    assert!(matches!(
        layout(&["00.01.00_01_a.sql", "0002_b.sql"]),
        Err(LayoutError::Mixed { .. })
    ));
}
