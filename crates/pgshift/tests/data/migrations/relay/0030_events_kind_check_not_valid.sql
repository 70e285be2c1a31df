-- 0030_events_kind_check_not_valid.sql
--
-- Intent: kinds are never negative (replaces the trigger dropped in 0013).
--
-- Safe: the NOT VALID + VALIDATE idiom. ADD ... NOT VALID is catalog-only (brief
-- ACCESS EXCLUSIVE, bounded by lock_timeout); VALIDATE scans every partition under
-- SHARE UPDATE EXCLUSIVE, which lets reads and writes go on.

SET lock_timeout = '2s';

ALTER TABLE events
    ADD CONSTRAINT events_kind_nonnegative_check CHECK (kind >= 0) NOT VALID;

ALTER TABLE events VALIDATE CONSTRAINT events_kind_nonnegative_check;
