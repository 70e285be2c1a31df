-- Orders are listed per account, newest first. Written as sqlx users write it; pgshift
-- builds the index without blocking writes to orders (CREATE INDEX CONCURRENTLY) where
-- the table has rows.
CREATE INDEX orders_account_placed_idx ON orders (account_id, placed_at DESC);
ALTER TABLE accounts ADD COLUMN display_name text;
