-- 0029_communities_widen_display_name.sql
--
-- Intent: 100 characters was too short; allow 200.
--
-- Safe: widening varchar(n) is binary-coercible: no rewrite and no index rebuild,
-- only a brief ACCESS EXCLUSIVE (here bounded by a lock_timeout). Narrowing it, or
-- changing it to another type, would scan or rewrite the table.

SET lock_timeout = '2s';

ALTER TABLE communities ALTER COLUMN display_name TYPE varchar(200);
