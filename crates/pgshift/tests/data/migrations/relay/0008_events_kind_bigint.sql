-- 0008_events_kind_bigint.sql
--
-- Intent: kind becomes bigint (kinds above 2^31 show up in the wild).
--
-- Hazards: ALTER COLUMN ... TYPE bigint is a full rewrite of every partition and a
-- rebuild of every index under ACCESS EXCLUSIVE. It cannot even run alone here:
-- PostgreSQL refuses to change the type of a column used by a generated column
-- ("cannot alter type of a column used by a generated column"), so search_tsv is
-- dropped and re-added in the same statement, and its GIN index rebuilt after.

ALTER TABLE events
    DROP COLUMN search_tsv,
    ALTER COLUMN kind TYPE bigint,
    ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
        CASE WHEN kind IN (1, 30023, 30024)
             THEN to_tsvector('english', content) END
    ) STORED;

CREATE INDEX events_search_tsv_idx ON events USING gin (search_tsv);
