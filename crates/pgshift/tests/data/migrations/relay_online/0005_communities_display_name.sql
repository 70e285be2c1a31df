-- A display name for communities (nullable, no default: catalog only).
ALTER TABLE communities ADD COLUMN display_name varchar(100);
COMMENT ON COLUMN communities.display_name IS 'shown in clients; falls back to host';
