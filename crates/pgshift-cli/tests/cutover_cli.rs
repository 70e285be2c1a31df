//! Copy-and-swap's own locks as `plan` states them, checked against the requests the
//! run makes (read from `pg_locks` while they wait); and `cutover`, which waits for
//! the outcome and exits by it, or with `--no-wait` only requests.

mod common;

use std::collections::BTreeSet;
use std::process::Child;
use std::time::{Duration, Instant};

use common::cas::{hold, hold_lock, spawn, value};
use common::{pgshift, Run};
use pgshift_embedded::{shared_cluster, Cluster};

fn database(prefix: &str, tables: &[&str]) -> (&'static Cluster, String) {
    let cluster = shared_cluster().expect("a PostgreSQL cluster starts");
    let db = cluster.fresh_database(prefix).expect("database");
    for table in tables {
        cluster
            .psql(
                &db,
                &format!(
                    "CREATE TABLE {table} (id bigint PRIMARY KEY, qty int NOT NULL); \
                     INSERT INTO {table} SELECT g, g FROM generate_series(1, 2000) g; ANALYZE {table};"
                ),
            )
            .expect("schema");
    }
    (cluster, db)
}

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("one JSON document ({e}):\n{}\n{}", run.stdout, run.stderr))
}

/// The newest run of `table`'s phase, or "".
fn phase_of(cluster: &Cluster, db: &str, table: &str) -> String {
    cluster
        .psql(
            db,
            &format!("SELECT phase FROM pgshift.runs WHERE source_name = '{table}' ORDER BY id DESC LIMIT 1"),
        )
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn wait_for(cluster: &Cluster, db: &str, table: &str, wanted: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = phase_of(cluster, db, table);
        if now == wanted {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("pgshift ended ({status}) before {table} reached {wanted}; last phase {now:?}");
        }
        assert!(
            Instant::now() < deadline,
            "{table} never reached {wanted}: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ended(child: Child) -> (i32, String) {
    let output = child.wait_with_output().expect("pgshift ends");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// `status --format json`'s line for `table`.
fn status_of(url: &str, table: &str) -> serde_json::Value {
    let status = pgshift(&["status", "--url", url, "--format", "json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    json(&status)["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|run| run["table"] == format!("public.{table}"))
        .cloned()
        .unwrap_or_else(|| panic!("a run of {table}: {}", status.stdout))
}

/// `pg_locks`' spelling of a mode as the report spells it (`share-row-exclusive`).
fn pg_locks_mode(report: &str) -> String {
    report
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect::<String>()
        + "Lock"
}

/// The modes pgshift's sessions wait for on `table` now.
fn waiting_modes_on(cluster: &Cluster, db: &str, table: &str) -> Vec<String> {
    let text = value(
        cluster,
        db,
        &format!(
            "SELECT coalesce(string_agg(DISTINCT l.mode, ','), '') FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
              WHERE l.relation = '{table}'::regclass AND NOT l.granted AND a.application_name LIKE 'pgshift%' \
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ),
    );
    text.split(',')
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Polls until pgshift waits for a lock on `items`; returns the modes it waits for.
fn until_waiting(cluster: &Cluster, db: &str, child: &mut Child) -> Vec<String> {
    until_waiting_on(cluster, db, "items", child)
}

/// Polls until pgshift waits for a lock on `table`; returns the modes it waits for.
fn until_waiting_on(cluster: &Cluster, db: &str, table: &str, child: &mut Child) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let modes = waiting_modes_on(cluster, db, table);
        if !modes.is_empty() {
            return modes;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("pgshift ended ({status}) without waiting for a lock on {table}");
        }
        assert!(
            Instant::now() < deadline,
            "pgshift never waited for {table}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The table's foreign keys make the run lock the referenced table twice: adding the
/// shadow's key (SHARE ROW EXCLUSIVE) and dropping the old table's after the swap
/// (ACCESS EXCLUSIVE). `plan` states both, and they are the requests `pg_locks` shows
/// the run waiting for on that table (before, `plan` named only the table itself).
#[test]
fn copy_and_swap_plan_states_the_locks_on_foreign_key_partners() {
    let (cluster, db) = database("cutover_cli_partners", &["parents"]);
    cluster
        .psql(
            &db,
            "CREATE TABLE items (id bigint PRIMARY KEY, parent_id bigint NOT NULL REFERENCES parents, qty int NOT NULL); \
             INSERT INTO items SELECT g, g, g FROM generate_series(1, 2000) g; ANALYZE items;",
        )
        .expect("schema");
    let url = cluster.connection_string(&db);
    let rewrite = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";
    let doc = json(&pgshift(&[
        "plan", "--url", &url, "--format", "json", "--sql", rewrite,
    ]));
    let stated = &doc["files"][0]["statements"][0]["copy_and_swap"];
    let on_parents: Vec<(String, String)> = stated["locks"]
        .as_array()
        .expect("the run's locks")
        .iter()
        .filter(|l| l["relation"]["name"] == "parents")
        .map(|l| {
            (
                l["phase"].as_str().unwrap_or_default().to_owned(),
                pg_locks_mode(l["mode"].as_str().expect("mode")),
            )
        })
        .collect();
    assert_eq!(
        on_parents,
        vec![
            ("indexing".to_owned(), "ShareRowExclusiveLock".to_owned()),
            ("cleanup".to_owned(), "AccessExclusiveLock".to_owned()),
        ],
        "{stated}"
    );
    let text = pgshift(&["plan", "--url", &url, "--sql", rewrite]);
    assert!(
        text.stdout.contains(
            "drop the old table's foreign key to it: ACCESS EXCLUSIVE on \"public\".\"parents\""
        ),
        "{}",
        text.stdout
    );

    // A reader of `parents` for the whole run (ACCESS SHARE: only the clean-up's
    // request conflicts with it) and a writer until the shadow's key waits for it.
    let reader = hold(cluster, &db, "parents", "SELECT count(*) FROM parents");
    let writer = hold(
        cluster,
        &db,
        "parents",
        "UPDATE parents SET qty = qty WHERE id = 1",
    );
    let mut run = spawn(&[
        "apply",
        "--url",
        &url,
        "--cutover-lock-timeout-ms",
        "200",
        "--cutover-attempts",
        "100",
        "--sql",
        rewrite,
    ]);
    let at_indexing = until_waiting_on(cluster, &db, "parents", &mut run);
    writer.release();
    let at_cleanup = loop {
        let modes = until_waiting_on(cluster, &db, "parents", &mut run);
        if modes != at_indexing {
            break modes;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    reader.release();
    let (code, stdout) = ended(run);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(at_indexing, vec!["ShareRowExclusiveLock".to_owned()]);
    assert_eq!(at_cleanup, vec!["AccessExclusiveLock".to_owned()]);
}

#[test]
fn copy_and_swap_plan_states_the_locks_the_run_waits_for() {
    let (cluster, db) = database("cutover_cli_locks", &["items"]);
    let url = cluster.connection_string(&db);
    let rewrite = "ALTER TABLE items ALTER COLUMN qty TYPE bigint";
    let plan = pgshift(&["plan", "--url", &url, "--sql", rewrite]);
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains("locks pgshift takes (copy-and-swap):"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("4. exchange the names: ACCESS EXCLUSIVE on \"items\": blocks all reads and writes; waited for at most 1000 ms per attempt, 10 attempts"),
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout.contains("blocking form (what --allow-blocking would take, for the whole rewrite): ACCESS EXCLUSIVE on \"items\""),
        "the statement-as-written's lock stays, for comparison: {}",
        plan.stdout
    );
    assert!(
        !plan.stdout.contains("      lock:  ACCESS EXCLUSIVE"),
        "not stated as the lock pgshift takes: {}",
        plan.stdout
    );
    let doc = json(&pgshift(&[
        "plan",
        "--url",
        &url,
        "--format",
        "json",
        "--cutover-lock-timeout-ms",
        "1500",
        "--sql",
        rewrite,
    ]));
    let stated = &doc["files"][0]["statements"][0]["copy_and_swap"];
    let locks = stated["locks"].as_array().expect("the run's locks");
    let by_phase = |phase: &str| {
        locks
            .iter()
            .find(|l| l["phase"] == phase)
            .unwrap_or_else(|| panic!("a {phase} lock: {stated}"))
    };
    assert_eq!(
        by_phase("swap")["lock_timeout_ms"],
        1500,
        "the budgets given are stated"
    );
    assert_eq!(stated["blocking_form"][0]["mode"], "access-exclusive");
    let capture_mode = pg_locks_mode(by_phase("capture")["mode"].as_str().expect("mode"));
    let swap_mode = pg_locks_mode(by_phase("swap")["mode"].as_str().expect("mode"));
    let stated_modes: BTreeSet<String> = locks
        .iter()
        .map(|l| pg_locks_mode(l["mode"].as_str().expect("mode")))
        .collect();

    // A reader (ACCESS SHARE) and a writer (ROW EXCLUSIVE) in open transactions: the
    // run waits for the writer to install its capture, and for the reader to swap.
    let reader = hold_lock(cluster, &db);
    let writer = hold(
        cluster,
        &db,
        "items",
        "UPDATE items SET qty = qty WHERE id = 1",
    );
    let mut run = spawn(&["apply", "--url", &url, "--sql", rewrite]);
    let at_capture = until_waiting(cluster, &db, &mut run);
    writer.release();
    std::thread::sleep(Duration::from_millis(20));
    let at_swap = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let modes = until_waiting(cluster, &db, &mut run);
            if phase_of(cluster, &db, "items") == "cutover" {
                break modes;
            }
            assert!(
                modes.iter().all(|m| stated_modes.contains(m)),
                "a request the plan does not state: {modes:?} (stated {stated_modes:?})"
            );
            assert!(Instant::now() < deadline, "never waited at the swap");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    reader.release();
    let (code, stdout) = ended(run);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        at_capture,
        vec![capture_mode],
        "the capture's request, as stated"
    );
    assert_eq!(at_swap, vec![swap_mode], "the swap's request, as stated");
}

#[test]
fn cutover_waits_for_the_outcome_and_exits_by_it() {
    let (cluster, db) = database("cutover_cli_wait", &["items", "waited", "nowait"]);
    let url = cluster.connection_string(&db);
    let deferred = |table: &str| {
        let sql = format!("ALTER TABLE {table} ALTER COLUMN qty TYPE bigint");
        spawn(&[
            "apply",
            "--url",
            &url,
            "--defer-cutover",
            "--cutover-lock-timeout-ms",
            "100",
            "--cutover-attempts",
            "2",
            "--sql",
            &sql,
        ])
    };

    // A live run that refuses at the swap: cutover waits and exits 2 with its reason.
    let mut run = deferred("items");
    wait_for(cluster, &db, "items", "ready", &mut run);
    let live = status_of(&url, "items");
    assert_eq!(live["live"], true, "{live}");
    assert!(live["holder_pid"].as_i64().is_some(), "{live}");
    assert_eq!(live["next"], "pgshift cutover public.items");
    let reader = hold_lock(cluster, &db);
    let refused = pgshift(&["cutover", "--url", &url, "items"]);
    reader.release();
    assert_eq!(refused.code, 2, "{}\n{}", refused.stdout, refused.stderr);
    assert!(
        refused.stdout.contains("did not swap") && refused.stdout.contains("lock-budget-exhausted"),
        "{}",
        refused.stdout
    );
    assert!(
        refused.stderr.contains("cutover: waiting for run"),
        "progress while waiting: {}",
        refused.stderr
    );
    let (code, _) = ended(run);
    assert_eq!(code, 2, "the run itself refused");

    // No process runs it any more: said, with what to do, exit 1 — waiting or not.
    let dead = status_of(&url, "items");
    assert_eq!(dead["live"], false, "{dead}");
    assert!(
        dead["next"]
            .as_str()
            .is_some_and(|n| n.starts_with("pgshift resume public.items")),
        "{dead}"
    );
    for args in [
        vec!["cutover", "--url", &url, "items"],
        vec!["cutover", "--no-wait", "--url", &url, "items"],
    ] {
        let nobody = pgshift(&args);
        assert_eq!(
            nobody.code, 1,
            "{args:?}: {}\n{}",
            nobody.stdout, nobody.stderr
        );
        assert!(
            nobody.stdout.contains("no live process is running it"),
            "{}",
            nobody.stdout
        );
        assert!(
            nobody.stdout.contains("pgshift resume items"),
            "{}",
            nobody.stdout
        );
        assert!(
            !nobody.stdout.contains("swapped") && !nobody.stdout.contains("Done"),
            "{}",
            nobody.stdout
        );
    }
    assert_eq!(pgshift(&["abort", "--url", &url, "items"]).code, 0);

    // A live run that swaps: cutover waits for it and exits 0.
    let mut run = deferred("waited");
    wait_for(cluster, &db, "waited", "ready", &mut run);
    let swapped = pgshift(&["cutover", "--url", &url, "--format", "json", "waited"]);
    assert_eq!(swapped.code, 0, "{}\n{}", swapped.stdout, swapped.stderr);
    let doc = json(&swapped);
    assert_eq!(doc["result"]["waited"], true);
    assert_eq!(doc["result"]["outcome"], "swapped");
    assert_eq!(
        phase_of(cluster, &db, "waited"),
        "done",
        "swapped by the time cutover returns"
    );
    assert_eq!(ended(run).0, 0);

    // --no-wait only requests: exit 0, and it says so, never "swapped".
    let mut run = deferred("nowait");
    wait_for(cluster, &db, "nowait", "ready", &mut run);
    let requested = pgshift(&["cutover", "--no-wait", "--url", &url, "nowait"]);
    assert_eq!(
        requested.code, 0,
        "{}\n{}",
        requested.stdout, requested.stderr
    );
    assert!(
        requested.stdout.starts_with("Cutover requested for run"),
        "{}",
        requested.stdout
    );
    assert!(
        !requested.stdout.contains("swapped") && !requested.stdout.contains("Done"),
        "{}",
        requested.stdout
    );
    assert_eq!(ended(run).0, 0, "the run swaps on its own");
    assert_eq!(
        value(cluster, &db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'nowait'::regclass AND attname = 'qty'"),
        "bigint"
    );
}
