-- 0003_outbox_payload_gin_index.sql
--
-- Intent: the dispatcher filters pending outbox rows by payload content
-- (payload @> '{"pubkey": ...}').
--
-- Hazard: GIN index built without CONCURRENTLY on the plain table event_outbox. The
-- SHARE lock blocks every INSERT into the outbox for the whole (slow) GIN build, and
-- those INSERTs come from trigger events_outbox_enqueue: every writer inserting a
-- kind 4 or 1059 event into `events` stalls behind it.

CREATE INDEX event_outbox_payload_idx
    ON event_outbox USING gin (payload jsonb_path_ops);
