-- 0019_events_add_client_lock_timeout.sql
--
-- Intent: record which client published an event (nullable, filled by new writers).
--
-- Safe: a lock_timeout bounds the wait for ACCESS EXCLUSIVE, and adding a nullable
-- column without a default is a catalog-only change (no rewrite, no scan).

SET lock_timeout = '2s';

ALTER TABLE events ADD COLUMN client text;
