-- 0012_events_pubkey_guard_trigger_always.sql
--
-- Intent: refuse events whose id or pubkey is not 32 bytes, for every session.
--
-- Hazard: CREATE TRIGGER takes SHARE ROW EXCLUSIVE on the parent and every partition.
-- Safe w.r.t. the replica-role bypass: ENABLE ALWAYS TRIGGER makes it fire under
-- session_replication_role = replica too (PostgreSQL applies it to every partition's
-- clone). The function is created first, so the trigger never points at nothing.

CREATE FUNCTION relay_pubkey_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF octet_length(NEW.id) <> 32 OR octet_length(NEW.pubkey) <> 32 THEN
        RAISE EXCEPTION 'relay: id and pubkey must be 32 bytes'
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER events_pubkey_guard
    BEFORE INSERT OR UPDATE OF id, pubkey ON events
    FOR EACH ROW EXECUTE FUNCTION relay_pubkey_guard();

ALTER TABLE events ENABLE ALWAYS TRIGGER events_pubkey_guard;
