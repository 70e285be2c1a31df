-- Backfill, then require: one transaction under sqlx.
UPDATE ledgers SET currency = 'EUR' WHERE currency IS NULL;
ALTER TABLE ledgers ALTER COLUMN currency SET NOT NULL;
