//! The tables the execution tests (exec_apply, exec_latency) run their changes on:
//! a keyed table with an index, a table with no key, a guard function, and a table
//! partitioned by range into four partitions; and a writer's insert into the latter.

/// The schema, with its rows.
pub const SCHEMA: &str = "
CREATE TABLE owners (id bigint PRIMARY KEY);
INSERT INTO owners SELECT g FROM generate_series(1, 100) g;
CREATE TABLE accounts (id bigint PRIMARY KEY, email text, kind int, owner_id bigint, note text);
INSERT INTO accounts SELECT g, 'user' || g || '@example.com', g % 5, (g % 100) + 1, 'n'
  FROM generate_series(1, 20000) g;
CREATE INDEX accounts_note_idx ON accounts (note);
CREATE TABLE keyless (id bigint, v int);
INSERT INTO keyless SELECT g, g FROM generate_series(1, 5000) g;
CREATE FUNCTION guard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE events (id bigint NOT NULL, at timestamptz NOT NULL, kind int, PRIMARY KEY (id, at))
  PARTITION BY RANGE (at);
CREATE TABLE events_a PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2026-04-01');
CREATE TABLE events_b PARTITION OF events FOR VALUES FROM ('2026-04-01') TO ('2026-07-01');
CREATE TABLE events_c PARTITION OF events FOR VALUES FROM ('2026-07-01') TO ('2026-10-01');
CREATE TABLE events_d PARTITION OF events FOR VALUES FROM ('2026-10-01') TO ('2027-01-01');
INSERT INTO events SELECT g, '2026-01-01'::timestamptz + (g % 360) * interval '1 day', g % 7
  FROM generate_series(1, 20000) g;
ANALYZE;
";

/// An insert into `events` (its id is `$1`) that lands in the first three partitions.
pub const EVENTS_WRITER: &str =
    "INSERT INTO events (id, at, kind) VALUES ($1::bigint, '2026-01-01'::timestamptz + ($1::bigint % 270) * interval '1 day', 1)";
