-- Reject events with an out-of-range kind, for every session (replication apply too).
CREATE FUNCTION relay_kind_range_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind < 0 OR NEW.kind > 65535 THEN
        RAISE EXCEPTION 'relay: kind % out of range', NEW.kind USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER events_kind_range_guard BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION relay_kind_range_guard();
ALTER TABLE events ENABLE ALWAYS TRIGGER events_kind_range_guard;
