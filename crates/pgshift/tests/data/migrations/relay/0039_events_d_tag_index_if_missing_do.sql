-- 0039_events_d_tag_index_if_missing_do.sql
--
-- Intent: look up replaceable events by (community, author, d tag). Some relays
-- created this index by hand already; create it only where it is missing, and stop
-- if an index of that name exists with another definition.
--
-- Hazards: the CREATE INDEX inside the DO block runs on the partitioned parent
-- (CONCURRENTLY is impossible there, and in a DO block anyway): SHARE on events and
-- every partition for the whole build, blocking all writers. Whether it runs at all
-- depends on the catalog (to_regclass), which only the live database answers.

DO $$
DECLARE
    def text;
BEGIN
    IF to_regclass('public.events_d_tag_idx') IS NULL THEN
        CREATE INDEX events_d_tag_idx ON events (community_id, pubkey, d_tag)
            WHERE d_tag IS NOT NULL;
    END IF;
    def := pg_get_indexdef('public.events_d_tag_idx'::regclass);
    IF strpos(def, '(community_id, pubkey, d_tag)') = 0
       OR strpos(def, 'WHERE (d_tag IS NOT NULL)') = 0 THEN
        RAISE EXCEPTION 'relay: events_d_tag_idx exists with another definition: %', def;
    END IF;
END
$$;
