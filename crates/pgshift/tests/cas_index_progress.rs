//! Copy-and-swap reports its indexing phase (hours on a large table): each build on
//! the shadow by name, the n-th of how many, with the server's own progress of it
//! (`pg_stat_progress_create_index`, read on a second session) while it runs.

mod common;

use common::cas::{options, run};
use common::*;
use pgshift::cas::{CasProgress, IndexBuild, Mode, Phase};

/// `slow_id` sleeps a millisecond per row, so that building an index on it takes
/// long enough (about 2 s for 1,500 rows) to be read while it runs.
const SCHEMA: &str = "
CREATE FUNCTION slow_id(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS
  $$ BEGIN PERFORM pg_sleep(0.001); RETURN v; END $$;
CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL, note text);
INSERT INTO items SELECT g, g % 100, 'note ' || g FROM generate_series(1, 1500) g;
CREATE INDEX items_qty_idx ON items (qty);
CREATE INDEX items_slow_idx ON items (slow_id(id));
ANALYZE items;
";

/// Records the index builds reported, and the phase each was reported in.
#[derive(Default)]
struct Builds {
    phase: Option<Phase>,
    seen: Vec<(Option<Phase>, IndexBuild)>,
}

impl CasProgress for Builds {
    fn phase(&mut self, phase: Phase) {
        self.phase = Some(phase);
    }
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog_max: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, _text: &str) {}
    fn index_build(&mut self, build: &IndexBuild) {
        self.seen.push((self.phase, build.clone()));
    }
}

impl Builds {
    /// Each build as announced when it started (before any reading of it).
    fn started(&self) -> Vec<&IndexBuild> {
        self.seen
            .iter()
            .map(|(_, b)| b)
            .filter(|b| b.reading.is_none())
            .collect()
    }
}

/// Runs `sql` on `items` to its end, recording the builds reported.
async fn run_recorded(db: &str, sql: &str) -> (pgshift::cas::RunReport, Builds) {
    let mut builds = Builds::default();
    let report = run(db, "items", sql, options(Mode::Live), &mut builds)
        .await
        .expect("the run completes");
    assert_eq!(report.phase, "done");
    (report, builds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indexing_phase_reports_each_build_and_the_servers_progress_of_it() {
    let db = database("cas_index_progress", SCHEMA);
    // The oracle for the names: the source's own indexes, as the catalog lists them.
    let source_indexes: Vec<String> = client(&db)
        .await
        .query(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'items'::regclass AND NOT indisprimary ORDER BY 1",
            &[],
        )
        .await
        .expect("indexes")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(source_indexes, ["items_qty_idx", "items_slow_idx"]);

    let (report, builds) =
        run_recorded(&db, "ALTER TABLE items ALTER COLUMN qty TYPE bigint").await;

    // Verification runs beside the builds after the key (plain indexes only): from
    // then on the run is in `verifying` too, and the key is built before it.
    assert!(report.verified_beside_builds, "{report:?}");
    assert!(
        builds.seen.iter().all(|(phase, build)| match phase {
            Some(Phase::Indexing) => true,
            Some(Phase::Verifying) => build.index != "primary key",
            _ => false,
        }),
        "builds are reported in the indexing phase, or beside verification after the key: {:?}",
        builds.seen
    );
    // Each build is announced once, before any reading of it, numbered in order.
    let started = builds.started();
    let count = started.len();
    assert_eq!(count, 3, "the primary key and two indexes: {started:?}");
    for (i, build) in started.iter().enumerate() {
        assert_eq!((build.number, build.count), (i + 1, count), "{build:?}");
    }
    assert_eq!(started[0].index, "primary key");
    let mut names: Vec<String> = started[1..].iter().map(|b| b.index.clone()).collect();
    names.sort();
    assert_eq!(names, source_indexes);

    // The slow build was read while it ran, and the readings are the server's.
    let readings: Vec<_> = builds
        .seen
        .iter()
        .filter_map(|(_, b)| b.reading.as_ref().map(|r| (b, r)))
        .filter(|(b, _)| b.index == "items_slow_idx")
        .collect();
    assert!(
        !readings.is_empty(),
        "a two-second build is read every half second"
    );
    for (build, reading) in &readings {
        assert!(!reading.phase.is_empty(), "{build:?}");
        assert!(
            reading.blocks_done <= reading.blocks_total
                && reading.tuples_done <= reading.tuples_total.max(reading.tuples_done),
            "{reading:?}"
        );
        assert_eq!(
            (reading.partitions_total, reading.partitions_done),
            (0, 0),
            "not partitioned"
        );
    }
    assert!(
        readings
            .iter()
            .any(|(_, r)| r.blocks_total > 0 || r.tuples_total > 0),
        "some reading knows how far the build is: {readings:?}"
    );
}

/// Two slow indexes on a table with a foreign key (added to the shadow after the copy,
/// so verification runs after the builds, not beside them).
const WITH_FOREIGN_KEY: &str = "
CREATE FUNCTION slow_id(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS
  $$ BEGIN PERFORM pg_sleep(0.001); RETURN v; END $$;
CREATE TABLE kinds (id int PRIMARY KEY);
INSERT INTO kinds SELECT g FROM generate_series(0, 99) g;
CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL REFERENCES kinds, note text);
INSERT INTO items SELECT g, g % 100, 'note ' || g FROM generate_series(1, 1500) g;
CREATE INDEX items_slow_a ON items (slow_id(id));
CREATE INDEX items_slow_b ON items (slow_id(id + 1));
CREATE INDEX items_qty_idx ON items (qty);
ANALYZE items;
";

/// The catalog's index definitions of `items`, by name.
async fn index_definitions(db: &str) -> Vec<(String, String)> {
    client(db)
        .await
        .query(
            "SELECT c.relname::text, pg_get_indexdef(i.indexrelid) FROM pg_index i \
               JOIN pg_class c ON c.oid = i.indexrelid \
              WHERE i.indrelid = 'items'::regclass ORDER BY 1",
            &[],
        )
        .await
        .expect("indexes")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_builds_run_at_once_when_verification_waits_for_them() {
    let db = database("cas_index_at_once", WITH_FOREIGN_KEY);
    let before = index_definitions(&db).await;
    // The oracle: the server's own list of builds in progress, read on the side.
    let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (db, watching) = (db.clone(), watching.clone());
        tokio::spawn(async move {
            let side = client(&db).await;
            let mut most = 0_i64;
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                let row = side
                    .query_one(
                        "SELECT count(*) FROM pg_stat_progress_create_index WHERE datname = current_database()",
                        &[],
                    )
                    .await
                    .expect("progress view");
                most = most.max(row.get(0));
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            most
        })
    };
    let (report, builds) =
        run_recorded(&db, "ALTER TABLE items ALTER COLUMN note TYPE varchar(200)").await;
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    let most_at_once = watcher.await.expect("watcher");
    assert!(!report.verified_beside_builds, "{report:?}");

    assert_eq!(
        most_at_once, 2,
        "the server ran two of the shadow's builds at once (the run's two workers)"
    );
    let started = builds.started();
    assert_eq!(started.len(), 4, "the key and three indexes: {started:?}");
    for (i, build) in started.iter().enumerate() {
        assert_eq!((build.number, build.count), (i + 1, 4), "{build:?}");
    }
    assert_eq!(
        (started[0].index.as_str(), started[0].at_once),
        ("primary key", 1)
    );
    assert_eq!(
        started[2].at_once, 2,
        "the second build starts beside the first: {started:?}"
    );
    assert!(
        builds
            .seen
            .iter()
            .any(|(_, b)| b.reading.is_some() && b.at_once == 2),
        "a reading taken while two ran says so"
    );
    // The same indexes as before, each under its own name.
    assert_eq!(index_definitions(&db).await, before);
    // Sampled beside verification, the statistics are the new table's at the swap.
    let analyzed: i64 = client(&db)
        .await
        .query_one(
            "SELECT count(DISTINCT attname) FROM pg_stats WHERE schemaname = 'public' AND tablename = 'items'",
            &[],
        )
        .await
        .expect("pg_stats")
        .get(0);
    assert_eq!(analyzed, 3, "every column of the new table has statistics");
}

/// `picky` fails on the shadow's index sessions only (named `pgshift-index-…`), at its
/// first row; the source's index on it was built by another session.
const ONE_BUILD_FAILS: &str = "
CREATE FUNCTION slow_id(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS
  $$ BEGIN PERFORM pg_sleep(0.003); RETURN v; END $$;
CREATE FUNCTION picky(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS
  $$ BEGIN
       IF current_setting('application_name') LIKE 'pgshift-index-%' THEN
         RAISE EXCEPTION 'picky refuses the shadow';
       END IF;
       RETURN v;
     END $$;
CREATE TABLE kinds (id int PRIMARY KEY);
INSERT INTO kinds SELECT g FROM generate_series(0, 99) g;
CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL REFERENCES kinds, note text);
INSERT INTO items SELECT g, g % 100, 'note ' || g FROM generate_series(1, 1500) g;
CREATE INDEX items_slow_a ON items (slow_id(id));
CREATE INDEX items_picky ON items (picky(id));
ANALYZE items;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_fails_beside_another_cancels_it_and_is_the_runs_error() {
    let db = database("cas_index_fails", ONE_BUILD_FAILS);
    let err = run(
        &db,
        "items",
        "ALTER TABLE items ALTER COLUMN note TYPE varchar(200)",
        options(Mode::Live),
        &mut Builds::default(),
    )
    .await
    .expect_err("the shadow's build of items_picky fails");
    let message = err.to_string();
    assert!(
        message.contains("items_picky") && message.contains("picky refuses the shadow"),
        "{message}"
    );
    // The slow build (4.5 s) beside it was cancelled and had ended when the run
    // returned: the server builds nothing, and no session of the run is left.
    let side = client(&db).await;
    let row = side
        .query_one(
            "SELECT (SELECT count(*) FROM pg_stat_progress_create_index WHERE datname = current_database()), \
                    (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                       AND application_name LIKE 'pgshift-index-%' AND state <> 'idle')",
            &[],
        )
        .await
        .expect("server views");
    let (building, busy): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(
        (building, busy),
        (0, 0),
        "builds in progress, busy index sessions"
    );
}

/// A table that verifies after its builds (a foreign key), whose GIN index comes last
/// in the catalog's order, after a btree and a BRIN index.
const KINDS_OF_BUILD: &str = "
CREATE TABLE kinds (id int PRIMARY KEY);
INSERT INTO kinds SELECT g FROM generate_series(0, 9) g;
CREATE TABLE items (id bigint PRIMARY KEY, qty int NOT NULL REFERENCES kinds, tags int[] NOT NULL);
INSERT INTO items SELECT g, g % 10, ARRAY[g % 7, g % 11] FROM generate_series(1, 2000) g;
CREATE INDEX items_qty_idx ON items (qty);
CREATE INDEX items_id_brin ON items USING brin (id);
CREATE INDEX items_tags_idx ON items USING gin (tags);
ANALYZE items;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_starts_the_gin_build_first_and_the_brin_build_last() {
    let db = database("cas_index_order", KINDS_OF_BUILD);
    let before = index_definitions(&db).await;
    let (report, builds) =
        run_recorded(&db, "ALTER TABLE items ALTER COLUMN qty TYPE bigint").await;
    assert!(!report.verified_beside_builds, "{report:?}");
    let started: Vec<&str> = builds.started().iter().map(|b| b.index.as_str()).collect();
    assert_eq!(
        started,
        [
            "primary key",
            "items_tags_idx",
            "items_qty_idx",
            "items_id_brin"
        ]
    );
    assert_eq!(index_definitions(&db).await, before);
}
