-- 0023_outbox_vacuum_full.sql
--
-- Intent: the outbox is bloated after months of insert/delete churn; compact it.
--
-- Hazard: VACUUM FULL rewrites the table under ACCESS EXCLUSIVE (every event insert
-- of kind 4 / 1059 waits, through its trigger). It cannot run in a transaction block.

VACUUM FULL event_outbox;
