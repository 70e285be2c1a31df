-- Ephemeral channels live at most a week.
ALTER TABLE channels
    ADD CONSTRAINT channels_ttl_at_most_a_week CHECK (ttl_seconds IS NULL OR ttl_seconds <= 604800);
