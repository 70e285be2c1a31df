-- 0020_events_split_future_2027_03.sql
--
-- Intent: March 2027 gets its own monthly partition. events_future covers
-- [2027-03-01, MAXVALUE), so it is detached, its March rows moved to the new
-- partition (directly, so no trigger fires), and it is attached again from April.
--
-- Hazards: DETACH PARTITION without CONCURRENTLY takes ACCESS EXCLUSIVE on `events`,
-- held by this transaction until COMMIT, through the row move and both ATTACHes; each
-- ATTACH scans its table to validate the bound (no matching CHECK constraint). While
-- detached, the partition carries none of the cloned triggers (DETACH drops them;
-- ATTACH clones them back). DML with DDL in one transaction.

BEGIN;

ALTER TABLE events DETACH PARTITION events_future;

CREATE TABLE events_2027_03 (LIKE events INCLUDING ALL);

INSERT INTO events_2027_03
       (community_id, id, pubkey, created_at, kind, tags, content, channel_id,
        received_at, deleted_at, d_tag, trace_id, relay_score, client)
SELECT community_id, id, pubkey, created_at, kind, tags, content, channel_id,
       received_at, deleted_at, d_tag, trace_id, relay_score, client
  FROM events_future
 WHERE created_at < '2027-04-01 00:00:00+00';

DELETE FROM events_future WHERE created_at < '2027-04-01 00:00:00+00';

ALTER TABLE events ATTACH PARTITION events_2027_03
    FOR VALUES FROM ('2027-03-01 00:00:00+00') TO ('2027-04-01 00:00:00+00');

ALTER TABLE events ATTACH PARTITION events_future
    FOR VALUES FROM ('2027-04-01 00:00:00+00') TO (MAXVALUE);

COMMIT;
