-- Reactions get their own table.
CREATE TABLE event_reactions (
    community_id uuid NOT NULL REFERENCES communities (id),
    event_id bytea NOT NULL,
    pubkey bytea NOT NULL,
    emoji text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, event_id, pubkey, emoji)
);
CREATE INDEX event_reactions_recent_idx ON event_reactions (community_id, created_at DESC);
