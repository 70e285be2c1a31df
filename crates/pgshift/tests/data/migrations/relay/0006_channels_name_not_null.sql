-- 0006_channels_name_not_null.sql
--
-- Intent: every channel has a name (the application always sets one now).
--
-- Hazard: SET NOT NULL scans the whole table under ACCESS EXCLUSIVE. `channels` is
-- read and updated by the TTL trigger at the COMMIT of every insert of an event with
-- a channel, so those writers stall at COMMIT. The online path: ADD CHECK (name IS
-- NOT NULL) NOT VALID, VALIDATE, SET NOT NULL (skips the scan), drop the CHECK.

ALTER TABLE channels ALTER COLUMN name SET NOT NULL;
