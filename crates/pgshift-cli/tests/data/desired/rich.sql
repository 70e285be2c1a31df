-- A schema with one of each kind `pgshift pull` files: schemas, an extension, enum,
-- domain and composite types, identity and serial columns, a sequence no column owns,
-- partitioned tables with a default partition, foreign keys in a cycle, an expression
-- index with NULLS FIRST, a partial index, statistics, a disabled trigger, row
-- level security with a policy, grants, comments, a view with an INSTEAD rule, a
-- materialized view with an index, a BEGIN ATOMIC function and a reloption. (The test
-- adds a NULLS NOT DISTINCT index on 15 and later.)
DO $$ BEGIN CREATE ROLE pull_reader NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE SCHEMA app;
COMMENT ON SCHEMA app IS 'the application';
CREATE TYPE app.mood AS ENUM ('a', 'b');
CREATE DOMAIN app.pos AS int CHECK (VALUE > 0);
CREATE TYPE app.pair AS (x int, y text);
CREATE TABLE app.b (id serial PRIMARY KEY, a_id int, m app.mood DEFAULT 'a', p app.pos, pr app.pair);
CREATE TABLE app.a (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    b_id int REFERENCES app.b,
    note text COLLATE "C",
    g int GENERATED ALWAYS AS (id * 2) STORED,
    token bytea DEFAULT gen_random_bytes(8)
) WITH (fillfactor = 80, vacuum_truncate = false);
ALTER TABLE app.b ADD CONSTRAINT b_a FOREIGN KEY (a_id) REFERENCES app.a DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX a_note ON app.a (lower(note) NULLS FIRST, id DESC NULLS LAST) WHERE note IS NOT NULL;
CREATE SEQUENCE app.free_seq;
CREATE TABLE app.c (id int DEFAULT nextval('app.free_seq'), n serial, t timestamptz NOT NULL, CHECK (n IS NOT NULL) NOT VALID) PARTITION BY RANGE (t);
CREATE TABLE app.c_2024 PARTITION OF app.c FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE app.c_def PARTITION OF app.c DEFAULT;
ALTER TABLE app.c ADD PRIMARY KEY (t, n);
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER t_touch BEFORE UPDATE ON app.c FOR EACH ROW EXECUTE FUNCTION app.touch();
ALTER TABLE app.c DISABLE TRIGGER t_touch;
ALTER TABLE app.a ENABLE ROW LEVEL SECURITY;
ALTER TABLE app.a FORCE ROW LEVEL SECURITY;
CREATE POLICY p_read ON app.a FOR SELECT TO pull_reader USING (note IS NOT NULL);
GRANT USAGE ON SCHEMA app TO pull_reader;
GRANT SELECT ON app.a TO pull_reader;
GRANT SELECT (m) ON app.b TO pull_reader;
CREATE VIEW app.v AS SELECT a.id, b.m FROM app.a JOIN app.b ON b.id = a.b_id;
CREATE RULE r_ins AS ON INSERT TO app.v DO INSTEAD NOTHING;
CREATE MATERIALIZED VIEW app.mv AS SELECT count(*) AS n FROM app.a WITH NO DATA;
CREATE UNIQUE INDEX ON app.mv (n);
COMMENT ON TABLE app.a IS 'the a';
COMMENT ON COLUMN app.a.note IS 'a note';
COMMENT ON INDEX app.a_note IS 'by note';
CREATE FUNCTION app.atomic_count() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT count(*) FROM app.b; END;
CREATE STATISTICS app.st ON id, b_id FROM app.a;
CREATE TABLE "Mixed Case" ("Id" int);
