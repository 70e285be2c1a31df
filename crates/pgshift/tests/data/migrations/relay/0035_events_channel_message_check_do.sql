-- 0035_events_channel_message_check_do.sql
--
-- Intent: a channel message (kind 9) always belongs to a channel. Stop here, before
-- adding the constraint, if the live data says otherwise: the repair is a manual
-- script, not something this migration should guess.
--
-- Hazards: the DO block is a data check. It reads every partition of events (ACCESS
-- SHARE, a sequential scan of each: no index leads with kind) and changes nothing,
-- but its outcome depends on the rows of the live database, so it must run there,
-- not on a copy of the schema. The constraint then uses the NOT VALID + VALIDATE
-- idiom (brief ACCESS EXCLUSIVE, then a scan under SHARE UPDATE EXCLUSIVE).

SET lock_timeout = '2s';

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM events WHERE kind = 9 AND channel_id IS NULL) THEN
        RAISE EXCEPTION 'relay: channel messages without a channel; run the relink script first'
            USING ERRCODE = 'check_violation';
    END IF;
END
$$;

ALTER TABLE events
    ADD CONSTRAINT events_channel_message_check
    CHECK (kind <> 9 OR channel_id IS NOT NULL) NOT VALID;

ALTER TABLE events VALIDATE CONSTRAINT events_channel_message_check;
