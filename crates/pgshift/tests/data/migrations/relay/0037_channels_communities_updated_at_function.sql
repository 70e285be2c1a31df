-- 0037_channels_communities_updated_at_function.sql
--
-- Intent: channels and communities get an updated_at column like the console's
-- tables (0033), through the helper that adds it.
--
-- Hazards: two plain SELECTs, yet each runs ALTER TABLE ... ADD COLUMN through the
-- function's EXECUTE: ACCESS EXCLUSIVE on the table (channels is read by the TTL
-- trigger at the COMMIT of every event insert with a channel), here without a
-- lock_timeout. The default now() is stable, so no rewrite: existing rows all get
-- the time of this transaction.

SELECT relay_add_updated_at('channels');

SELECT relay_add_updated_at('communities');
