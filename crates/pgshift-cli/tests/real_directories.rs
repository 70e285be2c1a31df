//! Real migration directories as the oracle: the directories that published packages
//! ship (pinned in `tests/data/real_directories.json`, fetched and cached by
//! `scripts/corpora`, never copied into the repository), each run on twin databases of
//! one throwaway cluster:
//!
//! * A, natively: every forward file through `psql -X -v ON_ERROR_STOP=1`, as the
//!   directory's own runner runs it (`-1` per file, or one `-1` for all of them; its
//!   bootstrap first, its text substitution applied);
//! * B, through `pgshift migrate --format json` on a copy of the directory (the same
//!   names; only the runner's substitution applied). Where `migrate` stops at a file,
//!   the stop is recorded, that file is run natively as the runner would and
//!   `--baseline`d, and `migrate` goes on; where `migrate` reads no file of the
//!   directory, the files go through `pgshift apply`, one by one in the runner's order.
//!
//! Then `pg_dump --schema-only` of both must be identical: pgshift's schema and the
//! runners' history tables left out, `\restrict` lines dropped (pg_dump writes a random
//! key there), nothing else normalised. Every stop pgshift made must be the one the
//! manifest records for that directory, in order, so that a fix shows up as a failure
//! here until the manifest (and README's limitations) say it is fixed. Objects a
//! copy-and-swap run left behind count as a stop; their documented `DROP` statements
//! are run before the comparison.
//!
//! The directories `migrate` reads are also migrated from halfway: their first half
//! run natively (for sqlx, its history written as sqlx writes it), adopted with
//! `migrate --baseline`, then migrated on, with the same stops and schema.
//!
//! And one online rewrite per project (procrastinate's own `job_id` retype; on atuin,
//! apalis, graphile-worker and River, whose directories have none that copy-and-swap
//! runs, a widening of our own) on 50,000 seeded rows under 4 writers, with an
//! acknowledged-write check (`real_directories/load.rs`); writes must not fail either,
//! unless the scenario records the finding by which they do today.
//!
//! And `pgshift pull` of the schema each directory leaves: the pulled files, run by
//! `psql` on an empty database, must dump the same (`real_directories/pull.rs`).
//!
//! Runs on the server `PGSHIFT_PG_BIN` names (as every test of pgshift_embedded).

mod common;
#[path = "real_directories/harness.rs"]
mod harness;
#[path = "real_directories/load.rs"]
mod load;
#[path = "real_directories/pull.rs"]
mod pull;

use std::fs;

use harness::{
    check, check_halfway, cluster, corpora, display_name, dump, entry, forward_files, left_behind,
    manifest, prepare, run_natively, scratch, twin_databases, Prepared,
};
use load::{rewrite_under_load, Rewrite, Scenario};
use pull::pull_round_trip;

#[test]
fn atuin_server_postgres() {
    check("atuin-server-postgres");
}

#[test]
fn apalis_postgres() {
    check("apalis-postgres");
}

#[test]
fn underway() {
    check("underway");
}

#[test]
fn sqlxmq() {
    check("sqlxmq");
}

#[test]
fn cala_ledger() {
    check("cala-ledger");
}

#[test]
fn riverqueue_migrate() {
    check("riverqueue-migrate");
}

#[test]
fn hammerwork() {
    check("hammerwork");
}

#[test]
fn fang() {
    check("fang");
}

#[test]
fn procrastinate() {
    check("procrastinate");
}

#[test]
fn graphile_worker() {
    check("graphile-worker");
}

/// The directories `migrate` reads, on a database their runner migrated halfway.
#[test]
fn atuin_server_postgres_halfway() {
    check_halfway("atuin-server-postgres");
}

#[test]
fn apalis_postgres_halfway() {
    check_halfway("apalis-postgres");
}

#[test]
fn underway_halfway() {
    check_halfway("underway");
}

#[test]
fn sqlxmq_halfway() {
    check_halfway("sqlxmq");
}

#[test]
fn cala_ledger_halfway() {
    check_halfway("cala-ledger");
}

#[test]
fn riverqueue_migrate_halfway() {
    check_halfway("riverqueue-migrate");
}

#[test]
fn fang_halfway() {
    check_halfway("fang");
}

#[test]
fn hammerwork_halfway() {
    check_halfway("hammerwork");
}

#[test]
fn procrastinate_halfway() {
    check_halfway("procrastinate");
}

#[test]
fn graphile_worker_halfway() {
    check_halfway("graphile-worker");
}

/// `pgshift pull` of what each directory leaves, rebuilt by `psql` from the files.
#[test]
fn pull_atuin_server_postgres() {
    pull_round_trip("atuin-server-postgres");
}

#[test]
fn pull_apalis_postgres() {
    pull_round_trip("apalis-postgres");
}

#[test]
fn pull_underway() {
    pull_round_trip("underway");
}

#[test]
fn pull_sqlxmq() {
    pull_round_trip("sqlxmq");
}

#[test]
fn pull_cala_ledger() {
    pull_round_trip("cala-ledger");
}

#[test]
fn pull_riverqueue_migrate() {
    pull_round_trip("riverqueue-migrate");
}

#[test]
fn pull_hammerwork() {
    pull_round_trip("hammerwork");
}

#[test]
fn pull_fang() {
    pull_round_trip("fang");
}

#[test]
fn pull_procrastinate() {
    pull_round_trip("procrastinate");
}

#[test]
fn pull_graphile_worker() {
    pull_round_trip("graphile-worker");
}

/// Every directory of the manifest has its test above.
#[test]
fn every_directory_of_the_manifest_is_checked() {
    let names: Vec<&str> = manifest()
        .directories
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let checked = [
        "atuin-server-postgres",
        "apalis-postgres",
        "underway",
        "sqlxmq",
        "cala-ledger",
        "riverqueue-migrate",
        "hammerwork",
        "fang",
        "procrastinate",
        "graphile-worker",
    ];
    assert_eq!(names, checked);
}

/// The comparison sees a real difference: the same directory with its last file
/// left out on one side dumps differently.
#[test]
fn a_file_left_out_is_a_difference() {
    let entry = entry("atuin-server-postgres");
    let dir = corpora()
        .get("atuin-server-postgres")
        .expect("atuin-server-postgres fetched");
    let files = forward_files(entry, dir);
    let work = scratch("atuin-left-out");
    let prelude = work.join("prelude.sql");
    fs::write(&prelude, "").expect("prelude written");
    let whole = cluster().fresh_database("atuin_whole").expect("database");
    let short = cluster().fresh_database("atuin_short").expect("database");
    run_natively(entry, &whole, &prelude, &files).expect("every file runs");
    run_natively(entry, &short, &prelude, &files[..files.len() - 1]).expect("files run");
    assert_ne!(dump(&whole, &entry.history), dump(&short, &entry.history));
    assert_eq!(dump(&whole, &entry.history), dump(&whole, &entry.history));
    let _ = fs::remove_dir_all(&work);
}

/// procrastinate's own rewrite, `01.01.01_01_job_id_bigint.sql`
/// (`procrastinate_events.job_id` int → bigint, a foreign key to `procrastinate_jobs`).
static PROCRASTINATE: Scenario = Scenario {
    project: "procrastinate",
    before: Some("01.01.01_01_job_id_bigint.sql"),
    seed: "INSERT INTO procrastinate_jobs (queue_name, task_name, args) \
             SELECT 'seed', 'seed', '{}' FROM generate_series(1, 1000); \
           INSERT INTO procrastinate_events (job_id, type) \
             SELECT j.id, 'deferred' FROM procrastinate_jobs j, generate_series(1, 50);",
    seeded_rows: 51_000,
    rewrite: Rewrite::File("01.01.01_01_job_id_bigint.sql"),
    table: "\"public\".\"procrastinate_events\"",
    insert: "INSERT INTO procrastinate_events (job_id, type, at) \
             VALUES ((SELECT min(id) FROM procrastinate_jobs), 'started', \
                     '2000-01-01'::timestamptz + $1::bigint * interval '1 microsecond') \
             RETURNING id",
    update: "UPDATE procrastinate_events \
                SET at = '2000-01-01'::timestamptz + $2::bigint * interval '1 microsecond' \
              WHERE id = $1::bigint",
    read: "SELECT id, (extract(epoch FROM at - '2000-01-01'::timestamptz) * 1000000)::bigint \
             FROM procrastinate_events WHERE id = ANY($1::bigint[])",
    refused_because: None,
};

/// atuin's directory has no rewrite (its two type changes widen varchar, no rewrite):
/// `total_history_count_user.total` int → bigint.
static ATUIN: Scenario = Scenario {
    project: "atuin-server-postgres",
    before: None,
    seed: "INSERT INTO total_history_count_user (user_id, total) \
             SELECT g, g FROM generate_series(1, 50000) g;",
    seeded_rows: 50_000,
    rewrite: Rewrite::Sql("ALTER TABLE total_history_count_user ALTER COLUMN total TYPE bigint"),
    table: "\"public\".\"total_history_count_user\"",
    insert: "INSERT INTO total_history_count_user (user_id, total) \
             VALUES (0, $1::bigint) RETURNING id",
    update: "UPDATE total_history_count_user SET total = $2::bigint WHERE id = $1::bigint",
    read: "SELECT id, total::bigint FROM total_history_count_user WHERE id = ANY($1::bigint[])",
    refused_because: None,
};

/// apalis's own type changes run on a table without a key (refused, F2), so:
/// `apalis.jobs.attempts` int → bigint once the key is there (the whole directory).
static APALIS: Scenario = Scenario {
    project: "apalis-postgres",
    before: None,
    seed: "INSERT INTO apalis.jobs (job, id, job_type) \
             SELECT '\\x00'::bytea, 'seed-' || g, 'seed' FROM generate_series(1, 50000) g;",
    seeded_rows: 50_000,
    rewrite: Rewrite::Sql("ALTER TABLE apalis.jobs ALTER COLUMN attempts TYPE bigint"),
    table: "\"apalis\".\"jobs\"",
    insert: "INSERT INTO apalis.jobs (job, id, job_type, attempts) \
             VALUES ('\\x00'::bytea, $1::bigint::text, 'load', $1::bigint) \
             RETURNING id::bigint",
    update: "UPDATE apalis.jobs SET attempts = $2::bigint WHERE id = $1::bigint::text",
    read: "SELECT id::bigint, attempts::bigint FROM apalis.jobs \
            WHERE id = ANY($1::bigint[]::text[])",
    refused_because: Some(
        "F11 (F3 again): apalis.get_jobs and apalis.push_job use the row type of apalis.jobs; \
         a swap would leave them typed by the old table, so copy-and-swap refuses the table \
         (rewrite-unsupported) and changes nothing",
    ),
};

/// graphile-worker's directory has no rewrite pgshift runs (000011 is refused, F5):
/// `_private_jobs.priority` smallint → integer, a column the `graphile_worker.jobs` view
/// reads (PostgreSQL refuses the statement; copy-and-swap recreates the view, as
/// docs/COPY-AND-SWAP.md says). The writers enqueue through `add_job`.
static GRAPHILE_WORKER: Scenario = Scenario {
    project: "graphile-worker",
    before: None,
    // Straight into the table: 50,000 `add_job` calls in one statement take minutes.
    seed: "INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('seed'); \
           INSERT INTO graphile_worker._private_jobs (task_id, payload) \
             SELECT t.id, json_build_object('n', -g) \
               FROM graphile_worker._private_tasks t, generate_series(1, 50000) g \
              WHERE t.identifier = 'seed';",
    seeded_rows: 50_000,
    rewrite: Rewrite::Sql(
        "ALTER TABLE graphile_worker._private_jobs ALTER COLUMN priority TYPE integer",
    ),
    table: "\"graphile_worker\".\"_private_jobs\"",
    insert: "SELECT (graphile_worker.add_job('load', json_build_object('n', $1::bigint))).id",
    update:
        "UPDATE graphile_worker._private_jobs SET payload = json_build_object('n', $2::bigint) \
              WHERE id = $1::bigint",
    read: "SELECT id, (payload->>'n')::bigint FROM graphile_worker._private_jobs \
            WHERE id = ANY($1::bigint[])",
    refused_because: Some(
        "F14 (F3 again): add_job, add_jobs, complete_jobs and others return the row type of \
         _private_jobs; a swap would leave them typed by the old table (every add_job failed \
         after it, 42804), so copy-and-swap refuses the table (rewrite-unsupported)",
    ),
};

/// River's directory has no rewrite: `river_job.attempt` smallint → integer.
static RIVER: Scenario = Scenario {
    project: "riverqueue-migrate",
    before: None,
    seed: "INSERT INTO river_job (args, kind) \
             SELECT jsonb_build_object('n', -g), 'seed' FROM generate_series(1, 50000) g;",
    seeded_rows: 50_000,
    rewrite: Rewrite::Sql("ALTER TABLE river_job ALTER COLUMN attempt TYPE integer"),
    table: "\"public\".\"river_job\"",
    insert: "INSERT INTO river_job (args, kind) \
             VALUES (jsonb_build_object('n', $1::bigint), 'load') RETURNING id",
    update: "UPDATE river_job SET args = jsonb_build_object('n', $2::bigint) WHERE id = $1::bigint",
    read: "SELECT id, (args->>'n')::bigint FROM river_job WHERE id = ANY($1::bigint[])",
    refused_because: None,
};

/// One project's rewrite under 4 writers: every acknowledged write is there
/// afterwards, writes were acknowledged while it ran, it went through copy-and-swap
/// with every seeded row, and the schema is the one a native run of the same
/// statements leaves (or, for a scenario copy-and-swap refuses, nothing ran).
async fn rewrite_check(scenario: &'static Scenario) {
    let entry = entry(scenario.project);
    let Prepared {
        work,
        copy,
        prelude,
        files,
    } = prepare(entry, &format!("{}-load", scenario.project));
    let files: Vec<_> = files
        .into_iter()
        .filter(|f| {
            scenario
                .before
                .is_none_or(|b| display_name(f, entry.layout).as_str() < b)
        })
        .collect();
    let (live, native) = twin_databases(entry, "load", "twin");
    for db in [&live, &native] {
        run_natively(entry, db, &prelude, &files).expect("the files before the rewrite run");
    }
    cluster().psql(&live, scenario.seed).expect("rows seeded");
    let rewrite_file = match scenario.rewrite {
        Rewrite::File(name) => Some(copy.join(name)),
        Rewrite::Sql(_) => None,
    };
    let outcome = rewrite_under_load(
        scenario,
        &live,
        rewrite_file
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        4,
    )
    .await;
    let verdict = &outcome.pgshift["verdict"];
    if let Some(finding) = scenario.refused_because {
        // Refused before anything ran: no write can be lost, nothing changed.
        let said = outcome.pgshift.to_string();
        assert!(
            outcome.code == 2
                && said.contains("\"cause\":\"rewrite-unsupported\"")
                && said.contains("row type"),
            "{}: the recorded refusal ({finding}) is gone or different: {:#}",
            scenario.project,
            outcome.pgshift
        );
        assert!(
            outcome.lost.is_empty() && outcome.errors == 0,
            "{}: lost {:?}, write errors {} (first: {:?})",
            scenario.project,
            outcome.lost,
            outcome.errors,
            outcome.first_error
        );
        let _ = fs::remove_dir_all(&work);
        return;
    }
    assert_eq!(
        outcome.code, 0,
        "{}: the rewrite is done: {:#}",
        scenario.project, outcome.pgshift
    );
    let runs: Vec<&serde_json::Value> = verdict["units"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| &u["copy_and_swap"]["report"])
        .filter(|r| r["table"] == scenario.table)
        .collect();
    assert_eq!(
        runs.len(),
        1,
        "{}: one copy-and-swap run of {}: {verdict:#}",
        scenario.project,
        scenario.table
    );
    let run = runs[0];
    let copied = run["rows_copied"].as_u64().unwrap_or(0);
    assert!(
        copied >= scenario.seeded_rows,
        "{}: rows copied {copied}",
        scenario.project
    );
    let left = left_behind(verdict);
    assert!(
        left.is_empty(),
        "{}: left behind: {left:?}",
        scenario.project
    );
    assert!(
        outcome.lost.is_empty(),
        "{}: {} acknowledged writes lost or changed (key, acceptable payloads, found): {:?}",
        scenario.project,
        outcome.lost.len(),
        &outcome.lost[..outcome.lost.len().min(20)]
    );
    assert_eq!(
        outcome.errors, 0,
        "{}: writes failed: {:?}",
        scenario.project, outcome.first_error
    );
    assert!(
        outcome.acknowledged_during >= 20,
        "{}: only {} writes acknowledged while the rewrite ran ({} ms)",
        scenario.project,
        outcome.acknowledged_during,
        outcome.rewrite_ms
    );
    match (&scenario.rewrite, &rewrite_file) {
        (_, Some(path)) => run_natively(entry, &native, &prelude, std::slice::from_ref(path))
            .expect("the rewrite runs natively"),
        (Rewrite::Sql(sql), None) => {
            cluster()
                .psql(&native, sql)
                .expect("the rewrite runs natively");
        }
        (Rewrite::File(_), None) => unreachable!("a file rewrite has its path"),
    }
    assert_eq!(
        dump(&live, &entry.history),
        dump(&native, &entry.history),
        "{}: the schema after the rewrite under load is not the native one",
        scenario.project
    );
    println!(
        "{}: {} rows copied, rewrite {} ms (ACCESS EXCLUSIVE held {} us at the swap), \
         {} writes acknowledged ({} while the rewrite ran), {} write errors{}, 0 lost",
        scenario.project,
        copied,
        outcome.rewrite_ms,
        run["swap"]["lock_held_us"],
        outcome.acknowledged,
        outcome.acknowledged_during,
        outcome.errors,
        outcome
            .first_error
            .as_deref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default()
    );
    let _ = fs::remove_dir_all(&work);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn procrastinate_rewrite_under_load() {
    rewrite_check(&PROCRASTINATE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atuin_rewrite_under_load() {
    rewrite_check(&ATUIN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apalis_rewrite_under_load() {
    rewrite_check(&APALIS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphile_worker_rewrite_under_load() {
    rewrite_check(&GRAPHILE_WORKER).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn river_rewrite_under_load() {
    rewrite_check(&RIVER).await;
}
