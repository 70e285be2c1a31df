-- 0038_touch_triggers_loop_do.sql
--
-- Intent: every table with an updated_at column keeps it current on UPDATE.
--
-- Hazards: the DO loop over pg_class calls relay_install_touch_trigger() once per
-- table, each a CREATE TRIGGER through EXECUTE (SHARE ROW EXCLUSIVE on the table),
-- all held until the block ends: about two dozen tables locked at once, among them
-- event_watermarks, which the replay skipper writes inside every insert of a
-- replaceable event, and channels, which the TTL trigger updates at COMMIT. Which
-- tables it touches is decided by the catalog at run time. The new triggers are
-- ORIGIN-enabled (a replica session skips them), and on event_watermarks the touch
-- trigger overrides the skipper's clock_timestamp() with now().

DO $$
DECLARE
    tbl regclass;
BEGIN
    FOR tbl IN
        SELECT c.oid::regclass
          FROM pg_class c
          JOIN pg_attribute a ON a.attrelid = c.oid
         WHERE c.relnamespace = 'public'::regnamespace
           AND c.relkind IN ('r', 'p')
           AND NOT c.relispartition
           AND a.attname = 'updated_at'
           AND NOT a.attisdropped
           AND NOT EXISTS (SELECT 1 FROM pg_trigger t
                            WHERE t.tgrelid = c.oid
                              AND t.tgname = 'relay_touch_updated_at')
         ORDER BY c.relname
    LOOP
        PERFORM relay_install_touch_trigger(tbl);
    END LOOP;
END
$$;
