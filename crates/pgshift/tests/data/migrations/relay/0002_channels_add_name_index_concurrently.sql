-- 0002_channels_add_name_index_concurrently.sql
--
-- Intent: channel lookup by case-insensitive name inside a community.
--
-- Safe with respect to locks: CREATE INDEX CONCURRENTLY on a plain table. But it
-- cannot run inside a transaction block, so a runner that wraps each file in
-- BEGIN/COMMIT fails on it; and a failed build leaves an INVALID index behind.

CREATE INDEX CONCURRENTLY IF NOT EXISTS channels_name_idx
    ON channels (community_id, lower(name));
