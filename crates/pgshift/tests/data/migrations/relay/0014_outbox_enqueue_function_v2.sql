-- 0014_outbox_enqueue_function_v2.sql
--
-- Intent: also enqueue kind 1060 (sealed receipts) and put the content length in the
-- payload for the dispatcher's batching.
--
-- Hazard: CREATE OR REPLACE FUNCTION of a trigger function. No lock on `events` is
-- taken, yet the behaviour of trigger events_outbox_enqueue (cloned on every
-- partition) changes for the next row of every session: a side effect that other
-- systems rely on changes with no trace on the table itself, and any other table
-- whose trigger calls this function (a shadow copy, say) changes with it.

CREATE OR REPLACE FUNCTION relay_outbox_enqueue() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF NEW.kind NOT IN (4, 1059, 1060) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(
        hashtextextended('outbox:' || NEW.community_id::text, 0));
    INSERT INTO event_outbox (community_id, event_id, event_created_at, kind, payload)
    VALUES (NEW.community_id, NEW.id, NEW.created_at, NEW.kind,
            jsonb_build_object('pubkey', encode(NEW.pubkey, 'hex'),
                               'tags', NEW.tags,
                               'content_length', octet_length(NEW.content)));
    RETURN NULL;
END
$fn$;
