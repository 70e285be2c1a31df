-- 0024_events_partition_autovacuum_do.sql
--
-- Intent: vacuum the hot partitions of `events` more eagerly (storage parameters
-- cannot be set on a partitioned parent, so loop over its partitions).
--
-- Hazard: a DO block with dynamic SQL (EXECUTE format(...)): which tables it alters,
-- and under which locks, cannot be known without running it. Each ALTER TABLE ... SET
-- takes SHARE UPDATE EXCLUSIVE on one partition, all held until the block ends.

DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN
        SELECT i.inhrelid::regclass
          FROM pg_inherits i
         WHERE i.inhparent = 'events'::regclass
    LOOP
        EXECUTE format(
            'ALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0.02, '
            'autovacuum_analyze_scale_factor = 0.01)', part);
    END LOOP;
END
$$;
