-- 0025_channels_lock_table_cleanup.sql
--
-- Intent: clear stale deadlines of permanent channels while no TTL refresh can race
-- with the cleanup.
--
-- Hazard: an explicit LOCK TABLE ... IN ACCESS EXCLUSIVE MODE without a lock_timeout.
-- While it waits (and while it holds) every reader of `channels` queues, including
-- the TTL trigger run at the COMMIT of every insert of an event with a channel.

BEGIN;

LOCK TABLE channels IN ACCESS EXCLUSIVE MODE;

UPDATE channels
   SET ttl_deadline = NULL
 WHERE ttl_seconds IS NULL
   AND ttl_deadline IS NOT NULL;

COMMIT;
