-- 0016_communities_rename_host.sql
--
-- Intent: `host` is really a DNS name; call it hostname.
--
-- Hazard: RENAME COLUMN of a column the running application reads and writes
-- (every write resolves its community by host): the deployed code breaks the moment
-- this commits. The unique constraint keeps its old name communities_host_key.

ALTER TABLE communities RENAME COLUMN host TO hostname;
