-- Feed queries by kind and time: an index on the partitioned events table.
-- pgshift builds it partition by partition (CONCURRENTLY is not allowed on the parent).
CREATE INDEX events_kind_created_idx ON events (kind, created_at);
