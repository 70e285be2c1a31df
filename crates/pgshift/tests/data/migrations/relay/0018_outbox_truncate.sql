-- 0018_outbox_truncate.sql
--
-- Intent: the dispatcher was rewritten and re-delivers from `events`; clear the old
-- outbox and restart its sequence.
--
-- Hazard: TRUNCATE takes ACCESS EXCLUSIVE on event_outbox (every kind 4 / 1059 event
-- insert waits, through its trigger) and destroys undelivered rows: data loss that
-- cannot be undone once committed.

TRUNCATE event_outbox RESTART IDENTITY;
