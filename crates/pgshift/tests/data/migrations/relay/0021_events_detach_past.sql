-- 0021_events_detach_past.sql
--
-- Intent: archive everything before 2026-09 out of the live table.
--
-- Hazards: DETACH PARTITION without CONCURRENTLY takes ACCESS EXCLUSIVE on `events`
-- (every reader and writer of every partition waits). Afterwards no partition
-- accepts created_at < 2026-09-01: such inserts fail ("no partition of relation
-- found for row"), and the archive loses the cloned triggers.

ALTER TABLE events DETACH PARTITION events_past;

ALTER TABLE events_past RENAME TO events_archive_before_2026_09;
