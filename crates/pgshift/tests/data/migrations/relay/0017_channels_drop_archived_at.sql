-- 0017_channels_drop_archived_at.sql
--
-- Intent: archiving was replaced by soft deletion (deleted_at); drop archived_at.
--
-- Hazard: DROP COLUMN of a column the deployed application still selects; takes
-- ACCESS EXCLUSIVE on `channels` (briefly: no rewrite), which the TTL trigger needs at
-- the COMMIT of every insert of an event with a channel.

ALTER TABLE channels DROP COLUMN archived_at;
