//! The classifier's lock modes, proven against a live server.
//!
//! Every statement form of `tests/data/classify/forms.sql` (adapted to the schema in
//! `tests/data/lock_modes/schema.sql`, and the partition-relevant ones also run on the
//! partitioned table `events`) is classified with the facts its schema declares, then run
//! against a real PostgreSQL while a second session reads `pg_locks`:
//!
//! * A statement that can run in a transaction block runs as `BEGIN; <statement>` in
//!   session A; session B reads A's granted relation locks (strongest mode per
//!   relation), and A rolls back. A reads its relations' `pg_relation_filenode` before
//!   rolling back, which shows whether the statement rewrote them.
//! * A statement that cannot (the server answers `25001 active_sql_transaction`) runs in
//!   a fresh database under *guards*: one session per table holding a lock on it. At
//!   first every guard holds ACCESS EXCLUSIVE, so the statement waits on the first lock
//!   it requests; B reads that request (and whatever A already holds) from `pg_locks`,
//!   cancels A and starts again with that table's guard lowered to the strongest mode
//!   that conflicts with nothing seen so far, so the next wait reveals the next, stronger
//!   request. When A waits for a guard's transaction to end (`CONCURRENTLY` waiting out
//!   lockers), the guard is replaced by a fresh one (which A does not wait for) and
//!   released. `LOCK TABLE` cannot lock an index, so for a statement on an index two
//!   more kinds of guard stand in: one that planned a query on the index's table (ACCESS
//!   SHARE on the table and its live indexes) and one per index holding its `pg_class`
//!   row `FOR SHARE`, which stops A when it updates or deletes that row, after it has
//!   locked the index for that. Observations are taken only while A waits, so they are
//!   deterministic.
//!
//! The test then checks, collecting every disagreement and failing once with a table:
//! every lock the classifier names has exactly the observed strongest mode; with
//! `recurses`, every partition of a partitioned table shows the same mode, without it no
//! partition shows more than ACCESS SHARE; every observed lock of SHARE UPDATE EXCLUSIVE
//! or stronger on a table the classifier does not name is listed by the case as a known
//! implicit lock (with its reason); a `Rewrite` changes the relfilenode of the tables
//! it locks in its strongest mode and a `CatalogOnly` changes none; and the statement's
//! transaction use matches the server's (`OutsideOnly` is refused inside a transaction
//! block, nothing else is; `InsideOnly` is refused outside one).
//!
//! `PGSHIFT_WRITE_LOCK_TABLE=1` writes what the server showed to
//! `tests/data/lock_modes/observed-pg<major>.md`. Run it on another major with
//! `PGSHIFT_PG_BIN=/var/cache/pgshift/pg/17/bin`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgshift::classify::{classify, Classification, Context, ObjectKind, TransactionUse, WorkClass};
use pgshift::lock::LockMode;
use pgshift::lock::LockMode::{
    AccessExclusive, AccessShare, Exclusive, RowExclusive, Share, ShareRowExclusive,
    ShareUpdateExclusive,
};
use pgshift_embedded::{Cluster, ClusterOptions};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

const SCHEMA: &str = include_str!("data/lock_modes/schema.sql");
/// The environment variable that makes the test write `observed-pg<major>.md`.
const WRITE_ENV: &str = "PGSHIFT_WRITE_LOCK_TABLE";
/// How long one run of a statement may take before the test gives up on it.
const PROBE_DEADLINE: Duration = Duration::from_secs(20);
/// At most this many runs of one statement under guards.
const MAX_PROBES: usize = 60;
/// At most this many guard replacements in one run.
const MAX_ROTATIONS: usize = 200;

// ---------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------

/// What a case needs beyond the base schema (it then runs in a database of its own).
#[derive(Clone, Copy, Debug)]
enum Setup {
    None,
    Sql(&'static str),
    /// `events_past` left half-detached by an interrupted `DETACH … CONCURRENTLY`.
    PendingDetach,
}

/// A lock the statement takes on a table it does not name, known and explained.
#[derive(Clone, Copy, Debug)]
struct Implicit {
    relation: &'static str,
    mode: LockMode,
    reason: &'static str,
}

#[derive(Clone, Debug)]
struct Case {
    sql: &'static str,
    setup: Setup,
    since: u32,
    implicit: Vec<Implicit>,
    teardown: Option<&'static str>,
}

fn case(sql: &'static str) -> Case {
    Case {
        sql,
        setup: Setup::None,
        since: 14,
        implicit: Vec::new(),
        teardown: None,
    }
}

impl Case {
    /// Runs only from this major version on.
    fn since(mut self, major: u32) -> Self {
        self.since = major;
        self
    }

    fn setup(mut self, sql: &'static str) -> Self {
        self.setup = Setup::Sql(sql);
        self
    }

    fn pending_detach(mut self) -> Self {
        self.setup = Setup::PendingDetach;
        self
    }

    fn implicit(mut self, relation: &'static str, mode: LockMode, reason: &'static str) -> Self {
        self.implicit.push(Implicit {
            relation,
            mode,
            reason,
        });
        self
    }

    /// Any table the statement does not name may be locked in `mode`.
    fn implicit_any(self, mode: LockMode, reason: &'static str) -> Self {
        self.implicit(ANY_TABLE, mode, reason)
    }

    /// Why an unnamed relation may be locked in `mode`, if the case says.
    fn implicit_for(&self, relation: &str, mode: LockMode) -> Option<&'static str> {
        self.implicit
            .iter()
            .find(|i| (i.relation == relation || i.relation == ANY_TABLE) && i.mode == mode)
            .map(|i| i.reason)
    }

    /// The statement, and what it ran after when it needed a setup.
    fn title(&self) -> String {
        match self.setup {
            Setup::None => self.sql.to_owned(),
            Setup::Sql(setup) => format!("{} [after: {setup}]", self.sql),
            Setup::PendingDetach => format!(
                "{} [after an interrupted ALTER TABLE events DETACH PARTITION events_past CONCURRENTLY]",
                self.sql
            ),
        }
    }

    /// SQL run (outside any transaction) after the case, in its database.
    fn teardown(mut self, sql: &'static str) -> Self {
        self.teardown = Some(sql);
        self
    }
}

/// `Implicit::relation` for any table.
const ANY_TABLE: &str = "*";

const DEFAULT_PARTITION: &str = "CREATE TABLE events_default PARTITION OF events DEFAULT";

/// Every form of `tests/data/classify/forms.sql`, in its order, adapted to the schema
/// (the original spelling is the comment above a form whose names changed), plus the
/// partition-relevant forms on `events` and a few extra forms.
///
/// Not run, and why:
/// * `ALTER TABLE events ADD COLUMN code text UNIQUE`, `… ADD CONSTRAINT … EXCLUDE …`:
///   a unique or exclusion constraint on a partitioned table must include the partition
///   key (the `UNIQUE (code, created_at)` variant runs instead of the first).
/// * `ALTER TABLE events SET (…)`, `RESET (…)`: a partitioned table has no storage
///   parameters. `ALTER TABLE events SET LOGGED / UNLOGGED`: not possible on a
///   partitioned table.
/// * `CREATE INDEX CONCURRENTLY … ON events`, `DROP INDEX CONCURRENTLY` of a partitioned
///   index, `REINDEX … CONCURRENTLY` of a partitioned table: not supported by PostgreSQL.
/// * `ALTER TABLE events ALTER COLUMN … DROP IDENTITY`: `events` has no identity column
///   (identity columns on partitioned tables need PostgreSQL 17).
/// * `ALTER TABLE events DETACH PARTITION … CONCURRENTLY` with a default partition:
///   PostgreSQL refuses it.
///
/// Every form of forms.sql runs, on `plain` at least: `LISTEN` (unclassified) and
/// `PREPARE TRANSACTION` (the test's cluster has `max_prepared_transactions`) included.
fn cases() -> Vec<Case> {
    let fk_clone = "events' foreign key to communities is cloned onto the new partition, which locks communities like any new foreign key";
    let fk_detach = "the partition's foreign key to communities is detached from events' and gets triggers of its own, which locks communities";
    let index_table =
        "the index's table: offline the classifier cannot know which table an index is on";
    let partition_index_table = "the table of one of the partitioned index's partitions";
    let default_scan = "the default partition's constraint changes: it is locked (and scanned) in ACCESS EXCLUSIVE mode; offline the classifier cannot know there is one";
    vec![
        // ALTER TABLE … ADD COLUMN
        case("ALTER TABLE plain ADD COLUMN note text"),
        case("ALTER TABLE events ADD COLUMN note text"),
        case("ALTER TABLE plain ADD COLUMN score int DEFAULT 0 NOT NULL"),
        case("ALTER TABLE events ADD COLUMN score int DEFAULT 0 NOT NULL"),
        case("ALTER TABLE plain ADD COLUMN seen_at timestamptz DEFAULT now()"),
        case("ALTER TABLE events ADD COLUMN seen_at timestamptz DEFAULT now()"),
        case("ALTER TABLE plain ADD COLUMN token uuid DEFAULT gen_random_uuid()"),
        case("ALTER TABLE events ADD COLUMN token uuid DEFAULT gen_random_uuid()"),
        case("ALTER TABLE plain ADD COLUMN weird int DEFAULT my_func()"),
        case("ALTER TABLE events ADD COLUMN weird int DEFAULT my_func()"),
        case("ALTER TABLE plain ADD COLUMN body_len int GENERATED ALWAYS AS (length(content)) STORED"),
        case("ALTER TABLE events ADD COLUMN body_len int GENERATED ALWAYS AS (length(content)) STORED"),
        // VIRTUAL generated columns are new in 18, SET EXPRESSION in 17.
        case("ALTER TABLE plain ADD COLUMN body_len_v int GENERATED ALWAYS AS (length(content)) VIRTUAL").since(18),
        case("ALTER TABLE events ADD COLUMN body_len_v int GENERATED ALWAYS AS (length(content)) VIRTUAL").since(18),
        case("ALTER TABLE plain ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY"),
        // Before 17: "cannot recursively add identity column to table that has child tables".
        case("ALTER TABLE events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY").since(17),
        case("ALTER TABLE plain ADD COLUMN legacy_id bigserial"),
        case("ALTER TABLE events ADD COLUMN legacy_id bigserial"),
        case("ALTER TABLE plain ADD COLUMN must int NOT NULL"),
        case("ALTER TABLE events ADD COLUMN must int NOT NULL"),
        case("ALTER TABLE plain ADD COLUMN thread_id uuid REFERENCES threads (id)"),
        case("ALTER TABLE events ADD COLUMN thread_id uuid REFERENCES threads (id)"),
        case("ALTER TABLE plain ADD COLUMN pos int CHECK (pos > 0)"),
        case("ALTER TABLE events ADD COLUMN pos int CHECK (pos > 0)"),
        // ALTER TABLE events ADD COLUMN code text UNIQUE
        case("ALTER TABLE plain ADD COLUMN code2 text UNIQUE"),
        // ALTER TABLE events DROP COLUMN note
        case("ALTER TABLE plain DROP COLUMN obsolete"),
        case("ALTER TABLE events DROP COLUMN obsolete"),
        // ALTER TABLE … ALTER COLUMN
        case("ALTER TABLE plain ALTER COLUMN kind SET DEFAULT 1"),
        case("ALTER TABLE events ALTER COLUMN kind SET DEFAULT 1"),
        case("ALTER TABLE plain ALTER COLUMN kind DROP DEFAULT"),
        case("ALTER TABLE events ALTER COLUMN kind DROP DEFAULT"),
        case("ALTER TABLE plain ALTER COLUMN kind SET NOT NULL"),
        case("ALTER TABLE events ALTER COLUMN kind SET NOT NULL"),
        // ALTER TABLE events ALTER COLUMN kind DROP NOT NULL
        case("ALTER TABLE plain ALTER COLUMN state DROP NOT NULL"),
        case("ALTER TABLE events ALTER COLUMN state DROP NOT NULL"),
        case("ALTER TABLE plain ALTER COLUMN kind TYPE bigint"),
        case("ALTER TABLE events ALTER COLUMN kind TYPE bigint"),
        case("ALTER TABLE plain ALTER COLUMN name TYPE varchar(200)"),
        case("ALTER TABLE events ALTER COLUMN name TYPE varchar(200)"),
        case("ALTER TABLE plain ALTER COLUMN kind TYPE bigint USING kind::bigint"),
        case("ALTER TABLE events ALTER COLUMN kind TYPE bigint USING kind::bigint"),
        case("ALTER TABLE plain ALTER COLUMN search_tsv SET EXPRESSION AS (to_tsvector('english', content))").since(17),
        case("ALTER TABLE events ALTER COLUMN search_tsv SET EXPRESSION AS (to_tsvector('english', content))").since(17),
        case("ALTER TABLE plain ALTER COLUMN search_tsv DROP EXPRESSION"),
        case("ALTER TABLE events ALTER COLUMN search_tsv DROP EXPRESSION"),
        case("ALTER TABLE plain ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY"),
        case("ALTER TABLE events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY"),
        // ALTER TABLE events ALTER COLUMN id DROP IDENTITY
        case("ALTER TABLE plain ALTER COLUMN ident DROP IDENTITY"),
        case("ALTER TABLE plain ALTER COLUMN kind SET STATISTICS 500"),
        case("ALTER TABLE events ALTER COLUMN kind SET STATISTICS 500"),
        case("ALTER TABLE plain ALTER COLUMN content SET STORAGE EXTERNAL"),
        case("ALTER TABLE events ALTER COLUMN content SET STORAGE EXTERNAL"),
        case("ALTER TABLE plain ALTER COLUMN content SET COMPRESSION lz4"),
        case("ALTER TABLE events ALTER COLUMN content SET COMPRESSION lz4"),
        // ALTER TABLE … ADD CONSTRAINT (kind_positive exists, NOT VALID, in the schema)
        // ALTER TABLE events ADD CONSTRAINT kind_positive CHECK (kind > 0)
        case("ALTER TABLE plain ADD CONSTRAINT kind_nonneg CHECK (kind > 0)"),
        case("ALTER TABLE events ADD CONSTRAINT kind_nonneg CHECK (kind > 0)"),
        case("ALTER TABLE plain ADD CHECK (kind > 0)"),
        case("ALTER TABLE events ADD CHECK (kind > 0)"),
        // ALTER TABLE events ADD CONSTRAINT kind_positive CHECK (kind > 0) NOT VALID
        case("ALTER TABLE plain ADD CONSTRAINT kind_nonneg CHECK (kind > 0) NOT VALID"),
        case("ALTER TABLE events ADD CONSTRAINT kind_nonneg CHECK (kind > 0) NOT VALID"),
        case("ALTER TABLE plain ADD CONSTRAINT plain_community_fk FOREIGN KEY (community_id) REFERENCES communities (id)"),
        case("ALTER TABLE events ADD CONSTRAINT events_community_fk FOREIGN KEY (community_id) REFERENCES communities (id)"),
        case("ALTER TABLE plain ADD FOREIGN KEY (community_id) REFERENCES communities (id) NOT VALID"),
        // Before 18: "cannot add NOT VALID foreign key on partitioned table".
        case("ALTER TABLE events ADD FOREIGN KEY (community_id) REFERENCES communities (id) NOT VALID").since(18),
        case("ALTER TABLE plain ADD CONSTRAINT plain_code_key UNIQUE (code)"),
        case("ALTER TABLE events ADD CONSTRAINT events_code_key UNIQUE (code, created_at)"),
        // ALTER TABLE events ADD PRIMARY KEY (id)
        case("ALTER TABLE nopk ADD PRIMARY KEY (id)"),
        // ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY USING INDEX events_id_idx
        case("ALTER TABLE nopk ADD CONSTRAINT nopk_pkey PRIMARY KEY USING INDEX nopk_id_idx"),
        case("ALTER TABLE plain ADD CONSTRAINT no_overlap EXCLUDE USING gist (during WITH &&)"),
        case("ALTER TABLE plain VALIDATE CONSTRAINT kind_positive"),
        case("ALTER TABLE events VALIDATE CONSTRAINT kind_positive"),
        case("ALTER TABLE plain DROP CONSTRAINT kind_positive"),
        case("ALTER TABLE events DROP CONSTRAINT kind_positive"),
        // Renames
        case("ALTER TABLE plain RENAME TO plain_old"),
        case("ALTER TABLE events RENAME TO events_old"),
        case("ALTER TABLE plain RENAME COLUMN content TO body"),
        case("ALTER TABLE events RENAME COLUMN content TO body"),
        case("ALTER TABLE plain RENAME CONSTRAINT kind_positive TO kind_gt_zero"),
        case("ALTER TABLE events RENAME CONSTRAINT kind_positive TO kind_gt_zero"),
        case("ALTER INDEX plain_kind_idx RENAME TO plain_by_kind"),
        case("ALTER INDEX events_kind_idx RENAME TO events_by_kind"),
        case("ALTER TABLE plain SET SCHEMA archive"),
        case("ALTER TABLE events SET SCHEMA archive"),
        case("ALTER TABLE plain SET TABLESPACE fast"),
        case("ALTER TABLE events SET TABLESPACE fast"),
        // ALTER TABLE events SET LOGGED (`scratch` is unlogged)
        case("ALTER TABLE scratch SET LOGGED"),
        // ALTER TABLE events SET UNLOGGED (`plain` references a logged table)
        case("ALTER TABLE watermarks SET UNLOGGED"),
        // Triggers
        case("ALTER TABLE plain ENABLE TRIGGER plain_floor_guard"),
        case("ALTER TABLE events ENABLE TRIGGER events_floor_guard"),
        case("ALTER TABLE plain DISABLE TRIGGER plain_floor_guard"),
        case("ALTER TABLE events DISABLE TRIGGER events_floor_guard"),
        case("ALTER TABLE plain ENABLE ALWAYS TRIGGER plain_floor_guard"),
        case("ALTER TABLE events ENABLE ALWAYS TRIGGER events_floor_guard"),
        case("ALTER TABLE plain ENABLE REPLICA TRIGGER plain_floor_guard"),
        case("ALTER TABLE events ENABLE REPLICA TRIGGER events_floor_guard"),
        case("ALTER TABLE plain DISABLE TRIGGER ALL"),
        case("ALTER TABLE events DISABLE TRIGGER ALL"),
        // Partitions
        case("ALTER TABLE events ATTACH PARTITION events_2027_03 FOR VALUES FROM ('2027-03-01') TO ('2027-04-01')")
            .implicit("communities", ShareRowExclusive, fk_clone),
        case("ALTER TABLE events ATTACH PARTITION events_2027_03 FOR VALUES FROM ('2027-03-01') TO ('2027-04-01')")
            .setup(DEFAULT_PARTITION)
            .implicit("communities", ShareRowExclusive, fk_clone)
            .implicit("events_default", AccessExclusive, default_scan),
        case("ALTER TABLE events DETACH PARTITION events_past")
            .implicit("communities", ShareRowExclusive, fk_detach),
        case("ALTER TABLE events DETACH PARTITION events_past")
            .setup(DEFAULT_PARTITION)
            .implicit("communities", ShareRowExclusive, fk_detach)
            .implicit("events_default", AccessExclusive, default_scan),
        case("ALTER TABLE events DETACH PARTITION events_past CONCURRENTLY")
            .implicit("communities", ShareRowExclusive, fk_detach),
        case("ALTER TABLE events DETACH PARTITION events_past FINALIZE")
            .pending_detach()
            .implicit("communities", ShareRowExclusive, fk_detach),
        case("ALTER TABLE plain REPLICA IDENTITY FULL"),
        case("ALTER TABLE events REPLICA IDENTITY FULL"),
        case("ALTER TABLE plain SET (fillfactor = 90)"),
        case("ALTER TABLE plain SET (autovacuum_enabled = false, fillfactor = 80)"),
        case("ALTER TABLE plain SET (user_catalog_table = true)"),
        case("ALTER TABLE plain RESET (fillfactor)"),
        case("ALTER TABLE plain ENABLE ROW LEVEL SECURITY"),
        case("ALTER TABLE events ENABLE ROW LEVEL SECURITY"),
        case("ALTER TABLE plain OWNER TO relay"),
        case("ALTER TABLE events OWNER TO relay"),
        case("ALTER TABLE plain ADD COLUMN a int, ALTER COLUMN kind SET NOT NULL"),
        case("ALTER TABLE events ADD COLUMN a int, ALTER COLUMN kind SET NOT NULL"),
        case("ALTER TABLE plain ADD COLUMN b int, ALTER COLUMN kind TYPE bigint"),
        case("ALTER TABLE events ADD COLUMN b int, ALTER COLUMN kind TYPE bigint"),
        case("ALTER TABLE ONLY plain ALTER COLUMN kind SET DEFAULT 2"),
        case("ALTER TABLE ONLY events ALTER COLUMN kind SET DEFAULT 2"),
        // Indexes (plain_kind_idx and events_kind_idx exist in the schema)
        // CREATE INDEX events_kind_idx ON events (kind)
        case("CREATE INDEX plain_kind_idx2 ON plain (kind)"),
        case("CREATE INDEX events_kind_idx2 ON events (kind)"),
        case("CREATE INDEX ON plain (community_id, kind)"),
        case("CREATE INDEX ON events (community_id, kind)"),
        case("CREATE UNIQUE INDEX plain_code_idx ON plain (code) WHERE code IS NOT NULL"),
        case("CREATE UNIQUE INDEX events_code_idx ON events (code, created_at) WHERE code IS NOT NULL"),
        case("CREATE INDEX CONCURRENTLY plain_kind_idx2 ON plain (kind)"),
        case("CREATE INDEX plain_tags_gin ON plain USING gin (tags)"),
        case("CREATE INDEX events_tags_gin ON events USING gin (tags)"),
        // CREATE INDEX events_parent_only ON ONLY events (kind)
        case("CREATE INDEX events_parent_only2 ON ONLY events (kind)"),
        // ALTER INDEX events_parent_only ATTACH PARTITION events_past_kind_idx
        case("ALTER INDEX events_parent_only ATTACH PARTITION events_past_code_idx"),
        case("DROP INDEX plain_kind_idx").implicit("plain", AccessExclusive, index_table),
        case("DROP INDEX events_kind_idx")
            .implicit("events", AccessExclusive, index_table)
            .implicit("events_past", AccessExclusive, partition_index_table)
            .implicit("events_2027_01", AccessExclusive, partition_index_table)
            .implicit("events_2027_02", AccessExclusive, partition_index_table),
        case("DROP INDEX CONCURRENTLY plain_kind_idx").implicit("plain", ShareUpdateExclusive, index_table),
        // DROP INDEX IF EXISTS events_kind_idx, events_pubkey_idx
        case("DROP INDEX IF EXISTS plain_kind_idx, plain_name_idx").implicit("plain", AccessExclusive, index_table),
        case("REINDEX INDEX plain_kind_idx").implicit("plain", Share, index_table),
        case("REINDEX INDEX events_kind_idx")
            .implicit("events", Share, index_table)
            .implicit("events_past", Share, partition_index_table)
            .implicit("events_2027_01", Share, partition_index_table)
            .implicit("events_2027_02", Share, partition_index_table),
        case("REINDEX TABLE plain"),
        case("REINDEX TABLE events"),
        case("REINDEX INDEX CONCURRENTLY plain_kind_idx").implicit("plain", ShareUpdateExclusive, index_table),
        case("REINDEX SCHEMA public").implicit_any(
            Share,
            "REINDEX SCHEMA reindexes every table of the schema; the classifier refuses it and names none",
        ),
        // Triggers and functions
        // CREATE TRIGGER events_guard BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION guard()
        case("CREATE TRIGGER plain_guard BEFORE INSERT ON plain FOR EACH ROW EXECUTE FUNCTION guard()"),
        case("CREATE TRIGGER events_guard BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION guard()"),
        case("CREATE CONSTRAINT TRIGGER plain_check AFTER INSERT ON plain DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION check_row()"),
        case("CREATE CONSTRAINT TRIGGER events_check AFTER INSERT ON events DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION check_row()"),
        // CREATE OR REPLACE TRIGGER events_guard … (replaces the schema's trigger)
        case("CREATE OR REPLACE TRIGGER plain_floor_guard BEFORE INSERT ON plain FOR EACH ROW EXECUTE FUNCTION guard()"),
        case("CREATE OR REPLACE TRIGGER events_floor_guard BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION guard()"),
        // DROP TRIGGER events_guard ON events
        case("DROP TRIGGER plain_floor_guard ON plain"),
        case("DROP TRIGGER events_floor_guard ON events"),
        // ALTER TRIGGER events_guard ON events RENAME TO events_guard2
        case("ALTER TRIGGER plain_floor_guard ON plain RENAME TO plain_floor_guard2"),
        case("ALTER TRIGGER events_floor_guard ON events RENAME TO events_floor_guard2"),
        case("CREATE OR REPLACE FUNCTION guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.kind < 0 THEN RAISE EXCEPTION 'negative kind'; END IF; RETURN NEW; END $$"),
        // Tables
        // CREATE TABLE threads (id uuid PRIMARY KEY, community_id uuid REFERENCES communities (id))
        case("CREATE TABLE threads2 (id uuid PRIMARY KEY, community_id uuid REFERENCES communities (id))"),
        // CREATE TABLE events_2027_03 PARTITION OF events …
        case("CREATE TABLE events_2027_04 PARTITION OF events FOR VALUES FROM ('2027-04-01') TO ('2027-05-01')")
            .implicit("communities", ShareRowExclusive, fk_clone),
        case("CREATE TABLE events_2027_04 PARTITION OF events FOR VALUES FROM ('2027-04-01') TO ('2027-05-01')")
            .setup(DEFAULT_PARTITION)
            .implicit("communities", ShareRowExclusive, fk_clone)
            .implicit("events_default", AccessExclusive, default_scan),
        // CREATE TABLE events_copy (LIKE events INCLUDING ALL)
        case("CREATE TABLE plain_copy (LIKE plain INCLUDING ALL)"),
        case("CREATE TABLE events_copy (LIKE events INCLUDING ALL)"),
        // CREATE TABLE kinds AS SELECT DISTINCT kind FROM events
        case("CREATE TABLE kinds2 AS SELECT DISTINCT kind FROM plain"),
        case("CREATE TABLE kinds2 AS SELECT DISTINCT kind FROM events"),
        case("DROP TABLE outbox"),
        case("DROP TABLE IF EXISTS outbox, watermarks CASCADE"),
        case("TRUNCATE outbox"),
        case("TRUNCATE events"),
        // Maintenance
        case("VACUUM FULL plain"),
        case("VACUUM FULL events"),
        case("VACUUM (ANALYZE) plain"),
        case("VACUUM (ANALYZE) events"),
        case("ANALYZE plain"),
        case("ANALYZE events"),
        case("CLUSTER plain USING plain_pkey"),
        // Before 15: "cannot cluster a partitioned table".
        case("CLUSTER events USING events_pkey").since(15),
        case("LOCK TABLE plain IN SHARE MODE"),
        case("LOCK TABLE events IN SHARE MODE"),
        case("LOCK TABLE ONLY events IN SHARE MODE"),
        case("LOCK plain"),
        case("LOCK events"),
        // Data
        case("INSERT INTO communities (id, host) VALUES ('00000000-0000-0000-0000-000000000001', 'x')"),
        case("UPDATE plain SET kind = 1 WHERE kind IS NULL"),
        case("UPDATE events SET kind = 1 WHERE kind IS NULL"),
        case("UPDATE plain SET kind = 1"),
        case("DELETE FROM outbox WHERE created_at < now() - interval '1 day'"),
        case("INSERT INTO kinds SELECT DISTINCT kind FROM plain"),
        case("INSERT INTO kinds SELECT DISTINCT kind FROM events"),
        case("SELECT count(*) FROM plain"),
        case("SELECT count(*) FROM events"),
        // Session and transaction control
        case("SET lock_timeout = '2s'"),
        case("SET LOCAL statement_timeout = 5000"),
        case("SET session_replication_role = replica"),
        case("RESET lock_timeout"),
        case("BEGIN"),
        case("COMMIT"),
        case("ROLLBACK"),
        case("SAVEPOINT s1"),
        case("PREPARE TRANSACTION 'x'").teardown("ROLLBACK PREPARED 'x'"),
        case("DO $$ BEGIN PERFORM 1; END $$"),
        case("CALL refresh_all()"),
        // Other catalog changes
        case("COMMENT ON TABLE plain IS 'relay events'"),
        case("COMMENT ON COLUMN plain.kind IS 'event kind'"),
        case("GRANT SELECT ON plain TO reader"),
        case("REVOKE INSERT ON plain FROM writer"),
        case("CREATE VIEW recent AS SELECT * FROM plain WHERE created_at > now() - interval '1 day'"),
        case("CREATE POLICY own_rows ON plain USING (community_id = current_setting('app.community')::uuid)"),
        case("CREATE SEQUENCE ticket_seq"),
        case("CREATE PUBLICATION relay_pub FOR TABLE plain"),
        case("CREATE PUBLICATION relay_pub FOR TABLE events"),
        case("CREATE EXTENSION IF NOT EXISTS pg_trgm"),
        case("CREATE TYPE mood AS ENUM ('ok', 'bad')"),
        case("CREATE STATISTICS plain_stats ON community_id, kind FROM plain"),
        case("CREATE STATISTICS events_stats ON community_id, kind FROM events"),
        case("REFRESH MATERIALIZED VIEW daily_counts"),
        case("LISTEN relay"),
        // Extra forms, beyond forms.sql
        case("REFRESH MATERIALIZED VIEW CONCURRENTLY daily_counts"),
        case("ALTER TABLE plain VALIDATE CONSTRAINT plain_thread_fk"),
        case("ALTER TABLE plain ALTER CONSTRAINT plain_community_id_fkey DEFERRABLE"),
        case("ALTER TABLE plain CLUSTER ON plain_pkey"),
        case("ALTER TABLE plain SET WITHOUT CLUSTER"),
        case("ALTER TABLE plain ALTER COLUMN kind SET (n_distinct = 100)"),
        case("ALTER TABLE plain ALTER COLUMN ident SET GENERATED ALWAYS"),
        case("ALTER TABLE plain FORCE ROW LEVEL SECURITY"),
        case("DROP VIEW community_hosts"),
        case("DROP MATERIALIZED VIEW daily_counts"),
        case("ALTER SEQUENCE base_seq RESTART"),
        case("DROP SEQUENCE base_seq"),
    ]
}

// ---------------------------------------------------------------------------------------
// Sessions and catalog reads
// ---------------------------------------------------------------------------------------

/// One connection and its backend pid.
struct Session {
    client: Arc<Client>,
    pid: i32,
}

async fn connect(conninfo: &str) -> Result<Session, String> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls)
        .await
        .map_err(|e| format!("connecting: {}", describe(&e)))?;
    tokio::spawn(connection);
    // Nothing here should take long: a hang becomes an error instead.
    let pid: i32 = client
        .query_one(
            "SELECT pg_backend_pid() FROM set_config('statement_timeout', '60s', false)",
            &[],
        )
        .await
        .map_err(|e| describe(&e))?
        .get(0);
    Ok(Session {
        client: Arc::new(client),
        pid,
    })
}

/// The server's own words for an error.
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => error.to_string(),
    }
}

fn code_of(error: &tokio_postgres::Error) -> Option<SqlState> {
    error.code().cloned()
}

/// A relation of the test database.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rel {
    oid: u32,
    /// As `regclass` prints it.
    name: String,
    relkind: char,
}

impl Rel {
    fn is_table(&self) -> bool {
        matches!(self.relkind, 'r' | 'p' | 'm')
    }
}

fn rel_from_row(row: &tokio_postgres::Row) -> Rel {
    let relkind: String = row.get(2);
    Rel {
        oid: row.get(0),
        name: row.get(1),
        relkind: relkind.chars().next().unwrap_or('?'),
    }
}

async fn resolve(b: &Client, name: &str) -> Result<Option<Rel>, String> {
    let row = b
        .query_opt(
            "SELECT c.oid, c.oid::regclass::text, c.relkind::text FROM pg_class c \
             WHERE c.oid = to_regclass($1)",
            &[&name],
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok(row.as_ref().map(rel_from_row))
}

async fn index_table(b: &Client, index: u32) -> Result<Option<Rel>, String> {
    let row = b
        .query_opt(
            "SELECT c.oid, c.oid::regclass::text, c.relkind::text \
             FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE i.indexrelid = $1",
            &[&index],
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok(row.as_ref().map(rel_from_row))
}

/// The partitions (at every level) of a partitioned table or index, with whether each
/// is a leaf.
async fn descendants(b: &Client, oid: u32) -> Result<Vec<(Rel, bool)>, String> {
    let rows = b
        .query(
            "SELECT c.oid, c.oid::regclass::text, c.relkind::text, t.isleaf \
             FROM pg_partition_tree($1::oid::regclass) t JOIN pg_class c ON c.oid = t.relid \
             WHERE t.relid <> $1::oid::regclass ORDER BY t.level, c.relname",
            &[&oid],
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok(rows
        .iter()
        .map(|row| (rel_from_row(row), row.get(3)))
        .collect())
}

const USER_RELATION: &str = "n.nspname NOT IN ('pg_catalog', 'information_schema') \
     AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'";

/// The tables of the database (what guards can lock: not materialized views).
async fn user_tables(b: &Client) -> Result<Vec<Rel>, String> {
    let rows = b
        .query(
            &format!(
                "SELECT c.oid, c.oid::regclass::text, c.relkind::text FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind IN ('r', 'p') AND {USER_RELATION} ORDER BY c.oid"
            ),
            &[],
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok(rows.iter().map(rel_from_row).collect())
}

/// `pg_relation_filenode` of each relation, as the session sees it.
async fn filenodes(client: &Client, oids: &[u32]) -> Result<BTreeMap<u32, Option<u32>>, String> {
    let oids: Vec<u32> = oids.to_vec();
    let rows = client
        .query(
            "SELECT o, pg_relation_filenode(o) FROM unnest($1::oid[]) AS o",
            &[&oids],
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// One row of `pg_locks` for a backend.
#[derive(Clone, Debug)]
struct HeldLock {
    locktype: String,
    granted: bool,
    mode: Option<LockMode>,
    /// The relation, when it is a user relation B can see.
    relation: Option<Rel>,
}

async fn locks_of(b: &Client, pid: i32) -> Result<Vec<HeldLock>, String> {
    let rows = b
        .query(
            &format!(
                "SELECT c.oid, c.oid::regclass::text, c.relkind::text, l.locktype, l.granted, l.mode, \
                        (c.oid IS NOT NULL AND {USER_RELATION}) AS user_relation \
                 FROM pg_locks l \
                 LEFT JOIN pg_class c ON l.locktype = 'relation' AND c.oid = l.relation \
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                 LEFT JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE l.pid = $1"
            ),
            &[&pid],
        )
        .await
        .map_err(|e| describe(&e))?;
    Ok(rows
        .iter()
        .map(|row| {
            let user: Option<bool> = row.get(6);
            let mode: String = row.get(5);
            HeldLock {
                locktype: row.get(3),
                granted: row.get(4),
                mode: LockMode::from_pg_locks_name(&mode),
                relation: if user == Some(true) {
                    Some(rel_from_row(row))
                } else {
                    None
                },
            }
        })
        .collect())
}

async fn blocking_pids(b: &Client, pid: i32) -> Result<Vec<i32>, String> {
    let row = b
        .query_one("SELECT pg_blocking_pids($1)", &[&pid])
        .await
        .map_err(|e| describe(&e))?;
    Ok(row.get(0))
}

async fn cancel(b: &Client, pid: i32) -> Result<(), String> {
    b.query_one("SELECT pg_cancel_backend($1)", &[&pid])
        .await
        .map_err(|e| describe(&e))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Observation
// ---------------------------------------------------------------------------------------

/// How the locks were read.
#[derive(Clone, Debug)]
enum How {
    /// Held open in a transaction block.
    InTransaction,
    /// Run outside a transaction block, under guards, this many times.
    UnderGuards { runs: usize, notes: Vec<String> },
}

#[derive(Clone, Debug, Default)]
struct Seen {
    /// Every mode seen per relation (requested or held).
    modes: BTreeMap<u32, (Rel, BTreeSet<LockMode>)>,
}

impl Seen {
    fn add(&mut self, rel: &Rel, mode: LockMode) {
        self.modes
            .entry(rel.oid)
            .or_insert_with(|| (rel.clone(), BTreeSet::new()))
            .1
            .insert(mode);
    }

    fn add_held(&mut self, locks: &[HeldLock]) {
        for lock in locks.iter().filter(|l| l.granted) {
            if let (Some(rel), Some(mode)) = (&lock.relation, lock.mode) {
                self.add(rel, mode);
            }
        }
    }

    fn strongest(&self) -> BTreeMap<u32, (Rel, LockMode)> {
        self.modes
            .iter()
            .filter_map(|(oid, (rel, modes))| modes.last().map(|mode| (*oid, (rel.clone(), *mode))))
            .collect()
    }
}

#[derive(Debug)]
struct Observation {
    how: How,
    /// Strongest mode per relation.
    locks: BTreeMap<u32, (Rel, LockMode)>,
    /// The server refused the statement inside a transaction block.
    outside_only: bool,
    /// Whether the relfilenodes below show what the statement did (it completed).
    work_checked: bool,
    /// relfilenode before and after, per watched relation.
    filenodes: BTreeMap<u32, (Option<u32>, Option<u32>)>,
}

enum InTransaction {
    Observed(Observation),
    OutsideOnly,
    Failed(String),
}

/// `BEGIN; <sql>` in A, locks read from B, relfilenodes compared, `ROLLBACK`.
async fn observe_in_transaction(
    a: &Session,
    b: &Client,
    sql: &str,
    watch: &[u32],
) -> Result<InTransaction, String> {
    let before = filenodes(b, watch).await?;
    a.client
        .batch_execute("BEGIN")
        .await
        .map_err(|e| describe(&e))?;
    if let Err(error) = a.client.batch_execute(sql).await {
        let _ = a.client.batch_execute("ROLLBACK").await;
        return Ok(
            if code_of(&error) == Some(SqlState::ACTIVE_SQL_TRANSACTION) {
                InTransaction::OutsideOnly
            } else {
                InTransaction::Failed(describe(&error))
            },
        );
    }
    let held = locks_of(b, a.pid).await?;
    let after = filenodes(&a.client, watch).await;
    a.client
        .batch_execute("ROLLBACK")
        .await
        .map_err(|e| describe(&e))?;
    let after = after?;
    let mut seen = Seen::default();
    seen.add_held(&held);
    Ok(InTransaction::Observed(Observation {
        how: How::InTransaction,
        locks: seen.strongest(),
        outside_only: false,
        work_checked: true,
        filenodes: compare_filenodes(watch, &before, &after),
    }))
}

fn compare_filenodes(
    watch: &[u32],
    before: &BTreeMap<u32, Option<u32>>,
    after: &BTreeMap<u32, Option<u32>>,
) -> BTreeMap<u32, (Option<u32>, Option<u32>)> {
    watch
        .iter()
        .map(|oid| {
            let get = |map: &BTreeMap<u32, Option<u32>>| map.get(oid).copied().flatten();
            (*oid, (get(before), get(after)))
        })
        .collect()
}

/// What a guard holds.
#[derive(Clone, Debug, PartialEq, Eq)]
enum GuardKind {
    /// `LOCK TABLE ONLY <table> IN <mode> MODE`.
    Lock(Rel, LockMode),
    /// A planned query on the table: ACCESS SHARE on it and on all its live indexes.
    Plan(Rel),
    /// `FOR SHARE` on the relation's `pg_class` row: stops A when it changes the row
    /// (a new relfilenode, a rename, a drop), after it has locked the relation for that.
    Row(Rel),
}

impl GuardKind {
    fn sql(&self) -> String {
        match self {
            GuardKind::Lock(rel, mode) => format!(
                "BEGIN; SET LOCAL lock_timeout = '10s'; LOCK TABLE ONLY {} IN {} MODE",
                rel.name,
                mode.sql_name()
            ),
            GuardKind::Plan(rel) => format!(
                "BEGIN; SET LOCAL lock_timeout = '10s'; EXPLAIN SELECT FROM ONLY {}",
                rel.name
            ),
            GuardKind::Row(rel) => format!(
                "BEGIN; SET LOCAL lock_timeout = '10s'; \
                 SELECT FROM pg_class WHERE oid = {} FOR SHARE",
                rel.oid
            ),
        }
    }
}

struct Guard {
    kind: GuardKind,
    session: Session,
}

/// Sessions for guards, reused across runs.
struct GuardPool {
    conninfo: String,
    idle: Vec<Session>,
}

impl GuardPool {
    async fn start(&mut self, kind: GuardKind) -> Result<Guard, String> {
        let session = match self.idle.pop() {
            Some(session) => session,
            None => connect(&self.conninfo).await?,
        };
        session
            .client
            .batch_execute(&kind.sql())
            .await
            .map_err(|e| format!("guard {kind:?}: {}", describe(&e)))?;
        Ok(Guard { kind, session })
    }

    async fn release(&mut self, guard: Guard) -> Result<(), String> {
        guard
            .session
            .client
            .batch_execute("ROLLBACK")
            .await
            .map_err(|e| describe(&e))?;
        self.idle.push(guard.session);
        Ok(())
    }
}

/// The strongest mode that conflicts with none of `seen`: a guard in it lets everything
/// already seen through and stops any other (stronger) request.
fn next_guard_mode(seen: &BTreeSet<LockMode>) -> Option<LockMode> {
    LockMode::ALL
        .into_iter()
        .rev()
        .find(|mode| seen.iter().all(|s| !mode.conflicts_with(*s)))
}

enum RunEnd {
    /// A waits for a lock on a relation a guard holds.
    Blocked,
    /// A finished: `None` on success, else the error.
    Finished(Option<(Option<SqlState>, String)>),
}

/// Runs `sql` outside a transaction block under guards, again and again, until every
/// request it makes on a guarded relation has been seen (see the module comment).
async fn observe_under_guards(
    conninfo: &str,
    sql: &str,
    plan_guards: &[Rel],
    row_guards: &[Rel],
    watch: &[u32],
) -> Result<Observation, String> {
    let a = connect(conninfo).await?;
    let b = connect(conninfo).await?;
    let b = &b.client;
    let before = filenodes(b, watch).await?;
    let mut completed = false;
    let mut pool = GuardPool {
        conninfo: conninfo.to_owned(),
        idle: Vec::new(),
    };
    let mut plan_guards: Vec<Rel> = plan_guards.to_vec();
    // A plan guard holds ACCESS SHARE on its table: the table's lock guard must not
    // conflict with it (EXCLUSIVE still stops every request but ACCESS SHARE).
    let cap = |oid: u32, mode: LockMode, plan_guards: &[Rel]| {
        if plan_guards.iter().any(|r| r.oid == oid) {
            mode.min(Exclusive)
        } else {
            mode
        }
    };
    let mut lock_guards: BTreeMap<u32, (Rel, LockMode)> = user_tables(b)
        .await?
        .into_iter()
        .map(|rel| (rel.oid, (rel, AccessExclusive)))
        .collect();
    let mut seen = Seen::default();
    let mut notes = Vec::new();
    let mut runs = 0;
    while runs < MAX_PROBES && !(lock_guards.is_empty() && plan_guards.is_empty()) {
        // (Row guards alone never make a run worth repeating: they stop A only once.)
        runs += 1;
        let mut guards = Vec::new();
        for rel in row_guards {
            guards.push(pool.start(GuardKind::Row(rel.clone())).await?);
        }
        for rel in &plan_guards {
            guards.push(pool.start(GuardKind::Plan(rel.clone())).await?);
        }
        for (rel, mode) in lock_guards.values() {
            let mode = cap(rel.oid, *mode, &plan_guards);
            guards.push(pool.start(GuardKind::Lock(rel.clone(), mode)).await?);
        }
        let client = Arc::clone(&a.client);
        let statement = sql.to_owned();
        let mut run = tokio::spawn(async move {
            client
                .batch_execute(&statement)
                .await
                .map_err(|e| (code_of(&e), describe(&e)))
        });
        let deadline = Instant::now() + PROBE_DEADLINE;
        let mut pause = Duration::from_millis(1);
        let mut rotations = 0;
        let mut blocked_by: Vec<GuardKind> = Vec::new();
        let end = loop {
            if run.is_finished() {
                break RunEnd::Finished((&mut run).await.map_err(|e| e.to_string())?.err());
            }
            let held = locks_of(b, a.pid).await?;
            if let Some(waiting) = held.iter().find(|l| !l.granted) {
                let blockers = blocking_pids(b, a.pid).await?;
                let (blocking, others): (Vec<Guard>, Vec<Guard>) = guards
                    .into_iter()
                    .partition(|g| blockers.contains(&g.session.pid));
                guards = others;
                if !blocking.is_empty() {
                    seen.add_held(&held);
                    if let (Some(rel), Some(mode)) = (&waiting.relation, waiting.mode) {
                        // A requests a lock a guard holds: one more mode seen.
                        seen.add(rel, mode);
                        blocked_by = blocking.iter().map(|g| g.kind.clone()).collect();
                        guards.extend(blocking);
                        break RunEnd::Blocked;
                    }
                    // A waits for guards' transactions to end (it does not want their
                    // locks): replace them with guards A does not wait for.
                    rotations += 1;
                    if rotations > MAX_ROTATIONS {
                        return Err(format!(
                            "{sql}: still waiting after {MAX_ROTATIONS} guard replacements"
                        ));
                    }
                    for old in blocking {
                        // A replacement must not wait for the guard it replaces (a
                        // self-conflicting mode), and a row guard has done its job.
                        let replace = match &old.kind {
                            GuardKind::Lock(_, mode) => !mode.conflicts_with(*mode),
                            GuardKind::Plan(_) => true,
                            GuardKind::Row(_) => false,
                        };
                        if replace {
                            let fresh = pool.start(old.kind.clone()).await?;
                            guards.push(fresh);
                        }
                        pool.release(old).await?;
                    }
                    continue;
                }
            }
            if Instant::now() > deadline {
                let _ = cancel(b, a.pid).await;
                let _ = (&mut run).await;
                for guard in guards {
                    pool.release(guard).await?;
                }
                return Err(format!(
                    "{sql}: neither finished nor waited for a guard within {PROBE_DEADLINE:?}"
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        if let RunEnd::Blocked = end {
            cancel(b, a.pid).await?;
            let _ = run.await;
        }
        for guard in guards {
            pool.release(guard).await?;
        }
        match end {
            RunEnd::Blocked => {
                for kind in blocked_by {
                    match kind {
                        GuardKind::Lock(rel, _) => {
                            let modes = seen.modes.get(&rel.oid).map(|(_, m)| m.clone());
                            match modes.as_ref().and_then(next_guard_mode) {
                                Some(mode) => {
                                    lock_guards.insert(rel.oid, (rel, mode));
                                }
                                None => {
                                    lock_guards.remove(&rel.oid);
                                }
                            }
                        }
                        GuardKind::Plan(rel) => plan_guards.retain(|r| r != &rel),
                        GuardKind::Row(_) => {}
                    }
                }
            }
            RunEnd::Finished(None) => {
                completed = true;
                break;
            }
            RunEnd::Finished(Some((code, message))) => {
                if runs == 1 || code == Some(SqlState::ACTIVE_SQL_TRANSACTION) {
                    return Err(message);
                }
                notes.push(format!("run {runs} ended with: {message}"));
                break;
            }
        }
    }
    // When the statement completed in the end, its relfilenode changes show too.
    let filenodes = if completed {
        let after = filenodes(b, watch).await?;
        compare_filenodes(watch, &before, &after)
    } else {
        BTreeMap::new()
    };
    Ok(Observation {
        how: How::UnderGuards { runs, notes },
        locks: seen.strongest(),
        outside_only: true,
        work_checked: completed,
        filenodes,
    })
}

/// Leaves `events_past` pending detach: `DETACH … CONCURRENTLY` commits its first
/// transaction, then waits for a session holding a lock on `events`, and is cancelled.
async fn make_pending_detach(conninfo: &str) -> Result<(), String> {
    let a = connect(conninfo).await?;
    let b = connect(conninfo).await?;
    let holder = connect(conninfo).await?;
    holder
        .client
        .batch_execute("BEGIN; LOCK TABLE ONLY events IN ROW EXCLUSIVE MODE")
        .await
        .map_err(|e| describe(&e))?;
    let client = Arc::clone(&a.client);
    let run = tokio::spawn(async move {
        client
            .batch_execute("ALTER TABLE events DETACH PARTITION events_past CONCURRENTLY")
            .await
    });
    let deadline = Instant::now() + PROBE_DEADLINE;
    let mut pause = Duration::from_millis(1);
    loop {
        let held = locks_of(&b.client, a.pid).await?;
        if held
            .iter()
            .any(|l| !l.granted && l.locktype == "virtualxid")
        {
            break;
        }
        if run.is_finished() || Instant::now() > deadline {
            return Err("DETACH … CONCURRENTLY did not wait for the lock holder".to_owned());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    cancel(&b.client, a.pid).await?;
    let _ = run.await;
    holder
        .client
        .batch_execute("ROLLBACK")
        .await
        .map_err(|e| describe(&e))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Judging
// ---------------------------------------------------------------------------------------

/// One row of the published table.
struct Row {
    relation: String,
    observed: Option<LockMode>,
    classifier: String,
    verdict: String,
}

/// One disagreement.
struct Mismatch {
    statement: String,
    relation: String,
    observed: String,
    classifier: String,
    what: String,
}

/// What the test found for one case.
struct Outcome {
    statement: String,
    classification: Classification,
    observation: Option<Observation>,
    rows: Vec<Row>,
    checks: Vec<Check>,
    skipped: Option<String>,
}

fn mode_name(mode: Option<LockMode>) -> String {
    mode.map_or_else(|| "none".to_owned(), |m| m.sql_name().to_owned())
}

/// A relation named by the classifier, resolved in the test database.
struct Named {
    written: String,
    object: ObjectKind,
    mode: LockMode,
    recurses: bool,
    /// The mode stated for each partition (the relation's own mode unless the
    /// classifier says otherwise).
    partition_mode: LockMode,
    rel: Option<Rel>,
    /// The table of an index.
    table: Option<Rel>,
    /// Partitions (all levels), with whether each is a leaf.
    partitions: Vec<(Rel, bool)>,
}

async fn resolve_named(b: &Client, classification: &Classification) -> Result<Vec<Named>, String> {
    let mut named = Vec::new();
    for lock in &classification.locks {
        let rel = resolve(b, &lock.relation.to_string()).await?;
        let table = match (&rel, lock.object) {
            (Some(rel), ObjectKind::Index) => index_table(b, rel.oid).await?,
            _ => None,
        };
        let partitions = match &rel {
            Some(rel) if matches!(rel.relkind, 'p' | 'I') => descendants(b, rel.oid).await?,
            _ => Vec::new(),
        };
        named.push(Named {
            written: lock.relation.to_string(),
            object: lock.object,
            mode: lock.mode,
            recurses: lock.recurses,
            partition_mode: lock.partition_mode.unwrap_or(lock.mode),
            rel,
            table,
            partitions,
        });
    }
    Ok(named)
}

/// Relations whose relfilenode tells whether the statement rewrote what it works on:
/// the tables and materialized views it locks in its strongest mode (the leaf partitions
/// of a partitioned one).
fn rewrite_targets(named: &[Named]) -> Vec<u32> {
    let strongest = named
        .iter()
        .filter(|n| n.object != ObjectKind::Index)
        .map(|n| n.mode)
        .max();
    let mut oids = Vec::new();
    for n in named
        .iter()
        .filter(|n| n.object != ObjectKind::Index && Some(n.mode) == strongest)
    {
        if let Some(rel) = &n.rel {
            if rel.relkind == 'p' {
                oids.extend(
                    n.partitions
                        .iter()
                        .filter(|(_, leaf)| *leaf)
                        .map(|(r, _)| r.oid),
                );
            } else if rel.is_table() {
                oids.push(rel.oid);
            }
        }
    }
    oids
}

type Check = (String, String, String, bool);

fn judge(
    case: &Case,
    classification: &Classification,
    named: &[Named],
    observation: &Observation,
    outside_refused: Option<bool>,
    mismatches: &mut Vec<Mismatch>,
) -> (Vec<Row>, Vec<Check>) {
    let mut rows = Vec::new();
    let mut miss = |relation: &str, observed: String, classifier: String, what: &str| {
        mismatches.push(Mismatch {
            statement: case.title(),
            relation: relation.to_owned(),
            observed,
            classifier,
            what: what.to_owned(),
        });
    };
    let observed = |oid: u32| observation.locks.get(&oid).map(|(_, mode)| *mode);
    // Every relation the classifier names, and their partitions, by oid.
    let mut known: BTreeMap<u32, Rel> = BTreeMap::new();
    for n in named {
        if let Some(rel) = &n.rel {
            known.insert(rel.oid, rel.clone());
        }
    }
    let named_oids: BTreeSet<u32> = known.keys().copied().collect();
    for n in named {
        known.extend(n.partitions.iter().map(|(r, _)| (r.oid, r.clone())));
    }

    for n in named {
        let classifier = format!(
            "{}{}",
            n.mode.sql_name(),
            if n.recurses { " (+partitions)" } else { "" }
        );
        let Some(rel) = &n.rel else {
            rows.push(Row {
                relation: n.written.clone(),
                observed: None,
                classifier: classifier.clone(),
                verdict: "NO: not in the test schema".to_owned(),
            });
            miss(
                &n.written,
                "-".into(),
                classifier,
                "relation not in the test schema",
            );
            continue;
        };
        let mut seen = observed(rel.oid);
        let mut via = String::new();
        if seen.is_none() && n.object == ObjectKind::Index && observation.outside_only {
            // The lock on an index was not seen: compare with its table's.
            if let Some(table) = &n.table {
                seen = observed(table.oid);
                via = format!(" (seen on its table {})", table.name);
            }
        }
        let ok = seen == Some(n.mode);
        rows.push(Row {
            relation: format!("{}{via}", rel.name),
            observed: seen,
            classifier: classifier.clone(),
            verdict: if ok { "yes".into() } else { "NO".into() },
        });
        if !ok {
            miss(
                &rel.name,
                format!("{}{via}", mode_name(seen)),
                classifier,
                "mode",
            );
        }
        for (part, _) in &n.partitions {
            if named_oids.contains(&part.oid) {
                continue;
            }
            let seen = observed(part.oid);
            let relation = format!("{} (partition of {})", part.name, rel.name);
            let (expected, verdict) = if n.recurses {
                let ok = seen == Some(n.partition_mode);
                if !ok {
                    miss(
                        &relation,
                        mode_name(seen),
                        n.partition_mode.sql_name().into(),
                        "recurses, but the partition's mode differs",
                    );
                }
                (
                    n.partition_mode.sql_name().to_owned(),
                    if ok {
                        "yes".to_owned()
                    } else {
                        "NO".to_owned()
                    },
                )
            } else {
                let expected = "at most ACCESS SHARE".to_owned();
                match seen.filter(|m| *m > AccessShare) {
                    None => (expected, "yes".to_owned()),
                    Some(mode) => match case.implicit_for(&part.name, mode) {
                        Some(reason) => (expected, format!("implicit: {reason}")),
                        None => {
                            miss(
                                &relation,
                                mode_name(seen),
                                expected.clone(),
                                "does not recurse, but the partition is locked",
                            );
                            (expected, "NO".to_owned())
                        }
                    },
                }
            };
            rows.push(Row {
                relation,
                observed: seen,
                classifier: expected,
                verdict,
            });
        }
    }
    for (oid, (rel, mode)) in &observation.locks {
        if known.contains_key(oid) || !rel.is_table() {
            continue;
        }
        let verdict = if *mode < ShareUpdateExclusive {
            "— (weaker than SHARE UPDATE EXCLUSIVE)".to_owned()
        } else if let Some(reason) = case.implicit_for(&rel.name, *mode) {
            format!("implicit: {reason}")
        } else {
            miss(
                &rel.name,
                mode.sql_name().to_owned(),
                "not named".into(),
                "unlisted",
            );
            "NO: unlisted".to_owned()
        };
        rows.push(Row {
            relation: rel.name.clone(),
            observed: Some(*mode),
            classifier: "not named".into(),
            verdict,
        });
    }
    if rows.is_empty() {
        rows.push(Row {
            relation: "(none)".into(),
            observed: None,
            classifier: "none".into(),
            verdict: "yes".into(),
        });
    }

    // Work class (tables and materialized views only: a sequence gets a new relfilenode
    // from ALTER SEQUENCE … RESTART, at constant cost).
    let mut checks = Vec::new();
    let is_rewrite = classification.work == WorkClass::Rewrite;
    if observation.work_checked && (is_rewrite || classification.work == WorkClass::CatalogOnly) {
        let name = |oid: &u32| {
            known
                .get(oid)
                .map_or_else(|| oid.to_string(), |r| r.name.clone())
        };
        let changed = |oid: &u32| {
            observation
                .filenodes
                .get(oid)
                .is_some_and(|(before, after)| {
                    before.is_some() && after.is_some() && before != after
                })
        };
        let kept = |oid: &u32| {
            observation
                .filenodes
                .get(oid)
                .is_some_and(|(before, after)| before.is_some() && before == after)
        };
        let (server, ok) = if is_rewrite {
            let targets = rewrite_targets(named);
            let unchanged: Vec<String> = targets.iter().filter(|o| kept(o)).map(name).collect();
            if targets.is_empty() {
                ("no table to rewrite".to_owned(), false)
            } else if unchanged.is_empty() {
                ("relfilenode changed".to_owned(), true)
            } else {
                (
                    format!("relfilenode unchanged: {}", unchanged.join(", ")),
                    false,
                )
            }
        } else {
            let changed: Vec<String> = observation
                .filenodes
                .keys()
                .filter(|o| changed(o) && known.get(o).is_some_and(Rel::is_table))
                .map(name)
                .collect();
            if changed.is_empty() {
                ("no relfilenode changed".to_owned(), true)
            } else {
                (
                    format!("relfilenode changed: {}", changed.join(", ")),
                    false,
                )
            }
        };
        let classifier = format!("{:?}", classification.work);
        if !ok {
            miss("(work)", server.clone(), classifier.clone(), "work class");
        }
        checks.push((classifier, "work".to_owned(), server, ok));
    }

    // Transaction use.
    let server = if observation.outside_only {
        "refused in a transaction block"
    } else {
        "runs in a transaction block"
    };
    let classifier = format!("{:?}", classification.transaction);
    let ok =
        (classification.transaction == TransactionUse::OutsideOnly) == observation.outside_only;
    if !ok {
        miss(
            "(transaction)",
            server.into(),
            classifier.clone(),
            "transaction use",
        );
    }
    checks.push((classifier, "transaction".to_owned(), server.to_owned(), ok));
    if let Some(refused) = outside_refused {
        let server = if refused {
            "refused outside a transaction block"
        } else {
            "runs outside a transaction block"
        };
        if !refused {
            miss(
                "(transaction)",
                server.into(),
                "InsideOnly".into(),
                "transaction use",
            );
        }
        checks.push((
            "InsideOnly".into(),
            "outside".into(),
            server.into(),
            refused,
        ));
    }
    (rows, checks)
}

// ---------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------

struct Databases<'a> {
    cluster: &'a Cluster,
    admin: Session,
    next: usize,
}

impl Databases<'_> {
    /// A new database made from the base schema, with the case's setup applied.
    async fn fresh(&mut self, setup: Setup) -> Result<String, String> {
        self.next += 1;
        let name = format!("lock_modes_{}", self.next);
        self.admin
            .client
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE lock_modes_base"))
            .await
            .map_err(|e| describe(&e))?;
        let conninfo = self.cluster.connection_string(&name);
        match setup {
            Setup::None => {}
            Setup::Sql(sql) => {
                let s = connect(&conninfo).await?;
                s.client
                    .batch_execute(sql)
                    .await
                    .map_err(|e| format!("setup: {}", describe(&e)))?;
            }
            Setup::PendingDetach => make_pending_detach(&conninfo).await?,
        }
        Ok(name)
    }

    async fn remove(&self, name: &str) {
        let _ = self
            .admin
            .client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}

/// The facts the base schema (and the case's setup SQL) declare.
fn declared_facts(case: &Case) -> pgshift::catalog::CatalogSnapshot {
    let schema = include_str!("data/lock_modes/schema.sql");
    let mut declared = pgshift::catalog::DeclaredSchema::new();
    let text = pgshift::source::blank_psql_meta_commands(schema);
    declared.absorb(&pgshift_sql::parse(&text).expect("the schema parses"));
    if let Setup::Sql(setup) = case.setup {
        declared.absorb(&pgshift_sql::parse(setup).expect("the setup parses"));
    }
    declared.snapshot()
}

/// Runs one case; returns what it found.
async fn run_case(
    case: &Case,
    major: u32,
    dbs: &mut Databases<'_>,
    shared: &(Session, Session),
    mismatches: &mut Vec<Mismatch>,
) -> Outcome {
    let statements = pgshift_sql::parse(case.sql).expect("the case parses");
    assert_eq!(statements.len(), 1, "one statement per case: {}", case.sql);
    // Classified as `pgshift lint --schema` would: with the tables the schema file
    // declares (and the case's own setup), for the server's version.
    let facts = declared_facts(case);
    let context = Context {
        facts: Some(&facts),
        server_version_num: Some(i32::try_from(major).unwrap_or(0) * 10_000),
        ..Context::default()
    };
    let classification = classify(&statements[0], &context);
    let mut outcome = Outcome {
        statement: case.title(),
        classification,
        observation: None,
        rows: Vec::new(),
        checks: Vec::new(),
        skipped: None,
    };
    if major < case.since {
        outcome.skipped = Some(format!("needs PostgreSQL {}", case.since));
        return outcome;
    }
    match run_case_inner(case, dbs, shared, &outcome.classification, mismatches).await {
        Ok((observation, rows, checks)) => {
            outcome.observation = Some(observation);
            outcome.rows = rows;
            outcome.checks = checks;
        }
        Err(error) => {
            mismatches.push(Mismatch {
                statement: case.title(),
                relation: "-".into(),
                observed: "-".into(),
                classifier: "-".into(),
                what: format!("failed to run: {error}"),
            });
            outcome.skipped = Some(format!("failed to run: {error}"));
        }
    }
    outcome
}

type Judged = (Observation, Vec<Row>, Vec<Check>);

async fn run_case_inner(
    case: &Case,
    dbs: &mut Databases<'_>,
    shared: &(Session, Session),
    classification: &Classification,
    mismatches: &mut Vec<Mismatch>,
) -> Result<Judged, String> {
    let mut database = None;
    let result = observe_case(case, dbs, shared, classification, &mut database).await;
    if let Some(name) = database {
        dbs.remove(&name).await;
    }
    let (named, observation, outside_refused) = result?;
    let (rows, checks) = judge(
        case,
        classification,
        &named,
        &observation,
        outside_refused,
        mismatches,
    );
    Ok((observation, rows, checks))
}

/// The relations whose relfilenodes are compared: those named and their partitions.
fn watched(named: &[Named]) -> Vec<u32> {
    let mut watch = Vec::new();
    for n in named {
        if let Some(rel) = &n.rel {
            watch.push(rel.oid);
            watch.extend(n.partitions.iter().map(|(r, _)| r.oid));
        }
    }
    watch
}

/// Runs the case in the shared database (in a transaction block) or in one of its own
/// (named in `database`, for the caller to remove): with a setup, or for a statement
/// that cannot run in a transaction block.
async fn observe_case(
    case: &Case,
    dbs: &mut Databases<'_>,
    shared: &(Session, Session),
    classification: &Classification,
    database: &mut Option<String>,
) -> Result<(Vec<Named>, Observation, Option<bool>), String> {
    let own_database = !matches!(case.setup, Setup::None)
        || classification.transaction == TransactionUse::OutsideOnly;
    let local;
    let (a, b) = if own_database {
        let name = dbs.fresh(case.setup).await?;
        let conninfo = dbs.cluster.connection_string(&name);
        *database = Some(name);
        local = (connect(&conninfo).await?, connect(&conninfo).await?);
        (&local.0, &local.1)
    } else {
        (&shared.0, &shared.1)
    };
    let mut named = resolve_named(&b.client, classification).await?;
    let watch = watched(&named);
    let observation = match observe_in_transaction(a, &b.client, case.sql, &watch).await? {
        InTransaction::Observed(observation) => observation,
        InTransaction::Failed(error) => return Err(error),
        InTransaction::OutsideOnly => {
            let name = match database {
                Some(name) => name.clone(),
                None => {
                    let name = dbs.fresh(case.setup).await?;
                    *database = Some(name.clone());
                    name
                }
            };
            let conninfo = dbs.cluster.connection_string(&name);
            let b = connect(&conninfo).await?;
            named = resolve_named(&b.client, classification).await?;
            let plan_guards: Vec<Rel> = named.iter().filter_map(|n| n.table.clone()).collect();
            let mut row_guards: Vec<Rel> = Vec::new();
            for n in named.iter().filter(|n| n.object == ObjectKind::Index) {
                row_guards.extend(n.rel.clone());
                row_guards.extend(n.partitions.iter().map(|(r, _)| r.clone()));
            }
            let watch = watched(&named);
            observe_under_guards(&conninfo, case.sql, &plan_guards, &row_guards, &watch).await?
        }
    };
    if let Some(teardown) = case.teardown {
        a.client
            .batch_execute(teardown)
            .await
            .map_err(|e| format!("teardown: {}", describe(&e)))?;
    }
    // LOCK TABLE outside a transaction block is an error, so this changes nothing.
    let outside_refused = if classification.transaction == TransactionUse::InsideOnly {
        Some(match a.client.batch_execute(case.sql).await {
            Ok(()) => false,
            Err(e) => code_of(&e) == Some(SqlState::NO_ACTIVE_SQL_TRANSACTION),
        })
    } else {
        None
    };
    Ok((named, observation, outside_refused))
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

fn render_markdown(major: u32, version: &str, outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Locks observed on PostgreSQL {version}");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Generated by `crates/pgshift/tests/lock_modes.rs` with `{WRITE_ENV}=1` (PostgreSQL {major}): \
         each statement was classified with the facts `schema.sql` declares (as \
         `pgshift lint --schema` does) and the server's version, then run against that \
         schema while a second session read `pg_locks`. Statements that can run in a \
         transaction block were held open in one; the others were run under guard sessions \
         (see the test's module comment). \"observed mode\" is the strongest mode the \
         statement held or requested on the relation. Relations are tables, views and \
         materialized views; index locks appear only where the classifier names the index."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| statement | relation | observed mode | classifier mode | match |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for outcome in outcomes {
        let statement = format!("`{}`", escape(&outcome.statement));
        if let Some(skipped) = &outcome.skipped {
            let _ = writeln!(
                out,
                "| {statement} | — | not run: {} | — | — |",
                escape(skipped)
            );
            continue;
        }
        for row in &outcome.rows {
            let _ = writeln!(
                out,
                "| {statement} | {} | {} | {} | {} |",
                escape(&row.relation),
                mode_name(row.observed),
                escape(&row.classifier),
                escape(&row.verdict)
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "## Work and transaction use");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "A `Rewrite` must change the relfilenode of the tables (or materialized views) the \
         statement locks in its strongest mode (of each leaf partition, for a partitioned \
         table) and a \
         `CatalogOnly` must change none (checked inside the transaction block, or, under \
         guards, once the statement has completed). `OutsideOnly` statements must be \
         refused in a transaction \
         block and no others; `InsideOnly` ones must be refused outside one."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| statement | how observed | check | classifier | server | match |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for outcome in outcomes {
        let Some(observation) = &outcome.observation else {
            continue;
        };
        let how = match &observation.how {
            How::InTransaction => "in a transaction block".to_owned(),
            How::UnderGuards { runs, notes } => {
                let mut how = format!(
                    "under guards, {runs} run{}",
                    if *runs == 1 { "" } else { "s" }
                );
                for note in notes {
                    how.push_str(&format!("; {note}"));
                }
                how
            }
        };
        for (classifier, check, server, ok) in &outcome.checks {
            let _ = writeln!(
                out,
                "| `{}` | {} | {check} | {classifier} | {server} | {} |",
                escape(&outcome.statement),
                escape(&how),
                if *ok { "yes" } else { "NO" }
            );
        }
    }
    out
}

/// The failure message: the disagreements grouped by statement, in aligned columns.
fn render_mismatches(major: u32, mismatches: &[Mismatch]) -> String {
    let width = |f: fn(&Mismatch) -> &str| mismatches.iter().map(|m| f(m).len()).max().unwrap_or(0);
    let (relation, observed, classifier) = (
        width(|m| &m.relation).max("relation".len()),
        width(|m| &m.observed).max("observed".len()),
        width(|m| &m.classifier).max("classifier".len()),
    );
    let mut out = format!(
        "{} disagreement(s) between the classifier and PostgreSQL {major}:\n\n    \
         {:relation$}  {:observed$}  {:classifier$}  what\n",
        mismatches.len(),
        "relation",
        "observed",
        "classifier"
    );
    let mut last = None;
    for m in mismatches {
        if last != Some(&m.statement) {
            let _ = writeln!(out, "{}", m.statement);
            last = Some(&m.statement);
        }
        let _ = writeln!(
            out,
            "    {:relation$}  {:observed$}  {:classifier$}  {}",
            m.relation, m.observed, m.classifier, m.what
        );
    }
    out
}

/// Creates what is per cluster: roles and the tablespace `fast` (in a directory the
/// server's OS user owns), then the base database.
async fn prepare_cluster(cluster: &Cluster, admin: &Client) -> Result<(), String> {
    let dir = cluster.dir().join("tablespace_fast");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let owner = std::fs::metadata(cluster.data_dir()).map_err(|e| e.to_string())?;
    std::os::unix::fs::chown(&dir, Some(owner.uid()), Some(owner.gid()))
        .map_err(|e| format!("chown {}: {e}", dir.display()))?;
    let location = dir.to_str().ok_or("tablespace path is not UTF-8")?;
    for sql in [
        "CREATE ROLE reader".to_owned(),
        "CREATE ROLE writer".to_owned(),
        "CREATE ROLE relay".to_owned(),
        format!("CREATE TABLESPACE fast LOCATION '{location}'"),
        "CREATE DATABASE lock_modes_base".to_owned(),
    ] {
        admin
            .batch_execute(&sql)
            .await
            .map_err(|e| format!("{sql}: {}", describe(&e)))?;
    }
    let base = connect(&cluster.connection_string("lock_modes_base")).await?;
    base.client
        .batch_execute(SCHEMA)
        .await
        .map_err(|e| format!("schema.sql: {}", describe(&e)))?;
    Ok(())
}

// INV: LK-1 — every stated lock mode is what the server takes, read from pg_locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inv_lk_1_stated_lock_modes_match_pg_locks() {
    let started = Instant::now();
    let cluster = Cluster::start(
        &ClusterOptions::new()
            .setting("max_prepared_transactions", "4")
            .setting("autovacuum", "off"),
    )
    .expect("a PostgreSQL cluster");
    let major = cluster.version().major;
    let admin = connect(&cluster.connection_string("postgres"))
        .await
        .expect("admin session");
    prepare_cluster(&cluster, &admin.client)
        .await
        .expect("roles, tablespace and base schema");
    admin
        .client
        .batch_execute("CREATE DATABASE lock_modes_shared TEMPLATE lock_modes_base")
        .await
        .expect("shared database");
    let shared_conninfo = cluster.connection_string("lock_modes_shared");
    let shared = (
        connect(&shared_conninfo).await.expect("session A"),
        connect(&shared_conninfo).await.expect("session B"),
    );
    let mut dbs = Databases {
        cluster: &cluster,
        admin,
        next: 0,
    };
    let mut mismatches = Vec::new();
    let mut outcomes = Vec::new();
    for case in cases() {
        outcomes.push(run_case(&case, major, &mut dbs, &shared, &mut mismatches).await);
    }
    if std::env::var(WRITE_ENV).is_ok_and(|v| v == "1") {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/lock_modes/observed-pg{major}.md"));
        std::fs::write(
            &path,
            render_markdown(major, &cluster.version().to_string(), &outcomes),
        )
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
    eprintln!(
        "lock_modes: {} cases on PostgreSQL {} in {:.1?}",
        outcomes.len(),
        cluster.version(),
        started.elapsed()
    );
    assert!(
        mismatches.is_empty(),
        "{}",
        render_mismatches(major, &mismatches)
    );
}

#[test]
fn guard_modes_let_seen_modes_through_and_stop_stronger_ones() {
    for mode in LockMode::ALL {
        let seen = BTreeSet::from([mode]);
        match next_guard_mode(&seen) {
            None => assert_eq!(mode, AccessExclusive),
            Some(guard) => {
                assert!(!guard.conflicts_with(mode), "{guard} lets {mode} through");
                for stronger in LockMode::ALL.into_iter().filter(|m| *m > mode) {
                    assert!(
                        guard.conflicts_with(stronger),
                        "{guard} stops {stronger} after {mode}"
                    );
                }
            }
        }
    }
    assert_eq!(
        next_guard_mode(&BTreeSet::from([AccessShare])),
        Some(Exclusive)
    );
    assert_eq!(
        next_guard_mode(&BTreeSet::from([ShareUpdateExclusive])),
        Some(RowExclusive)
    );
    assert_eq!(next_guard_mode(&BTreeSet::from([Share])), Some(Share));
}
