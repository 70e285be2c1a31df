ALTER TABLE ledgers DROP COLUMN currency;
