-- 0028_communities_add_display_name.sql
--
-- Intent: communities get a human-readable display name (up to 100 characters).
--
-- Safe: nullable column, no default: catalog-only; the ACCESS EXCLUSIVE on
-- `communities` is brief but is taken without a lock_timeout.

ALTER TABLE communities ADD COLUMN display_name varchar(100);
