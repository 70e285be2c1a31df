ALTER TABLE ledgers ADD COLUMN note text;
