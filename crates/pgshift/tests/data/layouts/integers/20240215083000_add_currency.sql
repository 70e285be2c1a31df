ALTER TABLE ledgers ADD COLUMN currency text;
