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

    let mut builds = Builds::default();
    let report = run(
        &db,
        "items",
        "ALTER TABLE items ALTER COLUMN qty TYPE bigint",
        options(Mode::Live),
        &mut builds,
    )
    .await
    .expect("the run completes");
    assert_eq!(report.phase, "done");

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
    let started: Vec<&IndexBuild> = builds
        .seen
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b.reading.is_none())
        .collect();
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
