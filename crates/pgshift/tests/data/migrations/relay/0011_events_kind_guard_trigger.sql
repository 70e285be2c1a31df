-- 0011_events_kind_guard_trigger.sql
--
-- Intent: refuse events whose kind is outside 0..65535 (an invariant of the protocol).
--
-- Hazards: CREATE TRIGGER on `events` takes SHARE ROW EXCLUSIVE on the parent and on
-- every partition (blocks all writers). The trigger is created ORIGIN-enabled (plain
-- CREATE TRIGGER): a session with session_replication_role = replica (bulk loaders,
-- logical replication apply, copy tools) skips it, so the "invariant" is not one.
-- UPDATE OF kind also makes the trigger depend on the column `kind`.

CREATE FUNCTION relay_kind_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind < 0 OR NEW.kind > 65535 THEN
        RAISE EXCEPTION 'relay: kind % out of range', NEW.kind
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER events_kind_guard
    BEFORE INSERT OR UPDATE OF kind ON events
    FOR EACH ROW EXECUTE FUNCTION relay_kind_guard();
