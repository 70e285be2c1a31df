-- 0009_events_add_trace_id.sql
--
-- Intent: give every event a trace id for cross-service debugging.
--
-- Hazard: ADD COLUMN with a volatile default (gen_random_uuid()). Unlike a constant
-- default this cannot be stored in the catalog: every partition is rewritten under
-- ACCESS EXCLUSIVE, each existing row getting its own value.

ALTER TABLE events ADD COLUMN trace_id uuid NOT NULL DEFAULT gen_random_uuid();
