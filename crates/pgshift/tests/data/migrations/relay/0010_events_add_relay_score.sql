-- 0010_events_add_relay_score.sql
--
-- Intent: a spam score per event, 0 until the scorer has looked at it.
--
-- Safe on PostgreSQL 11+: a constant default is stored in the catalog (no rewrite).
-- ACCESS EXCLUSIVE is still taken on the parent and every partition, briefly, and
-- without a lock_timeout it queues behind any long transaction (and everyone queues
-- behind it).

ALTER TABLE events ADD COLUMN relay_score int NOT NULL DEFAULT 0;
