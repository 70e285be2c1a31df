-- 0027_events_reindex_channel_window.sql
--
-- Intent: the channel-window index is bloated; rebuild it, and the channels indexes.
--
-- Hazards: REINDEX without CONCURRENTLY of a partitioned index rebuilds each
-- partition's index in turn, blocking writes to that partition (SHARE) and reads that
-- use the index (ACCESS EXCLUSIVE on the index) while it is rebuilt; REINDEX of a
-- partitioned index cannot run in a transaction block. The second statement is the
-- online form, also not allowed in a transaction block.

REINDEX INDEX events_channel_window_idx;

REINDEX TABLE CONCURRENTLY channels;
