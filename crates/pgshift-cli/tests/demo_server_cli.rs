//! `pgshift demo` where no server can be had says how to get one, with exit code 1.
//! (Where none is installed it downloads one: `pgshift-embedded`'s `fetch` tests.)

mod common;

use common::pgshift_in_env;

fn demo(env: &[(&str, &str)]) -> (i32, String, String) {
    let out = std::env::temp_dir().join(format!("pgshift-demo-noserver-{}", std::process::id()));
    let out_text = out.to_string_lossy().into_owned();
    let run = pgshift_in_env(&["demo", "--out", &out_text], env);
    let _ = std::fs::remove_dir_all(&out);
    (run.code, run.stdout, run.stderr)
}

#[test]
fn an_unusable_pg_bin_says_what_to_point_it_at() {
    let dir = "/nonexistent/pgshift-bin";
    let (code, stdout, stderr) = demo(&[("PGSHIFT_PG_BIN", dir)]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "* starting a throwaway PostgreSQL …\n");
    assert_eq!(
        stderr,
        format!(
            "pgshift demo: PGSHIFT_PG_BIN={dir}: not a directory; set it to the bin directory \
             of a PostgreSQL 14+ server (holding `postgres` and `initdb`), or unset it to use an \
             installed server or, if there is none, a downloaded one\n"
        )
    );
}

#[test]
fn an_unreadable_fetch_setting_says_what_it_takes() {
    let (code, _, stderr) = demo(&[("PGSHIFT_PG_FETCH", "sometimes")]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "pgshift demo: PGSHIFT_PG_FETCH=\"sometimes\": expected 0 (do not download), 1 \
         (download 18) or a major version such as 17\n"
    );
}

/// `pgshift demo --defer-cutover` used to wait forever for a `pgshift cutover` that
/// nobody could send (the demo never says how to reach its cluster): it is refused at
/// once, before any cluster starts.
#[test]
fn defer_cutover_is_refused_before_anything_starts() {
    let run = pgshift_in_env(&["demo", "--defer-cutover"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "", "no cluster was started");
    assert!(
        run.stderr
            .starts_with("pgshift demo: --defer-cutover would wait"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("do this:"), "{}", run.stderr);
}
