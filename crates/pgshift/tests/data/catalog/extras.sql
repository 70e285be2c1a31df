-- Objects added to the relay workload for tests/catalog.rs, loaded after
-- workloads/relay/schema.sql and seed_small.sql.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

-- A type outside pg_catalog, for ColumnFacts.type_name.
CREATE TYPE public.mood AS ENUM ('calm', 'loud');

-- A LIST-partitioned table with a DEFAULT partition and a sub-partitioned partition.
CREATE TABLE public.metrics (
    id      bigint GENERATED ALWAYS AS IDENTITY,
    region  text NOT NULL,
    amount  numeric(12, 2),
    label   varchar(100) DEFAULT 'none',
    tags    int[],
    feeling public.mood,
    CONSTRAINT metrics_pkey PRIMARY KEY (id, region)
) PARTITION BY LIST (region);
CREATE TABLE public.metrics_eu PARTITION OF public.metrics FOR VALUES IN ('eu');
CREATE TABLE public.metrics_us PARTITION OF public.metrics FOR VALUES IN ('us')
    PARTITION BY HASH (id);
CREATE TABLE public.metrics_us_0 PARTITION OF public.metrics_us
    FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE public.metrics_us_1 PARTITION OF public.metrics_us
    FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE public.metrics_other PARTITION OF public.metrics DEFAULT;
INSERT INTO public.metrics (region, amount, label)
SELECT (ARRAY['eu', 'us', 'ap'])[1 + i % 3], i, 'row ' || i
  FROM generate_series(1, 300) AS i;
-- NOT VALID only holds when added to an existing table.
ALTER TABLE public.metrics ADD CONSTRAINT metrics_amount_check CHECK (amount >= 0) NOT VALID;

-- Foreign keys that reference a partitioned table: PostgreSQL adds a constraint row
-- per referenced partition on the referencing table, and clones on each partition of
-- a partitioned referencing table.
CREATE TABLE public.regions (code text PRIMARY KEY) PARTITION BY LIST (code);
CREATE TABLE public.regions_eu PARTITION OF public.regions FOR VALUES IN ('eu');
CREATE TABLE public.regions_us PARTITION OF public.regions FOR VALUES IN ('us');
CREATE TABLE public.region_notes (
    code text CONSTRAINT region_notes_code_fkey REFERENCES public.regions
);
CREATE TABLE public.region_logs (
    code text CONSTRAINT region_logs_code_fkey REFERENCES public.regions,
    at   date NOT NULL
) PARTITION BY RANGE (at);
CREATE TABLE public.region_logs_2026 PARTITION OF public.region_logs
    FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');

-- Dependents of events and communities: a view, a view on that view (not a direct
-- dependent of events), a materialized view.
CREATE VIEW public.recent_events AS
    SELECT community_id, id, created_at FROM public.events WHERE deleted_at IS NULL;
CREATE VIEW public.recent_events_ids AS SELECT id FROM public.recent_events;
CREATE MATERIALIZED VIEW public.community_hosts AS
    SELECT id, host FROM public.communities;

-- Publications: events and channels by name, plus the app schema on PostgreSQL 15+.
CREATE PUBLICATION relay_pub FOR TABLE public.events, public.channels;

-- Row-level security and replica identity on other tables.
ALTER TABLE public.channels ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.channels FORCE ROW LEVEL SECURITY;
ALTER TABLE public.event_outbox REPLICA IDENTITY FULL;

-- Name resolution: app.events shadows public.events for search_path app, public;
-- hidden is never on the path; a schema named after the role for "$user"; a table
-- named like a catalog table in public.
CREATE SCHEMA app;
CREATE TABLE app.accounts (id int PRIMARY KEY, owner_id uuid);
CREATE TABLE app.events (note text);
CREATE SCHEMA hidden;
CREATE TABLE hidden.secrets (id int);
CREATE SCHEMA postgres;
CREATE TABLE postgres.mine (id int);
CREATE TABLE public.pg_type (id int);
CREATE SEQUENCE public.ticket_seq;

SELECT pg_catalog.current_setting('server_version_num')::int >= 150000 AS pg15 \gset
\if :pg15
CREATE PUBLICATION app_pub FOR TABLES IN SCHEMA app;
\endif
-- Generated columns: stored everywhere, virtual on PostgreSQL 18+.
SELECT pg_catalog.current_setting('server_version_num')::int >= 180000 AS pg18 \gset
\if :pg18
CREATE TABLE public.shapes (
    side   int NOT NULL,
    area   int GENERATED ALWAYS AS (side * side) STORED,
    double int GENERATED ALWAYS AS (side * 2) VIRTUAL
);
\else
CREATE TABLE public.shapes (
    side   int NOT NULL,
    area   int GENERATED ALWAYS AS (side * side) STORED
);
\endif

-- A hostile schema: every object here would hijack an unqualified catalog query
-- made with search_path = evil, pg_catalog.
CREATE SCHEMA evil;
CREATE TABLE evil.pg_class (oid oid, relname name, relnamespace oid, relkind "char");
INSERT INTO evil.pg_class VALUES (1, 'events', 2200, 'v');
CREATE TABLE evil.pg_namespace (oid oid, nspname name);
CREATE TABLE evil.pg_attribute (attrelid oid, attname name, attnum int2);
CREATE FUNCTION evil.format_type(oid, integer) RETURNS text
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.text $$;
CREATE FUNCTION evil.pg_get_indexdef(oid) RETURNS text
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.text $$;
CREATE FUNCTION evil.pg_get_userbyid(oid) RETURNS name
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.name $$;
CREATE FUNCTION evil.current_setting(text) RETURNS text
    LANGUAGE sql AS $$ SELECT '1'::pg_catalog.text $$;
CREATE FUNCTION evil.pg_relation_size(regclass) RETURNS bigint
    LANGUAGE sql AS $$ SELECT -1::pg_catalog.int8 $$;
CREATE FUNCTION evil.oid_never_equal(oid, oid) RETURNS boolean
    LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = evil.oid_never_equal);
CREATE FUNCTION evil.name_never_equal(name, name) RETURNS boolean
    LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR evil.= (LEFTARG = name, RIGHTARG = name, FUNCTION = evil.name_never_equal);
CREATE FUNCTION evil.int2_always_greater(int2, int4) RETURNS boolean
    LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.> (LEFTARG = int2, RIGHTARG = int4, FUNCTION = evil.int2_always_greater);
CREATE FUNCTION evil.unnest(text[]) RETURNS SETOF text
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.text $$;
CREATE FUNCTION evil.unnest(oid[]) RETURNS SETOF oid
    LANGUAGE sql AS $$ SELECT '1'::pg_catalog.oid $$;
CREATE FUNCTION evil.has_schema_privilege(oid, text) RETURNS boolean
    LANGUAGE sql AS $$ SELECT false $$;
CREATE FUNCTION evil.pg_backend_pid() RETURNS integer
    LANGUAGE sql AS $$ SELECT 0 $$;
CREATE FUNCTION evil.pg_my_temp_schema() RETURNS oid
    LANGUAGE sql AS $$ SELECT '2200'::pg_catalog.oid $$;
CREATE FUNCTION evil.pg_get_expr(pg_node_tree, oid) RETURNS text
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.text $$;
CREATE FUNCTION evil.pg_get_constraintdef(oid) RETURNS text
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.text $$;
CREATE FUNCTION evil.pg_get_triggerdef(oid) RETURNS text
    LANGUAGE sql AS $$ SELECT 'evil'::pg_catalog.text $$;
CREATE FUNCTION evil.pg_total_relation_size(regclass) RETURNS bigint
    LANGUAGE sql AS $$ SELECT -1::pg_catalog.int8 $$;
CREATE FUNCTION evil.pg_partition_tree(regclass)
    RETURNS TABLE (relid regclass, parentrelid regclass, isleaf boolean, level integer)
    LANGUAGE sql AS $$ SELECT NULL::pg_catalog.regclass, NULL::pg_catalog.regclass, true, 0 $$;
CREATE TABLE evil.pg_constraint (oid oid, conname name, conrelid oid, contype "char");
CREATE TABLE evil.pg_trigger (oid oid, tgname name, tgrelid oid);
CREATE TABLE evil.pg_index (indexrelid oid, indrelid oid);
CREATE TABLE evil.pg_inherits (inhrelid oid, inhparent oid);
CREATE TABLE evil.pg_locks (pid integer, locktype text, virtualtransaction text);
CREATE TABLE evil.pg_publication (oid oid, pubname name, puballtables boolean);
INSERT INTO evil.pg_publication VALUES (1, 'evil_pub', true);

-- Stable sizes and estimates: nothing left for autovacuum to do.
VACUUM ANALYZE;
