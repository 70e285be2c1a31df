-- 0001_events_add_pubkey_kind_index.sql
--
-- Intent: "all reactions by this author" (pubkey + kind) scans too much of
-- events_pubkey_idx; add a covering btree on (pubkey, kind, created_at DESC).
--
-- Hazard: a plain CREATE INDEX on the partitioned parent `events`. It takes SHARE on
-- the parent and on every partition and builds all eight partition indexes before it
-- returns, so every writer waits for the whole build. CONCURRENTLY is refused on a
-- partitioned parent; the online path is CREATE INDEX ON ONLY events, then
-- CREATE INDEX CONCURRENTLY on each partition and ALTER INDEX ... ATTACH PARTITION.

CREATE INDEX events_pubkey_kind_idx
    ON events (pubkey, kind, created_at DESC);
