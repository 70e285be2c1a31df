-- Longer display names: varchar(100) to varchar(200) keeps every value, no rewrite.
ALTER TABLE communities ALTER COLUMN display_name TYPE varchar(200);
