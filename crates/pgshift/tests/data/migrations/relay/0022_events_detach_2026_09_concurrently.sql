-- 0022_events_detach_2026_09_concurrently.sql
--
-- Intent: archive September 2026 without blocking the relay.
--
-- Mostly safe: DETACH ... CONCURRENTLY takes only SHARE UPDATE EXCLUSIVE on `events`.
-- But it cannot run in a transaction block, it waits for every transaction that
-- might see the partition, an interrupted run leaves the partition "detach pending"
-- (finish with DETACH PARTITION ... FINALIZE), and [2026-09-01, 2026-10-01) is no
-- longer accepted by `events`.

ALTER TABLE events DETACH PARTITION events_2026_09 CONCURRENTLY;
