-- 0036_events_d_tag_limit_fresh_install_do.sql
--
-- Intent: the protocol limits d tags to 256 characters. A fresh install gets the
-- limit in the column type; a relay that already holds events keeps text (the
-- ingest path enforces the limit there), because the type change rewrites the table.
--
-- Hazards: the DO block's ALTER ... TYPE varchar(256) rewrites every partition and
-- rebuilds every index under ACCESS EXCLUSIVE, but only when events is empty. What
-- it does depends on the data: a no-op on a live relay, a rewrite on a fresh
-- install, and a rewrite on any copy of the schema that has no rows (where a
-- schema-only rehearsal would see it).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM events LIMIT 1) THEN
        ALTER TABLE events ALTER COLUMN d_tag TYPE varchar(256);
    END IF;
END
$$;
