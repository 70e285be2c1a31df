-- Every channel has a name now (the backfill ran in an earlier release).
ALTER TABLE channels ALTER COLUMN name SET NOT NULL;
