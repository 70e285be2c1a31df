-- workloads/relay/check.sql
--
-- Self-check of workloads/relay/schema.sql on a live server:
--     psql -v ON_ERROR_STOP=1 -f workloads/relay/check.sql
-- Part A checks the catalog (partitions, cloned triggers, cloned indexes and FKs).
-- Part B exercises each of the five triggers inside one transaction that ends in
-- ROLLBACK; deferred triggers are fired early with SET CONSTRAINTS ... IMMEDIATE.
-- Part C proves that the created_at floor guard really fires at COMMIT (that
-- transaction fails, so it leaves nothing behind).
-- Any surprise raises an exception (SQLSTATE P0001, message 'relay check: ...').
-- Needs a superuser only for the session_replication_role part (skipped otherwise).
-- Works on a freshly loaded schema, with or without seed.sql.

\set ON_ERROR_STOP 1
\set QUIET 1
SET client_min_messages = warning;

BEGIN;

-- =================================================================================
-- A. Catalog
-- =================================================================================
DO $check$
DECLARE
    expected_parts text[] := ARRAY['events_past', 'events_2026_09', 'events_2026_10',
        'events_2026_11', 'events_2026_12', 'events_2027_01', 'events_2027_02',
        'events_future'];
    expected_trigs text[] := ARRAY['events_created_at_floor_guard',
        'events_channel_ttl_refresh', 'events_replay_skipper',
        'events_outbox_enqueue', 'events_soft_delete_purge'];
    parts   text[];
    p       text;
    t       text;
    n       int;
    r       record;
    parent_idx int;
BEGIN
    -- events is RANGE-partitioned on created_at
    SELECT count(*) INTO n
      FROM pg_partitioned_table pt
     WHERE pt.partrelid = 'events'::regclass AND pt.partstrat = 'r';
    IF n <> 1 THEN
        RAISE EXCEPTION 'relay check: events is not range-partitioned';
    END IF;

    SELECT array_agg(c.relname::text ORDER BY c.relname) INTO parts
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass;
    IF parts IS DISTINCT FROM (SELECT array_agg(x ORDER BY x) FROM unnest(expected_parts) x) THEN
        RAISE EXCEPTION 'relay check: events partitions are %, expected %', parts, expected_parts;
    END IF;

    -- catch-alls are bounded by MINVALUE / MAXVALUE
    IF pg_get_expr((SELECT relpartbound FROM pg_class WHERE oid = 'events_past'::regclass),
                   'events_past'::regclass) NOT LIKE '%MINVALUE%' THEN
        RAISE EXCEPTION 'relay check: events_past is not a MINVALUE catch-all';
    END IF;
    IF pg_get_expr((SELECT relpartbound FROM pg_class WHERE oid = 'events_future'::regclass),
                   'events_future'::regclass) NOT LIKE '%MAXVALUE%' THEN
        RAISE EXCEPTION 'relay check: events_future is not a MAXVALUE catch-all';
    END IF;

    -- the five triggers on the parent, ORIGIN-enabled, with the right shape
    FOREACH t IN ARRAY expected_trigs LOOP
        SELECT * INTO r FROM pg_trigger
         WHERE tgrelid = 'events'::regclass AND tgname = t;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'relay check: trigger % missing on events', t;
        END IF;
        IF r.tgenabled <> 'O' THEN
            RAISE EXCEPTION 'relay check: trigger % has tgenabled %, expected O', t, r.tgenabled;
        END IF;
        IF r.tgparentid <> 0 THEN
            RAISE EXCEPTION 'relay check: trigger % on the parent has a parent', t;
        END IF;
        -- tgtype bits: 1 ROW, 2 BEFORE, 4 INSERT, 8 DELETE, 16 UPDATE
        IF (r.tgtype & 1) = 0 THEN
            RAISE EXCEPTION 'relay check: trigger % is not FOR EACH ROW', t;
        END IF;
        IF t IN ('events_created_at_floor_guard', 'events_channel_ttl_refresh') THEN
            IF r.tgconstraint = 0 OR NOT r.tgdeferrable OR NOT r.tginitdeferred THEN
                RAISE EXCEPTION 'relay check: % is not a DEFERRABLE INITIALLY DEFERRED constraint trigger', t;
            END IF;
        ELSIF r.tgconstraint <> 0 THEN
            RAISE EXCEPTION 'relay check: % should not be a constraint trigger', t;
        END IF;
        IF t = 'events_replay_skipper' AND (r.tgtype & 2) = 0 THEN
            RAISE EXCEPTION 'relay check: events_replay_skipper is not BEFORE';
        END IF;
        IF t <> 'events_replay_skipper' AND (r.tgtype & 2) <> 0 THEN
            RAISE EXCEPTION 'relay check: % should be AFTER', t;
        END IF;
        IF t = 'events_soft_delete_purge' AND ((r.tgtype & 16) = 0 OR r.tgattr::text = '') THEN
            RAISE EXCEPTION 'relay check: events_soft_delete_purge is not UPDATE OF deleted_at';
        END IF;
        IF t = 'events_created_at_floor_guard' AND ((r.tgtype & 4) = 0 OR (r.tgtype & 16) = 0
                OR cardinality(string_to_array(r.tgattr::text, ' ')) <> 2) THEN
            RAISE EXCEPTION 'relay check: floor guard is not INSERT OR UPDATE OF created_at, channel_id';
        END IF;
    END LOOP;

    -- every partition carries a clone of every trigger, same enable state, same flags
    FOREACH p IN ARRAY expected_parts LOOP
        FOREACH t IN ARRAY expected_trigs LOOP
            SELECT count(*) INTO n
              FROM pg_trigger c
              JOIN pg_trigger parent ON parent.oid = c.tgparentid
             WHERE c.tgrelid = p::regclass
               AND c.tgname = t
               AND c.tgparentid <> 0
               AND parent.tgrelid = 'events'::regclass
               AND parent.tgname = t
               AND c.tgenabled = parent.tgenabled
               AND c.tgtype = parent.tgtype
               AND c.tgdeferrable = parent.tgdeferrable
               AND c.tginitdeferred = parent.tginitdeferred
               AND c.tgfoid = parent.tgfoid;
            IF n <> 1 THEN
                RAISE EXCEPTION 'relay check: partition % has no faithful clone of trigger %', p, t;
            END IF;
        END LOOP;
    END LOOP;

    -- every partition index is attached to a parent index (6 indexes + primary key)
    SELECT count(*) INTO parent_idx FROM pg_index WHERE indrelid = 'events'::regclass;
    IF parent_idx <> 7 THEN
        RAISE EXCEPTION 'relay check: events has % indexes, expected 7', parent_idx;
    END IF;
    FOREACH p IN ARRAY expected_parts LOOP
        SELECT count(*) INTO n
          FROM pg_index x
          JOIN pg_inherits i ON i.inhrelid = x.indexrelid
         WHERE x.indrelid = p::regclass
           AND i.inhparent IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'events'::regclass);
        IF n <> parent_idx THEN
            RAISE EXCEPTION 'relay check: partition % has % attached indexes, expected %', p, n, parent_idx;
        END IF;
        -- the FK to communities is cloned too
        SELECT count(*) INTO n FROM pg_constraint
         WHERE conrelid = p::regclass AND contype = 'f' AND conparentid <> 0
           AND confrelid = 'communities'::regclass;
        IF n <> 1 THEN
            RAISE EXCEPTION 'relay check: partition % lacks the cloned FK to communities', p;
        END IF;
    END LOOP;

    -- search_tsv is a stored generated column; the primary key is (community_id, created_at, id)
    IF (SELECT attgenerated FROM pg_attribute
         WHERE attrelid = 'events'::regclass AND attname = 'search_tsv') IS DISTINCT FROM 's' THEN
        RAISE EXCEPTION 'relay check: events.search_tsv is not a stored generated column';
    END IF;
    IF pg_get_constraintdef((SELECT oid FROM pg_constraint
                              WHERE conrelid = 'events'::regclass AND conname = 'events_pkey'))
       <> 'PRIMARY KEY (community_id, created_at, id)' THEN
        RAISE EXCEPTION 'relay check: unexpected events primary key';
    END IF;
END
$check$;

-- =================================================================================
-- B. Behaviour (fixtures use their own community, rolled back at the end)
-- =================================================================================
INSERT INTO communities (id, host)
VALUES ('c0ffee00-0000-4000-8000-000000000001', 'check.relay.invalid');
INSERT INTO channels (community_id, id, name, ttl_seconds) VALUES
    ('c0ffee00-0000-4000-8000-000000000001', 'c0ffee00-0000-4000-8000-0000000000e1', 'check-ephemeral', 300),
    ('c0ffee00-0000-4000-8000-000000000001', 'c0ffee00-0000-4000-8000-0000000000f1', 'check-permanent', NULL);

-- A helper: insert one event of the check community (returns the number of rows the
-- INSERT reported, 0 when a BEFORE trigger skipped it).
CREATE FUNCTION pg_temp.ev(p_id text, p_created timestamptz, p_kind int,
                           p_channel uuid DEFAULT NULL, p_content text DEFAULT 'hello relay',
                           p_d_tag text DEFAULT NULL, p_pubkey text DEFAULT 'check-author')
RETURNS int LANGUAGE plpgsql AS $$
DECLARE n int;
BEGIN
    INSERT INTO events (community_id, id, pubkey, created_at, kind, content, channel_id, d_tag)
    VALUES ('c0ffee00-0000-4000-8000-000000000001', sha256(convert_to(p_id, 'UTF8')),
            sha256(convert_to(p_pubkey, 'UTF8')), p_created, p_kind, p_content, p_channel, p_d_tag);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;

CREATE FUNCTION pg_temp.nrows(p_id text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM events
     WHERE community_id = 'c0ffee00-0000-4000-8000-000000000001'
       AND id = sha256(convert_to(p_id, 'UTF8'))
$$;

-- ---------------------------------------------------------------------------------
-- B1. created_at floor guard (deferred; fired here with SET CONSTRAINTS IMMEDIATE)
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    eph  uuid := 'c0ffee00-0000-4000-8000-0000000000e1';
    perm uuid := 'c0ffee00-0000-4000-8000-0000000000f1';
    raised boolean;
BEGIN
    -- no GUC: historical channel rows in every partition are accepted
    PERFORM set_config('relay.created_at_floor', '', true);
    PERFORM pg_temp.ev('floor-hist-past', '2020-01-01 00:00+00', 9, perm);
    PERFORM pg_temp.ev('floor-hist-2026-10', '2026-10-05 00:00+00', 9, perm);
    PERFORM pg_temp.ev('floor-hist-future', '2030-01-01 00:00+00', 9, perm);
    SET CONSTRAINTS events_created_at_floor_guard IMMEDIATE;
    SET CONSTRAINTS events_created_at_floor_guard DEFERRED;

    -- GUC set: an old channel row is refused, but only when the deferred trigger fires
    raised := false;
    BEGIN
        PERFORM set_config('relay.created_at_floor', '3600', true);
        PERFORM pg_temp.ev('floor-old-channel', clock_timestamp() - interval '2 hours', 9, perm);
        -- the INSERT itself succeeded: the check is deferred
        IF pg_temp.nrows('floor-old-channel') <> 1 THEN
            RAISE EXCEPTION 'relay check: floor guard row not inserted before the deferred check';
        END IF;
        SET CONSTRAINTS events_created_at_floor_guard IMMEDIATE;
    EXCEPTION WHEN check_violation THEN
        raised := true;
    END;
    IF NOT raised THEN
        RAISE EXCEPTION 'relay check: floor guard accepted a channel row older than the floor';
    END IF;
    SET CONSTRAINTS events_created_at_floor_guard DEFERRED;

    -- GUC set: an old row without a channel, and a recent channel row, are accepted
    PERFORM set_config('relay.created_at_floor', '3600', true);
    PERFORM pg_temp.ev('floor-old-nochannel', clock_timestamp() - interval '2 hours', 1, NULL);
    PERFORM pg_temp.ev('floor-recent-channel', clock_timestamp() - interval '1 minute', 9, perm);
    SET CONSTRAINTS events_created_at_floor_guard IMMEDIATE;
    SET CONSTRAINTS events_created_at_floor_guard DEFERRED;

    -- GUC set: moving a row's created_at below the floor (UPDATE OF created_at) is refused
    raised := false;
    BEGIN
        UPDATE events SET created_at = clock_timestamp() - interval '3 hours'
         WHERE id = sha256(convert_to('floor-recent-channel', 'UTF8'));
        SET CONSTRAINTS events_created_at_floor_guard IMMEDIATE;
    EXCEPTION WHEN check_violation THEN
        raised := true;
    END;
    IF NOT raised THEN
        RAISE EXCEPTION 'relay check: floor guard missed UPDATE OF created_at';
    END IF;
    SET CONSTRAINTS events_created_at_floor_guard DEFERRED;

    -- GUC set: giving an old channel-less row a channel (UPDATE OF channel_id) is refused
    raised := false;
    BEGIN
        UPDATE events SET channel_id = perm
         WHERE id = sha256(convert_to('floor-old-nochannel', 'UTF8'));
        SET CONSTRAINTS events_created_at_floor_guard IMMEDIATE;
    EXCEPTION WHEN check_violation THEN
        raised := true;
    END;
    IF NOT raised THEN
        RAISE EXCEPTION 'relay check: floor guard missed UPDATE OF channel_id';
    END IF;
    SET CONSTRAINTS events_created_at_floor_guard DEFERRED;

    -- GUC back to empty: no check at all
    PERFORM set_config('relay.created_at_floor', '', true);
    PERFORM pg_temp.ev('floor-old-channel-unset', clock_timestamp() - interval '2 hours', 9, perm);
    SET CONSTRAINTS events_created_at_floor_guard IMMEDIATE;
    SET CONSTRAINTS events_created_at_floor_guard DEFERRED;
END
$check$;

-- ---------------------------------------------------------------------------------
-- B2. channel TTL refresh (deferred, shared advisory lock, failures are warnings)
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    c1   uuid := 'c0ffee00-0000-4000-8000-000000000001';
    eph  uuid := 'c0ffee00-0000-4000-8000-0000000000e1';
    perm uuid := 'c0ffee00-0000-4000-8000-0000000000f1';
    deadline timestamptz;
    before_fire timestamptz;
    n int;
BEGIN
    -- fire whatever B1 left pending, then start from a clean channel state
    SET CONSTRAINTS events_channel_ttl_refresh IMMEDIATE;
    SET CONSTRAINTS events_channel_ttl_refresh DEFERRED;
    UPDATE channels SET ttl_deadline = NULL WHERE community_id = c1;

    PERFORM pg_temp.ev('ttl-eph-1', '2026-11-10 12:00+00', 9, eph);
    PERFORM pg_temp.ev('ttl-perm-1', '2026-11-10 12:00+00', 9, perm);
    PERFORM pg_temp.ev('ttl-none-1', '2026-11-10 12:00+00', 1, NULL);

    -- deferred: nothing happened yet
    SELECT ttl_deadline INTO deadline FROM channels WHERE community_id = c1 AND id = eph;
    IF deadline IS NOT NULL THEN
        RAISE EXCEPTION 'relay check: ttl refresh fired before the deferred point';
    END IF;

    before_fire := clock_timestamp();
    SET CONSTRAINTS events_channel_ttl_refresh IMMEDIATE;
    SET CONSTRAINTS events_channel_ttl_refresh DEFERRED;

    SELECT ttl_deadline INTO deadline FROM channels WHERE community_id = c1 AND id = eph;
    IF deadline IS NULL
       OR deadline < before_fire + interval '300 seconds'
       OR deadline > clock_timestamp() + interval '300 seconds' THEN
        RAISE EXCEPTION 'relay check: ephemeral channel deadline is %, expected clock_timestamp() + 300 s', deadline;
    END IF;
    IF (SELECT ttl_deadline FROM channels WHERE community_id = c1 AND id = perm) IS NOT NULL THEN
        RAISE EXCEPTION 'relay check: ttl refresh touched a permanent channel';
    END IF;

    -- the trigger took a shared transaction-level advisory lock (still held)
    SELECT count(*) INTO n FROM pg_locks
     WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND mode = 'ShareLock'
       AND granted
       AND ((classid::bigint << 32) | objid::bigint)
           = hashtextextended('ttl:' || c1::text || ':' || eph::text, 0);
    IF n <> 1 THEN
        RAISE EXCEPTION 'relay check: ttl refresh holds no shared advisory lock on ttl:<community>:<channel>';
    END IF;

    -- a failing refresh is swallowed: the event stays, the deadline is unchanged
    UPDATE channels SET ttl_deadline = NULL WHERE community_id = c1 AND id = eph;
    BEGIN
        ALTER TABLE channels ADD CONSTRAINT relay_check_no_deadline
            CHECK (ttl_deadline IS NULL) NOT VALID;
        PERFORM pg_temp.ev('ttl-eph-fails', '2026-11-10 12:01+00', 9, eph);
        SET CONSTRAINTS events_channel_ttl_refresh IMMEDIATE;   -- WARNING, not ERROR
        SET CONSTRAINTS events_channel_ttl_refresh DEFERRED;
        IF pg_temp.nrows('ttl-eph-fails') <> 1 THEN
            RAISE EXCEPTION 'relay check: event lost when the ttl refresh failed';
        END IF;
        IF (SELECT ttl_deadline FROM channels WHERE community_id = c1 AND id = eph) IS NOT NULL THEN
            RAISE EXCEPTION 'relay check: deadline moved although the refresh failed';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'RLYOK', MESSAGE = 'undo the temporary constraint';
    EXCEPTION WHEN SQLSTATE 'RLYOK' THEN
        NULL;
    END;
END
$check$;

-- ---------------------------------------------------------------------------------
-- B3. replay skipper (BEFORE INSERT, kind 30078 with a d tag)
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    c1 uuid := 'c0ffee00-0000-4000-8000-000000000001';
    t1 timestamptz := '2027-01-15 10:00+00';
    n  int;
    raised boolean;
    w  record;
BEGIN
    n := pg_temp.ev('rep-a', t1, 30078, NULL, '{"theme":"dark"}', 'app-settings');
    IF n <> 1 OR pg_temp.nrows('rep-a') <> 1 THEN
        RAISE EXCEPTION 'relay check: first replaceable event not inserted';
    END IF;
    SELECT * INTO w FROM event_watermarks
     WHERE community_id = c1 AND d_tag = 'app-settings';
    IF w.created_at <> t1 OR w.id <> sha256(convert_to('rep-a', 'UTF8')) THEN
        RAISE EXCEPTION 'relay check: watermark not written for the first event';
    END IF;

    -- exact replay: INSERT reports 0 rows, no error, still exactly one row
    BEGIN
        n := pg_temp.ev('rep-a', t1, 30078, NULL, '{"theme":"dark"}', 'app-settings');
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'relay check: exact replay reached the table (%)', SQLERRM;
    END;
    IF n <> 0 OR pg_temp.nrows('rep-a') <> 1 THEN
        RAISE EXCEPTION 'relay check: exact replay was not silently skipped (row_count %)', n;
    END IF;

    -- older event of the same key: refused
    raised := false;
    BEGIN
        PERFORM pg_temp.ev('rep-old', t1 - interval '1 day', 30078, NULL, '{}', 'app-settings');
    EXCEPTION WHEN unique_violation THEN
        raised := SQLERRM LIKE 'relay: stale replaceable event%';
    END;
    IF NOT raised THEN
        RAISE EXCEPTION 'relay check: stale replaceable event was not refused';
    END IF;

    -- newer event of the same key: accepted, watermark moves
    n := pg_temp.ev('rep-b', t1 + interval '1 hour', 30078, NULL, '{"theme":"light"}', 'app-settings');
    IF n <> 1 THEN
        RAISE EXCEPTION 'relay check: newer replaceable event not inserted';
    END IF;
    SELECT * INTO w FROM event_watermarks
     WHERE community_id = c1 AND d_tag = 'app-settings';
    IF w.created_at <> t1 + interval '1 hour' OR w.id <> sha256(convert_to('rep-b', 'UTF8')) THEN
        RAISE EXCEPTION 'relay check: watermark did not move to the newer event';
    END IF;

    -- replaying the first event now: it is stale (older than the watermark)
    raised := false;
    BEGIN
        PERFORM pg_temp.ev('rep-a', t1, 30078, NULL, '{"theme":"dark"}', 'app-settings');
    EXCEPTION WHEN unique_violation THEN
        raised := SQLERRM LIKE 'relay: stale replaceable event%';
    END;
    IF NOT raised THEN
        RAISE EXCEPTION 'relay check: replay of a superseded event was not refused';
    END IF;

    -- another d tag, another kind, or no d tag: untouched by the skipper
    IF pg_temp.ev('rep-other-tag', t1 - interval '1 day', 30078, NULL, '{}', 'other') <> 1
       OR pg_temp.ev('rep-kind1', t1 - interval '1 day', 1, NULL, 'x', 'app-settings') <> 1
       OR pg_temp.ev('rep-no-dtag', t1 - interval '1 day', 30078, NULL, '{}', NULL) <> 1 THEN
        RAISE EXCEPTION 'relay check: replay skipper interfered with an unrelated event';
    END IF;
    IF (SELECT count(*) FROM event_watermarks WHERE community_id = c1) <> 2 THEN
        RAISE EXCEPTION 'relay check: unexpected watermark rows';
    END IF;
END
$check$;

-- ---------------------------------------------------------------------------------
-- B4. outbox enqueue (AFTER INSERT, kinds 4 and 1059, shared advisory lock)
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    c1 uuid := 'c0ffee00-0000-4000-8000-000000000001';
    n  int;
BEGIN
    PERFORM pg_temp.ev('out-dm', '2026-12-24 18:00+00', 4, NULL, 'ciphertext');
    PERFORM pg_temp.ev('out-wrap', '2026-12-24 18:01+00', 1059, NULL, 'ciphertext');
    PERFORM pg_temp.ev('out-note', '2026-12-24 18:02+00', 1, NULL, 'plain note');
    SELECT count(*) INTO n FROM event_outbox WHERE community_id = c1;
    IF n <> 2 THEN
        RAISE EXCEPTION 'relay check: outbox has % rows for the check community, expected 2', n;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM event_outbox
                    WHERE community_id = c1 AND kind = 4
                      AND event_id = sha256(convert_to('out-dm', 'UTF8'))
                      AND event_created_at = '2026-12-24 18:00+00'
                      AND payload ? 'pubkey') THEN
        RAISE EXCEPTION 'relay check: outbox row for the DM is wrong';
    END IF;
    SELECT count(*) INTO n FROM pg_locks
     WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND mode = 'ShareLock'
       AND granted
       AND ((classid::bigint << 32) | objid::bigint)
           = hashtextextended('outbox:' || c1::text, 0);
    IF n <> 1 THEN
        RAISE EXCEPTION 'relay check: outbox enqueue holds no shared advisory lock';
    END IF;
END
$check$;

-- ---------------------------------------------------------------------------------
-- B5. soft-delete purge (AFTER UPDATE OF deleted_at)
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    c1 uuid := 'c0ffee00-0000-4000-8000-000000000001';
BEGIN
    PERFORM pg_temp.ev('del-kind5', '2027-02-02 08:00+00', 5, NULL, 'deleting e1');
    PERFORM pg_temp.ev('del-empty', '2027-02-02 08:01+00', 1, NULL, '');
    PERFORM pg_temp.ev('del-note', '2027-02-02 08:02+00', 1, NULL, 'keep my tombstone');

    -- an update that does not touch deleted_at purges nothing
    UPDATE events SET tags = '[["t","x"]]'
     WHERE community_id = c1 AND id = sha256(convert_to('del-kind5', 'UTF8'));
    IF pg_temp.nrows('del-kind5') <> 1 THEN
        RAISE EXCEPTION 'relay check: purge fired on an update of another column';
    END IF;

    UPDATE events SET deleted_at = clock_timestamp()
     WHERE community_id = c1
       AND id IN (sha256(convert_to('del-kind5', 'UTF8')),
                  sha256(convert_to('del-empty', 'UTF8')),
                  sha256(convert_to('del-note', 'UTF8')));
    IF pg_temp.nrows('del-kind5') <> 0 OR pg_temp.nrows('del-empty') <> 0 THEN
        RAISE EXCEPTION 'relay check: soft-deleted kind 5 / empty events were not purged';
    END IF;
    IF pg_temp.nrows('del-note') <> 1
       OR (SELECT deleted_at FROM events
            WHERE community_id = c1 AND id = sha256(convert_to('del-note', 'UTF8'))) IS NULL THEN
        RAISE EXCEPTION 'relay check: soft-deleted note did not keep its tombstone';
    END IF;
END
$check$;

-- ---------------------------------------------------------------------------------
-- B6. generated search_tsv and partition routing
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    c1 uuid := 'c0ffee00-0000-4000-8000-000000000001';
    r  record;
BEGIN
    PERFORM pg_temp.ev('tsv-note', '2026-09-03 00:00+00', 1, NULL, 'Relay Quokka sunrise');
    PERFORM pg_temp.ev('tsv-long', '2026-09-03 00:01+00', 30023, NULL, 'longform quokka');
    PERFORM pg_temp.ev('tsv-react', '2026-09-03 00:02+00', 7, NULL, 'quokka');
    IF (SELECT count(*) FROM events
         WHERE community_id = c1 AND search_tsv @@ to_tsquery('simple', 'quokka')) <> 2 THEN
        RAISE EXCEPTION 'relay check: search_tsv is not computed for exactly kinds 1 and 30023';
    END IF;
    SELECT tableoid::regclass::text AS part INTO r FROM events
     WHERE community_id = c1 AND id = sha256(convert_to('tsv-note', 'UTF8'));
    IF r.part <> 'events_2026_09' THEN
        RAISE EXCEPTION 'relay check: 2026-09-03 routed to %', r.part;
    END IF;
    SELECT tableoid::regclass::text AS part INTO r FROM events
     WHERE community_id = c1 AND id = sha256(convert_to('floor-hist-past', 'UTF8'));
    IF r.part <> 'events_past' THEN
        RAISE EXCEPTION 'relay check: 2020-01-01 routed to %', r.part;
    END IF;
    SELECT tableoid::regclass::text AS part INTO r FROM events
     WHERE community_id = c1 AND id = sha256(convert_to('floor-hist-future', 'UTF8'));
    IF r.part <> 'events_future' THEN
        RAISE EXCEPTION 'relay check: 2030-01-01 routed to %', r.part;
    END IF;
END
$check$;

-- ---------------------------------------------------------------------------------
-- B7. ORIGIN triggers are bypassed by session_replication_role = replica (the hazard
-- the engine must handle).  Superuser only.
-- ---------------------------------------------------------------------------------
DO $check$
DECLARE
    c1 uuid := 'c0ffee00-0000-4000-8000-000000000001';
    n_before bigint;
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE NOTICE 'relay check: not a superuser, replica-role part skipped';
        RETURN;
    END IF;
    SELECT count(*) INTO n_before FROM event_outbox WHERE community_id = c1;
    PERFORM set_config('session_replication_role', 'replica', true);
    -- stale replaceable event and a DM: both go in, no trigger fires
    PERFORM pg_temp.ev('rep-stale-replica', '2027-01-01 00:00+00', 30078, NULL, '{}', 'app-settings');
    PERFORM pg_temp.ev('out-dm-replica', '2027-01-01 00:00+00', 4, NULL, 'ciphertext');
    PERFORM set_config('session_replication_role', 'origin', true);
    IF pg_temp.nrows('rep-stale-replica') <> 1 THEN
        RAISE EXCEPTION 'relay check: replica-role insert of a stale event did not land';
    END IF;
    IF (SELECT count(*) FROM event_outbox WHERE community_id = c1) <> n_before THEN
        RAISE EXCEPTION 'relay check: outbox trigger fired under session_replication_role = replica';
    END IF;
END
$check$;

ROLLBACK;

-- =================================================================================
-- C. The floor guard fires at COMMIT: this transaction must fail with 23514.
-- =================================================================================
\echo relay check: the next COMMIT is expected to fail with 23514 (check_violation)
\set ON_ERROR_STOP 0
BEGIN;
SET LOCAL relay.created_at_floor = '3600';
INSERT INTO communities (id, host)
VALUES ('c0ffee00-0000-4000-8000-000000000002', 'check-commit.relay.invalid');
INSERT INTO channels (community_id, id, name)
VALUES ('c0ffee00-0000-4000-8000-000000000002', 'c0ffee00-0000-4000-8000-0000000000f2', 'check-commit');
INSERT INTO events (community_id, id, pubkey, created_at, kind, content, channel_id)
VALUES ('c0ffee00-0000-4000-8000-000000000002', sha256('\x01'::bytea), sha256('\x02'::bytea),
        clock_timestamp() - interval '2 hours', 9, 'too old',
        'c0ffee00-0000-4000-8000-0000000000f2');
\set pre_commit_error :ERROR
COMMIT;
\set commit_error :ERROR
\set commit_sqlstate :SQLSTATE
\set ON_ERROR_STOP 1
SELECT :'pre_commit_error' = 'false'
   AND :'commit_error' = 'true'
   AND :'commit_sqlstate' = '23514' AS floor_guard_at_commit_ok \gset
\if :floor_guard_at_commit_ok
\else
DELETE FROM events WHERE community_id = 'c0ffee00-0000-4000-8000-000000000002';
DELETE FROM channels WHERE community_id = 'c0ffee00-0000-4000-8000-000000000002';
DELETE FROM communities WHERE id = 'c0ffee00-0000-4000-8000-000000000002';
DO $$ BEGIN RAISE EXCEPTION 'relay check: floor guard did not refuse the COMMIT with 23514'; END $$;
\endif

\echo relay check: all checks passed
