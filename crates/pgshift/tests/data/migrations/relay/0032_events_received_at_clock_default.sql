-- 0032_events_received_at_clock_default.sql
--
-- Intent: received_at should be the arrival time of each row, not the start time of
-- its (possibly long, batched) transaction.
--
-- Low risk: SET DEFAULT only changes the catalog (existing rows keep their value), but
-- it takes ACCESS EXCLUSIVE on `events` and every partition, here without a
-- lock_timeout, so it can queue behind a long transaction with every writer behind it.

ALTER TABLE events ALTER COLUMN received_at SET DEFAULT clock_timestamp();
