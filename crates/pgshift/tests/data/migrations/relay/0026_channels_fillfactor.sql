-- 0026_channels_fillfactor.sql
--
-- Intent: `channels` rows are updated by the TTL trigger on every event; leave room
-- in each page for HOT updates.
--
-- Low risk: SET (fillfactor) takes SHARE UPDATE EXCLUSIVE and rewrites nothing (only
-- pages written from now on honour it). It would be refused on the partitioned
-- `events` parent (storage parameters belong to its partitions).

ALTER TABLE channels SET (fillfactor = 70);
