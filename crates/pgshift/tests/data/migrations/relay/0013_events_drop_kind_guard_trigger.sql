-- 0013_events_drop_kind_guard_trigger.sql
--
-- Intent: the kind range check moved into the application; drop the trigger.
--
-- Hazard: DROP TRIGGER takes ACCESS EXCLUSIVE on `events` and on every partition
-- (each clone is dropped): no reads and no writes while it waits and runs, and
-- without a lock_timeout it waits behind any long transaction.

DROP TRIGGER events_kind_guard ON events;

DROP FUNCTION relay_kind_guard();
