-- 0015_channels_topic_backfill_txn.sql
--
-- Intent: channels get a mandatory topic and communities a channel quota, both
-- backfilled, in one transaction "so that it is atomic".
--
-- Hazards: DDL and DML in one explicit transaction. ACCESS EXCLUSIVE on `channels`
-- (taken by the first ALTER) is held through the UPDATE backfill and until COMMIT,
-- then ACCESS EXCLUSIVE on `communities` is added to it. Every event insert checks its
-- FK against `communities` (and its TTL trigger reads `channels`): all event writers
-- stall until COMMIT. Each SET NOT NULL also scans its table.

BEGIN;

ALTER TABLE channels ADD COLUMN topic text;
UPDATE channels SET topic = 'Welcome to #' || name WHERE topic IS NULL;
ALTER TABLE channels ALTER COLUMN topic SET NOT NULL;

ALTER TABLE communities ADD COLUMN max_channels int;
UPDATE communities SET max_channels = 100 WHERE max_channels IS NULL;
ALTER TABLE communities ALTER COLUMN max_channels SET NOT NULL;

COMMIT;
