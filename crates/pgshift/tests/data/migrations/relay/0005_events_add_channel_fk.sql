-- 0005_events_add_channel_fk.sql
--
-- Intent: an event that names a channel must name an existing channel of the same
-- community.
--
-- Hazard: FOREIGN KEY added without NOT VALID. Validation scans every partition of
-- `events` holding SHARE ROW EXCLUSIVE on events, on every partition and on
-- `channels`: writers of both tables wait for the whole scan. Note: PostgreSQL 15
-- refuses NOT VALID for a foreign key on a partitioned table ("not yet supported on
-- partitioned tables"); the online path is per partition.

ALTER TABLE events
    ADD CONSTRAINT events_channel_fkey
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id);
