-- 0007_events_replace_search_tsv.sql
--
-- Intent: search with English stemming, and index kind 30024 (draft long-form) too.
-- A stored generated column cannot change its expression before PostgreSQL 17
-- (ALTER COLUMN ... SET EXPRESSION), so the column is dropped and added again.
--
-- Hazards: adding a STORED generated column rewrites every partition under ACCESS
-- EXCLUSIVE (the whole table is recomputed). Dropping the column drops
-- events_search_tsv_idx with it: until the second statement ends, full-text search
-- has no index; that CREATE INDEX is a plain GIN build on the partitioned parent.

ALTER TABLE events
    DROP COLUMN search_tsv,
    ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
        CASE WHEN kind IN (1, 30023, 30024)
             THEN to_tsvector('english', content) END
    ) STORED;

CREATE INDEX events_search_tsv_idx ON events USING gin (search_tsv);
