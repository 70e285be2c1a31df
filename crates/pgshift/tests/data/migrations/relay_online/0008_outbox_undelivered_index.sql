-- no-transaction
-- The delivery worker scans undelivered rows by kind.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_outbox_undelivered_kind_idx
    ON event_outbox (kind, seq) WHERE delivered_at IS NULL;
