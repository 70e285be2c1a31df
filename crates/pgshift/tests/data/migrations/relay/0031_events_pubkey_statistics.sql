-- 0031_events_pubkey_statistics.sql
--
-- Intent: better row estimates for per-author queries (pubkey is very skewed).
--
-- Safe: SET STATISTICS takes SHARE UPDATE EXCLUSIVE on the parent and each partition
-- and changes only the catalog; it takes effect at the next ANALYZE.

ALTER TABLE events ALTER COLUMN pubkey SET STATISTICS 1000;
