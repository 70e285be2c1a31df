-- workloads/relay/schema.sql
--
-- The relay workload: the data layer of a self-hosted chat relay (signed events in
-- channels of communities), written from /work/shared/design/relay-workload.md.
-- It is a deliberately hostile target for an online schema-change engine:
--   * `events` is RANGE-partitioned by created_at (past catch-all, six monthly
--     partitions 2026-09 .. 2027-02, future catch-all), with a composite primary key,
--     a stored generated tsvector, btree + partial + GIN indexes and an FK;
--   * five row triggers on the `events` parent (cloned by PostgreSQL to every
--     partition, all ORIGIN-enabled): two deferred constraint triggers, a BEFORE
--     trigger that silently skips rows, and two AFTER triggers with side effects.
--
-- Deterministic: partition bounds are fixed UTC instants, never computed from now().
-- Load into a database (PostgreSQL 14..18) with:
--     psql -v ON_ERROR_STOP=1 -f workloads/relay/schema.sql
-- The file runs in one transaction and can be loaded again over itself (tables and
-- indexes use IF NOT EXISTS, functions CREATE OR REPLACE, triggers DROP + CREATE).

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

BEGIN;

-- ---------------------------------------------------------------------------------
-- communities: small, read on every write (FK target of channels and events)
-- ---------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS communities (
    id              uuid        NOT NULL DEFAULT gen_random_uuid(),
    host            text        NOT NULL,
    deletion_state  text        NOT NULL DEFAULT 'active',
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT communities_pkey PRIMARY KEY (id),
    CONSTRAINT communities_host_key UNIQUE (host),
    CONSTRAINT communities_deletion_state_check
        CHECK (deletion_state IN ('active', 'deleting', 'deleted'))
);
COMMENT ON TABLE communities IS 'relay: one row per hosted community';

-- ---------------------------------------------------------------------------------
-- channels: a channel with ttl_seconds set is ephemeral; every new event in it pushes
-- ttl_deadline (see trigger events_channel_ttl_refresh).  `name` is nullable on
-- purpose (a migration sets it NOT NULL).
-- ---------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS channels (
    community_id  uuid        NOT NULL,
    id            uuid        NOT NULL DEFAULT gen_random_uuid(),
    name          text,
    ttl_seconds   int,
    ttl_deadline  timestamptz,
    archived_at   timestamptz,
    deleted_at    timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT channels_pkey PRIMARY KEY (community_id, id),
    CONSTRAINT channels_community_id_fkey FOREIGN KEY (community_id)
        REFERENCES communities (id),
    CONSTRAINT channels_ttl_seconds_check CHECK (ttl_seconds IS NULL OR ttl_seconds > 0)
);
COMMENT ON TABLE channels IS 'relay: channels of a community; ttl_seconds set = ephemeral';

-- ---------------------------------------------------------------------------------
-- events: range-partitioned by created_at
-- ---------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS events (
    community_id  uuid        NOT NULL,
    id            bytea       NOT NULL,   -- 32-byte event hash
    pubkey        bytea       NOT NULL,   -- 32-byte author key
    created_at    timestamptz NOT NULL,   -- author-claimed time (partition key)
    kind          int         NOT NULL,
    tags          jsonb       NOT NULL DEFAULT '[]',
    content       text        NOT NULL,
    channel_id    uuid,
    received_at   timestamptz NOT NULL DEFAULT now(),
    deleted_at    timestamptz,
    d_tag         text,                   -- replaceable-event key (replay skipper)
    search_tsv    tsvector GENERATED ALWAYS AS (
                      CASE WHEN kind IN (1, 30023)
                           THEN to_tsvector('simple', content) END
                  ) STORED,
    CONSTRAINT events_pkey PRIMARY KEY (community_id, created_at, id),
    CONSTRAINT events_community_id_fkey FOREIGN KEY (community_id)
        REFERENCES communities (id)
) PARTITION BY RANGE (created_at);
COMMENT ON TABLE events IS 'relay: signed events, range-partitioned by created_at';
COMMENT ON COLUMN events.search_tsv IS 'full-text vector, only for kinds 1 and 30023';

CREATE TABLE IF NOT EXISTS events_past    PARTITION OF events
    FOR VALUES FROM (MINVALUE) TO ('2026-09-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_2026_09 PARTITION OF events
    FOR VALUES FROM ('2026-09-01 00:00:00+00') TO ('2026-10-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_2026_10 PARTITION OF events
    FOR VALUES FROM ('2026-10-01 00:00:00+00') TO ('2026-11-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_2026_11 PARTITION OF events
    FOR VALUES FROM ('2026-11-01 00:00:00+00') TO ('2026-12-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_2026_12 PARTITION OF events
    FOR VALUES FROM ('2026-12-01 00:00:00+00') TO ('2027-01-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_2027_01 PARTITION OF events
    FOR VALUES FROM ('2027-01-01 00:00:00+00') TO ('2027-02-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_2027_02 PARTITION OF events
    FOR VALUES FROM ('2027-02-01 00:00:00+00') TO ('2027-03-01 00:00:00+00');
CREATE TABLE IF NOT EXISTS events_future  PARTITION OF events
    FOR VALUES FROM ('2027-03-01 00:00:00+00') TO (MAXVALUE);

-- Indexes on the parent: PostgreSQL creates a matching index on every partition and
-- attaches it (partition index names are generated, e.g.
-- events_2026_09_community_id_channel_id_created_at_id_idx).
CREATE INDEX IF NOT EXISTS events_channel_window_idx
    ON events (community_id, channel_id, created_at DESC, id);
CREATE INDEX IF NOT EXISTS events_kind_idx
    ON events (community_id, kind, created_at DESC);
CREATE INDEX IF NOT EXISTS events_pubkey_idx
    ON events (pubkey, created_at DESC);
CREATE INDEX IF NOT EXISTS events_live_idx
    ON events (community_id, created_at)
    WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS events_search_tsv_idx
    ON events USING gin (search_tsv);
CREATE INDEX IF NOT EXISTS events_tags_idx
    ON events USING gin (tags);

-- ---------------------------------------------------------------------------------
-- event_outbox: written by trigger events_outbox_enqueue, drained by a dispatcher
-- that takes the exclusive advisory lock 'outbox:<community>' while it deletes.
-- ---------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS event_outbox (
    seq               bigint      GENERATED ALWAYS AS IDENTITY,
    community_id      uuid        NOT NULL,
    event_id          bytea       NOT NULL,
    event_created_at  timestamptz NOT NULL,
    kind              int         NOT NULL,
    payload           jsonb       NOT NULL,
    enqueued_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_at      timestamptz,
    CONSTRAINT event_outbox_pkey PRIMARY KEY (seq)
);
CREATE INDEX IF NOT EXISTS event_outbox_pending_idx
    ON event_outbox (community_id, seq)
    WHERE delivered_at IS NULL;

-- ---------------------------------------------------------------------------------
-- event_watermarks: newest (created_at, id) seen per replaceable key, written by
-- trigger events_replay_skipper.
-- ---------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS event_watermarks (
    community_id  uuid        NOT NULL,
    pubkey        bytea       NOT NULL,
    d_tag         text        NOT NULL,
    created_at    timestamptz NOT NULL,
    id            bytea       NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT event_watermarks_pkey PRIMARY KEY (community_id, pubkey, d_tag)
);

-- ---------------------------------------------------------------------------------
-- Trigger functions
-- ---------------------------------------------------------------------------------

-- (1) created_at floor guard.  Fires at COMMIT (deferred).  The relay's writer pool
-- sets relay.created_at_floor (seconds); sessions that do not set it are not checked.
CREATE OR REPLACE FUNCTION relay_created_at_floor_guard() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    floor_setting text := current_setting('relay.created_at_floor', true);
    floor_seconds double precision;
BEGIN
    IF floor_setting IS NULL OR btrim(floor_setting) = '' THEN
        RETURN NULL;
    END IF;
    floor_seconds := floor_setting::double precision;
    IF NEW.channel_id IS NOT NULL
       AND NEW.created_at < clock_timestamp() - make_interval(secs => floor_seconds) THEN
        RAISE EXCEPTION 'relay: event created_at % is older than the floor of % s',
                NEW.created_at, floor_setting
            USING ERRCODE = 'check_violation',
                  TABLE = TG_TABLE_NAME,
                  DETAIL = format('community %s, channel %s, id %s',
                                  NEW.community_id, NEW.channel_id,
                                  encode(NEW.id, 'hex'));
    END IF;
    RETURN NULL;
END
$fn$;

-- (2) channel TTL refresh.  Fires at COMMIT (deferred).  The TTL sweeper takes the
-- exclusive advisory lock on the same key before expiring a channel.  Failures never
-- abort the writer: they become warnings.
CREATE OR REPLACE FUNCTION relay_channel_ttl_refresh() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    ttl int;
BEGIN
    IF NEW.channel_id IS NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        PERFORM pg_advisory_xact_lock_shared(
            hashtextextended('ttl:' || NEW.community_id::text || ':' || NEW.channel_id::text, 0));
        SELECT c.ttl_seconds INTO ttl
          FROM channels c
         WHERE c.community_id = NEW.community_id AND c.id = NEW.channel_id;
        IF ttl IS NOT NULL THEN
            UPDATE channels c
               SET ttl_deadline = clock_timestamp() + make_interval(secs => ttl)
             WHERE c.community_id = NEW.community_id AND c.id = NEW.channel_id;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'relay: ttl refresh failed for channel %/%: % (SQLSTATE %)',
            NEW.community_id, NEW.channel_id, SQLERRM, SQLSTATE;
    END;
    RETURN NULL;
END
$fn$;

-- (3) replay skipper (BEFORE INSERT) for replaceable kind 30078 with a d tag:
--     exact replay of the watermark (same created_at and id)  -> RETURN NULL (skipped)
--     older than the watermark (or same instant, higher id)   -> exception
--     newer (or first of its key)                             -> watermark upserted
-- The order is (created_at, then lowest id wins), as for replaceable events.
CREATE OR REPLACE FUNCTION relay_replay_skipper() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    w_created_at timestamptz;
    w_id         bytea;
BEGIN
    IF NEW.kind <> 30078 OR NEW.d_tag IS NULL THEN
        RETURN NEW;
    END IF;

    INSERT INTO event_watermarks AS w (community_id, pubkey, d_tag, created_at, id)
    VALUES (NEW.community_id, NEW.pubkey, NEW.d_tag, NEW.created_at, NEW.id)
    ON CONFLICT (community_id, pubkey, d_tag) DO NOTHING;
    IF FOUND THEN
        RETURN NEW;                      -- first event of this key
    END IF;

    SELECT w.created_at, w.id INTO w_created_at, w_id
      FROM event_watermarks w
     WHERE w.community_id = NEW.community_id
       AND w.pubkey = NEW.pubkey
       AND w.d_tag = NEW.d_tag
       FOR UPDATE;

    IF NEW.created_at = w_created_at AND NEW.id = w_id THEN
        RETURN NULL;                     -- exact replay: silently skipped
    END IF;

    IF NEW.created_at < w_created_at
       OR (NEW.created_at = w_created_at AND NEW.id > w_id) THEN
        RAISE EXCEPTION 'relay: stale replaceable event for d tag %', NEW.d_tag
            USING ERRCODE = 'unique_violation',
                  TABLE = TG_TABLE_NAME,
                  DETAIL = format('watermark (%s, %s), event (%s, %s)',
                                  w_created_at, encode(w_id, 'hex'),
                                  NEW.created_at, encode(NEW.id, 'hex'));
    END IF;

    UPDATE event_watermarks w
       SET created_at = NEW.created_at, id = NEW.id, updated_at = clock_timestamp()
     WHERE w.community_id = NEW.community_id
       AND w.pubkey = NEW.pubkey
       AND w.d_tag = NEW.d_tag;
    RETURN NEW;
END
$fn$;

-- (4) outbox enqueue (AFTER INSERT, direct messages and gift wraps).  Shared advisory
-- lock so that many writers enqueue at once while the dispatcher drains exclusively.
CREATE OR REPLACE FUNCTION relay_outbox_enqueue() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.kind NOT IN (4, 1059) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(
        hashtextextended('outbox:' || NEW.community_id::text, 0));
    INSERT INTO event_outbox (community_id, event_id, event_created_at, kind, payload)
    VALUES (NEW.community_id, NEW.id, NEW.created_at, NEW.kind,
            jsonb_build_object('pubkey', encode(NEW.pubkey, 'hex'),
                               'tags', NEW.tags));
    RETURN NULL;
END
$fn$;

-- (5) soft-delete purge (AFTER UPDATE OF deleted_at): deletion events (kind 5) and
-- empty events are removed physically once soft-deleted; others keep a tombstone.
CREATE OR REPLACE FUNCTION relay_soft_delete_purge() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.deleted_at IS NULL OR OLD.deleted_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF NEW.kind = 5 OR NEW.content = '' THEN
        DELETE FROM events e
         WHERE e.community_id = NEW.community_id
           AND e.created_at = NEW.created_at
           AND e.id = NEW.id;
    END IF;
    RETURN NULL;
END
$fn$;

-- ---------------------------------------------------------------------------------
-- Triggers, on the parent only: PostgreSQL clones each one onto every partition
-- (pg_trigger.tgparentid <> 0) and onto partitions attached later.  All are plain
-- CREATE TRIGGER, so tgenabled = 'O' (ORIGIN): a session running with
-- session_replication_role = replica does not fire them.
-- (CREATE OR REPLACE is not available for constraint triggers: drop and create.)
-- ---------------------------------------------------------------------------------
DROP TRIGGER IF EXISTS events_created_at_floor_guard ON events;
CREATE CONSTRAINT TRIGGER events_created_at_floor_guard
    AFTER INSERT OR UPDATE OF created_at, channel_id ON events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION relay_created_at_floor_guard();

DROP TRIGGER IF EXISTS events_channel_ttl_refresh ON events;
CREATE CONSTRAINT TRIGGER events_channel_ttl_refresh
    AFTER INSERT ON events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION relay_channel_ttl_refresh();

DROP TRIGGER IF EXISTS events_replay_skipper ON events;
CREATE TRIGGER events_replay_skipper
    BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION relay_replay_skipper();

DROP TRIGGER IF EXISTS events_outbox_enqueue ON events;
CREATE TRIGGER events_outbox_enqueue
    AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION relay_outbox_enqueue();

DROP TRIGGER IF EXISTS events_soft_delete_purge ON events;
CREATE TRIGGER events_soft_delete_purge
    AFTER UPDATE OF deleted_at ON events
    FOR EACH ROW EXECUTE FUNCTION relay_soft_delete_purge();

COMMIT;
